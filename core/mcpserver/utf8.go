package mcpserver

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/rlmkit/rlm/internal/jsontext"
)

// The MCP SDK decodes messages with encoding/json, which reads a byte that
// is not UTF-8 (or a lone surrogate escape) as U+FFFD without a word:
// run_code would run other code than the client sent. Both transports
// therefore check each message first (jsontext.Check, as rlm serve does for
// its bodies) and answer one that is not such text with a JSON-RPC parse
// error naming the byte, before the SDK sees it.

// parseError is the JSON-RPC 2.0 answer to a message that cannot be read,
// with the message's id when a lenient decoding finds one.
func parseError(msg []byte, err error) []byte {
	var probe struct {
		ID json.RawMessage `json:"id"`
	}
	_ = json.Unmarshal(msg, &probe)
	id := probe.ID
	if len(id) == 0 || !json.Valid(id) {
		id = json.RawMessage("null")
	}
	b, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}{JSONRPC: "2.0", ID: id, Error: struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}{-32700, err.Error()}})
	return b
}

// utf8Only answers a POST whose body is not UTF-8 with 400 and a parse
// error; other requests go to h with the body as read.
func utf8Only(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Body == nil {
			h.ServeHTTP(w, r)
			return
		}
		data, rerr := io.ReadAll(r.Body)
		if rerr == nil {
			if err := jsontext.Check("the body", data); err != nil {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusBadRequest)
				_, _ = w.Write(parseError(data, err))
				return
			}
		}
		// h reads what was read, then the read's error (a body over the
		// limit, a client gone), as if nothing had come between.
		r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(data), errReader{rerr}))
		h.ServeHTTP(w, r)
	})
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) {
	if e.err == nil {
		return 0, io.EOF
	}
	return 0, e.err
}

// StdioTransport is MCP over in and out (newline-delimited JSON-RPC, as
// the SDK's IOTransport), except that a line that is not UTF-8 is not
// passed on: it is answered with a parse error naming the byte, and the
// session goes on.
func StdioTransport(in io.Reader, out io.Writer) mcp.Transport {
	w := &lockedWriter{w: out}
	return &mcp.IOTransport{
		Reader: &utf8Lines{r: bufio.NewReader(in), w: w},
		Writer: w,
	}
}

// lockedWriter serialises the SDK's writes (one message each) with
// utf8Lines' parse errors.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (l *lockedWriter) Close() error { return nil }

// utf8Lines passes on the lines of r that are UTF-8 and answers the others
// on w.
type utf8Lines struct {
	r    *bufio.Reader
	w    *lockedWriter
	line []byte // the rest of the line being passed on
	err  error  // r's error, returned once line is passed on
}

func (u *utf8Lines) Read(p []byte) (int, error) {
	for len(u.line) == 0 {
		if u.err != nil {
			return 0, u.err
		}
		line, err := u.r.ReadBytes('\n')
		u.err = err
		if cerr := jsontext.Check("the message", line); cerr != nil {
			if _, werr := u.w.Write(append(parseError(line, cerr), '\n')); werr != nil {
				return 0, werr
			}
			continue
		}
		u.line = line
	}
	n := copy(p, u.line)
	u.line = u.line[n:]
	return n, nil
}

func (u *utf8Lines) Close() error { return nil }
