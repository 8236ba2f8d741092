// Package keys owns the gateway's API keys: their secrets, the file format
// of their hashed entries, and checking a presented secret.
//
// A secret is "tg_" followed by 32 random bytes (crypto/rand) in unpadded
// base64url. Only its SHA-256 is stored, with the key's name and scope. A
// fast hash is the right one here: a password hash (bcrypt, scrypt,
// Argon2) is slow so that guessing a low-entropy password costs a lot per
// guess, but a 256-bit random secret cannot be guessed at any speed, and a
// slow hash would cost every request. The stored hash is compared in
// constant time against every entry.
//
// Keys live in two places, both files of JSON lines in one format (an
// Entry per line): the data folder's keys.jsonl, written by `toolgate keys
// create` and `keys revoke` (which moves the key's line, marked revoked,
// to keys-revoked.jsonl beside it), and optionally a file named by the config's
// toolgate.keysFile, written by hand or by configuration management (a
// Kubernetes Secret), so that replicas share one set. A Store reads both
// and reads a file again as soon as it changes, so a running gateway
// honours a new or revoked key at the next request. A file that cannot be
// read or parsed fails closed: every key is refused until it is fixed.
package keys

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/internal/mask"
)

// Prefix starts every secret, so that one is recognisable in a config, a
// log or a leak scanner.
const Prefix = "tg_"

// secretBytes is the entropy of a secret.
const secretBytes = 32

// Entry is one key as stored: never the secret, only its SHA-256.
type Entry struct {
	Name string `json:"name"`
	// SHA256 is the hex SHA-256 of the whole secret (prefix included).
	SHA256 string `json:"sha256"`
	// Profile limits the key to the tools of a profile of the config
	// ("" = no profile: every tool, as far as Allow and Deny let).
	Profile string `json:"profile,omitempty"`
	// Allow and Deny are globs over tool IDs (server__tool, catalog.Match
	// syntax): with Allow, a tool must match one of them; a tool matching
	// any Deny is refused.
	Allow []string `json:"allow,omitempty"`
	Deny  []string `json:"deny,omitempty"`
	// Admin keys may use the management actions that change the config.
	Admin   bool      `json:"admin,omitempty"`
	Created time.Time `json:"created,omitzero"`
	// Expires is when the key stops working (zero: never).
	Expires time.Time `json:"expires,omitzero"`
	// Revoked is when the key was revoked (zero: it was not). A revoked
	// entry lets no one in: its hash is kept only to name the key in the
	// audit record and the 401 of a client that still sends it, which read
	// "unknown API key". `keys revoke` writes it to keys-revoked.jsonl,
	// not keys.jsonl, which an older toolgate (that knows no such field)
	// must still read.
	Revoked time.Time `json:"revoked,omitzero"`
}

// Expired reports whether the key has expired at now.
func (e Entry) Expired(now time.Time) bool { return !e.Expires.IsZero() && !now.Before(e.Expires) }

// nameRE is what a key name may be: it is shown in logs and audit records
// and typed on command lines.
var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$`)

// Validate checks an entry as read from a file or made by New; the error
// names the field.
func (e Entry) Validate() error {
	if !nameRE.MatchString(e.Name) {
		return fmt.Errorf("name %q: use 1 to 64 letters, digits, '.', '_', '@' or '-', starting with a letter or digit", e.Name)
	}
	if b, err := hex.DecodeString(e.SHA256); err != nil || len(b) != sha256.Size {
		return fmt.Errorf("key %q: sha256 must be 64 hex digits (the output of `toolgate keys create --print-hash`)", e.Name)
	}
	for field, globs := range map[string][]string{"allow": e.Allow, "deny": e.Deny} {
		for _, g := range globs {
			if msg := catalog.CheckGlob(g); msg != "" {
				return fmt.Errorf("key %q: %s: %s", e.Name, field, msg)
			}
		}
	}
	return nil
}

// Spec is what `keys create` is given.
type Spec struct {
	Name    string
	Profile string
	Allow   []string
	Deny    []string
	Admin   bool
	Expires time.Time // zero: never
}

// New makes a key: its secret, to show once, and its entry, to store.
func New(s Spec, now time.Time) (secret string, e Entry, err error) {
	b := make([]byte, secretBytes)
	if _, err := rand.Read(b); err != nil {
		return "", Entry{}, fmt.Errorf("make a key: %w", err)
	}
	secret = Prefix + base64.RawURLEncoding.EncodeToString(b)
	e = Entry{
		Name:    s.Name,
		SHA256:  Hash(secret),
		Profile: s.Profile,
		Allow:   s.Allow,
		Deny:    s.Deny,
		Admin:   s.Admin,
		Created: now.UTC().Truncate(time.Second),
		Expires: s.Expires.UTC(),
	}
	if !s.Expires.IsZero() && !s.Expires.After(now) {
		return "", Entry{}, fmt.Errorf("expires %s is not in the future", s.Expires.Format(time.RFC3339))
	}
	if err := e.Validate(); err != nil {
		return "", Entry{}, err
	}
	// The audit log masks what looks like a credential in every field, a
	// key's name too: records of a key so named would not name it, and
	// audit tail --key NAME would find none of them.
	if m := mask.Tokens(e.Name); m != e.Name {
		return "", Entry{}, fmt.Errorf("name %q looks like a credential: the log and the audit records would show it as %q, and `audit tail --key %s` would find none of its records: choose another name",
			e.Name, m, e.Name)
	}
	return secret, e, nil
}

// Hash is the stored form of a secret: hex SHA-256.
func Hash(secret string) string {
	h := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(h[:])
}

// Line is e as one line of a keys file (with its newline).
func (e Entry) Line() []byte {
	b, _ := json.Marshal(e)
	return append(b, '\n')
}

// Parse reads a keys file: one Entry per line; blank lines and lines
// starting with # are skipped. A malformed line or a duplicate name is an
// error naming the file and the line; a revoked entry may share its name
// (a key revoked, then created again under its name).
func Parse(b []byte, name string) ([]Entry, error) {
	var out []Entry
	seen := map[string]int{}
	for i, line := range bytes.Split(b, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		var e Entry
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&e); err != nil {
			if strings.HasPrefix(err.Error(), "json: unknown field ") {
				// encoding/json has no typed error for it. Refused all the
				// same: a field this toolgate does not know may narrow the
				// key (a scope, a limit) in the toolgate that wrote it.
				return nil, fmt.Errorf("%s:%d: a key entry with a field this toolgate does not know (%v): written by a newer toolgate? run it again, "+
					"or, to go on with this one, keep a copy of the file and take the field out of the line", name, i+1, err)
			}
			return nil, fmt.Errorf("%s:%d: not a key entry (%v): each line is one JSON object as printed by `toolgate keys create --print-hash`", name, i+1, err)
		}
		if err := e.Validate(); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, i+1, err)
		}
		if !e.Revoked.IsZero() {
			out = append(out, e)
			continue
		}
		if prev, ok := seen[e.Name]; ok {
			return nil, fmt.Errorf("%s:%d: key %q is also on line %d: names must be unique", name, i+1, e.Name, prev)
		}
		seen[e.Name] = i + 1
		out = append(out, e)
	}
	return out, nil
}

// Format is the content of a keys file holding entries.
func Format(entries []Entry) []byte {
	var b bytes.Buffer
	b.WriteString("# toolgate API keys: one JSON object per line (SHA-256 of each secret, never the secret).\n")
	for _, e := range entries {
		b.Write(e.Line())
	}
	return b.Bytes()
}

// find returns the index of the hash that is the secret's (-1 for none),
// comparing with every one in constant time (no early exit).
func find(sums [][sha256.Size]byte, secret string) int {
	sum := sha256.Sum256([]byte(secret))
	found := -1
	for i := range sums {
		if subtle.ConstantTimeCompare(sums[i][:], sum[:]) == 1 {
			found = i
		}
	}
	return found
}
