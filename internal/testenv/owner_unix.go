//go:build unix

package testenv

import (
	"os"
	"testing"
)

// NobodyUID is the user a test run as root gives a folder to, standing
// for a gateway that runs as its own user.
const NobodyUID = 65534

// GatewayOwner gives path to NobodyUID when the test runs as root (as
// CI does) and returns the owner that what toolgate writes there must
// keep: NobodyUID, or this user when it is not root (nothing to give).
func GatewayOwner(t testing.TB, path string) int {
	t.Helper()
	if os.Geteuid() != 0 {
		return os.Getuid()
	}
	if err := os.Chown(path, NobodyUID, NobodyUID); err != nil {
		t.Fatal(err)
	}
	return NobodyUID
}
