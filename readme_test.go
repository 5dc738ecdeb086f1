// Package rlm_test checks the repository itself: what the README promises a new user.
package rlm_test

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeTestCommandSetsUp checks that the README's test command does
// the set-up a fresh machine needs: `./make.sh test` installs make and the
// like when missing and runs `make test`, which runs .ci/setup before any
// build or test, so nobody has to know to run it first; CI runs the same.
func TestReadmeTestCommandSetsUp(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make not installed")
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "./make.sh test ") {
		t.Fatal("README no longer shows `./make.sh test`; update this test with its new test command")
	}
	ci, err := os.ReadFile(".ci/run")
	if err != nil || !strings.Contains(string(ci), "./make.sh test") {
		t.Fatalf("CI (.ci/run) must run the README's test command ./make.sh test (%v)", err)
	}
	sh, err := os.ReadFile("make.sh")
	if err != nil || !strings.Contains(string(sh), `exec make "$@"`) {
		t.Fatalf("make.sh must end by running make with its arguments (%v)", err)
	}
	cmd := exec.Command("make", "-n", "test")
	cmd.Dir = "."
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make -n test: %v\n%s", err, out)
	}
	s := string(out)
	setup, build, test := strings.Index(s, ".ci/setup"), strings.Index(s, "go build"), strings.Index(s, "go test")
	if setup < 0 || build < 0 || test < 0 || setup > build || setup > test {
		t.Fatalf("make test must run .ci/setup before building and testing; make -n test printed:\n%s", s)
	}
}

// TestReadmeStatesGoVersion checks the README names the Go version go.mod
// requires, the one thing a fresh machine must bring.
func TestReadmeStatesGoVersion(t *testing.T) {
	mod, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(mod)
	if m == nil {
		t.Fatal("no go directive in go.mod")
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if want := "Go " + string(m[1]) + " or newer"; !strings.Contains(string(readme), want) {
		t.Fatalf("README does not say %q (go.mod's go directive)", want)
	}
}
