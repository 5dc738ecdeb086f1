package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/llm"
)

// fakeSession is a test double of core.Session. It runs no Python: each
// line of a cell is one command of a tiny language, enough to drive the
// loop through its paths:
//
//	print TEXT          prints TEXT
//	set NAME TEXT       sets a variable to the string TEXT
//	len                 prints the context's length
//	llm PROMPT          calls llm_query and prints the answer
//	llmset NAME PROMPT  calls llm_query and stores the answer
//	rlm TASK            calls rlm_query (no sub-context) and prints the answer
//	rlmsub CTX | TASK   calls rlm_query with a sub-context
//	batch N PROMPT      calls llm_query N times concurrently
//	raise MSG           ends the cell with an exception
//	timeout             ends the cell as timed out, state kept
//	crash               ends the cell as timed out with the state lost
//	big N               prints N characters
type fakeSession struct {
	factory *fakeFactory
	opts    core.SessionOptions
	mu      sync.Mutex
	vars    map[string]string
	closed  bool
}

type fakeFactory struct {
	mu       sync.Mutex
	sessions []*fakeSession
	codes    []string
	openErr  error
	execErr  error
}

func (f *fakeFactory) open(_ context.Context, o core.SessionOptions) (core.Session, error) {
	if f.openErr != nil {
		return nil, f.openErr
	}
	s := &fakeSession{factory: f, opts: o, vars: map[string]string{}}
	f.mu.Lock()
	f.sessions = append(f.sessions, s)
	f.mu.Unlock()
	return s, nil
}

func (f *fakeFactory) allClosed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range f.sessions {
		s.mu.Lock()
		c := s.closed
		s.mu.Unlock()
		if !c {
			return false
		}
	}
	return true
}

func (s *fakeSession) Execute(ctx context.Context, code string, _ time.Duration) (*core.Result, error) {
	s.factory.mu.Lock()
	s.factory.codes = append(s.factory.codes, code)
	err := s.factory.execErr
	s.factory.mu.Unlock()
	if err != nil {
		return nil, err
	}
	var out strings.Builder
	res := &core.Result{EndedBy: "exit"}
	b := s.opts.Bridges
	for _, line := range strings.Split(code, "\n") {
		cmd, arg, _ := strings.Cut(strings.TrimSpace(line), " ")
		switch cmd {
		case "print":
			fmt.Fprintln(&out, arg)
		case "set":
			name, val, _ := strings.Cut(arg, " ")
			s.mu.Lock()
			s.vars[name] = val
			s.mu.Unlock()
		case "len":
			n := 0
			if s.opts.Context != nil {
				n = len(s.opts.Context.Data)
			}
			fmt.Fprintln(&out, n)
		case "llm", "llmset":
			prompt := arg
			name := ""
			if cmd == "llmset" {
				name, prompt, _ = strings.Cut(arg, " ")
			}
			a, err := b.LLMQuery(ctx, prompt, "")
			if err != nil {
				res.Error = "LLMQueryError: " + err.Error()
				res.ExitCode = 1
				return s.done(res, &out), nil
			}
			if name != "" {
				s.mu.Lock()
				s.vars[name] = a
				s.mu.Unlock()
			} else {
				fmt.Fprintln(&out, a)
			}
		case "rlm", "rlmsub":
			var sub *string
			task := arg
			if cmd == "rlmsub" {
				c, t, _ := strings.Cut(arg, " | ")
				sub, task = &c, t
			}
			a, err := b.RLMQuery(ctx, task, sub, "")
			if err != nil {
				res.Error = "LLMQueryError: " + err.Error()
				res.ExitCode = 1
				return s.done(res, &out), nil
			}
			fmt.Fprintln(&out, a)
		case "batch":
			var n int
			var prompt string
			fmt.Sscanf(arg, "%d", &n)
			_, prompt, _ = strings.Cut(arg, " ")
			answers := make([]string, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					answers[i], _ = b.LLMQuery(ctx, fmt.Sprintf("%s #%d", prompt, i), "")
				}()
			}
			wg.Wait()
			fmt.Fprintln(&out, strings.Join(answers, ","))
		case "raise":
			res.Error = "Traceback (most recent call last):\nValueError: " + arg
			res.ExitCode = 1
			return s.done(res, &out), nil
		case "timeout", "crash":
			res.TimedOut, res.EndedBy, res.DurationMs, res.ExitCode = true, "timeout", 2000, -1
			if cmd == "crash" {
				res.StateLost = true
				s.mu.Lock()
				s.vars = map[string]string{}
				s.mu.Unlock()
			}
			return s.done(res, &out), nil
		case "big":
			var n int
			fmt.Sscanf(arg, "%d", &n)
			out.WriteString(strings.Repeat("x", n/2) + strings.Repeat("y", n-n/2))
		}
	}
	return s.done(res, &out), nil
}

func (s *fakeSession) done(res *core.Result, out *strings.Builder) *core.Result {
	res.Stdout = out.String()
	return res
}

func (s *fakeSession) Variable(_ context.Context, name string) (json.RawMessage, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.vars[name]
	if !ok {
		return nil, false, nil
	}
	b, _ := json.Marshal(v)
	return b, true, nil
}

func (s *fakeSession) Cancel() error { return nil }

func (s *fakeSession) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	return nil
}

// fakeModel is an in-process llm.Provider: script decides each answer from
// the request. Usage is counted in words, like llmtest's servers; the cost
// comes from core/llm's price table.
type fakeModel struct {
	script func(req llm.Request) (string, error)
	mu     sync.Mutex
	reqs   []llm.Request
	usage  llm.Usage
}

func (m *fakeModel) Name() string { return "fake" }

func (m *fakeModel) Complete(ctx context.Context, req llm.Request) (llm.Response, error) {
	if err := ctx.Err(); err != nil {
		return llm.Response{}, err
	}
	// Like strict servers, require user and assistant turns to alternate,
	// starting and ending with the user.
	for i, msg := range req.Messages {
		if want := []string{"user", "assistant"}[i%2]; msg.Role != want {
			return llm.Response{}, fmt.Errorf("message %d has role %s, want %s", i, msg.Role, want)
		}
	}
	if len(req.Messages)%2 == 0 {
		return llm.Response{}, fmt.Errorf("the conversation does not end with a user message")
	}
	text, err := m.script(req)
	if err != nil {
		return llm.Response{}, err
	}
	in := words(req.System)
	for _, msg := range req.Messages {
		in += words(msg.Content)
	}
	u := llm.Usage{InputTokens: in, OutputTokens: words(text)}
	cost, _ := llm.Cost(req.Model, u)
	m.mu.Lock()
	m.reqs = append(m.reqs, req)
	m.usage.InputTokens += u.InputTokens
	m.usage.OutputTokens += u.OutputTokens
	m.mu.Unlock()
	return llm.Response{Text: text, Usage: u, Model: req.Model, Attempts: 1, CostUSD: cost}, nil
}

func (m *fakeModel) requests() []llm.Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]llm.Request(nil), m.reqs...)
}

func words(s string) int64 { return int64(len(strings.Fields(s))) }

// lastUser is the last user message of a request.
func lastUser(req llm.Request) string {
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == "user" {
			return req.Messages[i].Content
		}
	}
	return ""
}

// turn is the number of assistant messages already in the conversation.
func turn(req llm.Request) int {
	n := 0
	for _, m := range req.Messages {
		if m.Role == "assistant" {
			n++
		}
	}
	return n
}

// repl wraps lines into a repl block.
func repl(lines ...string) string {
	return "```repl\n" + strings.Join(lines, "\n") + "\n```\n"
}
