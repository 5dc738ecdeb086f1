package install

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/ending"
)

// fake is an installer whose "install" is a shell script: it appends a line
// to count (to tell how often it ran), then runs body with the target
// directory as $1.
func fake(t *testing.T, body string) (*Installer, string) {
	t.Helper()
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	count := filepath.Join(t.TempDir(), "count")
	return &Installer{
		Runtime: "fake",
		Version: "fake 1.0",
		Command: func(dir string, reqs []string, _ core.InstallOptions) []string {
			return []string{"/bin/sh", "-c", "echo run >> " + count + "; " + body, "sh", dir, strings.Join(reqs, ",")}
		},
		Env: BaseEnv(),
	}, count
}

func runs(t *testing.T, count string) int {
	b, err := os.ReadFile(count)
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "\n")
}

func TestKeyNormalizesTheSet(t *testing.T) {
	in := &Installer{Runtime: "python", Version: "Python 3.11.7"}
	a := in.Key([]string{"b", "a"}, core.InstallOptions{})
	if b := in.Key([]string{" a", "b", "a", ""}, core.InstallOptions{}); a != b {
		t.Errorf("order, blanks and repeats changed the key: %s != %s", a, b)
	}
	if b := in.Key([]string{"a", "b"}, core.InstallOptions{IndexURL: "http://mirror"}); a == b {
		t.Error("the index URL does not change the key")
	}
	if b := in.Key([]string{"a", "b"}, core.InstallOptions{FindLinks: []string{"/w"}, NoIndex: true}); a == b {
		t.Error("find-links/no-index do not change the key")
	}
	other := &Installer{Runtime: "python", Version: "Python 3.12.1"}
	if b := other.Key([]string{"a", "b"}, core.InstallOptions{}); a == b {
		t.Error("the runtime version does not change the key")
	}
}

func TestEnsureInstallsOnceUnderConcurrency(t *testing.T) {
	in, count := fake(t, `sleep 0.3; mkdir -p "$1/pkg" && echo "$2" > "$1/pkg/reqs"`)
	const n = 4
	outs := make([]*Outcome, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i], errs[i] = in.Ensure(context.Background(), []string{"b", "a"}, core.InstallOptions{}, core.Limits{})
		}()
	}
	wg.Wait()
	fresh := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if outs[i].Failed != nil {
			t.Fatalf("install failed: %s %s", outs[i].Failed.Error, outs[i].Failed.Stderr)
		}
		if !outs[i].Cached {
			fresh++
		}
		if outs[i].Dir != outs[0].Dir {
			t.Errorf("different directories for one set: %s, %s", outs[i].Dir, outs[0].Dir)
		}
	}
	if got := runs(t, count); got != 1 {
		t.Errorf("installer ran %d times, want 1", got)
	}
	if fresh != 1 {
		t.Errorf("%d outcomes were fresh installs, want 1 (the rest cached)", fresh)
	}
	b, err := os.ReadFile(filepath.Join(outs[0].Dir, "pkg", "reqs"))
	if err != nil || string(b) != "a,b\n" {
		t.Errorf("installed set: %q, %v; want the sorted requirements", b, err)
	}
	tmps, _ := filepath.Glob(filepath.Join(filepath.Dir(outs[0].Dir), ".tmp-*"))
	if len(tmps) != 0 {
		t.Errorf("temporary directories left behind: %v", tmps)
	}

	// The same set in another order is the cached one; a new set installs.
	o, err := in.Ensure(context.Background(), []string{"a", "b", "a"}, core.InstallOptions{}, core.Limits{})
	if err != nil || !o.Cached || o.Dir != outs[0].Dir {
		t.Errorf("repeated set: cached=%v dir=%s err=%v", o.Cached, o.Dir, err)
	}
	if o, err = in.Ensure(context.Background(), []string{"c"}, core.InstallOptions{}, core.Limits{}); err != nil || o.Cached {
		t.Errorf("new set: cached=%v err=%v", o.Cached, err)
	}
	if got := runs(t, count); got != 2 {
		t.Errorf("installer ran %d times, want 2", got)
	}
}

func TestEnsureFailureIsReportedAndNotCached(t *testing.T) {
	in, count := fake(t, `echo "collecting $2"; echo "ERROR: no such package $2" >&2; exit 3`)
	for i := 1; i <= 2; i++ {
		o, err := in.Ensure(context.Background(), []string{"nothere"}, core.InstallOptions{}, core.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		f := o.Failed
		if f == nil {
			t.Fatal("a failed install was reported as success")
		}
		if f.EndedBy != ending.InstallFailed || f.ExitCode != 3 {
			t.Errorf("ended_by %v exit %d, want INSTALL_FAILED and the installer's 3", f.EndedBy, f.ExitCode)
		}
		for _, want := range []string{"collecting nothere", "ERROR: no such package nothere"} {
			if !strings.Contains(f.Stderr, want) {
				t.Errorf("stderr %q lacks %q", f.Stderr, want)
			}
		}
		if !strings.Contains(f.Error, "nothere") {
			t.Errorf("error %q does not name the requirement", f.Error)
		}
		if got := runs(t, count); got != i {
			t.Errorf("after %d calls the installer ran %d times: a failure was cached", i, got)
		}
	}
	root, _ := Root()
	dirs, _ := filepath.Glob(filepath.Join(root, "fake", "*"))
	for _, d := range dirs {
		if !strings.HasSuffix(d, ".lock") {
			t.Errorf("a failed install left %s", d)
		}
	}
}

func TestEnsureHasItsOwnTimeout(t *testing.T) {
	in, _ := fake(t, `sleep 30`)
	o, err := in.Ensure(context.Background(), []string{"slow"}, core.InstallOptions{}, core.Limits{InstallTimeout: 200 * time.Millisecond, Wall: 60 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if o.Failed == nil || o.Failed.EndedBy != ending.InstallFailed {
		t.Fatalf("want INSTALL_FAILED, got %+v", o.Failed)
	}
	if !strings.Contains(o.Failed.Error, "timed out after 200ms") {
		t.Errorf("error %q does not say the install timed out", o.Failed.Error)
	}
	// It names what a user can set, not the wire field.
	want := "installing requirements (slow) timed out after 200ms (the install timeout: rlm exec --install-timeout sets it; HTTP and MCP requests get 5m0s)"
	if o.Failed.Error != want {
		t.Errorf("error %q, want %q", o.Failed.Error, want)
	}
}

func TestValidateRefusesOptions(t *testing.T) {
	for _, r := range []string{"--target=/", "-r/etc/passwd", " --index-url=http://evil", "pkg\nother"} {
		if err := Validate([]string{"ok", r}); err == nil {
			t.Errorf("%q accepted", r)
		}
	}
	if err := Validate([]string{"requests>=2", "left-pad@1.3.0", "/tmp/x-0.1.whl", "pkg @ https://x/y.whl"}); err != nil {
		t.Errorf("valid requirements refused: %v", err)
	}
	in, count := fake(t, `mkdir -p "$1/x"`)
	if _, err := in.Ensure(context.Background(), []string{"--target=/"}, core.InstallOptions{}, core.Limits{}); err == nil || runs(t, count) != 0 {
		t.Errorf("Ensure ran the installer with an option as a requirement: %v", err)
	}
}

func TestKeyFollowsLocalFiles(t *testing.T) {
	in := &Installer{Runtime: "python", Version: "Python 3.11.7"}
	dir := t.TempDir()
	opt := core.InstallOptions{FindLinks: []string{dir}, NoIndex: true}
	before := in.Key([]string{"pkg"}, opt)
	wheel := filepath.Join(dir, "pkg-0.2-py3-none-any.whl")
	if err := os.WriteFile(wheel, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Directory mtimes can be coarse: make the change visible.
	future := time.Now().Add(2 * time.Second)
	_ = os.Chtimes(dir, future, future)
	if in.Key([]string{"pkg"}, opt) == before {
		t.Error("adding a wheel to the find-links directory kept the key")
	}
	k1 := in.Key([]string{wheel}, core.InstallOptions{})
	_ = os.WriteFile(wheel, []byte("rebuilt"), 0o644)
	if in.Key([]string{wheel}, core.InstallOptions{}) == k1 {
		t.Error("rebuilding a local requirement kept the key")
	}
}
