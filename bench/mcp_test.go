package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/rlmkit/rlm/core/mcpserver"
	"github.com/rlmkit/rlm/core/server"
)

// BenchmarkMCP measures run_code of a trivial python program through MCP
// over streamable HTTP (/mcp, the official Go SDK's client, one POST per
// call) against POST /execute, on one server in the same run, one client
// at a time: the difference is what the MCP layer (JSON-RPC envelope,
// schema validation, the SDK's per-request session) adds to a run.
func BenchmarkMCP(b *testing.B) {
	srv, err := server.New(server.Config{Modes: []string{"python"}, Open: pluginOpener(b),
		MaxConcurrent: runtime.NumCPU(), Queue: 64, QueueWait: 5 * time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	srv.Handle("/mcp", mcpserver.HTTPHandler(srv, mcpserver.Options{}))
	ts := httptest.NewServer(srv)
	defer ts.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}

	b.Run("execute", func(b *testing.B) {
		one(b, func() error {
			resp, err := client.Post(ts.URL+"/execute", "application/json", strings.NewReader(trivial))
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			var r struct{ Stdout string }
			if resp.StatusCode != 200 || json.Unmarshal(body, &r) != nil || r.Stdout != "1\n" {
				return fmt.Errorf("%d %s", resp.StatusCode, body)
			}
			return nil
		})
	})
	b.Run("mcp", func(b *testing.B) {
		ctx := context.Background()
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench"}, nil).Connect(ctx,
			&mcp.StreamableClientTransport{Endpoint: ts.URL + "/mcp", HTTPClient: client}, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer cs.Close()
		one(b, func() error {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_code", Arguments: map[string]any{"code": "print(1)"}})
			if err != nil {
				return err
			}
			out, _ := json.Marshal(res.StructuredContent)
			var r struct{ Stdout string }
			if res.IsError || json.Unmarshal(out, &r) != nil || r.Stdout != "1\n" {
				return fmt.Errorf("run_code: %s", out)
			}
			return nil
		})
	})
}

// one runs call b.N times in a row after a warm-up and reports latency
// percentiles.
func one(b *testing.B, call func() error) {
	for i := 0; i < 5; i++ {
		if err := call(); err != nil {
			b.Fatal(err)
		}
	}
	lat := make([]time.Duration, b.N)
	b.ResetTimer()
	for i := range lat {
		t0 := time.Now()
		if err := call(); err != nil {
			b.Fatal(err)
		}
		lat[i] = time.Since(t0)
	}
	b.StopTimer()
	p50, p99 := percentiles(lat)
	b.ReportMetric(float64(p50.Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(p99.Microseconds())/1000, "p99-ms")
}
