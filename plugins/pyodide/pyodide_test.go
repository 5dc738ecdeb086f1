package pyodide

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rlmkit/rlm/core/ending"
	"github.com/rlmkit/rlm/internal/testutil"
)

// The tests run the real python.wasm in wazero. They skip only when the
// assets were not built and RLM_REQUIRE_WASM is unset; CI builds them
// (make wasm) and sets RLM_REQUIRE_WASM=1 so a missing build fails.

var (
	sharedOnce   sync.Once
	sharedRunner *Runner
	sharedErr    error
	logBuf       testutil.SyncBuffer
)

func requireAssets(t testing.TB) {
	t.Helper()
	if HasEmbeddedAssets() {
		return
	}
	if os.Getenv("RLM_REQUIRE_WASM") != "" {
		t.Fatalf("RLM_REQUIRE_WASM is set but python.wasm was not embedded: run %s before go test", BuildCommand)
	}
	t.Skipf("python.wasm not built; run %s (set RLM_REQUIRE_WASM=1 to make this a failure)", BuildCommand)
}

func runner(t testing.TB) *Runner {
	t.Helper()
	requireAssets(t)
	sharedOnce.Do(func() {
		log := slog.New(slog.NewJSONHandler(&logBuf, &slog.HandlerOptions{Level: slog.LevelDebug}))
		sharedRunner, sharedErr = New(context.Background(), Options{Logger: log})
	})
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	return sharedRunner
}

func run(t *testing.T, spec RunSpec) *Result {
	t.Helper()
	if spec.Workspace == "" {
		spec.Workspace = t.TempDir()
	}
	res, err := runner(t).Run(context.Background(), spec)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return res
}

func dump(t *testing.T, res *Result) {
	t.Helper()
	t.Logf("ended_by=%s exit=%d error=%q fuel=%d dur=%.1fms\nstdout:\n%s\nstderr:\n%s",
		res.EndedBy, res.ExitCode, res.Error, res.FuelConsumed, res.DurationMS, res.Stdout, res.Stderr)
}

// wantStopped fails the test unless res is a failed run that the given
// reason ended, with the Python exception exc in its stderr.
func wantStopped(t *testing.T, res *Result, reason ending.Reason, exc string) {
	t.Helper()
	if res.Success || res.EndedBy != reason || !bytes.Contains(res.Stderr, []byte(exc)) {
		dump(t, res)
		t.Fatalf("expected a failed run ended by %s with %s", reason, exc)
	}
}

func TestHello(t *testing.T) {
	ws := t.TempDir()
	// A fixed hash seed makes the interpreter's work, and so its fuel, repeatable.
	seed := map[string]string{"PYTHONHASHSEED": "0"}
	res := run(t, RunSpec{Code: "print('Hello')", Workspace: ws, Env: seed})
	if !res.Success || string(res.Stdout) != "Hello\n" || res.ExitCode != 0 || res.EndedBy != ending.Exit {
		dump(t, res)
		t.Fatal("hello did not succeed with Hello on stdout")
	}
	if res.FuelConsumed <= 0 || res.FuelConsumed >= res.FuelLimit {
		t.Errorf("fuel_consumed = %d (limit %d), want positive and below the limit", res.FuelConsumed, res.FuelLimit)
	}
	if res.WorkspacePath != ws {
		t.Errorf("workspace_path = %q, want %q", res.WorkspacePath, ws)
	}
	if res.MemoryUsedBytes < 1<<20 || res.DurationMS <= 0 {
		t.Errorf("memory_used_bytes = %d, duration_ms = %f", res.MemoryUsedBytes, res.DurationMS)
	}
	if len(res.FilesCreated) != 0 || len(res.FilesModified) != 0 {
		t.Errorf("hello changed files: %v %v (the code file must not be in the workspace)", res.FilesCreated, res.FilesModified)
	}
	// Fuel is deterministic: the same program costs the same every time.
	again := run(t, RunSpec{Code: "print('Hello')", Env: seed})
	if again.FuelConsumed != res.FuelConsumed {
		t.Errorf("fuel not deterministic: %d then %d", res.FuelConsumed, again.FuelConsumed)
	}
	logs := logBuf.String()
	for _, want := range []string{`"msg":"execution start"`, `"msg":"execution complete"`, `"runtime":"python"`, `"fuel_consumed":`} {
		if !strings.Contains(logs, want) {
			t.Errorf("log lacks %s", want)
		}
	}
}

func TestGuestEnvironment(t *testing.T) {
	res := run(t, RunSpec{
		Code:  "import os, sys\nprint(os.getcwd())\nprint(sys.argv)\nprint(sys.stdin.read())\nprint(__file__, __name__)\nprint(sys.path[:2])\nprint(os.environ['X'], os.environ['HOME'])",
		Args:  []string{"a", "b c"},
		Stdin: []byte("from stdin"),
		Env:   map[string]string{"X": "y", "HOME": "/app/home"},
	})
	want := "/app\n['/sandbox/user_code.py', 'a', 'b c']\nfrom stdin\n/sandbox/user_code.py __main__\n['/app', '/app/site-packages']\ny /app/home\n"
	if !res.Success || string(res.Stdout) != want {
		dump(t, res)
		t.Fatalf("stdout = %q, want %q", res.Stdout, want)
	}
	res = run(t, RunSpec{Code: "import sys; print('/app' in sys.path)", NoSetup: true})
	if string(res.Stdout) != "False\n" {
		dump(t, res)
		t.Fatal("NoSetup still changed sys.path")
	}
}

func TestSitePackagesImport(t *testing.T) {
	ws := t.TempDir()
	os.MkdirAll(filepath.Join(ws, "site-packages", "vendored"), 0o755)
	os.WriteFile(filepath.Join(ws, "site-packages", "vendored", "__init__.py"), []byte("NAME = 'vendored'\n"), 0o644)
	os.WriteFile(filepath.Join(ws, "helper.py"), []byte("def f(): return 42\n"), 0o644)
	res := run(t, RunSpec{Code: "import vendored, helper; print(vendored.NAME, helper.f())", Workspace: ws})
	if !res.Success || string(res.Stdout) != "vendored 42\n" {
		dump(t, res)
		t.Fatal("workspace and site-packages imports failed")
	}
	if len(res.FilesCreated) != 0 {
		t.Errorf("imports wrote files: %v (bytecode writing should be off)", res.FilesCreated)
	}
	res = run(t, RunSpec{Code: "import vendored", Workspace: ws, NoSetup: true})
	if res.Success || !bytes.Contains(res.Stderr, []byte("ModuleNotFoundError")) {
		dump(t, res)
		t.Fatal("NoSetup should leave site-packages off sys.path")
	}
}

func TestException(t *testing.T) {
	res := run(t, RunSpec{Code: "x = 1\nraise ValueError('test')"})
	if res.Success || res.ExitCode != 1 || res.EndedBy != ending.Exit {
		dump(t, res)
		t.Fatal("an uncaught exception must fail with exit status 1")
	}
	if !bytes.Contains(res.Stderr, []byte("ValueError: test")) || res.Error != "ValueError: test" {
		dump(t, res)
		t.Fatal("stderr/error lack ValueError: test")
	}
	if !bytes.Contains(res.Stderr, []byte(`File "/sandbox/user_code.py", line 2`)) || bytes.Contains(res.Stderr, []byte("_rlm_run")) {
		dump(t, res)
		t.Fatal("traceback should point at the user's file and hide the prelude")
	}
	res = run(t, RunSpec{Code: "import sys; print('bye'); sys.exit(3)"})
	if res.Success || res.ExitCode != 3 || string(res.Stdout) != "bye\n" {
		dump(t, res)
		t.Fatal("sys.exit(3) not reported as exit status 3")
	}
}

func TestHostFilesystemNotVisible(t *testing.T) {
	res := run(t, RunSpec{Code: "import os\nprint(sorted(os.listdir('/app')))\nopen('/etc/passwd').read()"})
	if res.Success {
		dump(t, res)
		t.Fatal("reading /etc/passwd succeeded")
	}
	if string(res.Stdout) != "[]\n" {
		dump(t, res)
		t.Fatal("positive control (listing /app) failed")
	}
	if !bytes.Contains(res.Stderr, []byte("PermissionError")) && !bytes.Contains(res.Stderr, []byte("FileNotFoundError")) {
		dump(t, res)
		t.Fatal("expected a permission or not-found error")
	}
}

func TestFuelExhaustion(t *testing.T) {
	// The seed's budget: 100 000 units is less than interpreter start-up
	// (~1.5 million), so the program is stopped before it even begins.
	res := run(t, RunSpec{Code: "while True: pass", Fuel: 100_000})
	wantStopped(t, res, ending.Fuel, "OutOfFuel")
	if res.FuelConsumed != 100_000 {
		t.Errorf("fuel_consumed = %d, want the whole budget", res.FuelConsumed)
	}
	// A budget that lets the program start: the loop itself must stop.
	res = run(t, RunSpec{Code: "print('started')\nwhile True: pass", Fuel: 50_000_000, Timeout: time.Minute})
	if res.EndedBy != ending.Fuel || string(res.Stdout) != "started\n" || !strings.HasPrefix(res.Error, "OutOfFuel") {
		dump(t, res)
		t.Fatal("infinite loop was not stopped by fuel")
	}
	if !strings.Contains(logBuf.String(), `"event":"fuel_exhaustion"`) {
		t.Error("no fuel_exhaustion security event logged")
	}
}

func TestMemoryLimit(t *testing.T) {
	res := run(t, RunSpec{Code: "print('before')\nx = 'a' * 100_000_000\nprint('after')", MemoryBytes: 64_000_000})
	wantStopped(t, res, ending.MemoryLimit, "MemoryError")
	if string(res.Stdout) != "before\n" || res.MemoryUsedBytes > 64_000_000 {
		dump(t, res)
		t.Fatalf("memory_used_bytes = %d over the 64 MB cap, or stdout wrong", res.MemoryUsedBytes)
	}
	if !strings.Contains(logBuf.String(), `"event":"memory_limit"`) {
		t.Error("no memory_limit security event logged")
	}
	// The same allocation fits a larger cap, and the runner is still usable.
	res = run(t, RunSpec{Code: "x = 'a' * 100_000_000\nprint(len(x))", MemoryBytes: 256 << 20})
	if !res.Success || string(res.Stdout) != "100000000\n" || res.MemoryUsedBytes < 100_000_000 {
		dump(t, res)
		t.Fatal("100 MB string under a 256 MiB cap failed")
	}
}

func TestMemoryLimitBelowMinimum(t *testing.T) {
	_, err := runner(t).Run(context.Background(), RunSpec{Code: "pass", MemoryBytes: 1 << 20})
	if err == nil || !strings.Contains(err.Error(), "below the interpreter's initial memory") {
		t.Fatalf("err = %v", err)
	}
}

func TestOutputCap(t *testing.T) {
	res := run(t, RunSpec{Code: "print('H' + 'x' * 9998 + 'T')", MaxOutputBytes: 1000})
	if !res.Success || len(res.Stdout) > 1000 || !res.StdoutTruncated {
		dump(t, res)
		t.Fatalf("stdout len %d truncated=%v, want <= 1000 and truncated", len(res.Stdout), res.StdoutTruncated)
	}
	if res.StdoutOmitted != 10001-int64(len(res.Stdout)) {
		t.Errorf("omitted = %d, want %d", res.StdoutOmitted, 10001-len(res.Stdout))
	}
	if res.Stdout[0] != 'H' || !bytes.HasSuffix(res.Stdout, []byte("T\n")) {
		t.Errorf("head/tail not kept: %q...%q", res.Stdout[:5], res.Stdout[len(res.Stdout)-5:])
	}
	if res.StderrTruncated {
		t.Error("stderr marked truncated")
	}
}

func TestFileDelta(t *testing.T) {
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "input.txt"), []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "untouched.txt"), []byte("same"), 0o644); err != nil {
		t.Fatal(err)
	}
	code := `import os
open('/app/output.txt', 'w').write('data')
with open('/app/input.txt', 'a') as f: f.write('more')
os.makedirs('/app/subdir', exist_ok=True)
open('/app/subdir/file.txt', 'w').write('x')
open('relative.txt', 'w').write(open('untouched.txt').read())
`
	res := run(t, RunSpec{Code: code, Workspace: ws})
	if !res.Success {
		dump(t, res)
		t.Fatal("run failed")
	}
	wantCreated := []string{"output.txt", "relative.txt", "subdir/file.txt"}
	if !reflect.DeepEqual(res.FilesCreated, wantCreated) {
		t.Errorf("files_created = %v, want %v", res.FilesCreated, wantCreated)
	}
	if !reflect.DeepEqual(res.FilesModified, []string{"input.txt"}) {
		t.Errorf("files_modified = %v, want [input.txt]", res.FilesModified)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "input.txt")); string(b) != "datamore" {
		t.Errorf("input.txt = %q on the host", b)
	}
}

func TestCheck(t *testing.T) {
	r := runner(t)
	ctx := context.Background()
	ok, msg, err := r.Check(ctx, "x = 1 + 2")
	if err != nil || !ok || msg != "" {
		t.Fatalf("Check(valid) = %v, %q, %v", ok, msg, err)
	}
	ok, msg, err = r.Check(ctx, "x = 1 +")
	if err != nil || ok || !strings.Contains(msg, "SyntaxError") || !strings.Contains(msg, "line 1") {
		t.Fatalf("Check(invalid) = %v, %q, %v", ok, msg, err)
	}
	// Nothing runs: an endless loop would exhaust fuel or time and make
	// Check return an error; a file write would need a mount that is absent.
	ok, _, err = r.Check(ctx, "import os; os.system('rm -rf /')\nopen('/app/pwned', 'w')\nwhile True: pass")
	if err != nil || !ok {
		t.Fatalf("Check(side effects) = %v, %v", ok, err)
	}
	ok, msg, err = r.Check(ctx, "a = '\x00'")
	if err != nil || ok || msg == "" {
		t.Fatalf("Check(NUL) = %v, %q, %v", ok, msg, err)
	}
}

func TestMissingAndCorruptBinary(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope", "python.wasm")
	_, err := New(context.Background(), Options{WasmPath: missing, CacheDir: "-"})
	if err == nil || !strings.Contains(err.Error(), missing) || !strings.Contains(err.Error(), "make wasm") || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing binary: err = %v", err)
	}
	dir := t.TempDir()
	corrupt := filepath.Join(dir, "python.wasm")
	os.WriteFile(corrupt, []byte("\x00asm\x01\x00\x00\x00garbage"), 0o644)
	badZip := filepath.Join(dir, "python311.zip")
	os.WriteFile(badZip, []byte("PK"), 0o644)
	_, err = New(context.Background(), Options{WasmPath: corrupt, CacheDir: "-"})
	if err == nil || !strings.Contains(err.Error(), badZip) || !strings.Contains(err.Error(), "make wasm") {
		t.Fatalf("corrupt stdlib: err = %v", err)
	}
	var zw bytes.Buffer
	zip.NewWriter(&zw).Close()
	os.WriteFile(badZip, zw.Bytes(), 0o644)
	_, err = New(context.Background(), Options{WasmPath: corrupt, CacheDir: "-"})
	if err == nil || !strings.Contains(err.Error(), corrupt) || !strings.Contains(err.Error(), "make wasm") {
		t.Fatalf("corrupt binary: err = %v", err)
	}
	os.WriteFile(corrupt, []byte("not wasm at all"), 0o644)
	_, err = New(context.Background(), Options{WasmPath: corrupt, CacheDir: "-"})
	if err == nil || !strings.Contains(err.Error(), corrupt) {
		t.Fatalf("non-wasm file: err = %v", err)
	}
}

func TestSymlinkEscapeByGuest(t *testing.T) {
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "ok.txt"), []byte("fine"), 0o644)
	code := `import os
print('control', open('/app/ok.txt').read())
try:
    os.symlink('../../../../etc/passwd', '/app/l')
    print('symlink created')
except OSError as e:
    print('symlink refused', type(e).__name__)
try:
    print('LEAK', open('/app/l').read()[:40])
except OSError as e:
    print('read refused', type(e).__name__)
try:
    os.link('/app/ok.txt', '/app/hard')
    print('hardlink created')
except OSError as e:
    print('hardlink refused', type(e).__name__)
`
	res := run(t, RunSpec{Code: code, Workspace: ws})
	out := string(res.Stdout)
	if !strings.Contains(out, "control fine\n") {
		dump(t, res)
		t.Fatal("positive control failed")
	}
	if strings.Contains(out, "LEAK") || strings.Contains(out, "root:") || !strings.Contains(out, "symlink refused PermissionError") ||
		!strings.Contains(out, "read refused") || !strings.Contains(out, "hardlink refused") {
		dump(t, res)
		t.Fatal("symlink escape not denied")
	}
	if _, err := os.Lstat(filepath.Join(ws, "l")); err == nil {
		t.Fatal("symlink exists on the host")
	}
	if !strings.Contains(logBuf.String(), `"event":"fs_escape_denied"`) {
		t.Error("no fs_escape_denied event logged")
	}
}

func TestSymlinkEscapePreplaced(t *testing.T) {
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "ok.txt"), []byte("fine"), 0o644)
	os.Mkdir(filepath.Join(ws, "sub"), 0o755)
	os.WriteFile(filepath.Join(ws, "sub", "in.txt"), []byte("nested"), 0o644)
	for name, target := range map[string]string{
		"passwd":  "/etc/passwd",
		"etc":     "/etc",
		"rel":     "../../../../../../etc/passwd",
		"inside":  "ok.txt", // even a link inside the workspace is not followed
		"subdir":  "sub",
		"dangler": "/nonexistent/x",
	} {
		if err := os.Symlink(target, filepath.Join(ws, name)); err != nil {
			t.Fatal(err)
		}
	}
	code := `import os
print('control', open('ok.txt').read(), open('/app/sub/in.txt').read())
print('listing', sorted(os.listdir('/app')))
for p in ['passwd', '/app/etc/passwd', 'rel', 'inside', 'subdir/in.txt', 'etc/hostname']:
    try:
        print('LEAK', p, open(p).read()[:30])
    except OSError as e:
        print('refused', p, type(e).__name__)
for p in ['dangler', 'passwd']:
    try:
        open(p, 'w').write('x')
        print('WROTE', p)
    except OSError as e:
        print('refused write', p, type(e).__name__)
print('islink', os.path.islink('passwd'), os.readlink('passwd'))
try:
    print('LEAK stat', os.stat('etc/passwd').st_size)
except OSError as e:
    print('refused stat', type(e).__name__)
`
	res := run(t, RunSpec{Code: code, Workspace: ws})
	out := string(res.Stdout)
	if !strings.Contains(out, "control fine nested\n") || !strings.Contains(out, "listing [") {
		dump(t, res)
		t.Fatal("positive control failed")
	}
	if strings.Contains(out, "LEAK") || strings.Contains(out, "WROTE") || strings.Contains(out, "root:") {
		dump(t, res)
		t.Fatal("a pre-placed symlink was followed")
	}
	if n := strings.Count(out, "refused "); n != 9 {
		dump(t, res)
		t.Fatalf("%d refusals, want 9", n)
	}
	if !strings.Contains(out, "islink True /etc/passwd") {
		dump(t, res)
		t.Fatal("lstat/readlink of a link should work")
	}
	if b, _ := os.ReadFile("/etc/passwd"); bytes.Equal(b, []byte("x")) {
		t.Fatal("/etc/passwd was overwritten")
	}
}

func TestTimeout(t *testing.T) {
	for _, tc := range []struct{ name, code string }{
		{"sleep", "import time\nprint('sleeping')\ntime.sleep(30)\nprint('woke')"},
		{"busy", "print('sleeping')\nwhile True: pass"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			res := run(t, RunSpec{Code: tc.code, Timeout: time.Second, Fuel: -1})
			el := time.Since(start)
			wantStopped(t, res, ending.Timeout, "TimeoutError")
			if string(res.Stdout) != "sleeping\n" {
				dump(t, res)
				t.Fatal("output before the timeout lost")
			}
			if el > 10*time.Second {
				t.Fatalf("a 1 s timeout took %s", el)
			}
		})
	}
}

func TestCancel(t *testing.T) {
	r := runner(t)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	res, err := r.Run(ctx, RunSpec{Code: "import time\ntime.sleep(30)", Workspace: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if res.EndedBy != ending.Cancelled || res.Success {
		dump(t, res)
		t.Fatal("expected cancelled")
	}
}

func TestConcurrentRuns(t *testing.T) {
	r := runner(t)
	testutil.Concurrently(t, 4, func(int) string {
		res, err := r.Run(context.Background(), RunSpec{Code: "import sys; print(sum(range(int(sys.argv[1]))))", Args: []string{"1000"}})
		if err != nil {
			return err.Error()
		}
		if string(res.Stdout) != "499500\n" {
			return string(res.Stdout) + string(res.Stderr)
		}
		return ""
	})
}

func TestRuntimeVersion(t *testing.T) {
	v, err := runner(t).RuntimeVersion(context.Background())
	if err != nil || v != "Python 3.11.2 (wasi)" {
		t.Fatalf("RuntimeVersion = %q, %v", v, err)
	}
}

func TestStdlibImports(t *testing.T) {
	res := run(t, RunSpec{Code: "import json, re, decimal, datetime, zlib, collections, math\nprint(json.dumps({'a': zlib.crc32(b'x')}), decimal.Decimal('1.1') + 1)"})
	if !res.Success || string(res.Stdout) != "{\"a\": 2363233923} 2.1\n" {
		dump(t, res)
		t.Fatal("stdlib imports failed")
	}
}

// Outside the mounts there is a read-only root: absent paths are "not
// found" (not PermissionError), / and /dev exist, and the usual devices work.
func TestVirtualRoot(t *testing.T) {
	code := `import os, pathlib
print(pathlib.Path('/x').exists(), os.path.exists('/etc/passwd'), os.path.isdir('/'))
print(sorted(os.listdir('/')), sorted(os.listdir('/dev')))
try:
    open('/etc/passwd')
except FileNotFoundError:
    print('FileNotFoundError')
with open(os.devnull, 'w') as f:
    print(f.write('discarded'))
with open('/dev/null', 'rb') as f:
    print(f.read())
with open('/dev/urandom', 'rb') as f:
    a, b = f.read(16), f.read(16)
print(len(a), len(b), a != b)
with open('/dev/zero', 'rb') as f:
    print(f.read(3))
for op in (lambda: os.mkdir('/newdir'), lambda: open('/new.txt', 'w')):
    try:
        op()
    except OSError as e:
        print(type(e).__name__, e.strerror)
`
	res := run(t, RunSpec{Code: code})
	want := `False False True
['app', 'dev', 'sandbox', 'usr'] ['null', 'random', 'urandom', 'zero']
FileNotFoundError
9
b''
16 16 True
b'\x00\x00\x00'
OSError Read-only file system
OSError Read-only file system
`
	if !res.Success || string(res.Stdout) != want {
		dump(t, res)
		t.Fatalf("stdout = %q, want %q", res.Stdout, want)
	}
}

// A trailing slash names a directory: creating "new/" with open or opening
// "file.txt/" fails as on Linux instead of creating or opening a file.
func TestWorkspaceTrailingSlash(t *testing.T) {
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "file.txt"), []byte("x"), 0o644)
	os.Mkdir(filepath.Join(ws, "dir"), 0o755)
	code := `import os
def attempt(what, f):
    try:
        f()
        print(what, 'ok')
    except OSError as e:
        print(what, type(e).__name__)
attempt('create dir/new/', lambda: open('dir/new/', 'w'))
attempt('read file.txt/', lambda: open('file.txt/').read())
attempt('stat file.txt/', lambda: os.stat('file.txt/'))
attempt('unlink file.txt/', lambda: os.unlink('file.txt/'))
attempt('stat dir/', lambda: os.stat('dir/'))
attempt('mkdir made/', lambda: os.mkdir('made/'))
attempt('listdir dir/', lambda: os.listdir('dir/'))
print(sorted(os.listdir('.')), os.listdir('dir'))
`
	res := run(t, RunSpec{Code: code, Workspace: ws})
	want := `create dir/new/ IsADirectoryError
read file.txt/ NotADirectoryError
stat file.txt/ NotADirectoryError
unlink file.txt/ NotADirectoryError
stat dir/ ok
mkdir made/ ok
listdir dir/ ok
['dir', 'file.txt', 'made'] []
`
	if !res.Success || string(res.Stdout) != want {
		dump(t, res)
		t.Fatalf("stdout = %q, want %q", res.Stdout, want)
	}
}

// os.utime(path) and Path.touch() on an existing file set the current time
// (wasi-libc left a NULL times uninitialised: 1970). Compared with the
// host's clock, so the check is about the epoch, not about speed.
func TestUtimeNow(t *testing.T) {
	ws := t.TempDir()
	old := time.Unix(1_000_000_000, 0)
	for _, n := range []string{"a.txt", "b.txt"} {
		p := filepath.Join(ws, n)
		os.WriteFile(p, []byte("x"), 0o644)
		os.Chtimes(p, old, old)
	}
	before := time.Now().Add(-time.Minute)
	res := run(t, RunSpec{Code: "import os, pathlib\nos.utime('a.txt')\npathlib.Path('b.txt').touch()", Workspace: ws})
	if !res.Success {
		dump(t, res)
		t.Fatal("utime failed")
	}
	for _, n := range []string{"a.txt", "b.txt"} {
		st, err := os.Stat(filepath.Join(ws, n))
		if err != nil {
			t.Fatal(err)
		}
		if st.ModTime().Before(before) {
			t.Errorf("%s: mtime %v after utime, want about now", n, st.ModTime())
		}
	}
}

// Time zones come from the tzdata package in the stdlib zip; bz2 and lzma
// are built in.
func TestZoneInfoBz2Lzma(t *testing.T) {
	code := `import bz2, lzma, zlib, zoneinfo, datetime
z = zoneinfo.ZoneInfo('Europe/Paris')
print(datetime.datetime(2024, 7, 1, 12, tzinfo=z).utcoffset(), datetime.datetime(2024, 1, 1, 12, tzinfo=z).tzname())
print('America/New_York' in zoneinfo.available_timezones())
data = b'rlm ' * 1000
print(bz2.decompress(bz2.compress(data)) == data, lzma.decompress(lzma.compress(data)) == data)
`
	res := run(t, RunSpec{Code: code})
	want := "2:00:00 CET\nTrue\nTrue True\n"
	if !res.Success || string(res.Stdout) != want {
		dump(t, res)
		t.Fatalf("stdout = %q, want %q", res.Stdout, want)
	}
}

// The stdlib ships its sources: tracebacks through it show the lines and
// inspect.getsource works.
func TestStdlibSources(t *testing.T) {
	code := `import inspect, json
print(inspect.getsource(json.dumps).splitlines()[0])
json.loads('')
`
	res := run(t, RunSpec{Code: code})
	if string(res.Stdout) != "def dumps(obj, *, skipkeys=False, ensure_ascii=True, check_circular=True,\n" {
		dump(t, res)
		t.Fatalf("getsource: stdout = %q", res.Stdout)
	}
	// The uncaught error's traceback quotes the stdlib line that raised it.
	if res.Success || !bytes.Contains(res.Stderr, []byte(`/usr/local/lib/python3.11/json/decoder.py", line`)) ||
		!bytes.Contains(res.Stderr, []byte("raise JSONDecodeError(")) {
		dump(t, res)
		t.Fatal("traceback has no stdlib source line")
	}
}
