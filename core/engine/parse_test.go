package engine

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseReply(t *testing.T) {
	cases := []struct {
		name  string
		in    string
		code  []string
		final *Final
	}{
		{"repl and python blocks", "Let me look.\n```repl\nprint(len(context))\n```\nand\n```python\nx = 1\nprint(x)\n```\n",
			[]string{"print(len(context))", "x = 1\nprint(x)"}, nil},
		{"other languages are not run", "```bash\nls\n```\n```json\n{}\n```", nil, nil},
		{"py and indented fences", "  ```py\n  y = 2\n  ```", []string{"  y = 2"}, nil},
		{"empty block skipped", "```repl\n```\n```repl\nz = 3\n```", []string{"z = 3"}, nil},
		{"backticks inside code do not close", "```repl\ns = \"```\"\nprint(s)\n```", []string{"s = \"```\"\nprint(s)"}, nil},
		{"unclosed block still runs", "```repl\nprint(1)\n", []string{"print(1)"}, nil},
		{"final", "Done.\nFINAL(42)", nil, &Final{Value: "42"}},
		{"final quoted", "FINAL(\"the answer\")", nil, &Final{Value: "the answer"}},
		{"final with parentheses", "FINAL(f(x) = (a + b))\nThat's all (really).", nil, &Final{Value: "f(x) = (a + b)"}},
		{"final multi-line", "FINAL(line one\nline two)", nil, &Final{Value: "line one\nline two"}},
		{"final var", "```repl\nans = 'x'\n```\nFINAL_VAR(ans)", []string{"ans = 'x'"}, &Final{Var: true, Value: "ans"}},
		{"final var quoted", "FINAL_VAR('result_2')", nil, &Final{Var: true, Value: "result_2"}},
		{"final var bad name", "FINAL_VAR(a b)", nil, nil},
		{"final in bold", "**FINAL(7)**", nil, &Final{Value: "7"}},
		{"mention mid-sentence is not final", "I will answer with FINAL(x) later.", nil, nil},
		{"final inside code is not final", "```repl\nprint('FINAL(1)')\n```", []string{"print('FINAL(1)')"}, nil},
		{"final inside other block is not final", "```text\nFINAL(1)\n```", nil, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := ParseReply(c.in)
			if !reflect.DeepEqual(r.Code, c.code) {
				t.Errorf("code = %q, want %q", r.Code, c.code)
			}
			if !reflect.DeepEqual(r.Final, c.final) {
				t.Errorf("final = %+v, want %+v", r.Final, c.final)
			}
		})
	}
}

func TestTruncate(t *testing.T) {
	if got := Truncate("short", 10); got != "short" {
		t.Fatalf("got %q", got)
	}
	s := strings.Repeat("a", 50) + strings.Repeat("b", 50)
	got := Truncate(s, 20)
	if !strings.HasPrefix(got, strings.Repeat("a", 10)+"\n") || !strings.HasSuffix(got, "\n"+strings.Repeat("b", 10)) {
		t.Fatalf("head/tail wrong: %q", got)
	}
	if !strings.Contains(got, "[80 characters omitted]") {
		t.Fatalf("no notice: %q", got)
	}
	// Runes are not split.
	u := strings.Repeat("é", 30)
	got = Truncate(u, 10)
	if !strings.HasPrefix(got, "ééééé\n") || !strings.HasSuffix(got, "\nééééé") || !strings.Contains(got, "[20 characters omitted]") {
		t.Fatalf("runes: %q", got)
	}
	// Exactly at the limit in runes but longer in bytes: kept whole.
	if got := Truncate(strings.Repeat("é", 10), 10); got != strings.Repeat("é", 10) {
		t.Fatalf("got %q", got)
	}
	if got := Truncate(s, 0); got != s {
		t.Fatal("0 must mean no limit")
	}
}
