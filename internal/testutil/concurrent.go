package testutil

import (
	"sync"
	"testing"
)

// Concurrently calls f(0) to f(n-1), each on its own goroutine, all at
// once, waits for them all, then reports each non-empty string f returned
// as a test error. f returns what went wrong ("" for nothing) rather than
// failing the test itself: FailNow must be called from the test's own
// goroutine.
func Concurrently(t testing.TB, n int, f func(i int) string) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan string, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			if e := f(i); e != "" {
				errs <- e
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}
