package keys

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testenv"
)

var now = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func newKey(t *testing.T, s Spec) (string, Entry) {
	t.Helper()
	secret, e, err := New(s, now)
	if err != nil {
		t.Fatal(err)
	}
	return secret, e
}

func TestNewKey(t *testing.T) {
	secret, e := newKey(t, Spec{Name: "ci", Profile: "kg", Allow: []string{"memory__*"}, Deny: []string{"memory__delete_*"}})
	if !strings.HasPrefix(secret, Prefix) || len(secret) != len(Prefix)+43 {
		t.Errorf("secret %q: want tg_ and 43 base64url characters", secret)
	}
	if e.SHA256 != Hash(secret) || strings.Contains(string(e.Line()), secret) {
		t.Errorf("entry %s holds the secret or the wrong hash", e.Line())
	}
	other, _ := newKey(t, Spec{Name: "ci"})
	if other == secret {
		t.Error("two keys with one secret")
	}
	for _, bad := range []Spec{
		{Name: ""}, {Name: "-x"}, {Name: "has space"},
		{Name: "ok", Allow: []string{"["}},
		{Name: "ok", Deny: []string{"memory"}},
		{Name: "ok", Expires: now.Add(-time.Hour)},
	} {
		if _, _, err := New(bad, now); err == nil {
			t.Errorf("New(%+v) passed", bad)
		}
	}
}

func TestParse(t *testing.T) {
	_, a := newKey(t, Spec{Name: "a"})
	_, b := newKey(t, Spec{Name: "b", Admin: true, Expires: now.Add(time.Hour)})
	content := Format([]Entry{a, b})
	got, err := Parse(append([]byte("\n# comment\n"), content...), "k")
	if err != nil || len(got) != 2 || got[1].Name != "b" || !got[1].Admin || !got[1].Expires.Equal(now.Add(time.Hour)) {
		t.Fatalf("Parse = %+v, %v", got, err)
	}
	for name, in := range map[string]string{
		"not json":  "{",
		"unknown":   `{"name":"a","sha256":"` + a.SHA256 + `","color":"red"}`,
		"bad hash":  `{"name":"a","sha256":"abc"}`,
		"duplicate": string(a.Line()) + string(a.Line()),
		"bad glob":  `{"name":"a","sha256":"` + a.SHA256 + `","allow":["["]}`,
	} {
		if _, err := Parse([]byte(in), "keys.jsonl"); err == nil || !strings.Contains(err.Error(), "keys.jsonl:") {
			t.Errorf("%s: %v, want an error naming the file and line", name, err)
		}
	}
}

// The store reads both files; revocation and expiry count at the next
// Verify; an unreadable file refuses every key.
func TestStore(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "keys.jsonl")
	file := filepath.Join(dir, "shared", "keys.jsonl")
	clock := now
	var logs testenv.LogBuffer
	s := Open(data, &Options{Logger: logs.Logger(), Now: func() time.Time { return clock }})
	if any, err := s.Any(); err != nil || any {
		t.Fatalf("empty store: %v %v", any, err)
	}
	if _, err := s.Verify("tg_x"); !errors.Is(err, ErrNoKeys) {
		t.Errorf("an empty store: %v", err)
	}

	adminSecret, admin := newKey(t, Spec{Name: "admin", Admin: true})
	if err := Add(data, admin); err != nil {
		t.Fatal(err)
	}
	// The fix said is a rotation that cuts no client off, not "revoke it
	// first".
	if err := Add(data, admin); err == nil || !strings.Contains(err.Error(), "exists already") || !strings.Contains(err.Error(), "to rotate its secret, create the new key under another name") {
		t.Errorf("adding a name twice: %v", err)
	}
	shortSecret, short := newKey(t, Spec{Name: "short", Expires: now.Add(time.Hour)})
	if err := Add(data, short); err != nil {
		t.Fatal(err)
	}
	if e, err := s.Verify(adminSecret); err != nil || e.Name != "admin" || !e.Admin {
		t.Fatalf("Verify(admin) = %+v, %v", e, err)
	}
	if _, err := s.Verify(""); !errors.Is(err, ErrMissing) {
		t.Errorf("no key given: %v", err)
	}
	if _, err := s.Verify(adminSecret + "x"); !errors.Is(err, ErrUnknown) {
		t.Errorf("wrong key: %v", err)
	}
	if _, err := s.Verify(shortSecret); err != nil {
		t.Errorf("short key before expiry: %v", err)
	}
	clock = now.Add(time.Hour)
	if e, err := s.Verify(shortSecret); !errors.Is(err, ErrExpired) || e.Name != "short" {
		t.Errorf("short key after expiry: %+v %v", e, err)
	}
	if err := Revoke(data, "admin", clock); err != nil {
		t.Fatal(err)
	}
	if e, err := s.Verify(adminSecret); !errors.Is(err, ErrRevoked) || e.Name != "admin" {
		t.Errorf("revoked key: %+v, %v", e, err)
	}
	if err := Revoke(data, "admin", clock); !errors.Is(err, ErrNotFound) {
		t.Errorf("revoking twice: %v", err)
	}
	// The last key revoked: keys are still needed (no one gets in), not
	// dropped as if there had never been any; a store opened afterwards has
	// none.
	if err := Revoke(data, "short", clock); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Verify(""); !errors.Is(err, ErrAllRevoked) {
		t.Errorf("every key revoked: %v, want ErrAllRevoked", err)
	}
	if any, err := s.Any(); err != nil || !any {
		t.Errorf("Any after every key was revoked = %v, %v; want true", any, err)
	}
	if _, err := Open(data, nil).Verify(""); !errors.Is(err, ErrNoKeys) {
		t.Errorf("a store opened after every key was revoked: %v, want ErrNoKeys", err)
	}
	if err := Add(data, short); err != nil {
		t.Fatal(err)
	}

	// A keysFile: named but missing fails closed, then works once there.
	s = Open(data, &Options{File: file, Logger: logs.Logger(), Now: func() time.Time { return clock }})
	if _, err := s.Verify(shortSecret); !errors.Is(err, ErrUnavailable) {
		t.Errorf("keysFile missing: %v", err)
	}
	// Not read yet: its first user says the error (serve stops on it);
	// a log line that requests are refused "until it is fixed" came just
	// before serve exited.
	if strings.Contains(logs.String(), "cannot be read") {
		t.Errorf("a log line for a store never read, whose caller says the error:\n%s", logs.String())
	}
	sharedSecret, shared := newKey(t, Spec{Name: "replica"})
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, shared.Line(), 0o600); err != nil {
		t.Fatal(err)
	}
	if e, err := s.Verify(sharedSecret); err != nil || e.Name != "replica" {
		t.Fatalf("keysFile key: %+v %v", e, err)
	}
	l, err := s.List()
	if err != nil || len(l) != 2 || l[0].Source != SourceFile || l[1].Source != SourceData {
		t.Errorf("List = %+v, %v", l, err)
	}
	// The same name in both: refused as a whole (which one is meant?).
	if err := Add(data, Entry{Name: "replica", SHA256: shared.SHA256}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Verify(sharedSecret); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "both") {
		t.Errorf("duplicate across files: %v", err)
	}
	if err := Revoke(data, "replica", clock); err != nil {
		t.Fatal(err)
	}
	// A damaged file: every key refused, the good ones included.
	if err := os.WriteFile(data, []byte("garbage\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Verify(sharedSecret); !errors.Is(err, ErrUnavailable) {
		t.Errorf("damaged data file: %v", err)
	}
	if any, err := s.Any(); err == nil || any {
		t.Errorf("Any on a damaged store = %v, %v; want an error", any, err)
	}
	// Read before: each failure is logged, once (the duplicate, the
	// damaged file).
	if n := strings.Count(logs.String(), "cannot be read"); n != 2 || !strings.Contains(logs.String(), "not a key entry") {
		t.Errorf("%d log lines for a store that broke after it was read, want 2, the damaged file's among them:\n%s", n, logs.String())
	}
}

// TestRevokedKeys: a revoked key's entry is kept, marked revoked, in
// keys-revoked.jsonl (keys.jsonl keeps the format an older toolgate
// reads), so that its secret, still sent, is named and said to be revoked
// (it was "unknown API key"); it lets no one in, does not count as a key
// (Any, List), its name may be taken again, and a damaged file of them
// shuts no one out.
func TestRevokedKeys(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "keys.jsonl")
	file := filepath.Join(dir, "shared.jsonl")
	var logs testenv.LogBuffer
	s := Open(data, &Options{File: file, Logger: logs.Logger(), Now: func() time.Time { return now }})
	bobSecret, bob := newKey(t, Spec{Name: "bob", Profile: "kg"})
	aliceSecret, alice := newKey(t, Spec{Name: "alice"})
	for _, e := range []Entry{bob, alice} {
		if err := Add(data, e); err != nil {
			t.Fatal(err)
		}
	}
	// The shared file marks one of its keys revoked by hand.
	carolSecret, carol := newKey(t, Spec{Name: "carol"})
	carol.Revoked = now.Add(-time.Hour)
	if err := os.WriteFile(file, carol.Line(), 0o600); err != nil {
		t.Fatal(err)
	}
	at := now.Add(90 * time.Second)
	if err := Revoke(data, "bob", at); err != nil {
		t.Fatal(err)
	}
	e, err := s.Verify(bobSecret)
	if want := "the API key was revoked at 2026-01-02T03:05:35Z"; !errors.Is(err, ErrRevoked) || e.Name != "bob" || err.Error() != want {
		t.Errorf("Verify(bob's secret, revoked) = %+v, %v; want bob and %q", e, err, want)
	}
	if e, err := s.Verify(carolSecret); !errors.Is(err, ErrRevoked) || e.Name != "carol" {
		t.Errorf("Verify(carol's secret, revoked in the shared file) = %+v, %v", e, err)
	}
	if _, err := s.Verify(aliceSecret); err != nil {
		t.Errorf("alice: %v", err)
	}
	l, err := s.List()
	if err != nil || len(l) != 1 || l[0].Name != "alice" {
		t.Errorf("List = %+v, %v; want alice alone", l, err)
	}
	r, err := s.Revoked()
	if err != nil || len(r) != 2 || r[0].Name != "carol" || r[1].Name != "bob" || !r[1].Revoked.Equal(at) || r[1].Path != RevokedFile(data) || r[1].Profile != "kg" {
		t.Errorf("Revoked = %+v, %v; want carol then bob (revoked at %s, in %s)", r, err, at, RevokedFile(data))
	}
	// keys.jsonl is as an older toolgate reads it: every field known to
	// it (it refuses one it does not know), bob's line gone.
	b, err := os.ReadFile(data)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "revoked") || strings.Contains(string(b), bob.SHA256) {
		t.Errorf("keys.jsonl after revoking bob:\n%s\nwant no revoked field, no bob", b)
	}
	// The name is free again; the old secret stays revoked, named.
	newSecret, newBob := newKey(t, Spec{Name: "bob"})
	if err := Add(data, newBob); err != nil {
		t.Fatal(err)
	}
	if e, err := s.Verify(newSecret); err != nil || e.Name != "bob" {
		t.Errorf("the new bob: %+v, %v", e, err)
	}
	if _, err := s.Verify(bobSecret); !errors.Is(err, ErrRevoked) {
		t.Errorf("the old bob's secret once the name is taken again: %v", err)
	}
	if err := Revoke(data, "bob", at.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if r, err := s.Revoked(); err != nil || len(r) != 3 {
		t.Errorf("bob revoked twice: %d revoked entries, %v; want 3", len(r), err)
	}
	// Every key revoked: a revoked secret is named still; none sent is
	// refused as before. Revoked entries are no keys: a store opened now
	// holds none.
	if err := Revoke(data, "alice", at); err != nil {
		t.Fatal(err)
	}
	if e, err := s.Verify(aliceSecret); !errors.Is(err, ErrRevoked) || e.Name != "alice" {
		t.Errorf("alice, the last key, revoked: %+v, %v", e, err)
	}
	if _, err := s.Verify(""); !errors.Is(err, ErrAllRevoked) {
		t.Errorf("no secret once every key was revoked: %v, want ErrAllRevoked", err)
	}
	if _, err := s.Verify("tg_other"); !errors.Is(err, ErrAllRevoked) {
		t.Errorf("an unknown secret once every key was revoked: %v, want ErrAllRevoked", err)
	}
	if any, err := Open(data, &Options{File: file}).Any(); err != nil || any {
		t.Errorf("Any of a store of revoked keys only = %v, %v; want false", any, err)
	}
	// A damaged revoked keys' file shuts no one out (it lets no one in
	// either): a revoked key is refused unnamed, and the log says why;
	// keys list fails on it.
	daveSecret, dave := newKey(t, Spec{Name: "dave"})
	if err := Add(data, dave); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(RevokedFile(data), []byte("garbage\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Verify(daveSecret); err != nil {
		t.Errorf("a key in force beside a damaged keys-revoked.jsonl: %v", err)
	}
	if e, err := s.Verify(aliceSecret); !errors.Is(err, ErrUnknown) || e.Name != "" {
		t.Errorf("a revoked key beside a damaged keys-revoked.jsonl: %+v, %v; want ErrUnknown", e, err)
	}
	if !strings.Contains(logs.String(), "the revoked API keys cannot be read") || !strings.Contains(logs.String(), "keys-revoked.jsonl:1") {
		t.Errorf("no log line says the revoked keys cannot be read:\n%s", logs.String())
	}
	if _, err := s.Revoked(); err == nil || !strings.Contains(err.Error(), "keys-revoked.jsonl:1") {
		t.Errorf("Revoked with a damaged keys-revoked.jsonl: %v", err)
	}
}

// A revoked key's entry is forgotten at a `keys revoke` once the key
// expired RevokedKeep ago (it used to stay for good, a line for every key
// ever revoked); one without an expiry, or expired more recently, is kept
// and named when sent.
func TestRevokeForgetsLongExpired(t *testing.T) {
	data := filepath.Join(t.TempDir(), "keys.jsonl")
	day := 24 * time.Hour
	secrets := map[string]string{}
	for _, s := range []Spec{
		{Name: "old", Expires: now.Add(day)},
		{Name: "never"},
		{Name: "recent", Expires: now.Add(20 * day)},
		{Name: "last"},
		{Name: "live"}, // in force: a store with none answers ErrNoKeys
	} {
		secret, e := newKey(t, s)
		if err := Add(data, e); err != nil {
			t.Fatal(err)
		}
		secrets[s.Name] = secret
	}
	for _, name := range []string{"old", "never", "recent"} {
		if err := Revoke(data, name, now); err != nil {
			t.Fatal(err)
		}
	}
	revokedNames := func() []string {
		t.Helper()
		b, err := os.ReadFile(RevokedFile(data))
		if err != nil {
			t.Fatal(err)
		}
		es, err := Parse(b, RevokedFile(data))
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range es {
			names = append(names, e.Name)
		}
		return names
	}
	// A day short of old's expiry and RevokedKeep: all kept.
	secret, e := newKey(t, Spec{Name: "early"})
	if err := Add(data, e); err != nil {
		t.Fatal(err)
	}
	if err := Revoke(data, "early", now.Add(day+RevokedKeep-day)); err != nil {
		t.Fatal(err)
	}
	secrets["early"] = secret
	if got := strings.Join(revokedNames(), " "); got != "old never recent early" {
		t.Errorf("revoked entries before old's expiry and RevokedKeep: %s", got)
	}
	at := now.Add(day + RevokedKeep)
	if err := Revoke(data, "last", at); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(revokedNames(), " "); got != "never recent early last" {
		t.Errorf("revoked entries once old expired RevokedKeep ago: %s, want old forgotten", got)
	}
	s := Open(data, &Options{Now: func() time.Time { return at }})
	if _, err := s.Verify(secrets["old"]); !errors.Is(err, ErrUnknown) {
		t.Errorf("old's secret once forgotten: %v, want it refused unnamed", err)
	}
	for _, name := range []string{"never", "recent", "last"} {
		if e, err := s.Verify(secrets[name]); !errors.Is(err, ErrRevoked) || e.Name != name {
			t.Errorf("%s's secret: %+v, %v; want it named revoked", name, e, err)
		}
	}
}

// Keys created at once by several commands are all kept.
func TestAddConcurrently(t *testing.T) {
	data := filepath.Join(t.TempDir(), "keys.jsonl")
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			_, e, err := New(Spec{Name: "k" + string(rune('a'+i))}, now)
			if err == nil {
				err = Add(data, e)
			}
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	l, err := Open(data, nil).List()
	if err != nil || len(l) != 16 {
		t.Fatalf("%d keys, %v", len(l), err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"name":"a","sha256":"` + strings.Repeat("ab", 32) + `","allow":["x__*"]}`))
	f.Add([]byte("# c\n\n{}"))
	f.Fuzz(func(t *testing.T, b []byte) {
		es, err := Parse(b, "f")
		if err != nil {
			return
		}
		for _, e := range es {
			if e.Validate() != nil {
				t.Fatalf("Parse accepted an invalid entry %+v", e)
			}
		}
	})
}

// A field this toolgate does not know (a line a newer toolgate wrote, met
// at a rollback) is refused as before, the file left as it is, and the
// error says that a newer toolgate may have written it and what to do.
func TestParseUnknownFieldNamesNewerToolgate(t *testing.T) {
	line := `{"name":"ops","note":"v2","sha256":"` + Hash("tg_x") + `","created":"2026-12-06T14:50:42Z"}`
	_, err := Parse([]byte(line+"\n"), "/d/keys.jsonl")
	if err == nil {
		t.Fatal("a line with an unknown field parsed")
	}
	for _, want := range []string{`/d/keys.jsonl:1:`, `unknown field "note"`, "written by a newer toolgate", "run it again"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
	if _, err := Parse([]byte("{nope\n"), "/d/keys.jsonl"); err == nil || strings.Contains(err.Error(), "newer") {
		t.Errorf("a malformed line: %v, want an error that blames no newer toolgate", err)
	}
}

// TestNewNameLikeACredential: every text field of an audit record is
// masked (mask.Tokens), a key's name too: one made with a name that looks
// like a credential (team-sk-deploy-prod-eu-west) was written in its
// records as team-sk-***, and `audit tail --key team-sk-deploy-prod-eu-west`
// found none of its calls nor its keys create/update/revoke. Such a name is
// refused at its creation, with why and the fix; other names are made.
func TestNewNameLikeACredential(t *testing.T) {
	for _, name := range []string{"team-sk-deploy-prod-eu-west", "ci_ghp_abcdefghijklmnopqrstuv"} {
		_, _, err := New(Spec{Name: name}, now)
		if err == nil || !strings.Contains(err.Error(), "looks like a credential") || !strings.Contains(err.Error(), "choose another name") {
			t.Errorf("New(%s): %v, want it refused as a credential's shape", name, err)
		}
	}
	for _, name := range []string{"ci", "ops@example.com", "ask-the-oracle-bot-prod-eu", "tg_ci"} {
		if _, _, err := New(Spec{Name: name}, now); err != nil {
			t.Errorf("New(%s): %v", name, err)
		}
	}
}
