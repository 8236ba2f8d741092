package keys

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/toolgate/toolgate/internal/datafile"
)

// Errors of Store.Verify. Each means 401 to an HTTP client, except
// ErrUnavailable (the store cannot be read: no one gets in) and ErrNoKeys
// (no key exists: a gateway on a loopback address lets requests in).
var (
	ErrNoKeys      = errors.New("no API key exists")
	ErrMissing     = errors.New("no API key given")
	ErrUnknown     = errors.New("unknown API key")
	ErrExpired     = errors.New("the API key has expired")
	ErrUnavailable = errors.New("the API key store cannot be read")
)

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
// config's keysFile, each read again when it changes. It is safe for
// concurrent use.
type Store struct {
	data *datafile.View[[]Entry]
	file *datafile.View[[]Entry] // nil without keysFile
	log  *slog.Logger
	now  func() time.Time

	mu      sync.Mutex
	lastErr string // the store error logged last ("" = healthy)
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
	s.data = datafile.NewView(dataPath, func(b []byte) ([]Entry, error) { return Parse(b, dataPath) }, func() []Entry { return nil })
	if o.File != "" {
		file := o.File
		s.file = datafile.NewView(file, func(b []byte) ([]Entry, error) { return Parse(b, file) }, nil)
	}
	return s
}

// List returns every entry with its source. An error means the store
// cannot be read (and nothing is returned).
func (s *Store) List() ([]Listed, error) {
	var out []Listed
	views := []struct {
		v   *datafile.View[[]Entry]
		src Source
	}{{s.data, SourceData}, {s.file, SourceFile}}
	seen := map[string]Listed{}
	var errs []error
	for _, vs := range views {
		if vs.v == nil {
			continue
		}
		es, err := vs.v.Load()
		if err != nil {
			what := "the data folder's keys"
			if vs.src == SourceFile {
				what = "toolgate.keysFile"
			}
			errs = append(errs, fmt.Errorf("%s: %w", what, err))
			continue
		}
		for _, e := range es {
			l := Listed{Entry: e, Source: vs.src, Path: vs.v.Path()}
			if prev, ok := seen[e.Name]; ok {
				errs = append(errs, fmt.Errorf("key %q is in both %s and %s: names must be unique (revoke or rename one)", e.Name, prev.Path, l.Path))
				continue
			}
			seen[e.Name] = l
			out = append(out, l)
		}
	}
	if err := errors.Join(errs...); err != nil {
		s.report(err)
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	s.report(nil)
	slices.SortFunc(out, func(a, b Listed) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// report logs a store error once per distinct error, and the recovery.
func (s *Store) report(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case err == nil && s.lastErr != "":
		s.log.Info("the API key store can be read again")
		s.lastErr = ""
	case err != nil && err.Error() != s.lastErr:
		s.log.Error("the API key store cannot be read: every request with a key is refused until it is fixed", "err", err)
		s.lastErr = err.Error()
	}
}

// Any reports whether any key exists (an expired one counts): the HTTP
// front requires a key as soon as one does. An error means the store
// cannot be read, and callers must fail closed.
func (s *Store) Any() (bool, error) {
	l, err := s.List()
	return len(l) > 0, err
}

// Verify returns the entry whose secret this is. Errors: ErrNoKeys (the
// store holds none, whatever the secret), ErrMissing (empty secret),
// ErrUnknown, ErrExpired (with the entry), ErrUnavailable. It reads the
// store once (a stat of each file, unless one changed).
func (s *Store) Verify(secret string) (Entry, error) {
	l, err := s.List()
	if err != nil {
		return Entry{}, err
	}
	if len(l) == 0 {
		return Entry{}, ErrNoKeys
	}
	if secret == "" {
		return Entry{}, ErrMissing
	}
	entries := make([]Entry, len(l))
	for i, e := range l {
		entries[i] = e.Entry
	}
	e, ok := find(entries, secret)
	if !ok {
		return Entry{}, ErrUnknown
	}
	if e.Expired(s.now()) {
		return e, ErrExpired
	}
	return e, nil
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
			return nil, fmt.Errorf("a key named %q exists already: revoke it first (`toolgate keys revoke %s`) or pick another name", e.Name, e.Name)
		}
		return Format(append(es, e)), nil
	})
}

// ErrNotFound is Remove's error for a name the file does not hold.
var ErrNotFound = errors.New("no such key")

// Remove deletes the key named name from the data folder's file at path:
// from then on a gateway refuses it.
func Remove(path, name string) error {
	return datafile.Update(path, func(old []byte) ([]byte, error) {
		es, err := Parse(old, path)
		if err != nil {
			return nil, err
		}
		i := slices.IndexFunc(es, func(x Entry) bool { return x.Name == name })
		if i < 0 {
			return nil, fmt.Errorf("%w named %q in %s", ErrNotFound, name, path)
		}
		return Format(slices.Delete(es, i, i+1)), nil
	})
}
