package native

import (
	"runtime/debug"
	"testing"
)

// A third-party plugin reports its own module's version or revision,
// never rlm's.
func TestModuleVersion(t *testing.T) {
	for _, c := range []struct {
		bi   debug.BuildInfo
		want string
	}{
		{debug.BuildInfo{Main: debug.Module{Path: "example.com/p", Version: "v1.2.0"}}, "v1.2.0"},
		{debug.BuildInfo{Main: debug.Module{Path: "example.com/p", Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.modified", Value: "true"}}}, "0123456789ab-dirty"},
		{debug.BuildInfo{Main: debug.Module{Path: "example.com/p", Version: "(devel)"}}, "devel"},
	} {
		if got := moduleVersion(&c.bi); got != c.want {
			t.Errorf("%+v: %q, want %q", c.bi.Main, got, c.want)
		}
	}
}
