package repl_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/internal/sandbox/proctree"
	"github.com/rlmkit/rlm/plugins/python/internal/repl"
)

// A session with a text context, a cell that asks the model through the
// CallbackFunc, and a variable read back as JSON. (Not run: it needs a
// Python interpreter; the package tests exercise the same calls.)
func Example() {
	_ = proctree.BecomeSubreaper() // once, in the plugin's main

	ctx := context.Background()
	p, err := repl.Start(ctx, repl.Config{
		Python:  "/usr/bin/python3", // the real interpreter, not a pyenv shim
		Context: &core.Context{Data: []byte("a long document"), Kind: "text"},
	})
	if err != nil {
		panic(err)
	}
	defer p.Close()

	answer := func(ctx context.Context, cb core.Query) ([]string, error) {
		out := make([]string, len(cb.Prompts)) // run batched prompts concurrently in real code
		for i, prompt := range cb.Prompts {
			out[i] = strings.ToUpper(prompt)
		}
		return out, nil
	}
	res, err := p.Execute(ctx, "summary = llm_query('summarise: ' + context[:20])\nprint(summary)", 30*time.Second, answer)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%s exit=%d ended_by=%v\n", res.Stdout, res.ExitCode, res.EndedBy)

	found, js, err := p.Variable(ctx, "summary")
	fmt.Println(found, js, err)
}
