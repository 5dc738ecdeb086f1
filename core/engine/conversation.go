package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/llm"
)

// A Conversation keeps a root loop after its answer so that later runs
// continue it: the same REPL (its variables, imports and `context`) and
// the model's history, with the next task as a new user message. It is
// the reference implementation's persistent mode, and rlm serve's
// POST /runs {"keep": true} / {"continue": RUN_ID}.
//
// The REPL session's callbacks (llm_query, rlm_query, tools) were fixed
// when it opened, so they reach the loop of whichever run holds the
// conversation now, and spend from that run's budget. One run at a time:
// a second RunIn while one is in progress fails. The owner closes it.
type Conversation struct {
	mu     sync.Mutex
	sess   core.Session
	msgs   []llm.Message
	cur    *node
	busy   bool
	closed bool
}

// ErrConversationBusy: the conversation is in use by another run, or
// closed.
var ErrConversationBusy = errors.New("the conversation is in use by another run, or closed")

// Turns is how many messages of history the conversation holds.
func (cv *Conversation) Turns() int {
	cv.mu.Lock()
	defer cv.mu.Unlock()
	return len(cv.msgs)
}

// Close ends the conversation's REPL session.
func (cv *Conversation) Close() error {
	cv.mu.Lock()
	sess := cv.sess
	cv.sess, cv.closed = nil, true
	cv.mu.Unlock()
	if sess != nil {
		return sess.Close()
	}
	return nil
}

func (cv *Conversation) acquire(n *node) error {
	cv.mu.Lock()
	defer cv.mu.Unlock()
	if cv.busy || cv.closed {
		return ErrConversationBusy
	}
	cv.busy, cv.cur = true, n
	return nil
}

func (cv *Conversation) release(msgs []llm.Message) {
	cv.mu.Lock()
	defer cv.mu.Unlock()
	if msgs != nil {
		cv.msgs = msgs
	}
	cv.busy = false
}

func (cv *Conversation) node() *node {
	cv.mu.Lock()
	defer cv.mu.Unlock()
	return cv.cur
}

// bridges are the session's callbacks, reaching the conversation's
// current loop.
func (cv *Conversation) bridges(max int, tools bool) core.Bridges {
	b := core.Bridges{
		LLMQuery: func(ctx context.Context, prompt, model string) (string, error) {
			return cv.node().llmQuery(ctx, prompt, model)
		},
		RLMQuery: func(ctx context.Context, task string, sub *string, model string) (string, error) {
			return cv.node().rlmQuery(ctx, task, sub, model)
		},
		MaxConcurrent: max,
	}
	if tools {
		b.ToolCall = func(ctx context.Context, call string) (string, error) {
			if tb := cv.node().toolBridge(); tb != nil {
				return tb(ctx, call)
			}
			return "", errors.New("tool_call: this run has no host-side tools")
		}
	}
	return b
}

// RunIn is Run, keeping the root loop in cv: the first run opens its REPL
// (with c as `context`), each later one continues it (c must be nil: the
// REPL keeps its `context`) with task as the next user message.
func (e *Engine) RunIn(ctx context.Context, task string, c *core.Context, cv *Conversation) (*Result, error) {
	if cv == nil {
		return e.Run(ctx, task, c)
	}
	cv.mu.Lock()
	continuing := cv.sess != nil
	cv.mu.Unlock()
	if continuing && c != nil {
		return &Result{}, errors.New("a continued run keeps its REPL's `context`: give the new input in the task, or start a new run")
	}
	return e.run(ctx, task, c, cv)
}

// continueMessage is a continued conversation's next user message.
func continueMessage(task string) string {
	return fmt.Sprintf("Next task: %s\n\nThe REPL is as you left it: `context` and your variables are still there. Work in ```repl blocks as before, and finish this task the same way.", task)
}
