package core

import (
	"errors"
	"strings"
	"testing"

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
	strict := Limits{Strict: true, MemoryBytes: 50 << 20}
	if err := checkLimits(strict, "noiso", "none"); err == nil || !strings.Contains(err.Error(), "--memory cannot hold: plugin noiso") {
		t.Errorf("a flag-given memory limit at none: got %v", err)
	}
	if err := checkLimits(strict, "noiso", "process"); err != nil {
		t.Errorf("at process the limit holds: %v", err)
	}
	if err := checkLimits(Limits{MemoryBytes: 1 << 30}, "noiso", "none"); err != nil {
		t.Errorf("a default limit at none: %v", err)
	}
	if err := checkLimits(Limits{Strict: true}, "noiso", "none"); err != nil {
		t.Errorf("strict without limits: %v", err)
	}
}
