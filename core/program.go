package core

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Program is one stateless run.
type Program struct {
	Code         string
	Files        []File
	Stdin        []byte
	Args         []string
	Env          map[string]string
	Requirements []string
	Install      *InstallOptions
	Limits       Limits
	Context      *Context
	ReturnFiles  bool
}

// Context is a session's `context` value.
type Context struct {
	Data []byte
	// Kind is "text" (a str in Python) or "json" (decoded).
	Kind string
}

// InstallOptions say where a program's requirements are installed from
// (pip's and npm's own options); nil means the tools' defaults.
type InstallOptions struct {
	IndexURL    string
	FindLinks   []string
	NoIndex     bool
	NPMRegistry string
}

// Validate is the check of a program every door shares, before anything
// runs: the environment (CheckEnv), every file's name (CleanName) and the
// context (Context.Validate). core/plugin's adapter applies it to every
// request a runtime receives, so a runtime may rely on it; the CLI and the
// HTTP server apply the same parts first to name their own flags and
// fields.
func (p Program) Validate() error {
	if err := CheckEnv(p.Env); err != nil {
		return err
	}
	for _, f := range p.Files {
		if _, err := CleanName(f.Path); err != nil {
			return err
		}
	}
	return p.Context.Validate()
}

// Validate checks a context (nil is none): a known kind, and for kind json
// a valid document, so that no interpreter starts only to fail on it.
func (c *Context) Validate() error {
	if c == nil {
		return nil
	}
	switch c.Kind {
	case "", "text":
		return nil
	case "json":
		if !json.Valid(c.Data) {
			return errors.New("the context is not valid JSON (kind json): pass it as text, or fix the document")
		}
		return nil
	}
	return fmt.Errorf("unknown context kind %q (want text or json)", c.Kind)
}
