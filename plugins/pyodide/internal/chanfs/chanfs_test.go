package chanfs

import (
	"testing"
	"time"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
)

func TestChannel(t *testing.T) {
	c := New()
	f, e := c.OpenFile("chan", experimentalsys.O_RDWR, 0)
	if e != 0 {
		t.Fatal(e)
	}
	if _, e := c.OpenFile("chan", experimentalsys.O_RDWR, 0); e != experimentalsys.EACCES {
		t.Fatalf("second open = %v, want EACCES", e)
	}
	if _, e := c.OpenFile("other", experimentalsys.O_RDWR|experimentalsys.O_CREAT, 0o644); e == 0 {
		t.Fatal("created a file")
	}
	// Guest writes: split into lines, partial lines held back.
	f.Write([]byte("one\ntw"))
	f.Write([]byte("o\n"))
	for _, want := range []string{"one", "two"} {
		select {
		case got := <-c.Out():
			if string(got) != want {
				t.Fatalf("got %q, want %q", got, want)
			}
		case <-time.After(time.Second):
			t.Fatal("no message")
		}
	}
	// Guest reads block until the host sends.
	got := make(chan string)
	go func() {
		buf := make([]byte, 3)
		var s string
		for len(s) < 6 {
			n, _ := f.Read(buf)
			s += string(buf[:n])
		}
		got <- s
	}()
	select {
	case s := <-got:
		t.Fatalf("read %q before anything was sent", s)
	case <-time.After(20 * time.Millisecond):
	}
	c.Send([]byte("hello"))
	if s := <-got; s != "hello\n" {
		t.Fatalf("read %q", s)
	}
	c.Close()
	if n, e := f.Read(make([]byte, 10)); n != 0 || e != 0 {
		t.Fatalf("read after close = %d, %v; want EOF", n, e)
	}
	if c.Send([]byte("x")) {
		t.Fatal("send after close succeeded")
	}
}
