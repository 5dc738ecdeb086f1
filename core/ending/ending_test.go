package ending

import (
	"strings"
	"testing"

	pb "github.com/rlmkit/rlm/core/runtimepb"
)

// Every wire value has a Reason named as its enum name in lower case, and
// it survives the round trip: a value added to the proto must be added here.
func TestWireRoundTrip(t *testing.T) {
	for n, name := range pb.EndedBy_name {
		e := pb.EndedBy(n)
		if e == pb.EndedBy_ENDED_BY_UNSPECIFIED {
			if FromProto(e) != Exit || Reason("").Proto() != e {
				t.Errorf("unspecified: FromProto %q, \"\".Proto %v", FromProto(e), Reason("").Proto())
			}
			continue
		}
		r := FromProto(e)
		if string(r) != strings.ToLower(name) || r.Proto() != e {
			t.Errorf("%s: FromProto %q, back %v", name, r, r.Proto())
		}
	}
}
