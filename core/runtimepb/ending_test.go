package runtimepb

import (
	"strings"
	"testing"

	"github.com/rlmkit/rlm/core/ending"
)

// Every wire value has a Reason named as its enum name in lower case, and
// it survives the round trip: a value added to the proto must be added here.
func TestEndedByRoundTrip(t *testing.T) {
	for n, name := range EndedBy_name {
		e := EndedBy(n)
		if e == EndedBy_ENDED_BY_UNSPECIFIED {
			if EndedByFromProto(e) != ending.Exit || EndedByProto("") != e {
				t.Errorf("unspecified: EndedByFromProto %q, EndedByProto(\"\") %v", EndedByFromProto(e), EndedByProto(""))
			}
			continue
		}
		r := EndedByFromProto(e)
		if string(r) != strings.ToLower(name) || EndedByProto(r) != e {
			t.Errorf("%s: EndedByFromProto %q, back %v", name, r, EndedByProto(r))
		}
	}
}
