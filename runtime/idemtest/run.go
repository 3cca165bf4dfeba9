package idemtest

import (
	"fmt"
	"runtime/debug"
	"sync"
	"testing"
)

// Twins runs fn(0) and fn(1) released at the same instant (behind a barrier)
// and returns both results.
func Twins[T any](t testing.TB, fn func(i int) T) [2]T {
	t.Helper()
	r := Storm(t, 2, fn)
	return [2]T{r[0], r[1]}
}

// Storm runs fn(0..n-1) in n goroutines released at once behind a barrier,
// waits for all of them and returns their results in index order.
//
// Every goroutine is started and parked on the barrier before any is
// released, so the calls overlap as much as the scheduler allows. fn runs off
// the test goroutine: it must report failures with t.Error, not t.Fatal. A
// panic in fn, or a t.Fatal/runtime.Goexit inside it, fails the test after all
// goroutines have finished.
func Storm[T any](t testing.TB, n int, fn func(i int) T) []T {
	t.Helper()
	if n < 1 {
		t.Fatalf("idemtest: Storm needs at least one goroutine, got n=%d", n)
	}
	results := make([]T, n)
	failures := make([]string, n)
	var ready, done sync.WaitGroup
	release := make(chan struct{})
	ready.Add(n)
	done.Add(n)
	for i := range n {
		go func() {
			defer done.Done()
			returned := false
			defer func() {
				if p := recover(); p != nil {
					failures[i] = fmt.Sprintf("panic: %v\n%s", p, debug.Stack())
				} else if !returned {
					failures[i] = "exited without returning (t.Fatal or runtime.Goexit called off the test goroutine)"
				}
			}()
			ready.Done()
			<-release
			results[i] = fn(i)
			returned = true
		}()
	}
	ready.Wait()
	close(release)
	done.Wait()
	for i, f := range failures {
		if f != "" {
			t.Fatalf("idemtest: Storm goroutine %d of %d: %s", i, n, f)
		}
	}
	return results
}
