package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestServeKeys(t *testing.T) {
	p := t.TempDir() + "/x.toml"
	os.WriteFile(p, []byte("[serve]\nmode = \"python,shell\"\nbody_limit = \"1MiB\"\nqueue_wait = \"2s\"\n"), 0o644)
	t.Setenv("RLM_TOKEN", "hunter2")
	t.Setenv("RLM_MAX_CONCURRENT", "3")
	c, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if c.Serve.Mode != "python,shell" || c.Serve.BodyLimit != 1<<20 || c.Serve.MaxConcurrent != 3 || c.Serve.Token != "hunter2" || c.Serve.QueueWait != Duration(2e9) {
		t.Errorf("got %+v", c.Serve)
	}
	out, err := c.TOML()
	if err != nil || strings.Contains(out, "hunter2") || !strings.Contains(out, `token = "(set)"`) {
		t.Errorf("config show must not print the token:\n%s", out)
	}
	for _, bad := range []string{"log_format = \"xml\"", "queue = -1", "max_concurrent = -2"} {
		os.WriteFile(p, []byte("[serve]\n"+bad+"\n"), 0o644)
		t.Setenv("RLM_MAX_CONCURRENT", "")
		if _, err := Load(p); err == nil || !strings.Contains(err.Error(), "serve.") {
			t.Errorf("%s accepted: %v", bad, err)
		}
	}
}

func TestLimitsValidated(t *testing.T) {
	p := filepath.Join(t.TempDir(), "rlm.toml")
	for _, tc := range []struct{ file, key string }{
		{"[limits]\nisolation = \"jail\"\n", "limits.isolation"},
		{"[limits]\nmemory = -1\n", "negative"},
		{"[limits]\nmax_processes = -1\n", "limits.max_processes"},
		{"[serve]\nisolation = \"strong\"\n", "serve.isolation"},
	} {
		os.WriteFile(p, []byte(tc.file), 0o644)
		_, err := Load(p)
		if err == nil || !strings.Contains(err.Error(), tc.key) {
			t.Errorf("%q: got %v, want an error naming %s", tc.file, err, tc.key)
		}
	}
	os.WriteFile(p, []byte("[limits]\nisolation = \"namespace\"\nmemory = \"256MiB\"\nmax_disk = \"64MiB\"\ncpu = \"5s\"\n[serve]\nisolation = \"process\"\n"), 0o644)
	c, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if c.Limits.Isolation != "namespace" || c.Limits.Memory != 256<<20 || c.Limits.MaxDisk != 64<<20 || c.Limits.CPU != Duration(5e9) || c.Serve.Isolation != "process" {
		t.Errorf("got %+v %+v", c.Limits, c.Serve.Isolation)
	}
}

func TestServeAddrChecked(t *testing.T) {
	for _, ok := range []string{"127.0.0.1:8080", "[::1]:0", ":8080", "localhost:http", "0.0.0.0:65535"} {
		if err := CheckAddr(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for bad, want := range map[string]string{
		"garbage":         `"garbage" is not a listen address: use HOST:PORT, such as 127.0.0.1:8080`,
		"127.0.0.1:99999": `"127.0.0.1:99999": port 99999 is out of range: use 0 to 65535`,
		"127.0.0.1:-1":    "out of range",
		"::1:8080":        "is not a listen address",
		"127.0.0.1:nope":  `"nope" is not a port`,
		"":                "the listen address is empty",
	} {
		if err := CheckAddr(bad); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want %q", bad, err, want)
		}
	}
	// From the file or the environment, the key or variable is named.
	p := filepath.Join(t.TempDir(), "rlm.toml")
	os.WriteFile(p, []byte("[serve]\naddr = \"garbage\"\n"), 0o644)
	if _, err := Load(p); err == nil || !strings.Contains(err.Error(), p+`: serve.addr: "garbage" is not a listen address`) {
		t.Errorf("file: %v", err)
	}
	t.Setenv("RLM_ADDR", "127.0.0.1:99999")
	if _, err := Load(""); err == nil || !strings.Contains(err.Error(), `environment: RLM_ADDR: "127.0.0.1:99999": port 99999 is out of range`) {
		t.Errorf("environment: %v", err)
	}
}
