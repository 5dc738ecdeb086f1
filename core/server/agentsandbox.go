package server

import (
	"errors"
	"net/http"
	"strings"
)

// rlm behind kubernetes-sigs/agent-sandbox (docs/kubernetes.md).
//
// agent-sandbox's router strips Authorization from every request it
// forwards (the header is the router's own credential, and a sandbox must
// not see the caller's), so rlm also takes its token in TokenHeader, which
// the router passes on. Its SDKs (Python k8s-agent-sandbox, Go
// clients/go/sandbox) speak the "python-runtime" contract: POST /execute
// {"command": "ls -la"} runs one command, split shell-like and not run by
// a shell, and reads {stdout, stderr, exit_code}. rlm's answer to /execute
// already carries those three fields, so the request is all that needs
// recognising: a body with command and without code is that contract (rlm's
// own requests always carry code), and it runs on the shell runtime.

// TokenHeader carries the bearer token where Authorization cannot: behind
// a proxy that strips it, such as agent-sandbox's router.
const TokenHeader = "X-RLM-Token"

// requestToken is the token a request presents: Authorization's bearer
// token, else TokenHeader's value.
func requestToken(r *http.Request) (string, bool) {
	if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		return strings.TrimSpace(tok), true
	}
	if tok := strings.TrimSpace(r.Header.Get(TokenHeader)); tok != "" {
		return tok, true
	}
	return "", false
}

// commandProgram turns an agent-sandbox request (Command set) into rlm's:
// the command split as Python's shlex.split does (the reference runtime's
// split), each word quoted, run with exec on the shell runtime, so no
// word is expanded, globbed or redirected, as in the reference runtime.
func (s *Server) commandProgram(req *ExecuteRequest) *APIError {
	if req.Command == nil {
		return nil
	}
	if req.Code != nil {
		return badField("command", "cannot be given with code: command is agent-sandbox's shell command, code is a program for language")
	}
	if l := Canonical(req.Language); l != "" && l != "shell" {
		return badField("command", "runs on the shell runtime; language %q cannot run it: drop language, or send code instead", req.Language)
	}
	if !s.Enabled("shell") {
		return badField("command", "runs on the shell runtime, which this server does not serve: start rlm serve with shell among its modes (--mode python,shell), or send code")
	}
	words, err := splitCommand(*req.Command)
	if err != nil {
		return badField("command", "cannot be split into words: %v", err)
	}
	if len(words) == 0 {
		return badField("command", "is empty")
	}
	for i, w := range words {
		words[i] = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
	}
	code := "exec " + strings.Join(words, " ") + "\n"
	req.Code, req.Language, req.Command = &code, "shell", nil
	return nil
}

// splitCommand splits s into words as Python's shlex.split(s) does (POSIX
// mode, no comments): blanks separate words; '…' is literal; in "…" a
// backslash escapes only " and \; elsewhere a backslash escapes the next
// character.
func splitCommand(s string) ([]string, error) {
	var (
		words  []string
		cur    strings.Builder
		inWord bool
	)
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case ' ', '\t', '\n', '\r':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case '\\':
			if i+1 == len(s) {
				return nil, errors.New("it ends in a backslash that escapes nothing")
			}
			i++
			cur.WriteByte(s[i])
			inWord = true
		case '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, errors.New("a single quote is not closed")
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case '"':
			inWord = true
			for i++; ; i++ {
				if i == len(s) {
					return nil, errors.New("a double quote is not closed")
				}
				if s[i] == '"' {
					break
				}
				if s[i] == '\\' && i+1 < len(s) && (s[i+1] == '"' || s[i+1] == '\\') {
					i++
				}
				cur.WriteByte(s[i])
			}
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}
