package ending

import (
	"testing"
	"time"
)

func TestMessage(t *testing.T) {
	for _, tc := range []struct {
		r     Reason
		limit int64
		want  string
	}{
		{Timeout, int64(2 * time.Second), "timed out after 2s"},
		{Timeout, 0, "timed out"},
		{MemoryLimit, 0, "reached the memory limit"},
		{MemoryLimit, 1 << 20, "reached the memory limit of 1048576 bytes"},
		{CPULimit, int64(3 * time.Second), "used up its CPU time of 3s"},
		{Fuel, 100, "used up its fuel budget of 100 units"},
		{OutputLimit, 64, "killed after writing more than 64 bytes of output"},
		{Cancelled, 5, "cancelled"},
		{Exit, 0, ""},
		{Signal, 0, ""},
	} {
		if got := tc.r.Message(tc.limit); got != tc.want {
			t.Errorf("%s.Message(%d) = %q, want %q", tc.r, tc.limit, got, tc.want)
		}
	}
	if got := Hint("reached the memory limit", "--memory"); got != "reached the memory limit; raise it with --memory" {
		t.Errorf("Hint = %q", got)
	}
	if got := Hint("timed out after 1s", ""); got != "timed out after 1s" {
		t.Errorf("Hint without a way = %q", got)
	}
}
