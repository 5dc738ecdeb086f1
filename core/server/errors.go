package server

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// Error codes in `{"error": {"code", "message"}}` bodies. The HTTP status
// carries the class; the code says which case it is.
const (
	CodeBadJSON            = "bad_json"
	CodeBadField           = "bad_field"
	CodeBadRequest         = "bad_request" // the runtime refused the request
	CodeNotFound           = "not_found"
	CodeMethodNotAllowed   = "method_not_allowed"
	CodeBodyTooLarge       = "body_too_large"
	CodeUnsupportedMedia   = "unsupported_media_type"
	CodeUnauthorized       = "unauthorized"
	CodeBusy               = "busy"
	CodeTooManySessions    = "too_many_sessions"
	CodeSessionNotFound    = "session_not_found"
	CodeSessionEnded       = "session_ended"
	CodeVariableNotFound   = "variable_not_found"
	CodeUnsupported        = "unsupported"
	CodeRuntimeUnavailable = "runtime_unavailable"
	CodeShuttingDown       = "shutting_down"
	CodeInternal           = "internal"
)

// APIError is an error with the HTTP status and code it is answered with.
type APIError struct {
	Status  int    `json:"-"`
	Code    string `json:"code"`
	Message string `json:"message"`
	// RetryAfter, in seconds, is sent as the Retry-After header when > 0.
	RetryAfter int `json:"-"`
}

func (e *APIError) Error() string { return e.Message }

func apiErr(status int, code, msg string) *APIError {
	return &APIError{Status: status, Code: code, Message: msg}
}

func writeError(w http.ResponseWriter, e *APIError) {
	if rec, ok := w.(*recorder); ok {
		rec.errCode = e.Code
		if e.Status == 499 {
			// Nobody is listening; record it and write nothing.
			rec.status = 499
			return
		}
	}
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.RetryAfter))
	}
	writeJSON(w, e.Status, struct {
		Error *APIError `json:"error"`
	}{e})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"error":{"code":"internal","message":"encoding the response failed"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
