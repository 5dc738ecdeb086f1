package servecmd

import (
	"github.com/rlmkit/rlm/cmd/rlm/cli/cmdutil"
	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/config"
)

// sessionBridges resolves --provider and the other model flags over
// rlm.toml into what gives each session its llm_query: nil when no
// provider is chosen (cells then hear "no LLM configured"). The provider
// and its key live in this process; cells reach it through the bridges.
func (o *Options) sessionBridges(cfg config.Config) (func(model string) (core.Bridges, error), error) {
	sl, err := o.Model.Sessions(cfg)
	if err != nil {
		return nil, cmdutil.Usage(err)
	}
	if sl == nil {
		return nil, nil
	}
	return sl.Bridges, nil
}
