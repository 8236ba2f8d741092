package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/gateway/audit"
	"github.com/toolgate/toolgate/gateway/keys"
	"github.com/toolgate/toolgate/internal/dirs"
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

// TestAuditTailKeyManaged: `audit tail --key carol` prints the records of
// keys create, update and revoke of carol (the key a command acted on, in
// the record's managedKey; in the reason alone of a record written before
// it), besides carol's own calls, and not those of another key whose name
// carol's starts.
func TestAuditTailKeyManaged(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	g := &globals{dataDir: t.TempDir()}
	var out, errOut bytes.Buffer
	for _, name := range []string{"carol", "carol2"} {
		if err := runKeysCreate(g, &out, &errOut, keysCreateFlags{spec: keys.Spec{Name: name}}, now); err != nil {
			t.Fatal(err)
		}
	}
	f := keysUpdateFlags{expires: "30d", set: func(s string) bool { return s == "expires" }}
	if err := runKeysUpdate(g, &out, &errOut, "carol", f, now); err != nil {
		t.Fatal(err)
	}
	if err := runKeysRevoke(g, &out, "carol", ""); err != nil {
		t.Fatal(err)
	}
	// A call made with carol, and a record of keys update written by a
	// toolgate of before managedKey.
	path := dirs.Audit(g.DataDir())
	for _, r := range []audit.Record{{Key: "carol", Action: "search_tools", Decision: audit.Allowed},
		{Transport: "cli", Action: "keys update", Decision: audit.Allowed, Reason: `key "carol": every tool; never expires → profile kg; never expires`}} {
		if err := audit.Append(path, r); err != nil {
			t.Fatal(err)
		}
	}
	out.Reset()
	if err := runAuditTail(context.Background(), g, &out, &errOut, auditTailFlags{n: 0, filter: audit.Filter{Key: "carol"}}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		fields := strings.Fields(line)
		if len(fields) > 4 {
			got = append(got, fields[3]+" "+fields[4])
		}
	}
	want := []string{"keys create", "keys update", "keys revoke", "search_tools allowed", "keys update"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("audit tail --key carol printed\n%s\nwant the records of %q", out.String(), want)
	}
	if strings.Contains(out.String(), "carol2") {
		t.Errorf("audit tail --key carol printed carol2's records:\n%s", out.String())
	}
}
