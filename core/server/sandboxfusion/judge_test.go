package sandboxfusion

import "testing"

// Output is compared as judges do: "lines" forgives trailing whitespace
// and blank lines but not a different line; "tokens" forgives any
// whitespace; "exact" nothing.
func TestSameOutput(t *testing.T) {
	for _, c := range []struct {
		got, want, mode string
		same            bool
	}{
		{"3\n", "3", "", true},
		{"10  \r\n\n\n", "10", "lines", true},
		{"1 2\n", "1  2\n", "lines", false},
		{"1\n2\n", "1 2", "lines", false},
		{"1\n2\n", "1 2", "tokens", true},
		{"1 2 3", "1 2", "tokens", false},
		{"3\n", "3", "exact", false},
		{"3\n", "3\n", "exact", true},
		{"", "\n\n", "lines", true},
	} {
		if got := SameOutput(c.got, c.want, c.mode); got != c.same {
			t.Errorf("SameOutput(%q, %q, %q) = %v", c.got, c.want, c.mode, got)
		}
	}
}
