package engine

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// The reference implementation's protocol (alexzhang13/rlm since
// 2026-05-13, and the checkpoints trained with it) ends a run from code:
//
//	answer["content"] = result
//	answer["ready"] = True
//
// rlm takes it in either protocol, by the same means as FINAL in code
// (finalcode.go): a block that mentions `answer` gets the helpers first,
// the answer dict records itself when "ready" turns true, and a block that
// rebinds `answer` to a plain dict with "ready" true counts too. The
// content is the answer (a str as is, anything else as JSON), with
// answer_source "answer".
//
// A run cut short by a budget (tokens, cost, time) ends with the
// content the model had put in the dict so far, even if not ready: it is
// reported with answer_source "partial" beside the budget error, so the
// work is not lost. No model call is made for it: the budget is spent.

// answerHelpers makes `answer` an answer dict (keeping what an earlier
// block put in a plain dict of that name) whose "ready" records the
// answer in the variables FINAL uses. A variable `answer` of another type
// is the model's own and is left alone.
const answerHelpers = `
class _RlmAnswer(dict):
    """answer["content"] = result; answer["ready"] = True ends the run."""
    def __init__(self, *a, **k):
        super().__init__(content="", ready=False)
        super().update(*a, **k)
    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        if key == "ready" and value:
            _rlm_answer_ready(self)
    def update(self, *a, **k):
        super().update(*a, **k)
        if self.get("ready"):
            _rlm_answer_ready(self)

def _rlm_answer_ready(d):
    global ` + finalKindVar + `, ` + finalValueVar + `
    ` + finalValueVar + ` = d.get("content", "")
    ` + finalKindVar + ` = "answer"

if "answer" not in globals():
    answer = _RlmAnswer()
elif type(globals()["answer"]) is dict:
    answer = _RlmAnswer(globals()["answer"])
`

// answerCheck runs after a block that mentioned the helpers: an `answer`
// rebound to a plain dict with "ready" true is an answer too.
const answerCheck = `if "` + finalKindVar + `" not in globals() and isinstance(globals().get("answer"), dict) and globals()["answer"].get("ready"):
    _rlm_answer_ready(globals()["answer"])
`

// SourceAnswer and SourcePartial are answer sources of the answer dict.
const (
	SourceAnswer  = "answer"  // answer["ready"] = True
	SourcePartial = "partial" // a budget ran out; answer["content"] as it was
)

// partialAnswer is what a loop stopped by err returns: when err is a used
// up budget and the REPL's answer dict holds content, that content as a
// partial answer beside err; else just err.
func (n *node) partialAnswer(err error) (*loopResult, error) {
	if !errors.Is(err, ErrBudgetExhausted) && !errors.Is(err, context.DeadlineExceeded) || n.sess == nil || n.r.parent.Err() != nil {
		return nil, err
	}
	// The run's own deadline may be what ended it: read on the caller's.
	ctx, cancel := context.WithTimeout(n.r.parent, 10*time.Second)
	defer cancel()
	raw, found, verr := n.sess.Variable(ctx, "answer")
	if verr != nil || !found {
		return nil, err
	}
	var d map[string]any
	if json.Unmarshal(raw, &d) != nil {
		return nil, err
	}
	var content string
	switch c := d["content"].(type) {
	case nil:
		return nil, err
	case string:
		content = c
	default:
		b, _ := json.Marshal(c)
		content = string(b)
	}
	if content == "" {
		return nil, err
	}
	return n.finish(0, content, SourcePartial), err
}
