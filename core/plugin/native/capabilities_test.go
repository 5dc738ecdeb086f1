package native

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/plugin/install"
	"github.com/rlmkit/rlm/core/plugin/toolpath"
)

// A runtime without an Installer never declares "requirements", whatever
// its Capabilities say, so the host refuses requirements for it
// (core.CheckRequirements); Run refuses them too, for a host that does not.
func TestRequirementsNeedAnInstaller(t *testing.T) {
	rt := &Runtime{Name: "sh", Tool: "sh", CodeFile: "main.sh", Probe: func(path string) (toolpath.Tool, error) {
		return toolpath.Tool{Exe: path, Version: "sh"}, nil
	}, Capabilities: []string{"program", "requirements"}}
	info, err := New(rt).Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(info.Capabilities, "requirements") || !slices.Contains(info.Capabilities, "program") {
		t.Errorf("without an Installer: capabilities %v", info.Capabilities)
	}
	if !info.Available {
		t.Skipf("sh unavailable: %s", info.UnavailableReason)
	}
	_, err = New(rt).Run(context.Background(), core.Program{Code: "echo ran", Requirements: []string{"left-pad"}, Limits: core.Limits{Isolation: "none"}})
	var refused *core.RefusedError
	if !errors.As(err, &refused) || refused.Kind != core.Invalid {
		t.Errorf("Run with requirements and no Installer: %v, want an Invalid refusal", err)
	}
	rt.Installer = func(toolpath.Tool) *install.Installer { return nil }
	if info, _ := New(rt).Info(context.Background()); !slices.Contains(info.Capabilities, "requirements") {
		t.Errorf("with an Installer: capabilities %v", info.Capabilities)
	}
}
