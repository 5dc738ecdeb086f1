package engine

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/llm"
)

type harness struct {
	t       *testing.T
	model   *fakeModel
	factory *fakeFactory
	trace   bytes.Buffer
	opts    Options
}

func newHarness(t *testing.T, script func(req llm.Request) (string, error)) *harness {
	h := &harness{t: t, model: &fakeModel{script: script}, factory: &fakeFactory{}}
	h.opts = Options{Provider: h.model, Model: "test-model", SubcallModel: "test-sub", Sandbox: h.factory.open,
		Budget: Budget{MaxIterations: 10, MaxDepth: 1}}
	h.opts.Trace = &h.trace
	return h
}

func (h *harness) run(task, ctx string) (*Result, error) {
	h.t.Helper()
	e, err := New(h.opts)
	if err != nil {
		h.t.Fatal(err)
	}
	var c *core.Context
	if ctx != "" {
		c = &core.Context{Data: []byte(ctx), Kind: "text"}
	}
	res, err := e.Run(context.Background(), task, c)
	if res == nil {
		h.t.Fatal("nil result")
	}
	if !h.factory.allClosed() {
		h.t.Error("a session was left open")
	}
	return res, err
}

func (h *harness) events() []Event {
	h.t.Helper()
	var evs []Event
	sc := bufio.NewScanner(bytes.NewReader(h.trace.Bytes()))
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var ev Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			h.t.Fatalf("trace line %q: %v", sc.Text(), err)
		}
		evs = append(evs, ev)
	}
	return evs
}

func count(evs []Event, typ string, match func(Event) bool) int {
	n := 0
	for _, ev := range evs {
		if ev.Type == typ && (match == nil || match(ev)) {
			n++
		}
	}
	return n
}

func TestFinalVarReadsTheVariable(t *testing.T) {
	h := newHarness(t, func(req llm.Request) (string, error) {
		switch turn(req) {
		case 0:
			return "Looking.\n" + repl("len", "set ans forty two"), nil
		default:
			if !strings.Contains(lastUser(req), "Output:\n26") {
				return "", fmt.Errorf("the model did not see the output: %q", lastUser(req))
			}
			return "FINAL_VAR(ans)", nil
		}
	})
	res, err := h.run("how long?", "abcdefghijklmnopqrstuvwxyz")
	if err != nil {
		t.Fatal(err)
	}
	if res.Answer != "forty two" || res.Source != SourceFinalVar {
		t.Fatalf("got %+v", res)
	}
	if res.Usage.Iterations != 2 || res.Usage.Calls != 2 {
		t.Fatalf("usage %+v", res.Usage)
	}
	first := h.model.requests()[0]
	if first.Model != "test-model" || first.System != SystemPrompt {
		t.Fatalf("first request %+v", first)
	}
	if !strings.Contains(first.Messages[0].Content, "how long?") || !strings.Contains(first.Messages[0].Content, "a str of 26 characters") {
		t.Fatalf("first message: %q", first.Messages[0].Content)
	}
	evs := h.events()
	if evs[0].Type != EventRunStart || evs[0].Config.Model != "test-model" || evs[len(evs)-1].Type != EventRunEnd {
		t.Fatalf("trace ends: %+v ... %+v", evs[0], evs[len(evs)-1])
	}
	if n := count(evs, EventCode, func(e Event) bool { return strings.Contains(e.Output, "26") }); n != 1 {
		t.Fatalf("%d code events with the output", n)
	}
	if n := count(evs, EventFinal, func(e Event) bool { return e.Answer == "forty two" && e.Node == 0 }); n != 1 {
		t.Fatalf("%d final events", n)
	}
}

func TestFinalVarMissingIsReportedAndLoopGoesOn(t *testing.T) {
	h := newHarness(t, func(req llm.Request) (string, error) {
		switch turn(req) {
		case 0:
			return "FINAL_VAR(nope)", nil
		case 1:
			if !strings.Contains(lastUser(req), "no variable named nope") {
				return "", fmt.Errorf("not told: %q", lastUser(req))
			}
			return "Oops.\n" + repl("print thinking"), nil
		default:
			return "FINAL(done)", nil
		}
	})
	res, err := h.run("t", "c")
	if err != nil || res.Answer != "done" || res.Source != SourceFinal {
		t.Fatalf("%+v %v", res, err)
	}
}

func TestReplyWithoutCodeIsNudged(t *testing.T) {
	h := newHarness(t, func(req llm.Request) (string, error) {
		if turn(req) == 0 {
			return "I think so.", nil
		}
		if !strings.Contains(lastUser(req), "no ```repl block") {
			return "", fmt.Errorf("no nudge: %q", lastUser(req))
		}
		return "FINAL(yes)", nil
	})
	if res, err := h.run("t", "c"); err != nil || res.Answer != "yes" {
		t.Fatalf("%+v %v", res, err)
	}
}

func TestIterationsExhaustedForcesAnAnswer(t *testing.T) {
	h := newHarness(t, func(req llm.Request) (string, error) {
		if strings.Contains(lastUser(req), "You have no turns left (all 3 iterations used)") {
			return "Best guess:\nFINAL(maybe 7)", nil
		}
		return repl("print still looking"), nil
	})
	h.opts.Budget.MaxIterations = 3
	res, err := h.run("t", "c")
	if err != nil {
		t.Fatal(err)
	}
	if res.Answer != "maybe 7" || res.Source != SourceForced {
		t.Fatalf("got %+v", res)
	}
	if res.Usage.Iterations != 3 || res.Usage.Calls != 4 {
		t.Fatalf("usage %+v", res.Usage)
	}
	evs := h.events()
	if count(evs, EventLLMCall, func(e Event) bool { return e.Caller == "forced" }) != 1 {
		t.Fatal("no forced call in the trace")
	}
	if count(evs, EventBudgetWarning, func(e Event) bool { return e.Budget == "iterations" }) != 1 {
		t.Fatal("no iterations warning at 80 %")
	}
}

func TestForcedAnswerWithoutDirectiveIsTheWholeReply(t *testing.T) {
	h := newHarness(t, func(req llm.Request) (string, error) {
		if strings.Contains(lastUser(req), "no turns left") {
			return "  It is probably 7.  ", nil
		}
		return repl("print x"), nil
	})
	h.opts.Budget.MaxIterations = 1
	res, err := h.run("t", "c")
	if err != nil || res.Answer != "It is probably 7." || res.Source != SourceForced || !res.NoFinal {
		t.Fatalf("%+v %v", res, err)
	}
}

func TestConsecutiveErrorsForceAnAnswer(t *testing.T) {
	h := newHarness(t, func(req llm.Request) (string, error) {
		if strings.Contains(lastUser(req), "no turns left (2 code blocks in a row failed)") {
			return "FINAL(gave up)", nil
		}
		return repl("raise boom"), nil
	})
	h.opts.Budget.MaxErrors = 2
	res, err := h.run("t", "c")
	if err != nil || res.Answer != "gave up" || res.Source != SourceForced || res.NoFinal || res.Usage.Iterations != 2 {
		t.Fatalf("%+v %v", res, err)
	}
	// The failures were shown to the model.
	reqs := h.model.requests()
	if !strings.Contains(lastUser(reqs[1]), "ValueError: boom") {
		t.Fatalf("error not shown: %q", lastUser(reqs[1]))
	}
}

func TestAnErrorFollowedBySuccessResetsTheCount(t *testing.T) {
	h := newHarness(t, func(req llm.Request) (string, error) {
		switch turn(req) {
		case 0, 2:
			return repl("raise boom"), nil
		case 1:
			return repl("print ok"), nil
		default:
			return "FINAL(fine)", nil
		}
	})
	h.opts.Budget.MaxErrors = 2
	res, err := h.run("t", "c")
	if err != nil || res.Answer != "fine" || res.Source != SourceFinal {
		t.Fatalf("%+v %v", res, err)
	}
}

func TestTokenBudget(t *testing.T) {
	h := newHarness(t, func(req llm.Request) (string, error) {
		return repl("print " + strings.Repeat("word ", 50)), nil
	})
	h.opts.Budget.MaxTokens = 2000
	res, err := h.run("t", "c")
	var be *BudgetError
	if !errors.As(err, &be) || be.Kind != "tokens" || !errors.Is(err, ErrBudgetExhausted) {
		t.Fatalf("err = %v", err)
	}
	if res.Answer != "" || res.Source != "" || res.Usage.Tokens() < 2000 {
		t.Fatalf("got %+v", res)
	}
	evs := h.events()
	if count(evs, EventBudgetWarning, func(e Event) bool { return e.Budget == "tokens" }) != 1 {
		t.Fatal("no token warning")
	}
	if end := evs[len(evs)-1]; end.Type != EventRunEnd || !strings.Contains(end.Error, "tokens budget exhausted") {
		t.Fatalf("run_end %+v", end)
	}
}

func TestCostBudget(t *testing.T) {
	h := newHarness(t, func(req llm.Request) (string, error) {
		return repl("print " + strings.Repeat("word ", 200)), nil
	})
	h.opts.Model = "gpt-4o" // priced in core/llm's table
	h.opts.Budget.MaxCostUSD = 0.01
	res, err := h.run("t", "c")
	var be *BudgetError
	if !errors.As(err, &be) || be.Kind != "cost" {
		t.Fatalf("err = %v", err)
	}
	if res.Usage.CostUSD < 0.01 {
		t.Fatalf("stopped early: %+v", res.Usage)
	}
	want, _ := llm.Cost("gpt-4o", h.model.usage)
	if d := res.Usage.CostUSD - want; d > 1e-9 || d < -1e-9 {
		t.Fatalf("cost %v, want %v", res.Usage.CostUSD, want)
	}
}

func TestUnpricedModelWarnsOnceUnderACostBudget(t *testing.T) {
	h := newHarness(t, func(req llm.Request) (string, error) {
		if turn(req) < 2 {
			return repl("print x"), nil
		}
		return "FINAL(ok)", nil
	})
	h.opts.Budget.MaxCostUSD = 1
	if _, err := h.run("t", "c"); err != nil {
		t.Fatal(err)
	}
	if n := count(h.events(), EventBudgetWarning, func(e Event) bool { return strings.Contains(e.Message, `"test-model"`) }); n != 1 {
		t.Fatalf("%d warnings about the unpriced model", n)
	}
}

func TestTimeBudget(t *testing.T) {
	h := newHarness(t, nil)
	h.model.script = func(req llm.Request) (string, error) {
		if turn(req) == 0 {
			return repl("print x"), nil
		}
		return "", nil
	}
	// The second call waits for the run's deadline, like a slow model.
	h.opts.Provider = &blockingModel{fakeModel: h.model, after: 1}
	h.opts.Budget.MaxTime = 200 * time.Millisecond
	res, err := h.run("t", "c")
	var be *BudgetError
	if !errors.As(err, &be) || be.Kind != "time" {
		t.Fatalf("err = %v", err)
	}
	if res.Usage.Iterations != 2 {
		t.Fatalf("usage %+v", res.Usage)
	}
}

// blockingModel answers its first `after` calls, then blocks until the
// context ends.
type blockingModel struct {
	*fakeModel
	after   int
	n       int
	blocked chan struct{} // closed when a call starts blocking (optional)
}

func (b *blockingModel) Complete(ctx context.Context, req llm.Request) (llm.Response, error) {
	b.n++
	if b.n > b.after {
		if b.blocked != nil && b.n == b.after+1 {
			close(b.blocked)
		}
		<-ctx.Done()
		return llm.Response{}, &llm.Error{Provider: "fake", Kind: ctx.Err(), Msg: "cancelled", Err: ctx.Err()}
	}
	return b.fakeModel.Complete(ctx, req)
}

func TestCancellationIsNotABudgetError(t *testing.T) {
	h := newHarness(t, nil)
	h.model.script = func(llm.Request) (string, error) { return repl("print x"), nil }
	h.opts.Provider = &blockingModel{fakeModel: h.model, after: 1}
	h.opts.Budget.MaxTime = time.Hour
	ctx, cancel := context.WithCancel(context.Background())
	blocked := make(chan struct{})
	h.opts.Provider.(*blockingModel).blocked = blocked
	e, _ := New(h.opts)
	go func() {
		<-blocked
		cancel()
	}()
	_, err := e.Run(ctx, "t", nil)
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrBudgetExhausted) {
		t.Fatalf("err = %v", err)
	}
}

// rlm_query past the maximum depth is an error the cell sees, never one
// model call with the whole context appended (which once sent 3 MB).
func TestRecursionSharesUsageAndRefusesPastMaxDepth(t *testing.T) {
	h := newHarness(t, func(req llm.Request) (string, error) {
		first := req.Messages[0].Content
		switch {
		case req.System == "" && strings.HasPrefix(first, "deeper"):
			return "", fmt.Errorf("rlm_query past the maximum depth made a model call: %q", first)
		case req.System == "":
			return "llm says " + strings.ToUpper(first), nil
		case strings.Contains(first, "sub-task at recursion depth 1"):
			if turn(req) == 0 {
				if !strings.Contains(first, "a str of 11 characters") {
					return "", fmt.Errorf("child context: %q", first)
				}
				return repl("rlm deeper"), nil
			}
			if !strings.Contains(lastUser(req), "LLMQueryError: rlm_query cannot start a child loop here: this loop is at depth 1 and the maximum depth is 1") {
				return "", fmt.Errorf("child did not see the refusal: %q", lastUser(req))
			}
			return "FINAL(child answer)", nil
		default:
			if turn(req) == 0 {
				return repl("rlmsub sub-context | find it", "llmset q question"), nil
			}
			if !strings.Contains(lastUser(req), "child answer") {
				return "", fmt.Errorf("root did not see the child: %q", lastUser(req))
			}
			return "FINAL_VAR(q)", nil
		}
	})
	h.opts.Budget.MaxDepth = 1
	res, err := h.run("root task", "the root context")
	if err != nil {
		t.Fatal(err)
	}
	if res.Answer != "llm says QUESTION" || res.Source != SourceFinalVar {
		t.Fatalf("got %+v", res)
	}
	u := res.Usage
	if u.InputTokens != h.model.usage.InputTokens || u.OutputTokens != h.model.usage.OutputTokens {
		t.Fatalf("usage %+v does not total the model's %+v", u, h.model.usage)
	}
	// root: 2 turns; child: 2 turns; llm_query (the refused rlm_query
	// counts as a sub-call, and makes no model call).
	if u.Calls != 5 || u.Iterations != 4 || u.Subcalls != 3 || u.MaxDepthReached != 1 {
		t.Fatalf("usage %+v", u)
	}
	if len(h.factory.sessions) != 2 {
		t.Fatalf("%d sessions, want one per loop", len(h.factory.sessions))
	}
	for _, req := range h.model.requests() {
		if req.System == "" && req.Model != "test-sub" {
			t.Fatalf("sub-call used model %q", req.Model)
		}
	}
	evs := h.events()
	if n := count(evs, EventSubcall, func(e Event) bool {
		return e.Kind == "rlm_query" && e.Node == 0 && e.Child != nil && *e.Child == 1 && e.ContextChars == 11
	}); n != 1 {
		t.Fatalf("%d rlm_query subcall events from the root", n)
	}
	if n := count(evs, EventLLMCall, func(e Event) bool {
		return e.Node == 1 && e.Depth == 1 && e.Parent != nil && *e.Parent == 0 && e.Caller == "child"
	}); n != 2 {
		t.Fatalf("%d child calls traced", n)
	}
	if count(evs, EventSubcall, func(e Event) bool {
		return e.Kind == "rlm_query" && e.Node == 1 && strings.Contains(e.Error, "cannot start a child loop")
	}) != 1 {
		t.Fatal("the refused rlm_query is not traced")
	}
	if count(evs, EventSubcallEnd, func(e Event) bool { return e.Answer == "child answer" }) != 1 {
		t.Fatal("no subcall_end")
	}
	if count(evs, EventLLMCall, nil) != 5 {
		t.Fatal("llm_call events do not match the calls")
	}
}

func TestMaxDepthZeroMeansNoChildLoops(t *testing.T) {
	h := newHarness(t, func(req llm.Request) (string, error) {
		if req.System == "" {
			return "plain", nil
		}
		if turn(req) == 0 {
			return repl("rlm sub"), nil
		}
		return "FINAL(ok)", nil
	})
	h.opts.Budget.MaxDepth = 0
	res, err := h.run("t", "c")
	if err != nil || res.Usage.MaxDepthReached != 0 || res.Usage.Subcalls != 1 || len(h.factory.sessions) != 1 {
		t.Fatalf("%+v %v", res, err)
	}
}

func TestSandboxTimeoutIsReportedAndTheLoopGoesOn(t *testing.T) {
	h := newHarness(t, func(req llm.Request) (string, error) {
		switch turn(req) {
		case 0:
			return repl("set keep 1", "timeout"), nil
		case 1:
			if !strings.Contains(lastUser(req), "ran out of time") || !strings.Contains(lastUser(req), "Variables set before it are kept") {
				return "", fmt.Errorf("timeout not reported: %q", lastUser(req))
			}
			return repl("crash"), nil
		case 2:
			if !strings.Contains(lastUser(req), "The REPL was restarted") {
				return "", fmt.Errorf("state loss not reported: %q", lastUser(req))
			}
			return repl("set ans recovered"), nil
		default:
			return "FINAL_VAR(ans)", nil
		}
	})
	res, err := h.run("t", "c")
	if err != nil || res.Answer != "recovered" {
		t.Fatalf("%+v %v", res, err)
	}
	evs := h.events()
	if count(evs, EventCode, func(e Event) bool { return e.Result.TimedOut }) != 2 {
		t.Fatal("timeouts not traced")
	}
}

func TestLongOutputIsTruncatedHeadAndTail(t *testing.T) {
	h := newHarness(t, func(req llm.Request) (string, error) {
		if turn(req) == 0 {
			return repl("big 50000"), nil
		}
		out := lastUser(req)
		if len(out) > 1200 || !strings.Contains(out, "[49000 characters omitted]") || !strings.HasPrefix(out, "Output:\nxxxx") || !strings.Contains(out, "yyyy\n") {
			return "", fmt.Errorf("bad truncation (%d bytes): %.300q", len(out), out)
		}
		return "FINAL(ok)", nil
	})
	h.opts.MaxOutputChars = 1000
	if _, err := h.run("t", "c"); err != nil {
		t.Fatal(err)
	}
}

func TestBatchedQueriesCountEveryPrompt(t *testing.T) {
	h := newHarness(t, func(req llm.Request) (string, error) {
		if req.System == "" {
			return "a", nil
		}
		if turn(req) == 0 {
			return repl("batch 16 q"), nil
		}
		return "FINAL(ok)", nil
	})
	res, err := h.run("t", "c")
	if err != nil || res.Usage.Subcalls != 16 || res.Usage.Calls != 18 {
		t.Fatalf("%+v %v", res, err)
	}
	if res.Usage.InputTokens != h.model.usage.InputTokens {
		t.Fatal("concurrent accounting lost tokens")
	}
}

func TestSandboxFailures(t *testing.T) {
	h := newHarness(t, func(llm.Request) (string, error) { return repl("print x"), nil })
	h.factory.openErr = errors.New("python3 not found")
	_, err := h.run("t", "c")
	if !errors.Is(err, ErrSandbox) || !strings.Contains(err.Error(), "python3 not found") {
		t.Fatalf("err = %v", err)
	}
	h = newHarness(t, func(llm.Request) (string, error) { return repl("print x"), nil })
	h.factory.execErr = fmt.Errorf("%w: EOF", core.ErrRuntimeLost)
	_, err = h.run("t", "c")
	if !errors.Is(err, ErrSandbox) || !errors.Is(err, core.ErrRuntimeLost) {
		t.Fatalf("err = %v", err)
	}
}

func TestProviderFailureEndsTheRun(t *testing.T) {
	h := newHarness(t, func(llm.Request) (string, error) {
		return "", &llm.Error{Provider: "fake", Kind: llm.ErrServer, Msg: "server error HTTP 500 after 5 attempts"}
	})
	res, err := h.run("t", "c")
	if !errors.Is(err, ErrProvider) || !errors.Is(err, llm.ErrServer) || !strings.Contains(err.Error(), "HTTP 500 after 5 attempts") {
		t.Fatalf("err = %v", err)
	}
	if res.Answer != "" {
		t.Fatal("answer on failure")
	}
	if count(h.events(), EventLLMError, nil) != 1 {
		t.Fatal("failure not traced")
	}
}

func TestNoContext(t *testing.T) {
	h := newHarness(t, func(req llm.Request) (string, error) {
		if !strings.Contains(req.Messages[0].Content, "`context` is None") {
			return "", fmt.Errorf("%q", req.Messages[0].Content)
		}
		return "FINAL(4)", nil
	})
	if res, err := h.run("2+2", ""); err != nil || res.Answer != "4" {
		t.Fatalf("%+v %v", res, err)
	}
}

func TestOptionsAreChecked(t *testing.T) {
	if _, err := New(Options{Sandbox: (&fakeFactory{}).open, Model: "m"}); err == nil {
		t.Fatal("no provider accepted")
	}
	if _, err := New(Options{Provider: &fakeModel{}, Model: "m"}); err == nil {
		t.Fatal("no sandbox accepted")
	}
	if _, err := New(Options{Provider: &fakeModel{}, Sandbox: (&fakeFactory{}).open}); err == nil {
		t.Fatal("no model accepted")
	}
}

// TestForcedFinalVarOfAMissingVariableIsNoAnswer: when the turns run out and
// the forced reply is FINAL_VAR of a variable the REPL does not have (never
// set, or set by code that failed), the variable's name is not the answer:
// the result is marked NoFinal with the variable named, as a FINAL_VAR in a
// turn is refused and told to the model.
func TestForcedFinalVarOfAMissingVariableIsNoAnswer(t *testing.T) {
	h := newHarness(t, func(req llm.Request) (string, error) {
		return "FINAL_VAR(nonexistent_var)", nil
	})
	h.opts.Budget.MaxIterations = 2
	res, err := h.run("t", "c")
	if err != nil {
		t.Fatal(err)
	}
	if !res.NoFinal || res.MissingVar != "nonexistent_var" || res.Source != SourceForced || res.Answer == "nonexistent_var" {
		t.Fatalf("%+v", res)
	}
	// In the turns, the model was told the variable is missing.
	if reqs := h.model.requests(); !strings.Contains(lastUser(reqs[1]), "no variable named nonexistent_var") {
		t.Fatalf("turn 2 was shown %q", lastUser(reqs[1]))
	}
}

// TestForcedFinalVarAfterAFailedLLMQuery: the variable llm_query was to set
// is missing because the query failed; its name is no answer either.
func TestForcedFinalVarAfterAFailedLLMQuery(t *testing.T) {
	h := newHarness(t, func(req llm.Request) (string, error) {
		switch {
		case req.System == "":
			return "", errors.New("sub-call refused")
		case strings.Contains(lastUser(req), "no turns left"):
			return "FINAL_VAR(summary)", nil
		}
		return repl("llmset summary summarise it"), nil
	})
	h.opts.Budget.MaxIterations = 1
	res, err := h.run("t", "c")
	if err != nil || !res.NoFinal || res.MissingVar != "summary" || res.Answer == "summary" {
		t.Fatalf("%+v %v", res, err)
	}
}

// TestForcedFinalVarOfASetVariableIsTheAnswer: the forced FINAL_VAR of a
// variable that exists still answers with its value.
func TestForcedFinalVarOfASetVariableIsTheAnswer(t *testing.T) {
	h := newHarness(t, func(req llm.Request) (string, error) {
		if strings.Contains(lastUser(req), "no turns left") {
			return "FINAL_VAR(x)", nil
		}
		return repl("set x 42"), nil
	})
	h.opts.Budget.MaxIterations = 1
	res, err := h.run("t", "c")
	if err != nil || res.NoFinal || res.MissingVar != "" || res.Source != SourceForced || res.Answer != "42" {
		t.Fatalf("%+v %v", res, err)
	}
}
