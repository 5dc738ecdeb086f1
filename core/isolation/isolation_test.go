package isolation

import "testing"

func TestParse(t *testing.T) {
	for in, want := range map[string]Level{"": Process, "none": None, "process": Process, "namespace": Namespace} {
		if got, err := Parse(in); err != nil || got != want {
			t.Errorf("Parse(%q) = %v, %v", in, got, err)
		}
	}
	if _, err := Parse("docker"); err == nil {
		t.Error("Parse(docker) should fail")
	}
}
