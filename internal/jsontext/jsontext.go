// Package jsontext checks that a client's JSON message is text that
// encoding/json will decode exactly. encoding/json reads a byte that is not
// UTF-8, and a \u escape of half a UTF-16 surrogate pair, as U+FFFD without
// a word: a program would run with other code than the client sent. Every
// door that decodes a client's JSON (rlm serve's bodies, MCP over HTTP and
// stdio) checks with Check first and refuses what it finds.
package jsontext

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Check refuses data, a JSON message that what names ("the body"), when it
// holds a byte that is not UTF-8 or a lone surrogate escape, naming the
// first one and the way to send binary data.
func Check(what string, data []byte) error {
	if at := invalidUTF8(data); at >= 0 {
		return fmt.Errorf("%s is not UTF-8: byte %d (0x%02x, counting from 0) is not valid UTF-8; %s", what, at, data[at], fix)
	}
	if at := loneSurrogate(data); at >= 0 {
		return fmt.Errorf("%s holds %s at byte %d (counting from 0), half of a UTF-16 surrogate pair, which stands for no character; %s", what, data[at:at+6], at, fix)
	}
	return nil
}

const fix = "JSON must be UTF-8 text, so send binary data base64-encoded in files (name → base64) and decode it in the program"

// invalidUTF8 is the offset of the first byte of b that is not part of
// valid UTF-8, or -1 when b is all UTF-8.
func invalidUTF8(b []byte) int {
	for i := 0; i < len(b); {
		if b[i] < utf8.RuneSelf {
			i++
			continue
		}
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 {
			return i
		}
		i += n
	}
	return -1
}

// loneSurrogate is the offset of the first \u escape in a string of b that
// is a high surrogate not followed by a low one, or a low surrogate not
// preceded by a high one; -1 when there is none. Outside strings JSON has
// no backslash, and a malformed escape is left to the decoder to report.
func loneSurrogate(b []byte) int {
	inString := false
	for i := 0; i < len(b); i++ {
		switch {
		case !inString:
			inString = b[i] == '"'
		case b[i] == '"':
			inString = false
		case b[i] == '\\' && i+1 < len(b):
			if b[i+1] != 'u' {
				i++ // \" \\ \n ...: the escaped byte is not a delimiter
				continue
			}
			u, ok := hex4(b, i+2)
			switch {
			case !ok:
				return -1
			case u >= 0xDC00 && u <= 0xDFFF:
				return i
			case u >= 0xD800 && u <= 0xDBFF:
				if i+7 >= len(b) || b[i+6] != '\\' || b[i+7] != 'u' {
					return i
				}
				lo, ok := hex4(b, i+8)
				if !ok {
					return -1 // a malformed or cut-off escape
				}
				if lo < 0xDC00 || lo > 0xDFFF {
					return i
				}
				i += 11 // the pair
			default:
				i += 5
			}
		}
	}
	return -1
}

// hex4 reads the four hex digits at b[at:].
func hex4(b []byte, at int) (rune, bool) {
	if at < 0 || at+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[at : at+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// Finite refuses data, a JSON value that what names ("field context"),
// when it holds a number with a fraction or exponent beyond a 64-bit
// float's range, such as 1e999: Python and JavaScript read it as infinity,
// which no JSON can carry back. Integers are left alone, however long:
// Python keeps them exact. data must be valid JSON.
func Finite(what string, data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	for {
		at := dec.InputOffset()
		tok, err := dec.Token()
		if err != nil {
			return nil // the end, or JSON the caller's decoder judges
		}
		n, ok := tok.(json.Number)
		if !ok || !strings.ContainsAny(string(n), ".eE") {
			continue
		}
		if f, err := strconv.ParseFloat(string(n), 64); err != nil && math.IsInf(f, 0) {
			// at is where the token's search began: skip the separator.
			at += int64(bytes.Index(data[at:], []byte(n)))
			return fmt.Errorf("%s holds the number %s (at byte %d), out of range for a 64-bit float: JSON numbers must be finite (send it as a string)", what, n, at)
		}
	}
}

// Depth is how deeply msg, valid JSON, nests objects and arrays: a
// decoder with a nesting limit (the MCP SDK's) refuses a message beyond
// it, and a caller that must answer instead of failing checks first.
func Depth(msg []byte) int {
	d, most := 0, 0
	inString, escaped := false, false
	for _, b := range msg {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case b == '\\':
				escaped = true
			case b == '"':
				inString = false
			}
		case b == '"':
			inString = true
		case b == '{' || b == '[':
			d++
			most = max(most, d)
		case b == '}' || b == ']':
			d--
		}
	}
	return most
}
