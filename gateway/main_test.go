package gateway

import (
	"os"
	"testing"

	"github.com/toolgate/toolgate/gateway/backend"
	"github.com/toolgate/toolgate/gateway/backend/backendtest"
)

// TestMain lets the test binary double as a fake backend (backendtest), so
// the gateway's tests run real backend processes (and as a backend's reaper).
func TestMain(m *testing.M) {
	if backend.IsReaper() { // before IsChild: a reaper's environment is its backend's
		backend.ReaperMain()
	}
	if backendtest.IsChild() {
		backendtest.Main()
		return
	}
	os.Exit(m.Run())
}
