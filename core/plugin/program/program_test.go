package program

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/ending"
)

func bash(t *testing.T, script string, l core.Limits) *core.Result {
	t.Helper()
	res, err := Exec(context.Background(), Command{Argv: []string{"bash", "-c", script}, Env: BaseEnv(t.TempDir()), Limits: l})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestExitCodeSignalAndOutput(t *testing.T) {
	r := bash(t, "echo out; echo err >&2; exit 7", core.Limits{})
	if r.ExitCode != 7 || r.Stdout != "out\n" || r.Stderr != "err\n" || r.EndedBy != ending.Exit {
		t.Fatalf("%+v", r)
	}
	r = bash(t, "kill -TERM $$", core.Limits{})
	if r.Signal != "SIGTERM" || r.ExitCode != 128+15 || r.EndedBy != ending.Signal {
		t.Fatalf("%+v", r)
	}
}

func TestTimeoutKillsTheGroupWithoutWaitingForBackgroundChildren(t *testing.T) {
	start := time.Now()
	r := bash(t, "sleep 300 & sleep 300", core.Limits{Wall: 300 * time.Millisecond})
	if r.EndedBy != ending.Timeout || !strings.Contains(r.Error, "timed out") {
		t.Fatalf("%+v", r)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("took %v: waited for the background child", d)
	}
}

func TestBackgroundChildDoesNotHoldTheResult(t *testing.T) {
	// The main process exits at once; its child keeps stdout open.
	start := time.Now()
	r := bash(t, "sleep 300 & echo done", core.Limits{Wall: 60 * time.Second})
	if r.Stdout != "done\n" || r.EndedBy != ending.Exit {
		t.Fatalf("%+v", r)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("took %v", d)
	}
}

func TestStdinAndFlood(t *testing.T) {
	res, err := Exec(context.Background(), Command{Argv: []string{"cat"}, Env: BaseEnv(t.TempDir()), Stdin: []byte("hello")})
	if err != nil || res.Stdout != "hello" {
		t.Fatalf("%v %+v", err, res)
	}
	r := bash(t, "yes", core.Limits{MaxOutputBytes: 1000, Wall: 60 * time.Second})
	if r.EndedBy != ending.OutputLimit || len(r.Stdout) > 1100 || r.StdoutOmitted == 0 {
		t.Fatalf("ended %v stdout %d omitted %d", r.EndedBy, len(r.Stdout), r.StdoutOmitted)
	}
}

func TestMissingInterpreterIsAnError(t *testing.T) {
	_, err := Exec(context.Background(), Command{Argv: []string{"/nonexistent/python9"}})
	if err == nil || !strings.Contains(err.Error(), "python9") {
		t.Fatalf("got %v", err)
	}
}

func TestWorkspaceFilesInAndOut(t *testing.T) {
	req := core.Program{
		Code:        "code",
		Files:       []core.File{{Path: "in/data.txt", Data: []byte("abc")}, {Path: "keep.txt", Data: []byte("same")}},
		ReturnFiles: true,
	}
	ws, err := NewWorkspace(req, "main.sh")
	if err != nil {
		t.Fatal(err)
	}
	dir := ws.Dir
	time.Sleep(10 * time.Millisecond) // distinct mtimes on coarse filesystems
	os.WriteFile(filepath.Join(dir, "in/data.txt"), []byte("abcd"), 0o644)
	os.MkdirAll(filepath.Join(dir, "out/deep"), 0o755)
	os.WriteFile(filepath.Join(dir, "out/deep/new.txt"), []byte("new"), 0o644)
	os.Symlink("/etc/passwd", filepath.Join(dir, "link"))
	res := &core.Result{}
	ws.Finish(res)
	got := map[string]string{}
	for _, f := range res.Files {
		got[f.Path] = f.Change + ":" + string(f.Data)
	}
	want := map[string]string{"in/data.txt": "modified:abcd", "out/deep/new.txt": "created:new"}
	if len(got) != len(want) || got["in/data.txt"] != want["in/data.txt"] || got["out/deep/new.txt"] != want["out/deep/new.txt"] {
		t.Fatalf("files %v want %v", got, want)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("workspace %s not removed", dir)
	}
}

func TestWorkspaceRefusesEscapes(t *testing.T) {
	for _, files := range [][]core.File{
		{{Path: "../escape", Data: []byte("x")}},
		{{Path: "/abs", Data: []byte("x")}},
		{{Path: "main.py", Data: []byte("clash")}},
		{{Path: "a.txt"}, {Path: "a.txt"}},
	} {
		if ws, err := NewWorkspace(core.Program{Files: files}, "main.py"); err == nil {
			ws.Remove()
			t.Errorf("%v accepted", files)
		}
	}
}

func TestProducedFilesAreBounded(t *testing.T) {
	req := core.Program{ReturnFiles: true, Limits: core.Limits{MaxFiles: 2, MaxFileBytes: 10}}
	ws, err := NewWorkspace(req, "main.sh")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"a", "b", "c"} {
		os.WriteFile(filepath.Join(ws.Dir, n), []byte("x"), 0o644)
	}
	os.WriteFile(filepath.Join(ws.Dir, "big"), make([]byte, 11), 0o644)
	res := &core.Result{}
	ws.Finish(res)
	if len(res.Files) != 2 || !res.FilesOmitted {
		t.Fatalf("files %d omitted %v", len(res.Files), res.FilesOmitted)
	}
}
