package engine

import (
	"testing"

	"github.com/rlmkit/rlm/core"
)

// Two contexts of the same size and type differ by their hash; a recording
// written before contexts were hashed compares by description only, so
// replaying it does not warn about every context.
func TestSameContextComparesTheHash(t *testing.T) {
	a := describe(&core.Context{Data: []byte("some text")})
	b := describe(&core.Context{Data: []byte("more text")})
	if a.SHA256 == "" || a.Chars != b.Chars || a.Type != b.Type {
		t.Fatalf("descriptions %+v and %+v", a, b)
	}
	if !sameContext(a, a) {
		t.Error("a context differs from itself")
	}
	if sameContext(a, b) {
		t.Error("another context of the same size and type passes for the recorded one")
	}
	old := a
	old.SHA256 = ""
	if !sameContext(old, b) {
		t.Error("a recording without a hash warns about a context of the same description")
	}
	if none := describe(nil); none.SHA256 != "" || !sameContext(none, describe(nil)) {
		t.Errorf("no context: %+v", none)
	}
}
