package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/llm"
)

// A kept conversation's next run continues the same REPL (a variable the
// first run set is still there) and the model's history (the first run's
// turns come before the next task), and its llm_query calls count in the
// run that makes them.
func TestConversationContinues(t *testing.T) {
	h := newHarness(t, func(req llm.Request) (string, error) {
		if req.System == "" {
			return "sub answer", nil
		}
		last := lastUser(req)
		switch {
		case strings.HasPrefix(req.Messages[0].Content, "Task: first") && len(req.Messages) == 1:
			return repl("set keep 41"), nil
		case strings.Contains(last, "Next task: second"):
			if len(req.Messages) != 5 || !strings.Contains(req.Messages[3].Content, "FINAL(stored)") {
				return "", fmt.Errorf("the second run does not see the first's history: %d messages", len(req.Messages))
			}
			return repl("llm ask"), nil
		case strings.Contains(last, "sub answer"):
			return "FINAL_VAR(keep)", nil
		}
		return "FINAL(stored)", nil
	})
	e, err := New(h.opts)
	if err != nil {
		t.Fatal(err)
	}
	cv := &Conversation{}
	res, err := e.RunIn(context.Background(), "first", &core.Context{Data: []byte("ctx"), Kind: "text"}, cv)
	if err != nil || res.Answer != "stored" {
		t.Fatalf("first run: %+v %v", res, err)
	}
	if h.factory.allClosed() {
		t.Fatal("the kept conversation's session was closed")
	}
	if _, err := e.RunIn(context.Background(), "again", &core.Context{Data: []byte("x")}, cv); err == nil || !strings.Contains(err.Error(), "keeps its REPL's `context`") {
		t.Fatalf("a continued run with a new context: %v", err)
	}
	res, err = e.RunIn(context.Background(), "second", nil, cv)
	if err != nil || res.Answer != "41" {
		t.Fatalf("second run: %+v %v", res, err)
	}
	if res.Usage.Subcalls != 1 || res.Usage.Calls != 3 {
		t.Fatalf("the second run's usage %+v: want its own llm_query and turns only", res.Usage)
	}
	if n := len(h.factory.sessions); n != 1 {
		t.Fatalf("%d sessions: a conversation keeps one", n)
	}
	if cv.acquire(nil) != nil {
		t.Fatal("the conversation stayed busy after its run")
	}
	cv.release(nil)
	if err := cv.Close(); err != nil || !h.factory.allClosed() {
		t.Fatalf("Close: %v, all closed %v", err, h.factory.allClosed())
	}
	if _, err := e.RunIn(context.Background(), "third", nil, cv); !errors.Is(err, ErrConversationBusy) {
		t.Fatalf("a closed conversation: %v", err)
	}
}
