package pyodide_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/plugins/pyodide"
)

// Running one program with limits. (No Output section: the example needs
// python.wasm, which a fresh checkout has not built yet; see make wasm.)
func ExampleRunner_Run() {
	ctx := context.Background()
	r, err := pyodide.New(ctx, pyodide.Options{})
	if err != nil {
		log.Fatal(err) // names the missing python.wasm and "make wasm"
	}
	defer r.Close(ctx)

	res, err := r.Run(ctx, pyodide.RunSpec{
		Code:           "open('out.txt', 'w').write('hi')\nprint(sum(range(10)))",
		Timeout:        5 * time.Second,
		Fuel:           500_000_000,
		MemoryBytes:    64 << 20,
		MaxOutputBytes: 4096,
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s%v %s %v\n", res.Stdout, res.Success, res.EndedBy, res.FilesCreated)
}

// A REPL session: globals persist between cells, and llm_query calls are
// answered by the host.
func ExampleRunner_OpenSession() {
	ctx := context.Background()
	r, err := pyodide.New(ctx, pyodide.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close(ctx)

	s, err := r.OpenSession(ctx, pyodide.SessionSpec{
		Context: []byte("a long document"),
		Callback: func(ctx context.Context, cb core.Query) ([]string, error) {
			return []string{"an answer"}, nil // call a model here, once per cb.Prompts
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	s.Execute(ctx, pyodide.CellSpec{Code: "n = len(context)"})
	res, _ := s.Execute(ctx, pyodide.CellSpec{Code: "n, llm_query('summarise: ' + context)"})
	fmt.Println(res.Value)
}
