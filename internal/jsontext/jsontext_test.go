package jsontext

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string // "" for accepted
	}{
		{`{"code":"print('é')"}`, ""},
		{`{"code":"\u00e9 \ud83d\ude00 \\ud800"}`, ""}, // an escaped backslash is no escape
		{`{"code":"a\"\ud800"}`, `holds \ud800 at byte 12`},
		{`{"code":"\udc00"}`, `holds \udc00 at byte 9`},
		{`{"code":"\uD800\u0041"}`, `holds \uD800 at byte 9`},
		{`{"code":"\ud800"}`, `half of a UTF-16 surrogate pair`},
		{"{\"code\":\"\xff\"}", "byte 9 (0xff, counting from 0) is not valid UTF-8"},
		{"{\"code\":\"\xe2\x82\"}", "byte 9 (0xe2"},
		{`{"code":"\ud83d\ude0`, ""}, // truncated: the decoder reports it
	} {
		err := Check("the body", []byte(tc.in))
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.in, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "base64") {
			t.Errorf("%s: got %v, want %q", tc.in, err, tc.want)
		}
	}
}

// What Check accepts, encoding/json decodes without a replacement
// character it did not see in the input.
func TestAcceptedDecodesExactly(t *testing.T) {
	for _, in := range []string{`"\u00e9\ud83d\ude00"`, `"\\ud800"`, `"plain"`, `"\ud800"`, `"\udfff x"`} {
		var s string
		if err := json.Unmarshal([]byte(in), &s); err != nil {
			t.Fatal(err)
		}
		lossy := strings.ContainsRune(s, '\uFFFD')
		if accepted := Check("x", []byte(in)) == nil; accepted == lossy {
			t.Errorf("%s: accepted %v, decoded %q", in, accepted, s)
		}
	}
}

func TestFinite(t *testing.T) {
	for _, ok := range []string{`1`, `1.5e308`, `-2.5`, `1e-999`, `123456789012345678901234567890123456789`,
		`1` + strings.Repeat("0", 400), `{"a": [1, "1e999", 2.0]}`, `"x"`, `null`} {
		if err := Finite("field context", []byte(ok)); err != nil {
			t.Errorf("%s refused: %v", ok, err)
		}
	}
	for bad, at := range map[string]string{`1e999`: "byte 0", `{"a": [1, -1.8e308]}`: "byte 10", `[2E400]`: "byte 1"} {
		err := Finite("field context", []byte(bad))
		if err == nil || !strings.Contains(err.Error(), "field context holds the number") || !strings.Contains(err.Error(), at) {
			t.Errorf("%s: %v, want it refused at %s", bad, err, at)
		}
	}
}

func TestDepth(t *testing.T) {
	for in, want := range map[string]int{
		`1`:                  0,
		`{"a":[1,{"b":[]}]}`: 4,
		`["[[[{", "\"]]]"]`:  1, // brackets in strings, an escaped quote
		`{"a":"\\"}`:         1,
		strings.Repeat("[", 3) + strings.Repeat("]", 3): 3,
	} {
		if got := Depth([]byte(in)); got != want {
			t.Errorf("Depth(%s) = %d, want %d", in, got, want)
		}
	}
}
