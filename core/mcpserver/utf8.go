package mcpserver

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"

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
	return rpcError(probe.ID, -32700, err.Error())
}

// rpcError is a JSON-RPC 2.0 error response; id is null unless it is a
// string or a number (the spec's null for an id that could not be read).
func rpcError(id json.RawMessage, code int, msg string) []byte {
	if !validID(id) {
		id = json.RawMessage("null")
	}
	type rpcErr struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	b, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   rpcErr          `json:"error"`
	}{"2.0", id, rpcErr{code, msg}})
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
