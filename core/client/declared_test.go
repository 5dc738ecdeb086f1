package client_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/client"
	"github.com/rlmkit/rlm/core/plugin/plugintest"
	pb "github.com/rlmkit/rlm/core/runtimepb"
	"github.com/rlmkit/rlm/internal/sandbox/isolate"
)

// countingInfo is a mock runtime declaring isolation none whose Info calls
// are counted.
func countingInfo(t *testing.T, calls *atomic.Int64) *client.Runtime {
	c, stop := plugintest.Connect(t, &plugintest.Runtime{InfoF: func(context.Context, *pb.InfoRequest) (*pb.InfoResponse, error) {
		calls.Add(1)
		return &pb.InfoResponse{Available: true, IsolationLevels: []string{"none"}}, nil
	}})
	return client.NewRuntime("x", "fake", c, stop, isolate.Available)
}

// A runtime asks its plugin's Info once for what it declares, and not at
// all when the fingerprint taken at launch was handed to it.
func TestDeclaredAskedOnce(t *testing.T) {
	ctx := context.Background()
	var calls atomic.Int64
	rt := countingInfo(t, &calls)
	for range 2 {
		if level, err := rt.Isolation(ctx, core.AutoIsolation, false); err != nil || level != "none" {
			t.Fatalf("Isolation: %q %v", level, err)
		}
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("Info asked %d times, want 1", n)
	}

	calls.Store(0)
	rt = countingInfo(t, &calls)
	rt.SetDeclared(&core.Info{Available: true, IsolationLevels: []string{"none"}})
	if _, err := rt.Declared(ctx); err != nil {
		t.Fatal(err)
	}
	if level, err := rt.Isolation(ctx, core.AutoIsolation, false); err != nil || level != "none" {
		t.Fatalf("Isolation: %q %v", level, err)
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("Info asked %d times after SetDeclared, want 0", n)
	}
	// Info itself always asks: it is how a caller checks the plugin is alive.
	if _, err := rt.Info(ctx); err != nil || calls.Load() != 1 {
		t.Errorf("Info: %v, %d calls", err, calls.Load())
	}
}

// A call the plugin does not offer (a nil field of the mock) is
// core.ErrUnsupported.
func TestUnofferedCallIsUnsupported(t *testing.T) {
	var calls atomic.Int64
	rt := countingInfo(t, &calls)
	if _, _, err := rt.Check(context.Background(), "x"); !errors.Is(err, core.ErrUnsupported) {
		t.Errorf("Check: %v, want ErrUnsupported", err)
	}
}
