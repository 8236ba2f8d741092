package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/gateway/keys"
)

// keys update --allow or --deny with a glob that does not parse is a usage
// error (exit status 2), as it is for keys create, and the key is left as
// it was: it exited 1, as for a file that could not be written.
func TestKeysUpdateBadGlobUsage(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	g := &globals{dataDir: t.TempDir()}
	var out, errOut bytes.Buffer
	if err := runKeysCreate(g, &out, &errOut, keysCreateFlags{spec: keys.Spec{Name: "ci"}}, now); err != nil {
		t.Fatal(err)
	}
	for _, flag := range []string{"allow", "deny"} {
		f := keysUpdateFlags{allow: []string{"["}, deny: []string{"["}, set: func(s string) bool { return s == flag }}
		err := runKeysUpdate(g, &out, &errOut, "ci", f, now)
		var ue usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), `key "ci": `+flag+`: "[" is not a valid glob`) {
			t.Errorf("keys update ci --%s '[': %v (%T), want a usage error naming the glob", flag, err, err)
		}
	}
}

// keys update --expires past the last date a key may name says how to make
// the key never expire with keys update (--expires never): it said "leave
// --expires out", keys create's way, which for keys update leaves the
// expiry as it was.
func TestKeysUpdateTooFarSaysNever(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	g := &globals{dataDir: t.TempDir()}
	var out, errOut bytes.Buffer
	if err := runKeysCreate(g, &out, &errOut, keysCreateFlags{spec: keys.Spec{Name: "ci"}}, now); err != nil {
		t.Fatal(err)
	}
	for _, in := range []string{"100000000d", "10000-01-01"} {
		f := keysUpdateFlags{expires: in, set: func(s string) bool { return s == "expires" }}
		err := runKeysUpdate(g, &out, &errOut, "ci", f, now)
		if err == nil || !strings.Contains(err.Error(), "too far off") || !strings.HasSuffix(err.Error(), ": give --expires never for a key that never expires") {
			t.Errorf("keys update ci --expires %s: %v", in, err)
		}
	}
}
