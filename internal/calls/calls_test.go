package calls

import (
	"errors"
	"sync"
	"testing"
)

func TestAnswerRoutesByID(t *testing.T) {
	var tb Table[string]
	id1, ch1, err := tb.Start()
	if err != nil {
		t.Fatal(err)
	}
	id2, ch2, _ := tb.Start()
	if id1 == id2 {
		t.Fatalf("ids repeat: %d", id1)
	}
	if !tb.Answer(id2, "two") || !tb.Answer(id1, "one") {
		t.Fatal("a waiting call was not answered")
	}
	if a, b := <-ch1, <-ch2; a != "one" || b != "two" {
		t.Errorf("got %q %q", a, b)
	}
	if tb.Answer(id1, "again") {
		t.Error("a call was answered twice")
	}
	if tb.Answer(99, "x") {
		t.Error("an id never issued was answered")
	}
}

func TestDropLosesLateReply(t *testing.T) {
	var tb Table[int]
	id, _, _ := tb.Start()
	tb.Drop(id)
	if tb.Answer(id, 1) {
		t.Error("a dropped call was answered")
	}
}

func TestFailReleasesWaitersAndKeepsFirstError(t *testing.T) {
	var tb Table[int]
	_, ch, _ := tb.Start()
	first := errors.New("connection reset")
	if got := tb.Fail(first); got != first {
		t.Errorf("Fail returned %v", got)
	}
	if got := tb.Fail(errors.New("later")); got != first {
		t.Errorf("a second Fail replaced the first error: %v", got)
	}
	if _, ok := <-ch; ok {
		t.Error("a waiter got a value after Fail")
	}
	if _, _, err := tb.Start(); err != first {
		t.Errorf("Start after Fail: %v, want %v", err, first)
	}
	if tb.Err() != first {
		t.Errorf("Err = %v", tb.Err())
	}
}

// Many goroutines start, answer and drop at once (go test -race).
func TestConcurrent(t *testing.T) {
	var tb Table[uint64]
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				id, ch, err := tb.Start()
				if err != nil {
					t.Error(err)
					return
				}
				go tb.Answer(id, id)
				if v := <-ch; v != id {
					t.Errorf("call %d got %d", id, v)
				}
			}
		}()
	}
	wg.Wait()
}
