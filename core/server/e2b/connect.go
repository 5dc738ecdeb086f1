package e2b

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
)

// The Connect protocol's JSON side, as envd's clients speak it
// (connectrpc.com/docs/protocol): a unary call is a POST of
// application/json answered by one JSON message, or by an error object
// {code, message} with the HTTP status its code maps to; a streaming call
// is a POST of application/connect+json whose body, both ways, is
// envelopes (one flags byte, a 4-byte big-endian length, the message),
// the response ending with an end-of-stream envelope (flags 2) carrying
// {} or {"error": {...}}.

// rpcError is a Connect error.
type rpcError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *rpcError) Error() string { return e.Code + ": " + e.Message }

func rpcErr(code, format string, args ...any) *rpcError {
	return &rpcError{Code: code, Message: fmt.Sprintf(format, args...)}
}

// httpStatus is the status a unary error is answered with.
func (e *rpcError) httpStatus() int {
	switch e.Code {
	case "invalid_argument", "failed_precondition", "out_of_range":
		return http.StatusBadRequest
	case "unauthenticated":
		return http.StatusUnauthorized
	case "permission_denied":
		return http.StatusForbidden
	case "not_found":
		return http.StatusNotFound
	case "already_exists", "aborted":
		return http.StatusConflict
	case "resource_exhausted":
		return http.StatusTooManyRequests
	case "unimplemented":
		return http.StatusNotImplemented
	case "unavailable":
		return http.StatusServiceUnavailable
	case "deadline_exceeded":
		return http.StatusGatewayTimeout
	case "canceled":
		return 499
	}
	return http.StatusInternalServerError
}

// maxMessage bounds one request message.
const maxMessage = 16 << 20

// unary serves a unary call: decode the request into req, answer with
// call's result.
func unary[Req any](w http.ResponseWriter, r *http.Request, call func(*Req) (any, *rpcError)) {
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		writeRPCError(w, rpcErr("invalid_argument", "Content-Type %q: this server speaks Connect with JSON only (application/json for unary calls; the E2B SDKs send it)", r.Header.Get("Content-Type")))
		return
	}
	var req Req
	body, err := io.ReadAll(io.LimitReader(r.Body, maxMessage+1))
	if err != nil || len(body) > maxMessage {
		writeRPCError(w, rpcErr("invalid_argument", "the request message is unreadable or over %d bytes", maxMessage))
		return
	}
	if len(body) > 0 {
		if err := json.Unmarshal(body, &req); err != nil {
			writeRPCError(w, rpcErr("invalid_argument", "the request is not a JSON message of this method: %v", err))
			return
		}
	}
	out, e := call(&req)
	if e != nil {
		writeRPCError(w, e)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func writeRPCError(w http.ResponseWriter, e *rpcError) {
	writeJSON(w, e.httpStatus(), e)
}

// stream is the response side of a server-streaming call.
type stream struct {
	w       http.ResponseWriter
	flusher http.Flusher
}

// readEnvelope reads the one request message of a server-streaming call.
func readEnvelope(r *http.Request, v any) *rpcError {
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/connect+json" {
		return rpcErr("invalid_argument", "Content-Type %q: a streaming call takes application/connect+json (this server speaks Connect with JSON only)", r.Header.Get("Content-Type"))
	}
	var head [5]byte
	if _, err := io.ReadFull(r.Body, head[:]); err != nil {
		return rpcErr("invalid_argument", "the request has no complete Connect envelope (5-byte header, then the message): %v", err)
	}
	if head[0]&^1 != 0 {
		return rpcErr("invalid_argument", "envelope flags %#x: a request message has flags 0 (compression is not supported)", head[0])
	}
	if head[0]&1 != 0 {
		return rpcErr("unimplemented", "compressed messages are not supported: send them uncompressed")
	}
	n := binary.BigEndian.Uint32(head[1:])
	if n > maxMessage {
		return rpcErr("resource_exhausted", "the request message is %d bytes, over the limit of %d", n, maxMessage)
	}
	msg := make([]byte, n)
	if _, err := io.ReadFull(r.Body, msg); err != nil {
		return rpcErr("invalid_argument", "the envelope says %d bytes but the body ends before: %v", n, err)
	}
	if err := json.Unmarshal(msg, v); err != nil {
		return rpcErr("invalid_argument", "the request is not a JSON message of this method: %v", err)
	}
	return nil
}

func newStream(w http.ResponseWriter) *stream {
	w.Header().Set("Content-Type", "application/connect+json")
	w.WriteHeader(http.StatusOK)
	f, _ := w.(http.Flusher)
	return &stream{w: w, flusher: f}
}

func (s *stream) envelope(flags byte, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	var head [5]byte
	head[0] = flags
	binary.BigEndian.PutUint32(head[1:], uint32(len(b)))
	if _, err := s.w.Write(append(head[:], b...)); err != nil {
		return err
	}
	if s.flusher != nil {
		s.flusher.Flush()
	}
	return nil
}

// send writes one message.
func (s *stream) send(v any) error { return s.envelope(0, v) }

// end writes the end-of-stream envelope, with e when the call failed.
func (s *stream) end(e *rpcError) {
	if e == nil {
		_ = s.envelope(2, struct{}{})
		return
	}
	_ = s.envelope(2, map[string]any{"error": e})
}

// streamError answers a streaming call that failed before its first
// message: the status is 200 and the error is in the end-of-stream
// envelope, as Connect requires.
func streamError(w http.ResponseWriter, e *rpcError) {
	newStream(w).end(e)
}
