package oauth

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/toolgate/toolgate/internal/datafile"
)

// Store holds each server's login as one file, <dir>/<server>.json.
type Store struct {
	dir string
	// mkdirAll makes the folder: os.MkdirAll, or in the Tokens of a
	// gateway their Storage's, which never makes the data folder again.
	mkdirAll func(dir string, perm fs.FileMode) error
}

// StoreDir is the folder of the logins inside toolgate's data folder.
const StoreDir = "auth"

// NewStore returns the store in dataDir/auth. Nothing is created until a
// login is saved.
func NewStore(dataDir string) *Store {
	return &Store{dir: filepath.Join(dataDir, StoreDir), mkdirAll: os.MkdirAll}
}

// Dir is the folder holding the login files.
func (s *Store) Dir() string { return s.dir }

// Path is the file of server's login.
func (s *Store) Path(server string) string { return filepath.Join(s.dir, server+".json") }

// Credentials are what a login to one server leaves: the client toolgate
// used, the endpoint that refreshes its tokens, and the tokens. They are
// secrets, never logged (LogValue shows what is safe).
type Credentials struct {
	Server string `json:"server"`
	// URL is the server's url from the config at login time. A login is
	// used only for a server at that URL: a token never goes elsewhere.
	URL string `json:"url"`
	// Resource is the resource indicator (RFC 8707) the tokens were asked
	// for: the server's protected-resource metadata "resource".
	Resource      string    `json:"resource"`
	Issuer        string    `json:"issuer"`
	TokenEndpoint string    `json:"tokenEndpoint"`
	Client        Client    `json:"client"`
	Scopes        []string  `json:"scopes,omitempty"` // granted (or asked for, when the token response does not say)
	Token         Token     `json:"token"`
	LoggedIn      time.Time `json:"loggedIn"`
	Refreshed     time.Time `json:"refreshed,omitzero"`
	// Refused says why a gateway stopped using this login (its refresh
	// token was refused); "" while it is good. A new login replaces it.
	Refused string `json:"refused,omitempty"`
	// StepUp is the step-up the server asked for (a 403
	// insufficient_scope naming scopes this login lacks), recorded by a
	// gateway for the next `auth login` to ask for; nil when none is
	// pending. A login granted those scopes clears it.
	StepUp *StepUp `json:"stepUp,omitempty"`
}

// StepUp is a pending step-up authorization (MCP 2025-11-25): the scopes a
// server asked for beyond those the login has.
type StepUp struct {
	Scopes []string  `json:"scopes"`
	Asked  time.Time `json:"asked"` // when a gateway last added to them
}

// Client is the OAuth client toolgate logged in as.
type Client struct {
	ID     string `json:"id"`
	Secret string `json:"secret,omitempty"`
	// AuthMethod is the token endpoint auth method: "none",
	// "client_secret_post" or "client_secret_basic".
	AuthMethod  string `json:"authMethod"`
	RedirectURI string `json:"redirectUri"`
	// Registered is true for a client toolgate registered itself (RFC
	// 7591), false for one from the config's oauth.clientId.
	Registered bool `json:"registered"`
	// Scopes are the scopes a client toolgate registered was registered
	// for (the registration's "scope"): a login asking for more registers
	// anew. Empty in a login saved before they were kept: that login's
	// Scopes stand for them.
	Scopes []string `json:"scopes,omitempty"`
	// RegistrationURI and RegistrationToken manage a client toolgate
	// registered (RFC 7592), when the authorization server gave them:
	// the login that replaces it with another client deletes it there.
	RegistrationURI   string `json:"registrationUri,omitempty"`
	RegistrationToken string `json:"registrationToken,omitempty"`
}

// Token is an access token and what renews it.
type Token struct {
	AccessToken  string    `json:"accessToken"`
	TokenType    string    `json:"tokenType,omitempty"`
	RefreshToken string    `json:"refreshToken,omitempty"`
	Expiry       time.Time `json:"expiry,omitzero"`   // zero: the server did not say
	Obtained     time.Time `json:"obtained,omitzero"` // when it was issued to toolgate
}

// For reports whether the login may be used for a server at url.
func (l *Credentials) For(url string) bool { return l != nil && l.URL == url }

// LogValue keeps secrets out of logs.
func (l *Credentials) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("server", l.Server),
		slog.String("issuer", l.Issuer),
		slog.Time("expiry", l.Token.Expiry),
		slog.Bool("refreshable", l.Token.RefreshToken != ""),
	)
}

// ErrNoLogin is returned by Delete when no login is stored.
var ErrNoLogin = errors.New("no login stored")

// Load returns server's login, or nil when none is stored.
func (s *Store) Load(server string) (*Credentials, error) {
	b, err := os.ReadFile(s.Path(server))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the stored login of %q: %w", server, err)
	}
	var l Credentials
	if err := json.Unmarshal(b, &l); err != nil {
		// Never quote the content: it holds tokens.
		return nil, fmt.Errorf("the stored login of %q (%s) is not valid JSON: run `toolgate auth login %s` again", server, s.Path(server), server)
	}
	if l.Server != server {
		return nil, fmt.Errorf("the stored login in %s is for server %q, not %q: run `toolgate auth login %s` again", s.Path(server), l.Server, server, server)
	}
	return &l, nil
}

// Save writes l as its server's login: to a temporary file in the folder
// (0600), synced, then renamed over the old one, so a reader sees the old
// login or the new one, never a mix. The folder is made 0700.
func (s *Store) Save(l *Credentials) error {
	if err := s.ensureDir(); err != nil {
		return err
	}
	b, err := json.MarshalIndent(l, "", "  ")
	if err != nil {
		return err
	}
	if err := datafile.WriteFile(s.Path(l.Server), append(b, '\n')); err != nil {
		return fmt.Errorf("save the login of %q: %w", l.Server, err)
	}
	return nil
}

// Delete removes server's login; ErrNoLogin when there is none.
func (s *Store) Delete(server string) error {
	err := os.Remove(s.Path(server))
	if errors.Is(err, fs.ErrNotExist) {
		return ErrNoLogin
	}
	if err != nil {
		return fmt.Errorf("remove the login of %q: %w", server, err)
	}
	datafile.SyncDir(s.dir)
	return nil
}

// Servers lists the servers with a stored login, sorted.
func (s *Store) Servers() ([]string, error) {
	entries, err := os.ReadDir(s.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if name, ok := strings.CutSuffix(e.Name(), ".json"); ok && !strings.HasPrefix(name, ".") {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out, nil
}

// ensureDir makes the folder, owner-only.
func (s *Store) ensureDir() error {
	if err := s.mkdirAll(s.dir, 0o700); err != nil {
		return fmt.Errorf("make the login folder: %w", err)
	}
	// MkdirAll leaves an existing folder as it is, and the umask may have
	// widened a new one: the logins are secrets.
	if err := os.Chmod(s.dir, 0o700); err != nil {
		return fmt.Errorf("make the login folder %s owner-only: %w", s.dir, err)
	}
	return nil
}

// lock takes server's file lock, shared by every toolgate process using the
// folder (a gateway refreshing, `auth login` saving), and returns its
// release. It blocks while another process holds it; the holders only
// ever hold it for one token request.
func (s *Store) lock(server string) (func(), error) {
	if err := s.ensureDir(); err != nil {
		return nil, err
	}
	unlock, err := datafile.Lock(filepath.Join(s.dir, "."+server+".lock"))
	if err != nil {
		return nil, fmt.Errorf("lock the login of %q: %w", server, err)
	}
	return unlock, nil
}
