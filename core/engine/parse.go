package engine

import (
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Reply is what the engine reads out of one model reply.
type Reply struct {
	// Code holds the bodies of the ```repl and ```python blocks, in order.
	Code []string
	// Final is set when the reply ends the run.
	Final *Final
}

// Final is a FINAL(answer) or FINAL_VAR(name) directive.
type Final struct {
	// Var is true for FINAL_VAR: Value is then a variable name to read
	// from the session.
	Var   bool
	Value string
}

// finalLine finds a directive at the start of a line (after optional
// whitespace and markdown emphasis), as the system prompt asks.
var finalLine = regexp.MustCompile(`(?m)^[ \t>*_]*(FINAL_VAR|FINAL)\(`)

// ParseReply extracts the code blocks and the final directive of a model
// reply.
//
// # Notes
//
// A directive counts only outside fenced blocks and at the start of a line,
// so prose that mentions "the FINAL(...) syntax" mid-sentence and code that
// prints it are not taken as the answer. FINAL(answer) runs to its
// matching closing parenthesis, so answers may contain balanced parentheses
// and span lines; one layer of matching quotes around the answer is removed.
// FINAL_VAR takes a variable name, quoted or not.
func ParseReply(text string) Reply {
	var r Reply
	var prose strings.Builder
	var block []string
	inBlock, keep := false, false
	for _, line := range strings.SplitAfter(text, "\n") {
		t := strings.TrimSpace(line)
		switch {
		case !inBlock && strings.HasPrefix(t, "```"):
			inBlock = true
			tag := strings.ToLower(strings.TrimSpace(strings.TrimLeft(t, "`")))
			keep = tag == "repl" || tag == "python" || tag == "py" || tag == "python3"
			block = block[:0]
		case inBlock && strings.Trim(t, "`") == "" && strings.HasPrefix(t, "```"):
			inBlock = false
			if code := strings.TrimRight(strings.Join(block, ""), " \t\r\n"); keep && strings.TrimSpace(code) != "" {
				r.Code = append(r.Code, code)
			}
		case inBlock:
			block = append(block, line)
		default:
			prose.WriteString(line)
		}
	}
	// An unclosed block at the end of a reply (the model ran out of tokens
	// or forgot the fence) still counts: running it shows the model its
	// mistake rather than ignoring its work.
	if inBlock && keep {
		if code := strings.TrimRight(strings.Join(block, ""), " \t\r\n"); strings.TrimSpace(code) != "" {
			r.Code = append(r.Code, code)
		}
	}
	loc := finalLine.FindStringSubmatchIndex(prose.String())
	if loc == nil {
		return r
	}
	p := prose.String()
	kind := p[loc[2]:loc[3]]
	rest := p[loc[1]:]
	if kind == "FINAL_VAR" {
		end := strings.IndexByte(rest, ')')
		if end < 0 {
			return r
		}
		name := unquote(strings.TrimSpace(rest[:end]))
		if !isIdent(name) {
			return r
		}
		r.Final = &Final{Var: true, Value: name}
		return r
	}
	end := closing(rest)
	if end < 0 {
		return r
	}
	r.Final = &Final{Value: unquote(strings.TrimSpace(rest[:end]))}
	return r
}

// closing finds the parenthesis that closes an opened one at the start of
// s: the first where the nesting returns to zero, or, when the answer's own
// parentheses do not balance, the last one in s.
func closing(s string) int {
	depth := 1
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(':
			depth++
		case ')':
			depth--
			if depth == 0 {
				return i
			}
		}
	}
	return strings.LastIndexByte(s, ')')
}

func unquote(s string) string {
	if len(s) >= 6 && (strings.HasPrefix(s, `"""`) && strings.HasSuffix(s, `"""`) ||
		strings.HasPrefix(s, "'''") && strings.HasSuffix(s, "'''")) {
		return strings.TrimSpace(s[3 : len(s)-3])
	}
	if len(s) >= 2 {
		q := s[0]
		if (q == '"' || q == '\'' || q == '`') && s[len(s)-1] == q && !strings.ContainsRune(s[1:len(s)-1], rune(q)) {
			return s[1 : len(s)-1]
		}
	}
	return s
}

func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		ok := c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9'
		if !ok {
			return false
		}
	}
	return true
}

// Truncate keeps the head and the tail of s so that the result holds at
// most max characters of s, with a notice in the middle of how many were
// left out. max <= 0 means no limit. Cuts fall on rune boundaries.
func Truncate(s string, max int) string {
	if max <= 0 || len(s) <= max {
		return s
	}
	n := utf8.RuneCountInString(s)
	if n <= max {
		return s
	}
	head := max / 2
	tail := max - head
	hi := byteOffset(s, head)
	ti := byteOffset(s, n-tail)
	omitted := n - head - tail
	return s[:hi] + "\n... [" + strconv.Itoa(omitted) + " characters omitted] ...\n" + s[ti:]
}

// byteOffset is the byte index of rune number r in s.
func byteOffset(s string, r int) int {
	i := 0
	for k := 0; k < r && i < len(s); k++ {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	return i
}
