// Package eventually is the one way tests wait for something that happens
// asynchronously: a condition re-checked until it holds or a deadline passes.
// Product code never imports it.
package eventually

import (
	"testing"
	"time"
)

// True re-checks cond every few milliseconds until it returns true, failing
// the test with msg if it has not within timeout.
func True(t testing.TB, timeout time.Duration, cond func() bool, msg string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: "+msg, append([]any{timeout}, args...)...)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
