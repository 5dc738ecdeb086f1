package execcmd

import (
	"context"
	"strings"
	"testing"

	"github.com/rlmkit/rlm/cmd/rlm/cli/cmdutil"
	"github.com/rlmkit/rlm/core/plugin/plugintest"
	pb "github.com/rlmkit/rlm/core/runtimepb"
)

// plainRuntime is fakert declaring only "program": it has no syntax check
// (Check answers Unimplemented, as core/plugin/native's does without a
// Syntax) and installs no requirements, yet, as a careless plugin might,
// takes a request with requirements and runs it: rlm must go by what it
// declares.
func plainRuntime() *plugintest.Runtime {
	rt := fakeRuntime()
	rt.CheckF = nil
	rt.InfoF = func(context.Context, *pb.InfoRequest) (*pb.InfoResponse, error) {
		return &pb.InfoResponse{Name: "plainrt", Available: true, FileExtension: ".pl", IsolationLevels: []string{"none"},
			Capabilities: []string{"program"}}, nil
	}
	return rt
}

// What a runtime does not declare is refused as a usage error (2), before
// anything runs: --requirements for a runtime that installs none (they
// would be ignored and the program run without them), --check for one
// with no checker (it is not the code that failed).
func TestUndeclaredCapabilityIsUsageError(t *testing.T) {
	out, errOut, code := runExec(t, "", "-r", "plainrt", "--requirements", "left-pad", "-c", "exit 0")
	if code != cmdutil.ExitUsage || out != "" || !strings.Contains(errOut, "requirements cannot be installed (left-pad)") ||
		!strings.Contains(errOut, "declares no requirements capability") {
		t.Errorf("--requirements on a runtime without them: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	out, errOut, code = runExec(t, "", "-r", "plainrt", "--check", "-c", "fine")
	if code != cmdutil.ExitUsage || out != "" || !strings.Contains(errOut, "has no syntax check") {
		t.Errorf("--check on a runtime without a checker: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	// A runtime declaring them still gets them.
	if out, errOut, code := runExec(t, "", "-r", "fakert", "--requirements", "left-pad", "-c", "exit 0"); code != 0 {
		t.Errorf("--requirements on a runtime declaring them: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}
