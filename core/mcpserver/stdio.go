package mcpserver

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/rlmkit/rlm/internal/jsontext"
)

// MaxLineLength is the most bytes one stdio message (a line, without its
// line ending) may hold: the SDK's own default, so nothing it would have
// read is refused.
const MaxLineLength = mcp.DefaultMaxLineLength

// drainCap bounds how long stdio waits at the end of its input for the
// replies still owed: every tool call has its own timeout, far shorter, so
// the cap only matters if a reply never comes (a request the SDK drops).
const drainCap = 10 * time.Minute

// StdioTransport is MCP over in and out (newline-delimited JSON-RPC, as the
// SDK's IOTransport), with the SDK's fragile edges taken off:
//
//   - The SDK ends the session on any line it cannot decode (not JSON, an
//     empty batch, "jsonrpc":"1.0", a line over its maximum length) with no
//     reply, and reads a byte that is not UTF-8 as U+FFFD without a word.
//     Each line is therefore checked before the SDK sees it and a bad one is
//     answered with a JSON-RPC error (-32700 parse error, -32600 invalid
//     request) while the session goes on; see stdioLines.
//   - The SDK stops at the end of in, cancelling the calls still running
//     and dropping their replies, which leaves `printf ... | rlm mcp`
//     without output. The end of in is therefore passed on only once every
//     request passed on has been answered (or cancelled by the client).
//   - The SDK answers a request the client cancelled (with
//     notifications/cancelled) once its handler returns, while MCP says the
//     receiver of a cancellation should not answer it, and a client may
//     already have reused the id. The reply to a request cancelled before
//     it was answered is therefore dropped here (a session_run so cancelled
//     has interrupted its cell and kept the session).
func StdioTransport(in io.Reader, out io.Writer) mcp.Transport {
	p := &pending{ids: map[string]int{}, cancelled: map[string]int{}, changed: make(chan struct{}, 1)}
	w := &stdioWriter{w: out, pending: p}
	return &mcp.IOTransport{
		Reader: &stdioLines{r: bufio.NewReader(in), w: w, pending: p, max: MaxLineLength, drainCap: drainCap},
		Writer: w,
		// stdioLines passes on no line over MaxLineLength, so the SDK's
		// own cap (which ends the session) is never needed.
		MaxLineLength: -1,
	}
}

// pending counts the requests passed on to the SDK and not yet answered,
// by id (see idKey), so that the end of input can wait for their replies,
// and the ones the client cancelled meanwhile, whose replies are dropped.
type pending struct {
	mu        sync.Mutex
	ids       map[string]int
	cancelled map[string]int
	changed   chan struct{} // signalled when an id is removed
}

// cancel notes that the client cancelled request key: if it is still
// unanswered, its reply will be dropped (see drop) and the end of input no
// longer waits for it.
func (p *pending) cancel(key string) {
	p.mu.Lock()
	unanswered := p.ids[key] > 0
	if unanswered {
		p.cancelled[key]++
	}
	p.mu.Unlock()
	if unanswered {
		p.remove(key)
	}
}

// drop says whether a reply to request key is one to a cancelled request,
// to be dropped; it is counted off.
func (p *pending) drop(key string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := p.cancelled[key]
	switch {
	case n == 0:
		return false
	case n > 1:
		p.cancelled[key] = n - 1
	default:
		delete(p.cancelled, key)
	}
	return true
}

func (p *pending) add(key string) {
	p.mu.Lock()
	p.ids[key]++
	p.mu.Unlock()
}

func (p *pending) remove(key string) {
	p.mu.Lock()
	if n := p.ids[key]; n > 1 {
		p.ids[key] = n - 1
	} else {
		delete(p.ids, key)
	}
	p.mu.Unlock()
	select {
	case p.changed <- struct{}{}:
	default:
	}
}

func (p *pending) empty() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.ids) == 0
}

// wait returns once no request is pending or after limit.
func (p *pending) wait(limit time.Duration) {
	timer := time.NewTimer(limit)
	defer timer.Stop()
	for !p.empty() {
		select {
		case <-p.changed:
		case <-timer.C:
			return
		}
	}
}

// idKey is a JSON-RPC id as the SDK tells ids apart: a number is read as a
// float64 and kept as an int64 (so 1, 1.0 and 1e0 are one id, written back
// as 1), a string as itself. It is "" for no id, null or an id of another
// type.
func idKey(id json.RawMessage) string {
	id = bytes.TrimSpace(id)
	if len(id) == 0 {
		return ""
	}
	switch id[0] {
	case '"':
		var s string
		if json.Unmarshal(id, &s) != nil {
			return ""
		}
		return "s" + s
	case 'n', 't', 'f', '{', '[':
		return ""
	}
	var f float64
	if json.Unmarshal(id, &f) != nil {
		return ""
	}
	return "n" + strconv.FormatInt(int64(f), 10)
}

func validID(id json.RawMessage) bool { return idKey(id) != "" }

// stdioWriter serialises the SDK's writes with stdioLines' error replies
// and, as each response goes out, strikes its id from pending. The SDK's
// ioConn writes each message (or batch) with one Write, newline included,
// so each Write is read as one message.
type stdioWriter struct {
	mu      sync.Mutex
	w       io.Writer
	pending *pending
}

func (l *stdioWriter) Write(p []byte) (int, error) {
	// A response is a message with an id and no method; the SDK's own
	// requests to the client carry a method and are not ours to count.
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method json.RawMessage `json:"method"`
	}
	key := ""
	if json.Unmarshal(p, &msg) == nil && msg.Method == nil {
		key = idKey(msg.ID)
	}
	if key != "" && l.pending.drop(key) {
		return len(p), nil // the client cancelled it: no reply
	}
	l.mu.Lock()
	n, err := l.w.Write(p)
	l.mu.Unlock()
	if key != "" {
		l.pending.remove(key)
	}
	return n, err
}

func (l *stdioWriter) Close() error { return nil }

// stdioLines passes on to the SDK each line of r that is one JSON-RPC 2.0
// message it can take, and answers the others on w: one bad line from a
// client must not end the session, and JSON-RPC 2.0 says what to reply.
// Blank lines are skipped. A line over max is read in bounded memory (the
// rest of it is discarded) and answered with an error saying the limit.
type stdioLines struct {
	r        *bufio.Reader
	w        *stdioWriter
	pending  *pending
	max      int
	drainCap time.Duration
	buf      []byte // the line being read
	line     []byte // the rest of the line being passed on
	err      error  // r's error, returned once line is passed on
}

func (u *stdioLines) Read(p []byte) (int, error) {
	for len(u.line) == 0 {
		if u.err != nil {
			if u.err == io.EOF {
				// The client has said all it will; let the replies it is
				// owed go out before the SDK hears of the end.
				u.pending.wait(u.drainCap)
			}
			return 0, u.err
		}
		line, tooLong, err := u.readLine()
		u.err = err
		if tooLong {
			if werr := u.reply(rpcError(nil, -32600, fmt.Sprintf(
				"invalid request: the message is over %d bytes (%d MiB), the most one line may hold, and was skipped: keep large data out of messages, in files the code reads or fetches",
				u.max, u.max>>20))); werr != nil {
				return 0, werr
			}
			continue
		}
		msg := bytes.TrimSpace(line)
		if len(msg) == 0 {
			continue
		}
		in, reply := checkMessage(msg)
		if reply != nil {
			if werr := u.reply(reply); werr != nil {
				return 0, werr
			}
			continue
		}
		if in.hasMethod {
			if key := idKey(in.id); key != "" {
				u.pending.add(key)
			}
			if in.method == "notifications/cancelled" {
				// No reply goes out to a cancelled request (see
				// stdioWriter), so the end of input does not wait for one.
				if key := idKey(in.cancelled); key != "" {
					u.pending.cancel(key)
				}
			}
		}
		// One message, and nothing after it on its line: the SDK ends the
		// session on "trailing data", spaces included.
		u.line = append(msg, '\n')
	}
	n := copy(p, u.line)
	u.line = u.line[n:]
	return n, nil
}

func (u *stdioLines) reply(msg []byte) error {
	_, err := u.w.Write(append(msg, '\n'))
	return err
}

// readLine reads a line, holding at most max bytes (and its line ending)
// of it: beyond that it reads on to the end of the line, keeping nothing,
// and reports tooLong.
func (u *stdioLines) readLine() (line []byte, tooLong bool, err error) {
	if cap(u.buf) > 1<<20 {
		u.buf = nil // a large line's memory is not held for the session
	}
	u.buf = u.buf[:0]
	for {
		chunk, err := u.r.ReadSlice('\n')
		if !tooLong {
			if len(u.buf)+len(chunk) > u.max+2 { // room for "\r\n"
				tooLong = true
				u.buf = u.buf[:0]
			} else {
				u.buf = append(u.buf, chunk...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if !tooLong && len(bytes.TrimRight(u.buf, "\r\n")) > u.max {
			tooLong = true
		}
		if tooLong {
			return nil, true, err
		}
		return u.buf, false, err
	}
}

// inbound is what stdioLines needs of a message it passes on.
type inbound struct {
	id        json.RawMessage
	method    string
	hasMethod bool
	cancelled json.RawMessage // a notifications/cancelled's requestId
}

// maxDepth is the SDK's limit on nesting (it ends the session beyond it).
const maxDepth = 1000

// checkMessage refuses, with the JSON-RPC error reply to send, a message
// the SDK would not decode: it ends the session on each of these.
func checkMessage(msg []byte) (in inbound, reply []byte) {
	if err := jsontext.Check("the message", msg); err != nil {
		return in, parseError(msg, err)
	}
	notJSON := func(err error) (inbound, []byte) {
		return inbound{}, rpcError(nil, -32700, "parse error: the message is not JSON ("+err.Error()+"); send one JSON-RPC message a line")
	}
	invalid := func(id json.RawMessage, why string) (inbound, []byte) {
		return inbound{}, rpcError(id, -32600, "invalid request: "+why)
	}
	// An object is decoded once, into its keys as written (the SDK
	// matches them case-sensitively); anything else is refused after a
	// syntax check, so that a message that is not JSON is said to be so.
	var m map[string]json.RawMessage
	if msg[0] == '{' {
		if err := json.Unmarshal(msg, &m); err != nil {
			return notJSON(err)
		}
	} else if err := json.Unmarshal(msg, new(json.RawMessage)); err != nil {
		return notJSON(err)
	}
	if jsontext.Depth(msg) > maxDepth {
		return invalid(nil, fmt.Sprintf("the message nests deeper than %d levels", maxDepth))
	}
	switch msg[0] {
	case '{':
	case '[':
		if bytes.Equal(bytes.Join(bytes.Fields(msg), nil), []byte("[]")) {
			return invalid(nil, "an empty batch")
		}
		return invalid(nil, "JSON-RPC batches are not supported (MCP dropped them in 2025-06-18); send one message a line")
	default:
		return invalid(nil, "a JSON-RPC message is an object, not "+string(truncate(msg, 40)))
	}
	id, hasID := m["id"]
	if hasID && !bytes.Equal(id, []byte("null")) && !validID(id) {
		return invalid(nil, "the id must be a string or a number")
	}
	var version string
	if raw, ok := m["jsonrpc"]; !ok || raw[0] != '"' || json.Unmarshal(raw, &version) != nil || version != "2.0" {
		return invalid(id, `"jsonrpc" must be "2.0"`)
	}
	if raw, ok := m["method"]; ok {
		if raw[0] != '"' || json.Unmarshal(raw, &in.method) != nil {
			return invalid(id, "the method must be a string")
		}
		in.hasMethod = true
		in.id = id
		if in.method == "notifications/cancelled" {
			var params struct {
				RequestID json.RawMessage `json:"requestId"`
			}
			_ = json.Unmarshal(m["params"], &params)
			in.cancelled = params.RequestID
		}
		return in, nil
	}
	// No method: a response to a request of the server's.
	if !validID(id) {
		return invalid(nil, "a message needs a method (a request or notification) or an id (a response)")
	}
	if raw, ok := m["error"]; ok {
		var e struct {
			Code    int64           `json:"code"`
			Message string          `json:"message"`
			Data    json.RawMessage `json:"data"`
		}
		if json.Unmarshal(raw, &e) != nil {
			return invalid(id, "the error must be an object with a numeric code and a string message")
		}
	}
	in.id = id
	return in, nil
}

func truncate(b []byte, n int) []byte {
	if len(b) > n {
		return append(b[:n:n], "..."...)
	}
	return b
}

func (u *stdioLines) Close() error { return nil }
