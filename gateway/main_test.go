package gateway

import (
	"os"
	"testing"

	"github.com/toolgate/toolgate/gateway/backend/backendtest"
)

// TestMain lets the test binary double as a fake backend (backendtest), so
// the gateway's tests run real backend processes.
func TestMain(m *testing.M) {
	if backendtest.IsChild() {
		backendtest.Main()
		return
	}
	os.Exit(m.Run())
}
