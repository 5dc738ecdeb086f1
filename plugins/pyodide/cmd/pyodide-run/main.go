// Command pyodide-run runs one Python program in the WebAssembly sandbox,
// without rlm's plugin machinery: a tool for trying the backend, for CI smoke
// tests and for measuring a whole-process cold start.
//
//	pyodide-run [-timeout 5s] [-fuel N] [-memory BYTES] [-max-output N]
//	            [-workspace DIR] [-wasm PATH] [-json] [-check] (-c CODE | FILE | -)
//
// The program's stdout and stderr are written to ours; the exit status is
// the program's, 124 on a timeout, 2 for a usage error. Logs go to stderr
// (-v for debug).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/rlmkit/rlm/core/ending"
	"github.com/rlmkit/rlm/plugins/pyodide"
)

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("pyodide-run", flag.ContinueOnError)
	fl.SetOutput(stderr)
	code := fl.String("c", "", "program text")
	timeout := fl.Duration("timeout", 0, "wall-clock limit (0: none)")
	fuel := fl.Int64("fuel", 0, "fuel budget (0: default, <0: unlimited)")
	memory := fl.Uint64("memory", 0, "memory limit in bytes (0: default 256 MiB)")
	maxOut := fl.Int("max-output", 0, "cap per stream in bytes (0: default 1 MiB)")
	workspace := fl.String("workspace", "", "directory mounted at /app (default: a temporary one)")
	wasm := fl.String("wasm", "", "python.wasm to use (default: the embedded one)")
	asJSON := fl.Bool("json", false, "print the result as JSON")
	check := fl.Bool("check", false, "only check the syntax")
	verbose := fl.Bool("v", false, "debug logs")
	if err := fl.Parse(args); err != nil {
		return 2
	}
	src := *code
	switch {
	case src != "" && fl.NArg() > 0:
		fmt.Fprintln(stderr, "pyodide-run: give -c or a file, not both")
		return 2
	case src == "" && fl.NArg() == 1:
		var b []byte
		var err error
		if fl.Arg(0) == "-" {
			b, err = io.ReadAll(stdin)
		} else {
			b, err = os.ReadFile(fl.Arg(0))
		}
		if err != nil {
			fmt.Fprintln(stderr, "pyodide-run:", err)
			return 2
		}
		src = string(b)
	case src == "":
		fmt.Fprintln(stderr, "usage: pyodide-run [flags] (-c CODE | FILE | -)")
		fl.PrintDefaults()
		return 2
	}
	lvl := slog.LevelWarn
	if *verbose {
		lvl = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lvl}))
	ctx := context.Background()
	r, err := pyodide.New(ctx, pyodide.Options{WasmPath: *wasm, Logger: log})
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	defer r.Close(ctx)
	if *check {
		ok, msg, err := r.Check(ctx, src)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		if !ok {
			fmt.Fprintln(stderr, msg)
			return 1
		}
		return 0
	}
	res, err := r.Run(ctx, pyodide.RunSpec{
		Code: src, Workspace: *workspace, Fuel: *fuel, Timeout: *timeout,
		MemoryBytes: *memory, MaxOutputBytes: *maxOut,
	})
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(struct {
			*pyodide.Result
			Stdout string `json:"stdout"`
			Stderr string `json:"stderr"`
		}{res, string(res.Stdout), string(res.Stderr)})
	} else {
		stdout.Write(res.Stdout)
		stderr.Write(res.Stderr)
	}
	switch {
	case res.EndedBy == ending.Timeout:
		return 124
	case res.ExitCode >= 0:
		return res.ExitCode
	}
	return 1
}
