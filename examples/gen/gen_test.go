package gen

import (
	"bytes"
	"crypto/sha256"
	"strings"
	"testing"
)

func TestHaystackIsDeterministicWithOneNeedle(t *testing.T) {
	var a, b bytes.Buffer
	if err := WriteHaystack(&a, 1<<20); err != nil {
		t.Fatal(err)
	}
	WriteHaystack(&b, 1<<20)
	if sha256.Sum256(a.Bytes()) != sha256.Sum256(b.Bytes()) {
		t.Fatal("two runs differ")
	}
	if n := strings.Count(a.String(), NeedleAnswer); n != 1 {
		t.Fatalf("needle appears %d times", n)
	}
	if i := strings.Index(a.String(), Needle); i < a.Len()/2 || i > a.Len()*3/4 {
		t.Fatalf("needle at %d of %d", i, a.Len())
	}
	if a.Len() < 1<<20 || a.Len() > 1<<20+200 {
		t.Fatalf("size %d", a.Len())
	}
}

func TestItemsUseEveryLabel(t *testing.T) {
	var buf bytes.Buffer
	WriteItems(&buf, 500)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 500 {
		t.Fatalf("%d lines", len(lines))
	}
	for _, l := range Labels {
		if !strings.Contains(buf.String(), "label: "+l+" ") {
			t.Errorf("label %s never drawn", l)
		}
	}
}
