package hostport

import (
	"strings"
	"testing"
)

// TestIPv6Fix: an IPv6 address written without brackets before its port
// ("::1:8931", Go's "too many colons") or without a port ("::1") is told
// the address as it must be written.
func TestIPv6Fix(t *testing.T) {
	for _, tc := range []struct{ addr, want string }{
		{"::1:8931", "an IPv6 address goes in brackets before its port: [::1]:8931"},
		{"::1", "an IPv6 address goes in brackets before its port: [::1]:PORT"},
		{"fe80::1%eth0:8931", "[fe80::1%eth0]:8931"},
		{"fd00::2", "[fd00::2]:PORT"},
		{"[::1]:8931", ""}, {"127.0.0.1:8931", ""}, {"localhost", ""}, {"8931", ""},
	} {
		if got := IPv6Fix(tc.addr); !strings.Contains(got, tc.want) || (tc.want == "") != (got == "") {
			t.Errorf("IPv6Fix(%q) = %q, want %q", tc.addr, got, tc.want)
		}
	}
}
