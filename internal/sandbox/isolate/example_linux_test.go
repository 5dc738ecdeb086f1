package isolate_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/rlmkit/rlm/core/isolation"
	"github.com/rlmkit/rlm/internal/sandbox/isolate"
)

// How a runtime plugin runs a user's program: input files in the working
// directory, limits, the program's own file, then the results from Dir.
func ExampleCommand() {
	dir, _ := os.MkdirTemp("", "run-")
	defer os.RemoveAll(dir)
	os.WriteFile(filepath.Join(dir, "main.py"), []byte("open('out.txt','w').write('hi')\nprint('done')\n"), 0o644)

	level := isolate.LevelNamespace
	if err := isolate.Available(level); err != nil {
		fmt.Println("cannot isolate:", err) // an error for the user, never a silent downgrade
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd, err := isolate.Command(ctx, isolate.Spec{
		Spec: isolation.Spec{
			Level:         level,
			Argv:          []string{"/root/.pyenv/versions/3.11.7/bin/python3", "main.py"},
			Dir:           dir,
			ReadOnlyPaths: []string{"/root/.pyenv/versions/3.11.7"},
			MemoryBytes:   256 << 20,
			MaxProcesses:  64,
			DiskBytes:     64 << 20,
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cmd.Cleanup()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		fmt.Println(err)
		return
	}
	o := cmd.Outcome()
	out, _ := os.ReadFile(filepath.Join(dir, "out.txt"))
	fmt.Println(o.Ending, o.ExitCode, stdout.String(), string(out))
}
