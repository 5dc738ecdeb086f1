package isolation

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/rlmkit/rlm/core/ending"
)

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

func TestCheck(t *testing.T) {
	for _, l := range Levels {
		if err := l.Check(); err != nil {
			t.Errorf("%s.Check() = %v", l, err)
		}
	}
	for _, l := range []Level{"", "wasm", "Namespace"} {
		if err := l.Check(); err == nil {
			t.Errorf("%q.Check() passed", l)
		}
	}
}

func TestParseLevels(t *testing.T) {
	got := ParseLevels("none\nprocess\nwasm\n\nnamespace\n")
	if !slices.Equal(got, []Level{None, Process, Namespace}) {
		t.Errorf("ParseLevels = %v", got)
	}
	if got := ParseLevels(""); len(got) != 0 {
		t.Errorf("ParseLevels(\"\") = %v", got)
	}
}

// The supervisor's wire (`rlm __sandbox`) keeps the JSON a plugin built
// before these types moved here writes and reads: native.SandboxSpec's
// names, and native.HelperReport's with program.Exit's untagged fields.
func TestWireJSON(t *testing.T) {
	spec, err := json.Marshal(Spec{Level: Namespace, Argv: []string{"a"}, Env: []string{"X=1"}, Dir: "/d",
		ReadOnlyPaths: []string{"/p"}, MemoryBytes: 1, MaxProcesses: 2, CPUSeconds: 3, DiskBytes: 4, FileSizeBytes: 5, AllowNetwork: true})
	if err != nil {
		t.Fatal(err)
	}
	const wantSpec = `{"level":"namespace","argv":["a"],"env":["X=1"],"dir":"/d","read_only_paths":["/p"],"memory_bytes":1,"max_processes":2,"cpu_seconds":3,"disk_bytes":4,"file_size_bytes":5,"allow_network":true}`
	if string(spec) != wantSpec {
		t.Errorf("Spec JSON = %s\nwant %s", spec, wantSpec)
	}
	rep, err := json.Marshal(Report{Exit: &Exit{Code: 3, Signal: 9, EndedBy: ending.MemoryLimit, PeakMemoryBytes: 7, Isolation: Process}, Error: "e"})
	if err != nil {
		t.Fatal(err)
	}
	const wantReport = `{"exit":{"Code":3,"Signal":9,"EndedBy":"memory_limit","PeakMemoryBytes":7,"Isolation":"process"},"error":"e"}`
	if string(rep) != wantReport {
		t.Errorf("Report JSON = %s\nwant %s", rep, wantReport)
	}
	if pid, _ := json.Marshal(Report{Pid: 42}); string(pid) != `{"pid":42}` {
		t.Errorf("Report{Pid} JSON = %s", pid)
	}
}
