package e2b

import (
	"bytes"
	"encoding/binary"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func frame(flags byte, msg string) []byte {
	b := make([]byte, 5, 5+len(msg))
	b[0] = flags
	binary.BigEndian.PutUint32(b[1:], uint32(len(msg)))
	return append(b, msg...)
}

// Bad Connect envelopes are refused with an error that names the problem.
func TestReadEnvelope(t *testing.T) {
	for name, c := range map[string]struct {
		ct   string
		body []byte
		code string
		want string
	}{
		"binary codec":  {"application/connect+proto", frame(0, "{}"), "invalid_argument", "JSON only"},
		"short header":  {"application/connect+json", []byte{0, 0}, "invalid_argument", "no complete Connect envelope"},
		"compressed":    {"application/connect+json", frame(1, "{}"), "unimplemented", "compressed"},
		"bad flags":     {"application/connect+json", frame(4, "{}"), "invalid_argument", "flags 0x4"},
		"short message": {"application/connect+json", frame(0, "{}")[:6], "invalid_argument", "body ends before"},
		"not JSON":      {"application/connect+json", frame(0, "{nope"), "invalid_argument", "not a JSON message"},
		"too large":     {"application/connect+json", []byte{0, 0xff, 0xff, 0xff, 0xff}, "resource_exhausted", "over the limit"},
	} {
		r := httptest.NewRequest("POST", "/process.Process/Start", bytes.NewReader(c.body))
		r.Header.Set("Content-Type", c.ct)
		var v map[string]any
		e := readEnvelope(r, &v)
		if e == nil || e.Code != c.code || !strings.Contains(e.Message, c.want) {
			t.Errorf("%s: %v, want %s saying %q", name, e, c.code, c.want)
		}
	}
	r := httptest.NewRequest("POST", "/x", bytes.NewReader(frame(0, `{"a": 1}`)))
	r.Header.Set("Content-Type", "application/connect+json")
	var v struct{ A int }
	if e := readEnvelope(r, &v); e != nil || v.A != 1 {
		t.Fatalf("a good envelope: %v %+v", e, v)
	}
}

// A stream is messages in envelopes, ended by an end-of-stream envelope
// (flags 2) holding {} or the error; an error before any message is a
// 200 with only that envelope, as Connect has it.
func TestStreamFraming(t *testing.T) {
	w := httptest.NewRecorder()
	st := newStream(w)
	_ = st.send(map[string]int{"pid": 3})
	st.end(nil)
	want := append(frame(0, `{"pid":3}`), frame(2, `{}`)...)
	if w.Code != 200 || w.Header().Get("Content-Type") != "application/connect+json" || !bytes.Equal(w.Body.Bytes(), want) {
		t.Fatalf("stream: %d %q, want %q", w.Code, w.Body.Bytes(), want)
	}
	w = httptest.NewRecorder()
	streamError(w, rpcErr("not_found", "no process %d", 9))
	if want := frame(2, `{"error":{"code":"not_found","message":"no process 9"}}`); w.Code != 200 || !bytes.Equal(w.Body.Bytes(), want) {
		t.Fatalf("stream error: %d %q", w.Code, w.Body.Bytes())
	}
	w = httptest.NewRecorder()
	writeRPCError(w, rpcErr("already_exists", "x"))
	if w.Code != http.StatusConflict || !strings.Contains(w.Body.String(), `"code":"already_exists"`) {
		t.Fatalf("unary error: %d %s", w.Code, w.Body.String())
	}
}

// E2B's paths name the workspace as /home/user; nothing else is reachable.
func TestToRel(t *testing.T) {
	for in, want := range map[string]string{"": ".", "~": ".", "/home/user": ".", "/home/user/": ".", "/home/user/a/b": "a/b", "a/b": "a/b", "~/x": "x", "/home/user/a/../b": "b"} {
		if got, e := toRel(in); e != nil || got != want {
			t.Errorf("toRel(%q) = %q, %v; want %q", in, got, e, want)
		}
	}
	for in, code := range map[string]string{"/etc/passwd": "permission_denied", "/home/user/../../etc": "permission_denied", "/home/username": "permission_denied", "../x": "invalid_argument"} {
		if _, e := toRel(in); e == nil || e.Code != code {
			t.Errorf("toRel(%q) = %v; want %s", in, e, code)
		}
	}
}
