// Package eventually is the one way tests wait for something that happens
// asynchronously: a condition re-checked until it holds or a deadline passes.
// Product code never imports it.
package eventually

import "time"

// T is what True needs of a test: *testing.T and testscript's *TestScript
// both have it.
type T interface {
	Fatalf(format string, args ...any)
}

// True re-checks cond every few milliseconds until it returns true, failing
// the test with msg if it has not within timeout.
func True(t T, timeout time.Duration, cond func() bool, msg string, args ...any) {
	if h, ok := t.(interface{ Helper() }); ok {
		h.Helper()
	}
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: "+msg, append([]any{timeout}, args...)...)
		}
		time.Sleep(10 * time.Millisecond) // tests only: the one shared way tests wait
	}
}
