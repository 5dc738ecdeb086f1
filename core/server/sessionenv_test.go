package server_test

import (
	"archive/zip"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rlmkit/rlm/core/server"
)

// POST /sessions takes env as /execute does: the interpreter sees it (also
// with warm sessions on, which hold interpreters started without it), and
// a name the sandbox's shell would drop is refused with 400 naming it.
func TestSessionEnv(t *testing.T) {
	url, _ := start(t, server.Config{Modes: []string{"python"}, Open: pythonOpener(t, nil), WarmSessions: 1})
	r := call(t, "POST", url+"/sessions", `{"env": {"GREETING": "hello there", "EMPTY": ""}}`)
	if r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.raw)
	}
	id := r.body["id"].(string)
	r = call(t, "POST", url+"/sessions/"+id+"/execute", `{"code": "import os\nos.environ['GREETING'], os.environ['EMPTY']"}`)
	if r.body["status"] != "success" || r.body["result"] != "('hello there', '')" {
		t.Fatalf("the session's environment: %s", r.raw)
	}
	// a session without env does not see another's
	id2 := call(t, "POST", url+"/sessions", `{}`).body["id"].(string)
	if r := call(t, "POST", url+"/sessions/"+id2+"/execute", `{"code": "import os\n'GREETING' in os.environ"}`); r.body["result"] != "False" {
		t.Fatalf("a session without env: %s", r.raw)
	}
	r = call(t, "POST", url+"/sessions", `{"env": {"BAD-NAME": "x"}}`)
	if r.status != 400 || r.errCode() != "bad_field" || !strings.Contains(r.errMsg(), `env["BAD-NAME"]`) || !strings.Contains(r.errMsg(), "not valid") {
		t.Fatalf("a bad env name: %d %s", r.status, r.raw)
	}
	r = call(t, "POST", url+"/sessions", `{"env": {"OK": "a\u0000b"}}`)
	if r.status != 400 || !strings.Contains(r.errMsg(), `env["OK"]`) || !strings.Contains(r.errMsg(), "NUL") {
		t.Fatalf("a NUL in a value: %d %s", r.status, r.raw)
	}
}

// POST /sessions takes requirements as /execute does: installed once
// before the interpreter starts (here a local wheel, by path: no index is
// reachable), importable in every cell. One that does not install refuses
// the session with 400 and the installer's output.
func TestSessionRequirements(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir()) // the plugins' install cache
	whl := writeWheel(t, t.TempDir(), "rlmsessdemo", "0.3")
	url, _ := start(t, server.Config{Modes: []string{"python"}, Open: pythonOpener(t, nil), WarmSessions: 1})
	r := call(t, "POST", url+"/sessions", mustJSON(map[string]any{"requirements": []string{whl}}))
	if r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.raw)
	}
	id := r.body["id"].(string)
	r = call(t, "POST", url+"/sessions/"+id+"/execute", `{"code": "import rlmsessdemo\nrlmsessdemo.GREETING"}`)
	if r.body["status"] != "success" || r.body["result"] != "'hello from rlmsessdemo 0.3'" {
		t.Fatalf("importing the requirement: %s", r.raw)
	}
	r = call(t, "POST", url+"/sessions", mustJSON(map[string]any{"requirements": []string{filepath.Join(t.TempDir(), "nothere-1.0-py3-none-any.whl")}}))
	if r.status != 400 || r.errCode() != "bad_request" || !strings.Contains(r.errMsg(), "the session's requirements did not install") ||
		!strings.Contains(r.errMsg(), "nothere-1.0-py3-none-any.whl") {
		t.Fatalf("a requirement that does not install: %d %s", r.status, r.raw)
	}
	r = call(t, "POST", url+"/sessions", `{"requirements": ["  "]}`)
	if r.status != 400 || r.errCode() != "bad_field" || !strings.Contains(r.errMsg(), "requirements[0]") {
		t.Fatalf("a blank requirement: %d %s", r.status, r.raw)
	}
	r = call(t, "POST", url+"/sessions", `{"requirements": ["--target=/tmp/x"]}`)
	if r.status != 400 || !strings.Contains(r.errMsg(), "looks like an installer option") {
		t.Fatalf("an installer option: %d %s", r.status, r.raw)
	}
}

// writeWheel writes a minimal pure-Python wheel of package name (whose
// GREETING says its name and version) into dir and returns its path.
func writeWheel(t *testing.T, dir, name, version string) string {
	t.Helper()
	info := name + "-" + version + ".dist-info"
	files := [][2]string{
		{name + "/__init__.py", fmt.Sprintf("GREETING = 'hello from %s %s'\n", name, version)},
		{info + "/METADATA", fmt.Sprintf("Metadata-Version: 2.1\nName: %s\nVersion: %s\n", name, version)},
		{info + "/WHEEL", "Wheel-Version: 1.0\nGenerator: rlm-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
	}
	var record strings.Builder
	for _, f := range files {
		sum := sha256.Sum256([]byte(f[1]))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", f[0], base64.RawURLEncoding.EncodeToString(sum[:]), len(f[1]))
	}
	record.WriteString(info + "/RECORD,,\n")
	files = append(files, [2]string{info + "/RECORD", record.String()})
	path := filepath.Join(dir, name+"-"+version+"-py3-none-any.whl")
	out, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	z := zip.NewWriter(out)
	for _, f := range files {
		w, err := z.Create(f[0])
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(f[1])); err != nil {
			t.Fatal(err)
		}
	}
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}
