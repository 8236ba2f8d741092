package backendtest

import (
	"testing"
	"time"
)

// Eventually polls cond until it holds, failing the test after 20 s: a bound
// for a hung test, not a speed assertion.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
