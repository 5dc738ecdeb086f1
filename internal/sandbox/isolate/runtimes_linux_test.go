package isolate

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rlmkit/rlm/core/ending"
	"github.com/rlmkit/rlm/core/isolation"
)

// The other runtimes the project starts work inside the sandbox with the
// default exposure (/usr, generated /etc) and a memory cgroup.
func TestOtherRuntimesRun(t *testing.T) {
	requireLevel(t, LevelNamespace)
	cases := []struct {
		name, file, code string
		argv             func(bin string) []string
	}{
		{"node", "main.js", "const fs = require('fs'); fs.writeFileSync('out.txt', 'node'); console.log('NODE-OK', process.version)", func(b string) []string { return []string{b, "main.js"} }},
		{"bash", "main.sh", "echo BASH-OK > out.txt; cat out.txt; echo BASH-OK", func(b string) []string { return []string{b, "main.sh"} }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			bin, err := exec.LookPath(tc.name)
			if err != nil {
				t.Skipf("%s not installed", tc.name)
			}
			if real, err := filepath.EvalSymlinks(bin); err == nil {
				bin = real
			}
			if !strings.HasPrefix(bin, "/usr/") {
				t.Skipf("%s lives outside /usr (%s); a plugin would pass its prefix in ReadOnlyPaths", tc.name, bin)
			}
			dir := t.TempDir()
			os.WriteFile(filepath.Join(dir, tc.file), []byte(tc.code), 0o644)
			spec := Spec{Spec: isolation.Spec{Level: LevelNamespace, Argv: tc.argv(bin), Dir: dir, MemoryBytes: 512 << 20, MaxProcesses: 64}}
			if os.Geteuid() == 0 {
				spec.DiskBytes = 16 << 20 // mounting the capped tmpfs needs root
			}
			r := run(t, spec)
			want := strings.ToUpper(tc.name) + "-OK"
			if r.out.Ending != ending.Exit || r.out.ExitCode != 0 || !strings.Contains(r.stdout, want) {
				t.Fatalf("want %s:\n%s", want, r)
			}
			if _, err := os.Stat(filepath.Join(dir, "out.txt")); err != nil {
				t.Fatalf("output file did not come back: %v", err)
			}
		})
	}
}
