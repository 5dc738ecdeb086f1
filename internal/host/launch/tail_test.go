package launch

import (
	"strings"
	"testing"
)

// A plugin's stderr is kept bounded: its tail, until a Go crash report
// begins, whose head (what panicked, and where) is kept instead of the
// idle goroutines a full traceback ends with.
func TestTailWriterKeepsCrashHead(t *testing.T) {
	w := &tailWriter{max: 64}
	line := func(s string) { w.Write([]byte(s)); w.Write([]byte("\n")) }
	for range 20 {
		line("starting up")
	}
	if got := w.String(); len(got) != 64 || !strings.HasSuffix(got, "starting up\n") {
		t.Fatalf("before a crash: %q; want the last 64 bytes", got)
	}
	line("panic: boom")
	line("main.explode()")
	for range 20 {
		line("goroutine 7 [select]:")
	}
	got := w.String()
	if !strings.HasPrefix(got, "panic: boom\nmain.explode()\n") || !strings.Contains(got, "left out") {
		t.Fatalf("after a crash: %q; want the report's head and a note that the rest is left out", got)
	}
	if strings.Contains(got, "starting up") {
		t.Fatalf("after a crash: %q; the earlier lines should give way to the report", got)
	}
	// A "panic: " in the middle of a line does not start a report.
	w = &tailWriter{max: 64}
	w.Write([]byte("said "))
	w.Write([]byte("panic: no"))
	w.Write([]byte("\n"))
	if w.crash != nil {
		t.Fatal("a mid-line panic: began a crash report")
	}
}
