package servecmd

import (
	"time"

	"github.com/rlmkit/rlm/cmd/rlm/cli/cmdutil"
	"github.com/rlmkit/rlm/cmd/rlm/cli/modelflags"
	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/config"
	"github.com/rlmkit/rlm/core/engine"
	"github.com/rlmkit/rlm/core/server"
)

// sessionBridges resolves --provider and the other model flags over
// rlm.toml into what gives each session its llm_query: nil when no
// provider is chosen (cells then hear "no LLM configured"). The provider
// and its key live in this process; cells reach it through the bridges.
//
// The same model runs RLM loops (POST /runs, MCP rlm_run): runs is nil
// without a provider. A run's budget defaults to [run]'s iterations,
// depth, errors and time; its tokens, cost and calls are capped by the
// sessions' budget flags.
func (o *Options) sessionBridges(cfg config.Config) (bridges func(model string) (core.Bridges, error), runs *server.RunsConfig, err error) {
	sl, err := o.Model.Sessions(cfg)
	if err != nil {
		return nil, nil, cmdutil.Usage(err)
	}
	if sl == nil {
		return nil, nil, nil
	}
	rc := cfg.Run
	runs = &server.RunsConfig{
		LLM: sl,
		Defaults: engine.Budget{MaxIterations: rc.MaxIterations, MaxDepth: rc.MaxDepth, MaxErrors: rc.MaxErrors,
			MaxTime: time.Duration(rc.MaxTime)},
		MaxOutputChars: rc.MaxOutputChars,
		Priced: func(model string) bool {
			return modelflags.CheckPriced(sl.ProviderName, 1, model) == nil
		},
	}
	return sl.Bridges, runs, nil
}
