package main

import (
	"os"
	"runtime/debug"
	"testing"
)

// serve collects at serveGCPercent unless GOGC says otherwise.
func TestServeGC(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	t.Setenv("GOGC", "") // restored after the test
	os.Unsetenv("GOGC")
	setServeGC()
	if got := debug.SetGCPercent(100); got != serveGCPercent {
		t.Fatalf("GOGC unset: percent %d, want %d", got, serveGCPercent)
	}
	t.Setenv("GOGC", "100")
	setServeGC()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Fatalf("GOGC=100: percent %d, want it left at 100", got)
	}
}
