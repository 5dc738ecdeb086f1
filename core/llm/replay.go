package llm

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/BurntSushi/toml"
)

// CallEventType is the "type" of a trace event that records one model call.
const CallEventType = "llm_call"

// CallEvent is one line of a JSONL trace that records a model call. The
// engine writes these (with any other fields it likes: time, id, ...) and
// the replay provider reads them back, so a recorded run replays exactly.
//
// # Transcript formats
//
// The replay provider reads three formats, told apart by content (and the
// .toml extension):
//
// 1. JSONL trace (what `rlm run --trace` writes): one JSON object per line.
// Lines whose "type" is not "llm_call" are ignored, as are unknown fields.
//
//	{"type":"llm_call","depth":0,"caller":"root",
//	 "request":{"model":"claude-sonnet-4-5","system":"...","messages":[{"role":"user","content":"..."}]},
//	 "response":{"text":"...","usage":{"input_tokens":812,"output_tokens":95},"model":"claude-sonnet-4-5-20250929"}}
//
// A JSON array of such events is accepted too.
//
// 2. A simple JSON transcript, answered strictly in order:
//
//	{"responses":[{"text":"first answer"},{"text":"second","usage":{"input_tokens":3,"output_tokens":1}}]}
//
// 3. The same as TOML:
//
//	[[responses]]
//	text = "first answer"
//
// # Matching
//
// Each recorded response is used at most once. For a request the replay
// provider takes the first unused recorded call whose request has the same
// hash of (model, system, messages); failing that, the same hash of
// (system, messages), so a trace replays under another model name; failing
// that, the next unused response in file order, preferring those recorded at
// the same depth and caller (see [WithCallInfo]). Hash matching is what makes
// concurrent sub-calls (llm_query_batched) replay deterministically: each
// prompt finds its own answer whatever order the calls arrive in. When no
// response is left the call fails with [ErrTranscript].
type CallEvent struct {
	Type     string   `json:"type"`
	Depth    int      `json:"depth"`
	Caller   string   `json:"caller,omitempty"`
	Request  Request  `json:"request"`
	Response Response `json:"response"`
}

// CallInfo says where in the recursion a call is made. The engine attaches
// it to the context of each model call with [WithCallInfo]; providers ignore
// it except replay, which uses it to choose among unmatched responses.
type CallInfo struct {
	Depth  int
	Caller string
}

type callInfoKey struct{}

// WithCallInfo returns ctx carrying info.
func WithCallInfo(ctx context.Context, info CallInfo) context.Context {
	return context.WithValue(ctx, callInfoKey{}, info)
}

// CallInfoFrom returns the CallInfo attached to ctx, if any.
func CallInfoFrom(ctx context.Context) (CallInfo, bool) {
	info, ok := ctx.Value(callInfoKey{}).(CallInfo)
	return info, ok
}

type replayEntry struct {
	full, loose string // request hashes; empty when no request was recorded
	hasInfo     bool
	info        CallInfo
	resp        Response
	used        bool
}

type replayBackend struct {
	path     string
	mu       sync.Mutex
	entries  []*replayEntry
	used     int
	start    *RecordedRun
	promptOK bool // a "prompt differs" warning was given
}

func newReplay(o Options) (completer, error) {
	if o.Transcript == "" {
		return nil, &Error{Provider: "replay", Kind: ErrTranscript,
			Msg: "no transcript file given (set [providers.replay] transcript in rlm.toml)"}
	}
	entries, start, err := loadTranscript(o.Transcript)
	if err != nil {
		return nil, &Error{Provider: "replay", Kind: ErrTranscript, Err: err,
			Msg: fmt.Sprintf("reading transcript %s: %v", o.Transcript, err)}
	}
	if len(entries) == 0 {
		return nil, &Error{Provider: "replay", Kind: ErrTranscript,
			Msg: fmt.Sprintf("transcript %s holds no responses (no %q events and no \"responses\" list)", o.Transcript, CallEventType)}
	}
	return &replayBackend{path: o.Transcript, entries: entries, start: start}, nil
}

func (b *replayBackend) endpoint() string { return b.path }

func (b *replayBackend) complete(ctx context.Context, req Request) (Response, error) {
	full, loose := requestHashes(req)
	info, hasInfo := CallInfoFrom(ctx)
	b.mu.Lock()
	defer b.mu.Unlock()
	pick := b.find(func(e *replayEntry) bool { return e.full != "" && e.full == full })
	if pick == nil {
		pick = b.find(func(e *replayEntry) bool { return e.loose != "" && e.loose == loose })
	}
	if pick == nil {
		b.promptDiffers(ctx, req, info, hasInfo)
	}
	if pick == nil && hasInfo {
		pick = b.find(func(e *replayEntry) bool { return e.hasInfo && e.info == info })
		if pick == nil {
			pick = b.find(func(e *replayEntry) bool { return e.hasInfo && e.info.Depth == info.Depth })
		}
	}
	if pick == nil {
		pick = b.find(func(*replayEntry) bool { return true })
	}
	if pick == nil {
		last := ""
		if n := len(req.Messages); n > 0 {
			last = excerpt(req.Messages[n-1].Content)
		}
		return Response{}, &Error{Kind: ErrTranscript,
			Msg: fmt.Sprintf("transcript %s has no response left (all %d used); unanswered request for model %q: %s",
				b.path, len(b.entries), req.Model, last)}
	}
	pick.used = true
	b.used++
	resp := pick.resp
	if resp.Model == "" {
		resp.Model = req.Model
	}
	return resp, nil
}

func (b *replayBackend) find(match func(*replayEntry) bool) *replayEntry {
	for _, e := range b.entries {
		if !e.used && match(e) {
			return e
		}
	}
	return nil
}

// requestHashes returns the hash of (model, system, messages) and of
// (system, messages).
func requestHashes(r Request) (full, loose string) {
	h := func(v any) string {
		data, _ := json.Marshal(v)
		sum := sha256.Sum256(data)
		return hex.EncodeToString(sum[:])
	}
	msgs := r.Messages
	if msgs == nil {
		msgs = []Message{}
	}
	return h([]any{r.Model, r.System, msgs}), h([]any{r.System, msgs})
}

// simpleTranscript is format 2 (and 3 after TOML decoding).
type simpleTranscript struct {
	Responses []Response `json:"responses"`
}

func loadTranscript(path string) ([]*replayEntry, *RecordedRun, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	if strings.EqualFold(filepath.Ext(path), ".toml") {
		var m map[string]any
		if _, err := toml.Decode(string(data), &m); err != nil {
			return nil, nil, err
		}
		// Go through JSON so the one set of json tags names the fields.
		js, err := json.Marshal(m)
		if err != nil {
			return nil, nil, err
		}
		entries, err := simpleEntries(js)
		return entries, nil, err
	}
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) > 0 && trimmed[0] == '[' {
		var events []CallEvent
		if err := json.Unmarshal(trimmed, &events); err != nil {
			return nil, nil, err
		}
		return eventEntries(events), nil, nil
	}
	if len(trimmed) > 0 && trimmed[0] == '{' {
		var top map[string]json.RawMessage
		if json.Unmarshal(trimmed, &top) == nil {
			if _, ok := top["responses"]; ok {
				entries, err := simpleEntries(trimmed)
				return entries, nil, err
			}
			if _, ok := top["type"]; !ok {
				return nil, nil, fmt.Errorf("a JSON object with neither \"responses\" nor \"type\"")
			}
		}
	}
	var events []CallEvent
	var start *RecordedRun
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 1<<20), 256<<20)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var probe struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(line, &probe); err != nil {
			return nil, nil, fmt.Errorf("line %d: %v", n, err)
		}
		if probe.Type == RunStartEventType && start == nil {
			var rs RecordedRun
			if json.Unmarshal(line, &rs) == nil && rs.Depth == 0 {
				start = &rs
			}
		}
		if probe.Type != CallEventType {
			continue
		}
		var ev CallEvent
		if err := json.Unmarshal(line, &ev); err != nil {
			return nil, nil, fmt.Errorf("line %d: %v", n, err)
		}
		events = append(events, ev)
	}
	if err := sc.Err(); err != nil {
		return nil, nil, err
	}
	return eventEntries(events), start, nil
}

func simpleEntries(js []byte) ([]*replayEntry, error) {
	var t simpleTranscript
	if err := json.Unmarshal(js, &t); err != nil {
		return nil, err
	}
	entries := make([]*replayEntry, len(t.Responses))
	for i, r := range t.Responses {
		entries[i] = &replayEntry{resp: r}
	}
	return entries, nil
}

func eventEntries(events []CallEvent) []*replayEntry {
	var entries []*replayEntry
	for _, ev := range events {
		if ev.Type != CallEventType {
			continue
		}
		e := &replayEntry{resp: ev.Response, hasInfo: true, info: CallInfo{Depth: ev.Depth, Caller: ev.Caller}}
		if len(ev.Request.Messages) > 0 || ev.Request.System != "" {
			e.full, e.loose = requestHashes(ev.Request)
		}
		entries = append(entries, e)
	}
	return entries
}
