package config

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
)

// The example documents every key and nothing else: it loads without
// unknown keys, and every key of Config appears in it.
func TestExampleDocumentsEveryKey(t *testing.T) {
	const path = "../../rlm.toml.example"
	var c Config
	md, err := toml.DecodeFile(path, &c)
	if err != nil {
		t.Fatal(err)
	}
	if und := md.Undecoded(); len(und) > 0 {
		t.Fatalf("example has keys Config lacks: %v", und)
	}
	defined := map[string]bool{}
	for _, k := range md.Keys() {
		defined[k.String()] = true
	}
	for _, k := range keysOf(reflect.TypeOf(Config{}), "") {
		if !defined[k] {
			t.Errorf("rlm.toml.example does not document %q", k)
		}
	}
	if _, err := Load(path); err != nil {
		t.Fatalf("example does not load: %v", err)
	}
	if got, want := mustLoad(t, path), Default(); !reflect.DeepEqual(got, want) {
		t.Errorf("example values differ from the defaults:\n got %+v\nwant %+v", got, want)
	}
}

func mustLoad(t *testing.T, p string) Config {
	c, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// keysOf lists dotted TOML keys of t; maps count as one key (their entries
// are free-form).
func keysOf(t reflect.Type, prefix string) []string {
	var out []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name := strings.Split(f.Tag.Get("toml"), ",")[0]
		if name == "" || name == "-" {
			continue
		}
		key := prefix + name
		if f.Type.Kind() == reflect.Struct && f.Type.PkgPath() != "time" {
			out = append(out, keysOf(f.Type, key+".")...)
			continue
		}
		out = append(out, key)
	}
	return out
}

func TestUnknownKeyNamesKeyAndFile(t *testing.T) {
	p := t.TempDir() + "/x.toml"
	os.WriteFile(p, []byte("[limits]\ntimout = \"1s\"\n"), 0o644)
	_, err := Load(p)
	if err == nil || !strings.Contains(err.Error(), "limits.timout") || !strings.Contains(err.Error(), p) {
		t.Fatalf("got %v", err)
	}
}

func TestSizes(t *testing.T) {
	for in, want := range map[string]int64{"1000": 1000, "64KiB": 65536, "10MB": 10_000_000, "1g": 1 << 30, "1.5k": 1536} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "lots", "-1", "5XB"} {
		if _, err := ParseSize(bad); err == nil {
			t.Errorf("ParseSize(%q) accepted", bad)
		}
	}
}

func TestEnvOverridesFile(t *testing.T) {
	p := t.TempDir() + "/x.toml"
	os.WriteFile(p, []byte("backend = \"native\"\n[limits]\ntimeout = \"2s\"\n"), 0o644)
	t.Setenv("RLM_TIMEOUT", "5s")
	c, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if c.Backend != "native" || c.Limits.Timeout != Duration(5e9) {
		t.Fatalf("got %+v", c)
	}
	t.Setenv("RLM_BACKEND", "warp")
	if _, err := Load(p); err == nil || !strings.Contains(err.Error(), "warp") {
		t.Fatalf("bad env backend accepted: %v", err)
	}
}

func TestShowHidesAPIKeys(t *testing.T) {
	p := t.TempDir() + "/x.toml"
	os.WriteFile(p, []byte("[providers.openai]\napi_key = \"sk-secret-123\"\nbase_url = \"http://h/v1\"\n"), 0o644)
	c, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.TOML()
	if err != nil || strings.Contains(out, "sk-secret-123") || !strings.Contains(out, "(set)") || !strings.Contains(out, "http://h/v1") {
		t.Fatalf("%v\n%s", err, out)
	}
	if c.Providers["openai"].APIKey != "sk-secret-123" {
		t.Fatal("TOML changed the config")
	}
}
