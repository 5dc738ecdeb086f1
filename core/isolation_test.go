package core

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rlmkit/rlm/core/isolation"
)

// noNamespaces is a host probe for a host without user namespaces: what it
// says, not what this machine has, drives the resolution under test.
func noNamespaces(l isolation.Level) error {
	if l == isolation.Namespace {
		return errors.New("user namespaces are disabled")
	}
	return nil
}

// everything is a host probe for a host that enforces every level.
func everything(isolation.Level) error { return nil }

func TestResolveIsolationAuto(t *testing.T) {
	for _, host := range []struct {
		name      string
		probe     isolation.Probe
		strongest string
	}{{"full host", everything, "namespace"}, {"no namespaces", noNamespaces, "process"}} {
		testResolveAuto(t, host.name, host.probe, host.strongest)
	}
}

func testResolveAuto(t *testing.T, hostName string, host isolation.Probe, strongest string) {
	process := "process"
	for _, tc := range []struct {
		name    string
		info    *Info
		session bool
		want    string
	}{
		{"nothing declared is none", &Info{}, false, "none"},
		{"none only", &Info{IsolationLevels: []string{"none"}}, false, "none"},
		{"all levels: the host's strongest", &Info{IsolationLevels: []string{"none", "process", "namespace"}}, false, strongest},
		{"sessions use their own list", &Info{IsolationLevels: []string{"none", "process", "namespace"}, SessionIsolationLevels: []string{"none", "process"}}, true, process},
		{"sessions not declared are none", &Info{IsolationLevels: []string{"none", "process", "namespace"}}, true, "none"},
		{"a level of its own", &Info{IsolationLevels: []string{"wasm"}}, false, "wasm"},
	} {
		for _, req := range []string{"", "auto"} {
			got, err := ResolveIsolation(tc.info, "p", req, tc.session, host)
			if err != nil || got != tc.want {
				t.Errorf("%s: %s (%q): got %q, %v; want %q", hostName, tc.name, req, got, err, tc.want)
			}
		}
	}
}

func TestResolveIsolationExplicit(t *testing.T) {
	info := &Info{IsolationLevels: []string{"none"}, SessionIsolationLevels: []string{"none", "process"}}
	_, err := ResolveIsolation(info, "perl (/x/rlm-plugin-perl)", "namespace", false, everything)
	var ref *RefusedError
	if !errors.As(err, &ref) {
		t.Fatalf("namespace on a none-only plugin: got %v, want a RefusedError", err)
	}
	for _, want := range []string{"plugin perl (/x/rlm-plugin-perl)", "cannot enforce isolation namespace for its programs", "declares only none", "--isolation auto"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if _, err := ResolveIsolation(info, "p", "process", true, everything); err != nil {
		t.Errorf("declared session level process refused: %v", err)
	}
	if _, err := ResolveIsolation(info, "p", "namespace", true, everything); err == nil || !strings.Contains(err.Error(), "for its sessions: it declares only none, process") {
		t.Errorf("undeclared session level: got %v", err)
	}
	if _, err := ResolveIsolation(&Info{IsolationLevels: []string{"wasm"}}, "p", "process", false, everything); err == nil {
		t.Error("process on a wasm-only plugin was accepted")
	}
	if got, err := ResolveIsolation(info, "p", "none", false, everything); err != nil || got != "none" {
		t.Errorf("none: got %q, %v", got, err)
	}
	all := &Info{IsolationLevels: []string{"none", "process", "namespace"}}
	_, err = ResolveIsolation(all, "p", "namespace", false, noNamespaces)
	if !errors.As(err, &ref) || !strings.Contains(err.Error(), "isolation namespace cannot work on this host: user namespaces are disabled") {
		t.Errorf("namespace on a host without it: got %v, want a refusal naming the host's reason", err)
	}
	// Without the host's probe no level can be ranked: an error, never a
	// guess (auto would otherwise fall to none).
	for _, req := range []string{"", "auto", "none", "namespace"} {
		if got, err := ResolveIsolation(all, "p", req, false, nil); err == nil || !strings.Contains(err.Error(), "needs the host's probe") {
			t.Errorf("no probe, %q: got %q, %v; want an error", req, got, err)
		}
	}
}

func TestCheckLimitsAtNone(t *testing.T) {
	noiso := &Info{Name: "noiso"}
	strict := Limits{Strict: MemoryLimit, MemoryBytes: 50 << 20}
	if err := checkLimits(strict, noiso, "noiso", "none"); err == nil || !strings.Contains(err.Error(), "--memory cannot hold: plugin noiso") {
		t.Errorf("a flag-given memory limit at none: got %v", err)
	}
	if err := checkLimits(strict, noiso, "noiso", "process"); err != nil {
		t.Errorf("at process the limit holds: %v", err)
	}
	if err := checkLimits(Limits{MemoryBytes: 1 << 30}, noiso, "noiso", "none"); err != nil {
		t.Errorf("a default limit at none: %v", err)
	}
	if err := checkLimits(Limits{Strict: AllResources}, noiso, "noiso", "none"); err != nil {
		t.Errorf("strict without limits: %v", err)
	}
}

// The refusal names only the limits the caller asked for, not the
// configured defaults beside them (the defaults alone are not refused).
func TestCheckLimitsNamesOnlyTheAskedFor(t *testing.T) {
	l := Limits{Strict: DiskLimit, MemoryBytes: 1 << 30, MaxProcesses: 256, MaxDiskBytes: 1 << 20}
	err := checkLimits(l, &Info{}, "python", "none")
	if err == nil {
		t.Fatal("--max-disk at none was not refused")
	}
	if msg := err.Error(); !strings.HasPrefix(msg, "--max-disk cannot hold") || strings.Contains(msg, "--memory") || strings.Contains(msg, "--max-processes") {
		t.Errorf("got %q; want it to name --max-disk alone", msg)
	}
}

// At a plugin's own level (pyodide's wasm) only the limits it declares as
// capabilities hold; the others, asked for explicitly, are refused.
func TestCheckLimitsAtPluginLevel(t *testing.T) {
	wasm := &Info{Capabilities: []string{"repl", "fuel", "memory", "max-processes"}}
	for _, tc := range []struct {
		l    Limits
		want string // "" when it holds
	}{
		{Limits{Strict: MemoryLimit, MemoryBytes: 64 << 20}, ""},
		{Limits{Strict: ProcessLimit, MaxProcesses: 4}, ""},
		{Limits{Strict: DiskLimit, MaxDiskBytes: 1 << 20}, "--max-disk cannot hold: plugin pyodide runs this at isolation wasm, which enforces only --memory, --max-processes"},
		{Limits{Strict: CPULimit | MemoryLimit, CPU: time.Second, MemoryBytes: 64 << 20}, "--cpu cannot hold"},
		// configured defaults it cannot hold are not the caller's request
		{Limits{MaxDiskBytes: 1 << 20, CPU: time.Second}, ""},
	} {
		err := checkLimits(tc.l, wasm, "pyodide", "wasm")
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%+v: %v", tc.l, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%+v: got %v, want %q", tc.l, err, tc.want)
		}
	}
	if err := checkLimits(Limits{Strict: MemoryLimit, MemoryBytes: 1}, &Info{}, "p", "wasm"); err == nil || !strings.Contains(err.Error(), "enforces no resource limit") {
		t.Errorf("a plugin level declaring no limit: %v", err)
	}
}

// A fuel budget on a runtime that counts no fuel is refused; unlimited
// (-1) and the default (0) hold everywhere.
func TestCheckLimitsFuel(t *testing.T) {
	native, wasm := &Info{Capabilities: []string{"program"}}, &Info{Capabilities: []string{"fuel"}}
	if err := checkLimits(Limits{Fuel: 100}, native, "python", "namespace"); err == nil || !strings.Contains(err.Error(), "--fuel cannot hold: plugin python counts no fuel") {
		t.Errorf("--fuel 100 on native python: %v", err)
	}
	for _, f := range []int64{0, -1} {
		if err := checkLimits(Limits{Fuel: f}, native, "python", "namespace"); err != nil {
			t.Errorf("--fuel %d on native python: %v", f, err)
		}
	}
	if err := checkLimits(Limits{Fuel: 100}, wasm, "pyodide", "wasm"); err != nil {
		t.Errorf("--fuel on pyodide: %v", err)
	}
}
