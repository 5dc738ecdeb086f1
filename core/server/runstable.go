package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/rlmkit/rlm/core/engine"
	"github.com/rlmkit/rlm/core/llm"
)

// Run is one RLM loop started by StartRun: its events so far, its status,
// and a way to follow it as it goes.
//
// Every event is kept until the run is forgotten (RunsConfig.Keep after it
// ends), so any number of readers can follow it from the start (POST
// /runs' own stream, GET /runs/{id}/events, rlm_run's progress), each at
// its own pace: a slow reader never holds the loop up.
type Run struct {
	id      string
	created time.Time
	task    string
	model   string
	subcall string

	mu      sync.Mutex
	cancel  context.CancelFunc
	events  []engine.Event
	changed chan struct{} // closed and replaced on every change
	done    chan struct{}
	usage   engine.Usage
	byModel map[string]ModelUsage
	final   *RunStatus
	ended   time.Time
	onEnd   func()
	// conv is the run's kept root loop (runskept.go); kept says it had
	// one, forgotten that the table let the run go.
	conv      *engine.Conversation
	kept      bool
	forgotten bool
}

// ID is the run's id, for GET /runs/{id} and the cancel endpoints.
func (r *Run) ID() string { return r.id }

// Done is closed when the run has ended.
func (r *Run) Done() <-chan struct{} { return r.done }

// Cancel ends the run: a model call or code block in progress is
// abandoned (the block's process killed), and the run ends cancelled.
func (r *Run) Cancel() {
	r.mu.Lock()
	cancel := r.cancel
	r.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// record keeps one event (engine.Options.OnEvent: called one at a time).
// A call's request is left out of what is kept and streamed: it is the
// whole conversation so far, repeated on every call (a trace has it).
func (r *Run) record(ev engine.Event) {
	if ev.Request != nil {
		ev.Request = &llm.Request{Model: ev.Request.Model, MaxTokens: ev.Request.MaxTokens, Temperature: ev.Request.Temperature}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if ev.Totals != nil {
		r.usage = *ev.Totals
	}
	if ev.Type == engine.EventLLMCall && ev.Request != nil && ev.Response != nil {
		m := r.byModel[ev.Request.Model]
		m.Calls++
		m.InputTokens += ev.Response.Usage.InputTokens
		m.OutputTokens += ev.Response.Usage.OutputTokens
		m.CostUSD += ev.Response.CostUSD
		r.byModel[ev.Request.Model] = m
	}
	r.events = append(r.events, ev)
	r.signal()
}

// signal wakes the readers; r.mu must be held.
func (r *Run) signal() {
	close(r.changed)
	r.changed = make(chan struct{})
}

// finish records how the run ended.
func (r *Run) finish(res *engine.Result, err error) {
	r.mu.Lock()
	st := r.statusLocked()
	if res != nil {
		st.Answer, st.AnswerSource, st.NoFinal, st.MissingVar = res.Answer, res.Source, res.NoFinal, res.MissingVar
		st.Usage = res.Usage
	}
	var be *engine.BudgetError
	switch {
	case err == nil:
		st.Status = RunSucceeded
	case errors.Is(err, context.Canceled):
		st.Status, st.ErrorKind = RunCancelled, "cancelled"
		st.Error = "the run was cancelled (POST /runs/{id}/cancel, DELETE /runs/{id}, the client went away, or the server stopped)"
	case errors.As(err, &be):
		st.Status, st.ErrorKind, st.BudgetKind = RunFailed, "budget", be.Kind
	case errors.Is(err, engine.ErrProvider):
		st.Status, st.ErrorKind = RunFailed, "provider"
	case errors.Is(err, engine.ErrSandbox):
		st.Status, st.ErrorKind = RunFailed, "sandbox"
	default:
		st.Status, st.ErrorKind = RunFailed, "internal"
	}
	if err != nil && st.Error == "" {
		st.Error = err.Error()
	}
	r.final = &st
	r.ended = time.Now()
	close(r.done)
	r.signal()
	onEnd := r.onEnd
	r.mu.Unlock()
	if onEnd != nil {
		onEnd()
	}
}

// Status is the run's status now.
func (r *Run) Status() RunStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.final != nil {
		st := *r.final
		st.Events = len(r.events)
		return st
	}
	return r.statusLocked()
}

func (r *Run) statusLocked() RunStatus {
	by := make(map[string]ModelUsage, len(r.byModel))
	for k, v := range r.byModel {
		by[k] = v
	}
	return RunStatus{ID: r.id, Status: RunRunning, Task: r.task, Model: r.model, SubcallModel: r.subcall,
		Usage: r.usage, UsageByModel: by, Created: r.created, Events: len(r.events)}
}

// Follow calls fn with each of the run's events, from the first, as they
// happen, until the run has ended and every event was given (it returns
// nil), ctx ends, or fn fails (it returns their error).
func (r *Run) Follow(ctx context.Context, fn func(engine.Event) error) error {
	return r.follow(ctx, fn, 0, nil)
}

// follow is Follow calling idle after every quiet period of every (when
// positive) in which the run emitted nothing.
func (r *Run) follow(ctx context.Context, fn func(engine.Event) error, every time.Duration, idle func() error) error {
	var tick <-chan time.Time
	if every > 0 {
		t := time.NewTicker(every)
		defer t.Stop()
		tick = t.C
	}
	next := 0
	for {
		r.mu.Lock()
		evs := r.events[next:]
		changed, ended := r.changed, r.final != nil
		r.mu.Unlock()
		for _, ev := range evs {
			if err := fn(ev); err != nil {
				return err
			}
		}
		next += len(evs)
		if ended && len(evs) == 0 {
			return nil
		}
		if len(evs) > 0 {
			continue
		}
		select {
		case <-changed:
		case <-tick:
			if err := idle(); err != nil {
				return err
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Wait waits for the run to end (or ctx) and returns its status.
func (r *Run) Wait(ctx context.Context) RunStatus {
	select {
	case <-r.done:
	case <-ctx.Done():
	}
	return r.Status()
}

// runTable holds the runs in progress and, for a while, the ended ones.
type runTable struct {
	once    sync.Once
	mu      sync.Mutex
	byID    map[string]*Run
	running int
	max     int
	keep    time.Duration
}

// keptRuns bounds the ended runs remembered, whatever Keep says: each
// holds its events.
const keptRuns = 256

func (s *Server) runs() *runTable {
	t := &s.runTab
	t.once.Do(func() {
		rc := s.cfg.Runs
		t.byID, t.max, t.keep = map[string]*Run{}, 4, 10*time.Minute
		if rc != nil && rc.MaxRuns > 0 {
			t.max = rc.MaxRuns
		}
		if rc != nil && rc.Keep > 0 {
			t.keep = rc.Keep
		}
	})
	return t
}

// add registers a new run, or says the table is full.
func (t *runTable) add(task, model, subcall string) (*Run, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pruneLocked()
	if t.running >= t.max {
		return nil, false
	}
	var b [12]byte
	_, _ = rand.Read(b[:])
	r := &Run{id: "run_" + hex.EncodeToString(b[:]), created: time.Now().UTC(), task: task, model: model, subcall: subcall,
		changed: make(chan struct{}), done: make(chan struct{}), byModel: map[string]ModelUsage{}}
	r.onEnd = func() {
		t.mu.Lock()
		t.running--
		t.mu.Unlock()
	}
	t.byID[r.id] = r
	t.running++
	return r, true
}

// pruneLocked forgets ended runs older than keep, and the oldest ended
// ones past keptRuns.
func (t *runTable) pruneLocked() {
	var ended []*Run
	for id, r := range t.byID {
		r.mu.Lock()
		fin, at := r.final != nil, r.ended
		r.mu.Unlock()
		switch {
		case fin && time.Since(at) > t.keep:
			delete(t.byID, id)
			go r.forget()
		case fin:
			ended = append(ended, r)
		}
	}
	for len(ended) > keptRuns {
		oldest := 0
		for i, r := range ended {
			if r.ended.Before(ended[oldest].ended) {
				oldest = i
			}
		}
		delete(t.byID, ended[oldest].id)
		go ended[oldest].forget()
		ended = append(ended[:oldest], ended[oldest+1:]...)
	}
}

func (t *runTable) get(id string) *Run {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pruneLocked()
	return t.byID[id]
}

func (t *runTable) remove(id string) *Run {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := t.byID[id]
	delete(t.byID, id)
	return r
}

// GetRun returns run id, in progress or ended a short while ago.
func (s *Server) GetRun(id string) (*Run, error) {
	if s.cfg.Runs == nil {
		return nil, runsOff()
	}
	if r := s.runs().get(id); r != nil {
		return r, nil
	}
	return nil, runNotFound(id)
}

// DeleteRun cancels run id if it is in progress and forgets it.
func (s *Server) DeleteRun(id string) (*Run, error) {
	if s.cfg.Runs == nil {
		return nil, runsOff()
	}
	r := s.runs().remove(id)
	if r == nil {
		return nil, runNotFound(id)
	}
	r.Cancel()
	r.forget()
	return r, nil
}

func runNotFound(id string) *APIError {
	return apiErr(http.StatusNotFound, CodeRunNotFound, "no run "+id+": it never existed, was deleted, or ended more than the server keeps runs for")
}

// Runs lists the runs in progress and those ended a short while ago,
// oldest first (GET /runs).
func (s *Server) Runs() ([]RunStatus, error) {
	if s.cfg.Runs == nil {
		return nil, runsOff()
	}
	t := s.runs()
	t.mu.Lock()
	t.pruneLocked()
	runs := make([]*Run, 0, len(t.byID))
	for _, r := range t.byID {
		runs = append(runs, r)
	}
	t.mu.Unlock()
	out := make([]RunStatus, 0, len(runs))
	for _, r := range runs {
		out = append(out, r.Status())
	}
	slices.SortFunc(out, func(a, b RunStatus) int { return a.Created.Compare(b.Created) })
	return out, nil
}
