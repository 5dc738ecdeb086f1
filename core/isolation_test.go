package core

import (
	"errors"
	"strings"
	"testing"

	pb "github.com/rlmkit/rlm/core/proto"
	"github.com/rlmkit/rlm/internal/isolate"
)

func TestResolveIsolationAuto(t *testing.T) {
	strongest := string(isolate.Strongest())
	process := "none"
	if isolate.Available(isolate.LevelProcess) == nil {
		process = "process"
	}
	for _, tc := range []struct {
		name    string
		info    *pb.InfoResponse
		session bool
		want    string
	}{
		{"nothing declared is none", &pb.InfoResponse{}, false, "none"},
		{"none only", &pb.InfoResponse{IsolationLevels: []string{"none"}}, false, "none"},
		{"all levels: the host's strongest", &pb.InfoResponse{IsolationLevels: []string{"none", "process", "namespace"}}, false, strongest},
		{"sessions use their own list", &pb.InfoResponse{IsolationLevels: []string{"none", "process", "namespace"}, SessionIsolationLevels: []string{"none", "process"}}, true, process},
		{"sessions not declared are none", &pb.InfoResponse{IsolationLevels: []string{"none", "process", "namespace"}}, true, "none"},
		{"a level of its own", &pb.InfoResponse{IsolationLevels: []string{"wasm"}}, false, "wasm"},
	} {
		for _, req := range []string{"", "auto"} {
			got, err := ResolveIsolation(tc.info, "p", req, tc.session)
			if err != nil || got != tc.want {
				t.Errorf("%s (%q): got %q, %v; want %q", tc.name, req, got, err, tc.want)
			}
		}
	}
}

func TestResolveIsolationExplicit(t *testing.T) {
	info := &pb.InfoResponse{IsolationLevels: []string{"none"}, SessionIsolationLevels: []string{"none", "process"}}
	_, err := ResolveIsolation(info, "perl (/x/rlm-plugin-perl)", "namespace", false)
	var ref *RefusedError
	if !errors.As(err, &ref) {
		t.Fatalf("namespace on a none-only plugin: got %v, want a RefusedError", err)
	}
	for _, want := range []string{"plugin perl (/x/rlm-plugin-perl)", "cannot enforce isolation namespace for its programs", "declares only none", "--isolation auto"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if _, err := ResolveIsolation(info, "p", "process", true); isolate.Available(isolate.LevelProcess) == nil && err != nil {
		t.Errorf("declared session level process refused: %v", err)
	}
	if _, err := ResolveIsolation(info, "p", "namespace", true); err == nil || !strings.Contains(err.Error(), "for its sessions: it declares only none, process") {
		t.Errorf("undeclared session level: got %v", err)
	}
	if _, err := ResolveIsolation(&pb.InfoResponse{IsolationLevels: []string{"wasm"}}, "p", "process", false); err == nil {
		t.Error("process on a wasm-only plugin was accepted")
	}
	if got, err := ResolveIsolation(info, "p", "none", false); err != nil || got != "none" {
		t.Errorf("none: got %q, %v", got, err)
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
