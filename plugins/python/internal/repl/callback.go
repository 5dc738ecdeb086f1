package repl

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/rlmkit/rlm/core"
)

type callbackParams struct {
	Kind       string   `json:"kind"`
	Prompts    []string `json:"prompts"`
	Contexts   []string `json:"contexts"`
	HasContext []bool   `json:"has_context"`
	Model      string   `json:"model"`
}

// callback serves one callback request in its own goroutine, so output and
// protocol reading go on meanwhile, and writes the reply itself.
func (p *Process) callback(ctx context.Context, d *inst, m *rpcMsg, cb CallbackFunc) {
	id := m.ID
	replyErr := func(msg string) {
		_ = d.send(response{JSONRPC: "2.0", ID: id, Error: &rpcError{Code: -32000, Message: msg}}, nil)
	}
	var params callbackParams
	if err := json.Unmarshal(m.Params, &params); err != nil {
		replyErr("bad callback request: " + err.Error())
		return
	}
	if cb == nil {
		kind := params.Kind
		if kind == "" {
			kind = "llm_query"
		}
		replyErr(kind + " is not available: this session has no LLM configured")
		return
	}
	req := core.Query{
		Kind:       params.Kind,
		Prompts:    params.Prompts,
		Contexts:   params.Contexts,
		HasContext: params.HasContext,
		Model:      params.Model,
	}
	go func() {
		var (
			results []string
			err     error
		)
		func() {
			defer func() {
				if r := recover(); r != nil {
					err = fmt.Errorf("callback panicked: %v", r)
				}
			}()
			results, err = cb(ctx, req)
		}()
		if err == nil {
			err = req.CheckAnswers(results)
		}
		if err != nil {
			replyErr(err.Error())
			return
		}
		_ = d.send(response{JSONRPC: "2.0", ID: id, Result: map[string]any{"results": results}}, nil)
	}()
}
