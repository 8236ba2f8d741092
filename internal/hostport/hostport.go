// Package hostport holds the rules for an address written host:port that
// the commands, the config and the HTTP front share: how an IPv6 address
// is written with its port.
package hostport

import (
	"net/netip"
	"strings"
)

// IPv6Fix is the fix of addr, given as host:port, when it is an IPv6
// address without the brackets that go before a port ("::1:8931", which
// Go reads as "too many colons", or "::1" alone): the address written
// so, "[::1]:8931" or "[::1]:PORT". "" for anything else. The flags and
// settings of an address (--http, --addr, toolgate.http.addr) say it.
func IPv6Fix(addr string) string {
	b := Bracketed(addr)
	if b == "" {
		return ""
	}
	if strings.HasSuffix(b, "]") {
		b += ":PORT"
	}
	return "an IPv6 address goes in brackets before its port: " + b
}

// Bracketed is addr, an IPv6 address without brackets and with or without
// a port after it, written with them: "[::1]:8931" for "::1:8931", "[::1]"
// for "::1". "" when addr is not such an address.
func Bracketed(addr string) string {
	if strings.Count(addr, ":") < 2 || strings.ContainsAny(addr, "[]") {
		return ""
	}
	if i := strings.LastIndex(addr, ":"); i > 0 {
		host, port := addr[:i], addr[i+1:]
		if _, err := netip.ParseAddr(host); err == nil && port != "" && len(port) <= 5 && strings.Trim(port, "0123456789") == "" {
			return "[" + host + "]:" + port
		}
	}
	if _, err := netip.ParseAddr(addr); err == nil {
		return "[" + addr + "]"
	}
	return ""
}
