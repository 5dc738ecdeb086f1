package llm

import (
	"context"
	"encoding/json"
	"fmt"
)

// A replay answers from a recording, and answers whatever it is asked: a
// run replayed with another task, another context or an edited prompt still
// gets the recorded answers, which then answer a question nobody asked. So
// the replay says when what it is asked differs from what was recorded,
// once per kind, and goes on (replaying on purpose with a changed prompt is
// a legitimate way to test the engine).

// RunStartEventType is the trace event that opens a run; the replay reads
// the recorded task and context from it.
const RunStartEventType = "run_start"

// RecordedRun is what a recorded trace says about the run it recorded.
type RecordedRun struct {
	Depth int    `json:"depth"`
	Task  string `json:"task"`
	// Context is the recorded description of the context (kind, size,
	// type), as the engine wrote it.
	Context json.RawMessage `json:"context"`
	// Config.Protocol is the recorded run's protocol (engine.RunConfig);
	// empty in traces written before runs recorded it.
	Config struct {
		Protocol string `json:"protocol"`
	} `json:"config"`
}

// Recorder is implemented by a provider that answers from a recording
// (replay): Recorded returns what the recording says about its run, when
// it says anything (a JSONL trace does, a plain list of responses does
// not).
type Recorder interface {
	Recorded() (RecordedRun, bool)
}

// Recorded implements Recorder for the wrapped provider.
func (w *wrapped) Recorded() (RecordedRun, bool) {
	if r, ok := w.c.(Recorder); ok {
		return r.Recorded()
	}
	return RecordedRun{}, false
}

// Recorded implements Recorder.
func (b *replayBackend) Recorded() (RecordedRun, bool) {
	if b.start == nil {
		return RecordedRun{}, false
	}
	return *b.start, true
}

type warnKey struct{}

// WithWarn returns ctx carrying warn, which a provider calls with a warning
// about a call (the engine shows them as run warnings).
func WithWarn(ctx context.Context, warn func(msg string)) context.Context {
	return context.WithValue(ctx, warnKey{}, warn)
}

func warnFrom(ctx context.Context) func(string) {
	if w, ok := ctx.Value(warnKey{}).(func(string)); ok && w != nil {
		return w
	}
	return func(string) {}
}

// promptDiffers warns, once per replay, that a request matches no recorded
// request. Called with b.mu held; only recordings that kept their requests
// (traces) can tell.
func (b *replayBackend) promptDiffers(ctx context.Context, req Request, info CallInfo, hasInfo bool) {
	if b.promptOK {
		return
	}
	recorded := false
	for _, e := range b.entries {
		if e.full != "" {
			recorded = true
			break
		}
	}
	if !recorded {
		return
	}
	b.promptOK = true
	where := ""
	if hasInfo {
		where = fmt.Sprintf(" (depth %d, %s)", info.Depth, info.Caller)
	}
	warnFrom(ctx)(fmt.Sprintf("replay: a prompt%s differs from every prompt recorded in %s (the system prompt or a message changed): answering with the next recorded response, which may not fit", where, b.path))
}
