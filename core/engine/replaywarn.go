package engine

import (
	"encoding/json"
	"fmt"
	"sync"

	"github.com/rlmkit/rlm/core/llm"
)

// checkRecording warns when the run replays a recording (llm.Recorder) of
// another task or another context: the recorded answers then answer a
// question this run did not ask. The replay goes on; the warning says what
// differs and how.
func (r *run) checkRecording(task string, info CtxInfo) {
	rec, ok := r.o.Provider.(llm.Recorder)
	if !ok {
		return
	}
	start, ok := rec.Recorded()
	if !ok {
		return
	}
	warn := func(msg string) {
		r.trace.emit(Event{Type: EventWarning, Message: msg})
	}
	if start.Task != task {
		warn(fmt.Sprintf("replay: the task differs from the recording's (recorded %q, this run %q): the recorded answers may not fit", excerpt(start.Task), excerpt(task)))
	}
	if p := start.Config.Protocol; p != "" && p != r.o.Protocol {
		warn(fmt.Sprintf("replay: the recording speaks the %s protocol and this run the %s one (another system prompt, another rlm_query and max_depth): pass --protocol %s to replay it as it was", p, r.o.Protocol, p))
	}
	var was CtxInfo
	if len(start.Context) > 0 && json.Unmarshal(start.Context, &was) == nil && !sameContext(was, info) {
		warn(fmt.Sprintf("replay: the context differs from the recording's (recorded %s, this run %s): the recorded answers may not fit", ctxSummary(was), ctxSummary(info)))
	}
}

// providerWarning shows a provider's warning about a call (a replayed
// prompt that matches no recorded one) as a run warning, once per text.
func (n *node) providerWarning(msg string) {
	r := n.r
	r.warnedMu.Lock()
	if r.warnedMsgs == nil {
		r.warnedMsgs = map[string]bool{}
	}
	seen := r.warnedMsgs[msg]
	r.warnedMsgs[msg] = true
	r.warnedMu.Unlock()
	if !seen {
		n.emit(Event{Type: EventWarning, Message: msg})
	}
}

// providerWarnings is the part of run that providerWarning keeps.
type providerWarnings struct {
	warnedMu   sync.Mutex
	warnedMsgs map[string]bool
}

// sameContext reports whether the recorded context was this run's: same
// description and, when the recording has one (traces written before it
// did not), the same hash.
func sameContext(was, now CtxInfo) bool {
	if was.SHA256 == "" {
		now.SHA256 = ""
	}
	return was == now
}

func ctxSummary(c CtxInfo) string {
	if c.SHA256 != "" {
		return fmt.Sprintf("[%s, %d chars, %s, sha256 %.12s]", c.Kind, c.Chars, c.Type, c.SHA256)
	}
	return fmt.Sprintf("[%s, %d chars, %s]", c.Kind, c.Chars, c.Type)
}

func excerpt(s string) string {
	const max = 80
	if r := []rune(s); len(r) > max {
		return string(r[:max]) + "…"
	}
	return s
}
