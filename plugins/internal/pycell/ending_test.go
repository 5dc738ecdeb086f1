package pycell

import (
	"testing"
	"time"

	"github.com/rlmkit/rlm/core/ending"
)

func TestMessage(t *testing.T) {
	if got := Message(ending.Timeout, int64(time.Second)); got != "TimeoutError: timed out after 1s" {
		t.Errorf("timeout: %q", got)
	}
	if got := Message(ending.Fuel, 10); got != "OutOfFuel: used up its fuel budget of 10 units" {
		t.Errorf("fuel: %q", got)
	}
	if got := Message(ending.Cancelled, 0); got != "cancelled" {
		t.Errorf("cancelled: %q", got)
	}
}
