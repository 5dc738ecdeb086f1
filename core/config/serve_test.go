package config

import (
	"os"
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
