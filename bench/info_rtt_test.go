package bench

import (
	"context"
	"testing"
	"time"
)

// BenchmarkInfoRoundTrip is the floor of the plugin hop: one unary Info
// RPC to the python plugin (no interpreter involved).
func BenchmarkInfoRoundTrip(b *testing.B) {
	rt := pythonRuntime(b)
	ctx := context.Background()
	lat := make([]time.Duration, 0, b.N)
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if _, err := rt.Client.Info(ctx, nil); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	p50, p99 := percentiles(lat)
	b.ReportMetric(float64(p50.Microseconds()), "p50-us")
	b.ReportMetric(float64(p99.Microseconds()), "p99-us")
}
