package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rlmkit/rlm/core/client"
	"github.com/rlmkit/rlm/core/plugin/plugintest"
	"github.com/rlmkit/rlm/core/runtimepb"
	"github.com/rlmkit/rlm/core/server"
	"github.com/rlmkit/rlm/internal/host/launch"
	"github.com/rlmkit/rlm/internal/sandbox/isolate"
	"github.com/rlmkit/rlm/plugins/python"
)

// TestMain doubles as the python plugin: tests launch this binary under
// the name rlm-plugin-python, as rlm launches the real one.
func TestMain(m *testing.M) {
	plugintest.Main(m, map[string]func(){"python": python.Main})
}

// pythonOpener launches this test binary as the python plugin. launches
// counts plugin starts.
func pythonOpener(t testing.TB, launches *atomic.Int64) server.Opener {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed")
	}
	dir := t.TempDir()
	plugintest.LinkPlugins(t, dir, "python")
	path := filepath.Join(dir, runtimepb.Prefix+"python")
	return func(ctx context.Context, name string) (*client.Runtime, error) {
		p, err := launch.Launch(path)
		if err != nil {
			return nil, err
		}
		if launches != nil {
			launches.Add(1)
		}
		return client.NewRuntime(name, "native", p.Client, p.Kill, isolate.Available), nil
	}
}

// start serves cfg on 127.0.0.1 and closes everything at the end.
func start(t testing.TB, cfg server.Config) (string, *server.Server) {
	t.Helper()
	s, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	t.Cleanup(func() {
		ts.Close()
		s.Close()
	})
	return ts.URL, s
}

type reply struct {
	status int
	header http.Header
	raw    []byte
	body   map[string]any
}

// errCode is the error code of an error reply.
func (r reply) errCode() string {
	e, _ := r.body["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

func (r reply) errMsg() string {
	e, _ := r.body["error"].(map[string]any)
	c, _ := e["message"].(string)
	return c
}

func call(t testing.TB, method, url, body string, hdr ...string) reply {
	t.Helper()
	return callCtx(context.Background(), t, method, url, body, hdr...)
}

func callCtx(ctx context.Context, t testing.TB, method, url, body string, hdr ...string) reply {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i+1] == "" {
			req.Header.Del(hdr[i])
		} else {
			req.Header.Set(hdr[i], hdr[i+1])
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	r := reply{status: resp.StatusCode, header: resp.Header, raw: raw}
	if bytes.HasPrefix(bytes.TrimSpace(raw), []byte("{")) {
		if err := json.Unmarshal(raw, &r.body); err != nil {
			t.Fatalf("%s %s: reply is not JSON: %v\n%s", method, url, err, raw)
		}
	}
	return r
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
