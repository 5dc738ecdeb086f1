package tracecmd

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rlmkit/rlm/cmd/rlm/cli/cmdutil"
)

func testFactory() (*cmdutil.Factory, *bytes.Buffer, *bytes.Buffer) {
	ios, out, errb := cmdutil.TestIO("")
	return &cmdutil.Factory{IO: ios}, out, errb
}

func TestViewFlags(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		out     string
		errText string
	}{
		{args: []string{"run.jsonl"}, out: "run.html"},
		{args: []string{"dir/run.trace.jsonl"}, out: "dir/run.trace.html"},
		{args: []string{"trace"}, out: "trace.html"},
		{args: []string{"run.jsonl", "-o", "x/page.html"}, out: "x/page.html"},
		{args: []string{"run.jsonl", "-o", "./run.jsonl"}, errText: "would overwrite the trace"},
		{args: []string{}, errText: "accepts 1 arg"},
	} {
		f, _, _ := testFactory()
		got, err := cmdutil.ParseFlags(f, NewCmdView, tc.args...)
		if tc.errText != "" {
			if err == nil || !strings.Contains(err.Error(), tc.errText) {
				t.Errorf("%v: error %v, want %q", tc.args, err, tc.errText)
			}
			continue
		}
		if err != nil || got == nil || got.Out != tc.out {
			t.Errorf("%v: %v, options %+v; want out %s", tc.args, err, got, tc.out)
		}
	}
}

func TestViewRun(t *testing.T) {
	f, _, errb := testFactory()
	page := filepath.Join(t.TempDir(), "agg.html")
	err := viewRun(&ViewOptions{IO: f.IO, Trace: "../../../../examples/aggregate/transcript.jsonl", Out: page})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(page)
	if err != nil || !bytes.Contains(b, []byte(`"answer":"bug: 795, docs: 191`)) {
		t.Fatalf("page: %v, %d bytes", err, len(b))
	}
	if !strings.Contains(errb.String(), "wrote "+page+" (46 events)") {
		t.Errorf("stderr %q", errb.String())
	}

	f, _, _ = testFactory()
	err = viewRun(&ViewOptions{IO: f.IO, Trace: filepath.Join(t.TempDir(), "none.jsonl"), Out: page})
	var ee *cmdutil.ExitError
	if !errors.As(err, &ee) || ee.Code != cmdutil.ExitUsage || !strings.Contains(err.Error(), "rlm run TASK --trace") {
		t.Errorf("missing trace: %v", err)
	}

	// A directory as the page is refused before anything is written, as
	// rlm run --trace-html refuses it.
	dir := t.TempDir()
	f, _, errb = testFactory()
	err = viewRun(&ViewOptions{IO: f.IO, Trace: "../../../../examples/aggregate/transcript.jsonl", Out: dir})
	if !errors.As(err, &ee) || ee.Code != cmdutil.ExitUsage || !strings.Contains(err.Error(), "-o "+dir+" is a directory: give a file name such as "+filepath.Join(dir, "transcript.html")) {
		t.Errorf("directory as the page: %v", err)
	}
	if errb.Len() > 0 {
		t.Errorf("stderr %q", errb.String())
	}
}
