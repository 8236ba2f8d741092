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
