package execcmd

import (
	"errors"

	"github.com/rlmkit/rlm/core/config"
)

// resolveModel gives the --context cell's llm_query the model that
// --provider, [run] provider or $RLM_PROVIDER chooses (see modelflags),
// with the [sessions] budget. Only a python program with --context runs
// as a cell that can call back; model flags without --context would do
// nothing, so they are refused.
func (o *Options) resolveModel(cfg config.Config) error {
	if o.Context == "" {
		if o.Changed != nil && o.Changed("provider") {
			return errors.New("--provider gives llm_query to the cell that --context runs; without --context the code runs as a program, which has no llm_query")
		}
		return nil
	}
	sl, err := o.Model.Sessions(cfg)
	if err != nil || sl == nil {
		return err
	}
	o.bridges, err = sl.Bridges("")
	return err
}
