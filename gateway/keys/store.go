package keys

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolgate/toolgate/internal/datafile"
	"github.com/toolgate/toolgate/internal/storage"
)

// Errors of Store.Verify. Each means 401 to an HTTP client, except
// ErrUnavailable (the store cannot be read: no one gets in) and ErrNoKeys
// (no key exists, nor did one since the store was opened: a gateway on a
// loopback address lets requests in).
var (
	ErrNoKeys = errors.New("no API key exists")
	// ErrAllRevoked: every key is gone (revoked) since the store held one.
	// Revoking keys never opens a gateway that needed them: until a key is
	// created again, or the gateway restarts, no one gets in.
	ErrAllRevoked = errors.New("every API key was revoked while the gateway ran: create one with `toolgate keys create` (a gateway restarted on a loopback address with no key serves without keys)")
	ErrMissing    = errors.New("no API key given")
	ErrUnknown    = errors.New("unknown API key")
	ErrExpired    = errors.New("the API key has expired")
	// ErrRevoked is Verify's error (with the entry, and when) for the
	// secret of a revoked key: a client still sending it is named.
	ErrRevoked     = errors.New("the API key was revoked")
	ErrUnavailable = errors.New("the API key store cannot be read")
)

// UnavailableWords are what the gateway answers every request with a key
// while the store cannot be read (ErrUnavailable), with 503: the HTTP
// front and the console alike. The reason is in the log, not the answer
// (it names the key files).
const UnavailableWords = "the gateway cannot read its API keys (its log says why); no request is let in until that is fixed"

// UnknownWords are what the gateway answers a secret that is no key it can
// name (unknown, or of a revoked key when the revoked keys cannot be read):
// the same words for every such secret, which tell nothing of which keys
// exist.
const UnknownWords = "the API key is unknown, revoked or expired"

// Refusal is what the gateway answers the holder of a secret Verify
// refused with err: a revoked or expired key says which, and when it was
// revoked, with what to do (only the holder of its secret hears it, which
// tells nothing of which keys exist), any other key UnknownWords. The HTTP
// front and the console say the same.
func Refusal(err error) string {
	if errors.Is(err, ErrRevoked) || errors.Is(err, ErrExpired) {
		return err.Error() + ": ask the gateway's operator for a key in force"
	}
	return UnknownWords
}

// Source is where an entry was read from.
type Source string

// Sources of entries.
const (
	SourceData Source = "data"     // the data folder's keys.jsonl
	SourceFile Source = "keysFile" // the config's toolgate.keysFile
)

// Listed is an entry and where it came from.
type Listed struct {
	Entry
	Source Source `json:"source"`
	Path   string `json:"path"`
}

// Options configure a Store. Nil means defaults.
type Options struct {
	// File is the config's toolgate.keysFile ("" = none). It must exist
	// when named: a missing one (a Secret not mounted) fails closed.
	File   string
	Logger *slog.Logger     // nil = discard
	Now    func() time.Time // nil = time.Now
}

// Store is the gateway's view of every key: the data folder's file and the
// config's keysFile, each read again when it changes, and the data
// folder's revoked keys, read only for a secret that is no key in force
// (a request let in costs no stat of that file). It is safe for concurrent
// use.
type Store struct {
	data *datafile.View[*parsed]
	// revoked is the data folder's keys-revoked.jsonl. It names a revoked
	// key that is sent, and lets no one in: one that cannot be read is
	// logged, not failed closed on (such a key is refused as unknown).
	revoked *datafile.View[*parsed]
	file    *datafile.View[*parsed] // nil without keysFile
	log     *slog.Logger
	now     func() time.Time

	held atomic.Bool // the store has held a key since it was opened

	mu             sync.Mutex
	lastErr        string // the store error logged last ("" = healthy)
	lastRevokedErr string // the revoked keys' error logged last
	read           bool   // the store was read once: its errors are logged from then on
	// The keys of the files as last merged, and the files' contents
	// they were merged from (a request finds them unchanged: no work).
	fromData, fromFile *parsed
	merged             *keyset
	mergeErr           error
}

// parsed is one file's entries with their hashes decoded.
type parsed struct {
	entries []Entry
	sums    [][sha256.Size]byte
}

func parse(b []byte, name string) (*parsed, error) {
	es, err := Parse(b, name)
	if err != nil {
		return nil, err
	}
	p := &parsed{entries: es, sums: make([][sha256.Size]byte, len(es))}
	for i, e := range es {
		hex.Decode(p.sums[i][:], []byte(e.SHA256)) //nolint:errcheck // Parse validated it
	}
	return p, nil
}

// parseInForce parses a file of the keys in force (the data folder's, the
// keysFile), refusing one that every user of the machine may write or
// replace (storage.OthersMayWrite): it fails closed, as a file that cannot be
// parsed does. It runs whenever the file is read again (at the first use
// and after each change of its content or mode), not at each request. The
// revoked keys' file is not checked: its entries let no one in.
func parseInForce(b []byte, path string) (*parsed, error) {
	if how, fix := storage.OthersMayWrite(path); how != "" {
		return nil, fmt.Errorf("%s %s: anyone could add an API key of their own, so none of its keys is accepted: %s", path, how, fix)
	}
	return parse(b, path)
}

// keyset is the keys of both files, sorted by name, and the entries of
// either marked revoked (by hand in a keysFile), in the order read.
type keyset struct {
	listed      []Listed
	sums        [][sha256.Size]byte
	revoked     []Listed
	revokedSums [][sha256.Size]byte
}

// RevokedFile is the file of the revoked keys beside the data folder's
// keys file at dataPath: `keys revoke` moves a key's line there, marked
// revoked. A file of its own, so that keys.jsonl stays one that an older
// toolgate reads (it refuses a field it does not know, and ignores this
// file: a revoked key is unknown to it, refused all the same).
func RevokedFile(dataPath string) string {
	return filepath.Join(filepath.Dir(dataPath), "keys-revoked.jsonl")
}

// Open returns the store of the keys in dataPath (the data folder's
// keys.jsonl; a missing file holds no key) and opts.File. Nothing is read
// until the first use.
func Open(dataPath string, opts *Options) *Store {
	var o Options
	if opts != nil {
		o = *opts
	}
	s := &Store{log: o.Logger, now: o.Now}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	s.data = datafile.NewView(dataPath, func(b []byte) (*parsed, error) { return parseInForce(b, dataPath) }, func() *parsed { return &parsed{} })
	revoked := RevokedFile(dataPath)
	s.revoked = datafile.NewView(revoked, func(b []byte) (*parsed, error) { return parse(b, revoked) }, func() *parsed { return &parsed{} })
	if o.File != "" {
		file := o.File
		s.file = datafile.NewView(file, func(b []byte) (*parsed, error) { return parseInForce(b, file) }, nil)
	}
	return s
}

// load returns the keys as of now: one stat of each file, and a merge only
// when one of them changed.
func (s *Store) load() (*keyset, error) {
	var errs []error
	data, err := s.data.Load()
	if err != nil {
		errs = append(errs, fmt.Errorf("the data folder's keys: %w", err))
	}
	var file *parsed
	if s.file != nil {
		if file, err = s.file.Load(); err != nil {
			errs = append(errs, fmt.Errorf("toolgate.keysFile: %w", err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		s.report(err)
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	s.mu.Lock()
	if data != s.fromData || file != s.fromFile || s.merged == nil && s.mergeErr == nil {
		s.fromData, s.fromFile = data, file
		s.merged, s.mergeErr = s.merge(data, file)
	}
	ks, err := s.merged, s.mergeErr
	s.mu.Unlock()
	s.report(err)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	if len(ks.listed) > 0 {
		s.held.Store(true)
	}
	return ks, nil
}

// merge puts both files' keys together; a name in both is an error.
// Entries marked revoked are kept apart, to name a revoked key that is
// sent.
func (s *Store) merge(data, file *parsed) (*keyset, error) {
	type src struct {
		p    *parsed
		from Source
		path string
	}
	srcs := []src{{data, SourceData, s.data.Path()}}
	if s.file != nil {
		srcs = append(srcs, src{file, SourceFile, s.file.Path()})
	}
	ks := &keyset{}
	where := map[string]string{}
	var errs []error
	for _, sr := range srcs {
		for i, e := range sr.p.entries {
			if !e.Revoked.IsZero() {
				ks.revoked = append(ks.revoked, Listed{Entry: e, Source: sr.from, Path: sr.path})
				ks.revokedSums = append(ks.revokedSums, sr.p.sums[i])
				continue
			}
			if prev, ok := where[e.Name]; ok {
				errs = append(errs, fmt.Errorf("key %q is in both %s and %s: names must be unique (revoke or rename one)", e.Name, prev, sr.path))
				continue
			}
			where[e.Name] = sr.path
			ks.listed = append(ks.listed, Listed{Entry: e, Source: sr.from, Path: sr.path})
			ks.sums = append(ks.sums, sr.p.sums[i])
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	idx := make([]int, len(ks.listed))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return strings.Compare(ks.listed[a].Name, ks.listed[b].Name) })
	sorted := &keyset{listed: make([]Listed, len(idx)), sums: make([][sha256.Size]byte, len(idx)), revoked: ks.revoked, revokedSums: ks.revokedSums}
	for i, j := range idx {
		sorted.listed[i], sorted.sums[i] = ks.listed[j], ks.sums[j]
	}
	return sorted, nil
}

// List returns every entry in force (expired ones included, revoked ones
// not) with its source, sorted by name. An error means the store cannot
// be read (and nothing is returned).
func (s *Store) List() ([]Listed, error) {
	ks, err := s.load()
	if err != nil {
		return nil, err
	}
	return slices.Clone(ks.listed), nil
}

// Revoked returns the revoked keys' entries, oldest revocation first. An
// error means a file cannot be read.
func (s *Store) Revoked() ([]Listed, error) {
	ks, err := s.load()
	if err != nil {
		return nil, err
	}
	p, err := s.revoked.Load()
	if err != nil {
		return nil, fmt.Errorf("the data folder's revoked keys: %w", err)
	}
	out := slices.Clone(ks.revoked)
	for _, e := range p.entries {
		out = append(out, Listed{Entry: e, Source: SourceData, Path: s.revoked.Path()})
	}
	slices.SortStableFunc(out, func(a, b Listed) int { return a.Revoked.Compare(b.Revoked) })
	return out, nil
}

// revokedEntry returns the revoked entry whose secret this is, if any:
// of the key files (marked by hand), else of the data folder's revoked
// keys, whose error is logged once per distinct error and otherwise
// taken as no entry.
func (s *Store) revokedEntry(ks *keyset, secret string) (Entry, bool) {
	if i := find(ks.revokedSums, secret); i >= 0 {
		return ks.revoked[i].Entry, true
	}
	p, err := s.revoked.Load()
	s.mu.Lock()
	switch turned(&s.lastRevokedErr, err) {
	case recovered:
		s.log.Info("the revoked API keys can be read again")
	case broke:
		s.log.Warn("the revoked API keys cannot be read: a revoked key sent is refused as unknown, not named, until it is fixed", "err", err)
	}
	s.mu.Unlock()
	if err != nil {
		return Entry{}, false
	}
	if i := find(p.sums, secret); i >= 0 {
		return p.entries[i], true
	}
	return Entry{}, false
}

// report logs a store error once per distinct error, and the recovery,
// once the store was read: before, the first use's caller says the error
// (serve stops on it), and a log line that requests "are refused until it
// is fixed" came just before serve exited.
func (s *Store) report(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		s.read = true
	}
	if err != nil && !s.read {
		return
	}
	switch turned(&s.lastErr, err) {
	case recovered:
		s.log.Info("the API key store can be read again")
	case broke:
		s.log.Error("the API key store cannot be read: every request with a key is refused until it is fixed", "err", err)
	}
}

// A read's turn, for a log line once per distinct error and once on
// recovery (report, revokedEntry).
const (
	unchanged = iota
	recovered // read again after an error
	broke     // an error, or another than the one before
)

// turned records err as the last read's (its text in *last, "" for none)
// and says how it differs from the one before.
func turned(last *string, err error) int {
	switch {
	case err == nil && *last != "":
		*last = ""
		return recovered
	case err != nil && err.Error() != *last:
		*last = err.Error()
		return broke
	}
	return unchanged
}

// Any reports whether keys are needed: a key exists (an expired one
// counts), or one did since the store was opened (see ErrAllRevoked). The
// HTTP front requires a key as soon as one exists. An error means the store
// cannot be read, and callers must fail closed.
func (s *Store) Any() (bool, error) {
	ks, err := s.load()
	return err == nil && (len(ks.listed) > 0 || s.held.Load()), err
}

// Verify returns the entry whose secret this is. Errors: ErrNoKeys (the
// store holds none and never did, whatever the secret: a revoked key does
// not count), ErrRevoked (with the entry, and when), ErrAllRevoked (it
// holds none any more), ErrMissing (empty secret), ErrUnknown, ErrExpired
// (with the entry), ErrUnavailable. It costs a stat of each file (unless
// one changed), one SHA-256 and a constant-time compare with every key;
// for a secret that is no key in force, a stat of the revoked keys' file
// and a compare with every revoked key besides.
func (s *Store) Verify(secret string) (Entry, error) {
	ks, err := s.load()
	if err != nil {
		return Entry{}, err
	}
	if len(ks.listed) == 0 && !s.held.Load() {
		return Entry{}, ErrNoKeys
	}
	if secret == "" && len(ks.listed) > 0 {
		return Entry{}, ErrMissing
	}
	if i := find(ks.sums, secret); i >= 0 {
		e := ks.listed[i].Entry
		if e.Expired(s.now()) {
			return e, ErrExpired
		}
		return e, nil
	}
	if e, ok := s.revokedEntry(ks, secret); ok && secret != "" {
		return e, fmt.Errorf("%w at %s", ErrRevoked, e.Revoked.UTC().Format(time.RFC3339))
	}
	if len(ks.listed) == 0 {
		return Entry{}, ErrAllRevoked
	}
	return Entry{}, ErrUnknown
}

// Add stores e in the data folder's file at path, refusing a name that is
// taken there.
func Add(path string, e Entry) error {
	if err := e.Validate(); err != nil {
		return err
	}
	return datafile.Update(path, func(old []byte) ([]byte, error) {
		es, err := Parse(old, path)
		if err != nil {
			return nil, err
		}
		if slices.ContainsFunc(es, func(x Entry) bool { return x.Name == e.Name }) {
			// "Revoke it first" alone cut a key's clients off for as long as
			// the new secret took to reach them: rotation is said as well.
			return nil, fmt.Errorf("a key named %q exists already: pick another name; to rotate its secret, create the new key under another name with the same scope (`toolgate keys list` shows it), move its clients to the new secret, then `toolgate keys revoke %s`", e.Name, e.Name)
		}
		return Format(append(es, e)), nil
	})
}

// Update changes the key named name in the data folder's file at path in
// place: change edits its entry (its scope, expiry, admin), which is
// checked and written back, the secret and its SHA-256 kept, so the key's
// holder keeps the secret (a person who changes team). A running gateway
// reads the new scope at its next request, as it reads a new or revoked
// key. before and after are the entry as it was and as it is now.
func Update(path, name string, change func(*Entry) error) (before, after Entry, err error) {
	err = datafile.Update(path, func(old []byte) ([]byte, error) {
		es, i, err := findKey(old, path, name)
		if err != nil {
			return nil, err
		}
		before = es[i]
		e := before
		e.Allow, e.Deny = slices.Clone(e.Allow), slices.Clone(e.Deny)
		if err := change(&e); err != nil {
			return nil, err
		}
		if e.Name != before.Name || e.SHA256 != before.SHA256 {
			return nil, errors.New("a key's name and secret cannot change: create another key")
		}
		if err := e.Validate(); err != nil {
			return nil, err
		}
		es[i], after = e, e
		return Format(es), nil
	})
	return before, after, err
}

// ErrNotFound is Revoke's and Update's error for a name the file does not hold.
var ErrNotFound = errors.New("no such key")

// findKey is the entries of old, the file at path, and the index of the
// key named name that is not revoked among them (ErrNotFound: none).
func findKey(old []byte, path, name string) ([]Entry, int, error) {
	es, err := Parse(old, path)
	if err != nil {
		return nil, 0, err
	}
	i := slices.IndexFunc(es, func(x Entry) bool { return x.Name == name && x.Revoked.IsZero() })
	if i < 0 {
		return nil, 0, fmt.Errorf("%w named %q in %s", ErrNotFound, name, path)
	}
	return es, i, nil
}

// Revoke deletes the key named name from the data folder's file at path
// (from then on a gateway refuses it) and adds its entry, marked revoked
// at now, to RevokedFile(path): a gateway that is sent its secret names it
// (in the audit log and the 401), where it said "unknown API key". The
// key is revoked once its line is gone: a revoked entry that could not be
// written then is ErrNotKept, with the key revoked all the same. The
// entries of keys that expired RevokedKeep before now go from that file
// (forgetRevoked).
func Revoke(path, name string, now time.Time) error {
	var gone Entry
	err := datafile.Update(path, func(old []byte) ([]byte, error) {
		es, i, err := findKey(old, path, name)
		if err != nil {
			return nil, err
		}
		gone = es[i]
		return Format(slices.Delete(es, i, i+1)), nil
	})
	if err != nil {
		return err
	}
	gone.Revoked = now.UTC().Truncate(time.Second)
	revoked := RevokedFile(path)
	err = datafile.Update(revoked, func(old []byte) ([]byte, error) {
		return append(forgetRevoked(old, revoked, now), gone.Line()...), nil
	})
	if err != nil {
		return fmt.Errorf("%w: key %q is revoked, but %s could not take its entry (a gateway sent its secret says \"unknown API key\"): %w", ErrNotKept, name, revoked, err)
	}
	return nil
}

// RevokedKeep is how long past its expiry a revoked key's entry is kept.
// The entry serves only to name the key to a client that still sends it
// (its 401 and audit record). A key with an expiry would be refused from
// then on had it not been revoked, as expired, and a month later its
// clients have heard so; a key without one could still be sent by a
// client that holds it at any time, so its entry is kept.
const RevokedKeep = 30 * 24 * time.Hour

// revokedHeader starts the revoked keys' file.
const revokedHeader = "# toolgate revoked API keys: refused, kept to name them when they are sent (SHA-256 of each secret, never the secret).\n"

// forgetRevoked returns the revoked keys' file old (read from name) without
// the entries whose key expired RevokedKeep before now: each `keys revoke`
// forgets those, or the file grew with every key ever revoked. A file that
// does not parse is left as it is (the gateway logs it; fixed by hand).
func forgetRevoked(old []byte, name string, now time.Time) []byte {
	if len(old) == 0 {
		return []byte(revokedHeader)
	}
	es, err := Parse(old, name)
	if err != nil {
		return old
	}
	kept := slices.DeleteFunc(slices.Clone(es), func(e Entry) bool {
		return !e.Expires.IsZero() && !now.Before(e.Expires.Add(RevokedKeep))
	})
	if len(kept) == len(es) {
		return old
	}
	b := []byte(revokedHeader)
	for _, e := range kept {
		b = append(b, e.Line()...)
	}
	return b
}

// ErrNotKept is Revoke's error for a key revoked whose revoked entry could
// not be written.
var ErrNotKept = errors.New("the revoked key's entry was not kept")
