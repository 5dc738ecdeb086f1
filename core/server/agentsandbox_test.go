package server

import (
	"encoding/json"
	"os/exec"
	"reflect"
	"strings"
	"testing"
)

// splitCommand must split as the agent-sandbox reference runtime does,
// which is Python's shlex.split: each case is checked against the real
// function, errors included.
func TestSplitCommandIsShlexSplit(t *testing.T) {
	cases := []string{
		`ls -la /tmp`, `  echo   a  `, `echo "a  b" 'c  d' e\ f`, `echo "a\"b" "a\\b" "a\$b" "a\nb"`,
		`echo 'a\b' a\\b a\'b`, `echo "" ''`, `echo a"b"'c'd`, "echo\ta\nb\rc", `echo $HOME *.go a;b >c |d`,
		`python3 -c "print('hi')"`, `echo "open`, `echo 'open`, `echo trailing\`, `echo é "ü ö"`, ``, `   `,
	}
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Fatalf("python3 is needed to compare with shlex.split: %v", err)
	}
	in, _ := json.Marshal(cases)
	cmd := exec.Command(py, "-c", `
import json, shlex, sys
out = []
for c in json.load(sys.stdin):
    try:
        out.append({"words": shlex.split(c)})
    except ValueError as e:
        out.append({"error": str(e)})
print(json.dumps(out))`)
	cmd.Stdin = strings.NewReader(string(in))
	raw, err := cmd.Output()
	if err != nil {
		t.Fatalf("python3: %v", err)
	}
	var want []struct {
		Words []string `json:"words"`
		Error string   `json:"error"`
	}
	if err := json.Unmarshal(raw, &want); err != nil {
		t.Fatal(err)
	}
	for i, c := range cases {
		got, err := splitCommand(c)
		switch {
		case want[i].Error != "" && err == nil:
			t.Errorf("splitCommand(%q) = %q; shlex.split refuses it: %s", c, got, want[i].Error)
		case want[i].Error == "" && err != nil:
			t.Errorf("splitCommand(%q): %v; shlex.split gives %q", c, err, want[i].Words)
		case err == nil && !reflect.DeepEqual(got, want[i].Words) && (len(got) != 0 || len(want[i].Words) != 0):
			t.Errorf("splitCommand(%q) = %q, shlex.split gives %q", c, got, want[i].Words)
		}
	}
}
