package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/gateway/backend"
	"github.com/toolgate/toolgate/gateway/backend/oauth"
	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/internal/dirs"
	"github.com/toolgate/toolgate/internal/mask"
	"github.com/toolgate/toolgate/internal/shellword"
	"github.com/toolgate/toolgate/internal/termtext"
)

func init() { register(newAuthCmd) }

func newAuthCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "auth",
		Short: "Log in to remote servers that ask for one (OAuth), show and remove logins",
		Long: `Remote (http, sse) servers that answer 401 with a Bearer challenge need a login,
as the MCP authorization spec describes. ` + "`toolgate auth login SERVER`" + ` runs it once:
toolgate finds the server's authorization server, registers itself there (or uses
the client in the server's "oauth" entry), and opens the authorization page. The
tokens are kept in the data folder (auth/SERVER.json, readable by you only); a
running gateway refreshes them and picks up a new login without a restart.
Without --config, login and status read the config of the gateway running on
the data folder.`,
	}
	cmd.AddCommand(newAuthLoginCmd(g), newAuthStatusCmd(g), newAuthLogoutCmd(g))
	return cmd
}

type authLoginFlags struct {
	config    string
	noBrowser bool
	timeout   time.Duration
}

func newAuthLoginCmd(g *globals) *cobra.Command {
	var f authLoginFlags
	cmd := &cobra.Command{
		Use:   "login SERVER [--config FILE] [--no-browser]",
		Short: "Log in to a remote server (OAuth authorization code with PKCE)",
		Long: `Log in to SERVER, an http or sse server of the config file that asks for a login.
It prints the authorization URL and opens it in a browser (unless --no-browser, or
no browser can be found); approve there, and the authorization server redirects to
a port toolgate listens on at 127.0.0.1. The tokens are saved in the data folder,
and a running gateway starts using them within a second.

With the browser on another machine (toolgate on a server reached over ssh), its
redirect to 127.0.0.1 cannot arrive: approve there, then paste the address the
browser ended at (http://127.0.0.1:PORT/callback?code=…, a page that did not load)
and press Enter.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runAuthLogin(cmd.Context(), g, cmd.OutOrStdout(), cmd.ErrOrStderr(), cmd.InOrStdin(), args[0], f)
		},
	}
	configFlag(cmd, &f.config)
	cmd.Flags().BoolVar(&f.noBrowser, "no-browser", false, "only print the authorization URL; do not open a browser")
	cmd.Flags().DurationVar(&f.timeout, "timeout", oauth.DefaultLoginTimeout, "how long to wait for the approval")
	return cmd
}

type authStatusFlags struct {
	config  string
	asJSON  bool
	timeout time.Duration
}

func newAuthStatusCmd(g *globals) *cobra.Command {
	var f authStatusFlags
	cmd := &cobra.Command{
		Use:   "status [--config FILE] [--json]",
		Short: "Show, for each http and sse server, whether it needs a login and the state of the stored one",
		Long: `For each http and sse server of the config file: "no auth needed", "static
headers" (it has its credentials in "headers"), "logged in" (with when the access
token expires, whether it can be refreshed, the scopes, and a step-up pending:
scopes a server's 403 asked for that the next login asks for) or "needs login"
(with why and the command to run). A server with a stored login is asked once
with it, as a gateway would (a refused access token is refreshed); one without
is asked once, without a token, whether it wants one.
Exit status: 0, or 3 when some server needs a login (or more scopes) or could
not be asked.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runAuthStatus(cmd.Context(), g, cmd.OutOrStdout(), cmd.ErrOrStderr(), f)
		},
	}
	configFlag(cmd, &f.config)
	cmd.Flags().BoolVar(&f.asJSON, "json", false, "print JSON instead of a table")
	cmd.Flags().DurationVar(&f.timeout, "timeout", 5*time.Second, "how long to wait for each server's answer")
	return cmd
}

type authLogoutFlags struct {
	config  string
	timeout time.Duration
}

func newAuthLogoutCmd(g *globals) *cobra.Command {
	var f authLogoutFlags
	cmd := &cobra.Command{
		Use:   "logout SERVER [--config FILE] [--timeout 10s]",
		Short: "Remove the stored login of a server and end it at its authorization server",
		Long: `Remove SERVER's stored tokens and client registration from the data folder,
then end them at the authorization server: revoke the refresh and the access
token (RFC 7009, where its metadata names a revocation_endpoint) and delete
the client toolgate registered (RFC 7592, where the registration gave the
means). A running gateway stops using the login at its next request to the
server and reports the server as needing a login.
The login is removed whatever the authorization server does; what it did
not end (it offers no revocation, refused, or did not answer within
--timeout) is said, with why: revoke toolgate's access there to end it.
Exit status 0 once the login is removed.
The config (--config, else that of the gateway running on the data folder,
if any) gives the server's "tls" settings to those requests.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runAuthLogout(cmd.Context(), g, cmd.OutOrStdout(), cmd.ErrOrStderr(), args[0], f)
		},
	}
	configFlag(cmd, &f.config)
	cmd.Flags().DurationVar(&f.timeout, "timeout", oauth.DefaultLogoutTimeout, "how long to wait for the authorization server, all its requests together")
	return cmd
}

// loadForAuth reads the config file at *path and applies its data folder.
// Without one, it reads the config of the gateway running on the data
// folder, when it serves one file, and says so on stderr (*path set to
// it): the commands' usage gives --config as optional, and an operator on
// the gateway's machine was told "needs --config FILE" while the gateway
// knew its file.
func (g *globals) loadForAuth(ctx context.Context, stderr io.Writer, path *string) (*config.File, error) {
	if *path == "" {
		found, err := runningConfig(ctx, g.DataDir())
		if err != nil {
			return nil, usageError{fmt.Errorf("needs --config FILE (the mcpServers JSON that names the server): %w", err)}
		}
		*path = found
		fmt.Fprintf(stderr, "config: %s (that of the gateway running on %s; --config FILE reads another)\n", found, g.DataDir())
	}
	cfg, err := config.Load(*path)
	if err != nil {
		return nil, err
	}
	g.applyConfig(cfg.Toolgate)
	return cfg, nil
}

// runningConfig is the config file the gateways running on dataDir serve,
// when they serve one and the same; else an error that says what runs.
func runningConfig(ctx context.Context, dataDir string) (string, error) {
	var served []string // each gateway's files, joined
	for _, gw := range localGateways(ctx, dataDir, 5*time.Second) {
		if gw.err == nil && gw.rep.Process != nil && len(gw.rep.Process.Config) > 0 {
			if files := strings.Join(gw.rep.Process.Config, " + "); !slices.Contains(served, files) {
				served = append(served, files)
			}
		}
	}
	switch {
	case len(served) == 0:
		return "", fmt.Errorf("no gateway serving a config file runs on the data folder %s to take it from", dataDir)
	case len(served) > 1 || strings.Contains(served[0], " + "):
		return "", fmt.Errorf("the gateways running on the data folder %s serve %s: name the file with the server", dataDir, strings.Join(served, ", "))
	}
	return served[0], nil
}

// remoteServer returns the http or sse server name of cfg, name read as
// the management tools read a server's (serverMeant: "Demo" is demo).
func remoteServer(cfg *config.File, path, name string) (config.Server, error) {
	all := cfg.All()
	names := make([]string, len(all))
	for i, s := range all {
		names[i] = s.Name
	}
	name, err := serverMeant(name, names)
	if err != nil {
		return config.Server{}, err
	}
	for _, s := range all {
		if s.Name == name {
			if s.Type == config.TypeStdio {
				return s, usageError{fmt.Errorf("server %q in %s is a stdio server: it runs on this machine and takes credentials through \"env\"; logins are for http and sse servers", name, path)}
			}
			return s, nil
		}
	}
	return config.Server{}, usageError{fmt.Errorf("no server %q in %s (its servers: %s)", name, path, strings.Join(names, ", "))}
}

// secretsOf hides server s's configured secrets (its URL's query values
// and password, its header values, its client secret) in a text, as
// serve's errors do.
func secretsOf(s config.Server) func(string) string {
	return mask.New(backend.Secrets(s)).Configured
}

func oauthServer(s config.Server) oauth.Server {
	o := oauth.Server{Name: s.Name, URL: s.URL, Transport: s.Type}
	if s.OAuth != nil {
		o.ClientID, o.ClientSecret, o.Scopes, o.RedirectURI = s.OAuth.ClientID, s.OAuth.ClientSecret, s.OAuth.Scopes, s.OAuth.RedirectURI
	}
	return o
}

// command is a toolgate command for the user to run, quoted for a shell,
// with --data-dir when this process's data folder is not the one the bare
// command would use (a --data-dir flag, $TOOLGATE_DATA_DIR or the config's
// dataDir): `toolgate keys create` run as printed must reach this folder.
func (g *globals) command(words ...string) string { return g.commandWith("", words...) }

// commandWith is command for words that name a config file whose dataDir
// is configDataDir: the command finds that folder on its own. The folder
// is named in full (dirs.Data makes it absolute), as the config file is
// (loginCommand): a gateway started with --data-dir d1 told to run `…
// --data-dir d1`, which from another folder (a service's, `toolgate
// status` run elsewhere) is another data folder.
func (g *globals) commandWith(configDataDir string, words ...string) string {
	if dir := g.DataDir(); dir != dirs.DefaultData(configDataDir) {
		words = append(words, "--data-dir", dir)
	}
	return shellword.Join(words...)
}

// The gateway's logins tell its backends the command that logs in and the
// step-ups their servers asked for.
var (
	_ backend.LoginCommander = (*oauth.Tokens)(nil)
	_ backend.StepUpKeeper   = (*oauth.Tokens)(nil)
	_ backend.ExpiryKeeper   = (*oauth.Tokens)(nil)
)

// loginCommand returns the exact command that logs in to a server of the
// config at cfgPath with this data folder, for errors to quote.
func (g *globals) loginCommand(cfgPath string) func(server string) string {
	abs, err := filepath.Abs(cfgPath)
	if err != nil {
		abs = cfgPath
	}
	return func(server string) string {
		return g.commandWith(g.configDataDir, "toolgate", "auth", "login", server, "--config", abs)
	}
}

// authTokens is the token keeper of a gateway or an index run over the
// config at cfgPath; Close it after the pool.
func (g *globals) authTokens(cfgPath string) *oauth.Tokens {
	return oauth.NewTokens(oauth.NewStore(g.DataDir()), &oauth.Options{Logger: g.logger, LoginCommand: g.loginCommand(cfgPath),
		Storage: g.health().Writer("logins", "refreshed tokens are kept in memory only")})
}

func runAuthLogin(ctx context.Context, g *globals, w, stderr io.Writer, in io.Reader, name string, f authLoginFlags) error {
	cfg, err := g.loadForAuth(ctx, stderr, &f.config)
	if err != nil {
		return err
	}
	s, err := remoteServer(cfg, f.config, name)
	if err != nil {
		return err
	}
	name = s.Name
	if s.StaticAuthorization() {
		return fmt.Errorf("server %q sends a static Authorization header from the config: remove it from \"headers\" to log in with OAuth instead", name)
	}
	store := oauth.NewStore(g.DataDir())
	if err := canSave(store.Dir()); err != nil {
		return fmt.Errorf("login to %s: it could not be saved, so it is not started: %w", name, err)
	}
	hc, err := serverHTTPClient(s, oauth.DefaultHTTPTimeout)
	if err != nil {
		return err
	}
	opener := ""
	if !f.noBrowser {
		opener = browserOpener()
	}
	creds, err := oauth.Login(ctx, store, oauthServer(s), &oauth.LoginOptions{
		Timeout:    f.timeout,
		Logger:     g.logger,
		HTTPClient: hc,
		Pasted:     lines(in),
		Rejected: func(line, why string) {
			fmt.Fprintf(w, "Not this login's redirect: %s. Still waiting…\n", why)
		},
		StepUp: func(scopes, stepUp, unlisted []string) {
			fmt.Fprintf(w, "%s asked for more scopes (a 403 insufficient_scope a gateway recorded): this login asks for the scopes %s (new: %s); approve them only if you mean to give them.\n",
				name, strings.Join(scopes, " "), strings.Join(stepUp, " "))
			if len(unlisted) > 0 {
				fmt.Fprintf(w, "The authorization server does not list %s in its scopes_supported: it may refuse the login (invalid_scope); `%s` forgets the login and the step-up.\n",
					strings.Join(unlisted, " "), g.commandWith(g.configDataDir, "toolgate", "auth", "logout", name))
			}
		},
		Authorize: func(authURL string) error {
			fmt.Fprintf(w, "To log in to %s, open this URL in a browser and approve:\n\n  %s\n\n", name, authURL)
			if opener != "" {
				if err := openBrowser(ctx, opener, authURL); err != nil {
					fmt.Fprintf(w, "(could not open a browser with %s: %v)\n", opener, err)
				} else {
					fmt.Fprintf(w, "(opened with %s)\n", opener)
				}
			}
			fmt.Fprintf(w, "Waiting for the approval (up to %s)…\n", f.timeout)
			fmt.Fprintf(w, "(With the browser on another machine, paste here the address it ends at, http://127.0.0.1:…%s?code=…, and press Enter.)\n", oauth.CallbackPath)
			return nil
		},
	})
	switch {
	case errors.Is(err, oauth.ErrNoLoginNeeded):
		fmt.Fprintf(w, "%s needs no login: %s answered without asking for one.\n", name, s.URL)
		return nil
	case errors.Is(err, oauth.ErrLoginTimeout):
		return fmt.Errorf("%w: open the URL above in a browser and approve, then run `%s` again (--timeout waits longer)", err, g.loginCommand(f.config)(name))
	case err != nil:
		// Go's HTTP errors quote the whole URL, a key in its query too.
		err = backend.MaskError(err, secretsOf(s))
		if fix := s.TLSFix(err); fix != "" {
			return fmt.Errorf("login to %s: %w: %s", name, err, fix)
		}
		return fmt.Errorf("login to %s: %w", name, err)
	}
	fmt.Fprintf(w, "Logged in to %s: %s.\nSaved in %s (readable by you only). A running gateway picks it up within a second.\n",
		name, describeCreds(creds, time.Now()), store.Path(name))
	return nil
}

// describeCreds says when the access token expires, whether it can be
// refreshed, and the scopes — never the tokens.
func describeCreds(c *oauth.Credentials, now time.Time) string {
	var parts []string
	if c.Token.Expiry.IsZero() {
		parts = append(parts, "the access token does not expire")
	} else if d := c.Token.Expiry.Sub(now); d > 0 {
		parts = append(parts, "access token expires in "+d.Round(time.Second).String())
	} else {
		parts = append(parts, "access token expired "+(-d).Round(time.Second).String()+" ago")
	}
	if c.Token.RefreshToken != "" {
		parts = append(parts, "refreshable")
	} else {
		parts = append(parts, "not refreshable")
	}
	scopes := "-"
	if len(c.Scopes) > 0 {
		scopes = strings.Join(c.Scopes, " ")
	}
	return strings.Join(parts, ", ") + "; scopes: " + scopes
}

// browserOpener returns the command that opens a URL in the user's
// browser, or "" when there is none (no display, no xdg-open).
func browserOpener() string {
	if runtime.GOOS == "darwin" {
		return "open"
	}
	if os.Getenv("DISPLAY") == "" && os.Getenv("WAYLAND_DISPLAY") == "" {
		return ""
	}
	if p, err := exec.LookPath("xdg-open"); err == nil {
		return p
	}
	return ""
}

func openBrowser(ctx context.Context, opener, u string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return exec.CommandContext(ctx, opener, u).Run()
}

// Auth states of `auth status`.
const (
	authNone       = "none"
	authHeaders    = "headers"
	authLoggedIn   = "loggedIn"
	authNeedsLogin = "needsLogin"
	authUnknown    = "unknown"
)

var authLabels = map[string]string{
	authNone: "no auth needed", authHeaders: "static headers", authLoggedIn: "logged in",
	authNeedsLogin: "needs login", authUnknown: "unknown",
}

// authServerStatus is one server in `auth status --json`.
type authServerStatus struct {
	Server      string     `json:"server"`
	Transport   string     `json:"transport"`
	URL         string     `json:"url"`
	Auth        string     `json:"auth"` // none | headers | loggedIn | needsLogin | unknown
	Detail      string     `json:"detail,omitempty"`
	Login       string     `json:"login,omitempty"` // the command to run, when it needs a login
	Issuer      string     `json:"issuer,omitempty"`
	Expiry      *time.Time `json:"expiry,omitempty"`
	Refreshable bool       `json:"refreshable,omitempty"`
	Scopes      []string   `json:"scopes,omitempty"`
	// StepUp are the scopes the server asked for beyond the login's (a
	// 403 insufficient_scope a gateway recorded), which `login` asks for.
	StepUp []string `json:"stepUp,omitempty"`
	// noLogin: it asks for a Bearer token but offers no login (no
	// protected-resource metadata): a token in its "headers" is the fix,
	// not `auth login`, which could only fail.
	noLogin bool
}

func runAuthStatus(ctx context.Context, g *globals, w, stderr io.Writer, f authStatusFlags) error {
	cfg, err := g.loadForAuth(ctx, stderr, &f.config)
	if err != nil {
		return err
	}
	store := oauth.NewStore(g.DataDir())
	tokens := g.authTokens(f.config)
	defer tokens.Close()
	login := g.loginCommand(f.config)
	var out []authServerStatus
	for _, s := range cfg.Servers() {
		if s.Type != config.TypeStdio {
			out = append(out, authServerStatus{Server: s.Name, Transport: s.Type, URL: maskURL(s.URL)})
		}
	}
	servers := cfg.Servers()
	byName := map[string]config.Server{}
	for _, s := range servers {
		byName[s.Name] = s
	}
	var wg sync.WaitGroup
	for i := range out {
		wg.Go(func() {
			st := &out[i]
			authState(ctx, store, tokens, byName[st.Server], st, f.timeout)
			if st.Auth == authNeedsLogin && !st.noLogin || len(st.StepUp) > 0 {
				st.Login = login(st.Server)
			}
		})
	}
	wg.Wait()
	if f.asJSON {
		if out == nil {
			out = []authServerStatus{}
		}
		if err := writeJSON(w, map[string]any{"servers": out}); err != nil {
			return err
		}
	} else if len(out) == 0 {
		fmt.Fprintf(w, "%s has no http or sse servers: nothing needs a login.\n", f.config)
	} else {
		tw := termtext.NewTable(w)
		fmt.Fprintln(tw, "SERVER\tTYPE\tAUTH\tDETAIL")
		for _, st := range out {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", st.Server, st.Transport, authLabels[st.Auth], dash(oneLine(st.Detail, 500))) // an authorization server's words may be in it
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		for _, st := range out {
			switch {
			case st.Login != "" && st.Auth == authLoggedIn:
				fmt.Fprintf(w, "\n%s asks for more scopes (%s): run `%s`\n", st.Server, strings.Join(st.StepUp, " "), st.Login)
			case st.Login != "":
				fmt.Fprintf(w, "\n%s needs a login: run `%s`\n", st.Server, st.Login)
			}
		}
	}
	var need, token, unknown, stepUp []string
	for _, st := range out {
		switch {
		case st.noLogin:
			token = append(token, st.Server)
		case st.Auth == authNeedsLogin:
			need = append(need, st.Server)
		case len(st.StepUp) > 0:
			stepUp = append(stepUp, st.Server)
		case st.Auth == authUnknown:
			unknown = append(unknown, st.Server)
		}
	}
	var says []string
	// servers, then what one of them or several say.
	say := func(servers []string, one, several string) {
		switch len(servers) {
		case 0:
		case 1:
			says = append(says, servers[0]+one)
		default:
			says = append(says, strings.Join(servers, ", ")+several)
		}
	}
	say(need, " needs a login", " need a login")
	say(token, ` needs a token in its "headers"`, ` need a token in their "headers"`)
	say(stepUp, " asks for more scopes (a step-up)", " ask for more scopes (a step-up)")
	if len(unknown) > 0 {
		// A server that could not be asked (unreachable, its certificate
		// not trusted) may need a login too: not a clean bill.
		says = append(says, strings.Join(unknown, ", ")+" could not be asked (the detail above says why)")
	}
	if len(says) == 0 {
		return nil
	}
	return exitError{errors.New(strings.Join(says, "; ")), degradedExit}
}

// authState fills in st for server s: from its stored login, which the
// server is asked to take (checkLogin), its headers, or by asking the
// server.
func authState(ctx context.Context, store *oauth.Store, tokens *oauth.Tokens, s config.Server, st *authServerStatus, timeout time.Duration) {
	creds, err := store.Load(s.Name)
	if err == nil && creds != nil && creds.For(s.URL) && creds.Refused == "" {
		if refused := checkLogin(ctx, tokens, s, timeout); refused != nil {
			st.Auth, st.Detail = authNeedsLogin, refused.Reason
			return
		}
		creds, err = store.Load(s.Name) // a refresh may have replaced it
	}
	switch {
	case err != nil:
		st.Auth, st.Detail = authNeedsLogin, err.Error()
		return
	case creds != nil && !creds.For(s.URL):
		st.Auth, st.Detail = authNeedsLogin, fmt.Sprintf("the stored login is for %s, not this url", maskURL(creds.URL))
		return
	case creds != nil && creds.Refused != "":
		st.Auth, st.Detail = authNeedsLogin, creds.Refused
		return
	case creds != nil:
		st.Issuer, st.Scopes, st.Refreshable = creds.Issuer, creds.Scopes, creds.Token.RefreshToken != ""
		if !creds.Token.Expiry.IsZero() {
			st.Expiry = &creds.Token.Expiry
		}
		st.Auth, st.Detail = authLoggedIn, describeCreds(creds, time.Now())
		if !st.Refreshable && st.Expiry != nil && time.Now().After(*st.Expiry) {
			st.Auth = authNeedsLogin
		}
		if p := creds.PendingScopes(); len(p) > 0 {
			// A gateway's call was refused 403 for these: the login
			// works for the rest, and the next one asks for them.
			st.StepUp = p
			st.Detail += "; step-up pending: the server asked for " + strings.Join(p, " ")
		}
		return
	case s.StaticAuthorization():
		st.Auth, st.Detail = authHeaders, "Authorization header from the config"
		return
	}
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var ch *oauth.Challenge
	hc, err := serverHTTPClient(s, 0)
	if err == nil {
		ch, err = oauth.Probe(pctx, hc, s.Type, s.URL)
	}
	switch {
	case err != nil:
		st.Auth, st.Detail = authUnknown, secretsOf(s)(err.Error()) // Go's HTTP errors quote the whole URL
		if fix := s.TLSFix(err); fix != "" {
			st.Detail += ": " + fix
		}
	case ch != nil && !oauth.OffersLogin(pctx, hc, s.URL, ch):
		st.Auth, st.noLogin = authNeedsLogin, true
		st.Detail = "it answers 401 with a Bearer challenge but offers no OAuth login (no protected-resource metadata, RFC 9728): it takes a token you give it: put it in the entry's \"headers\" (\"Authorization\": \"Bearer ${TOKEN}\")"
	case ch != nil:
		st.Auth, st.Detail = authNeedsLogin, "it answers 401 with a Bearer challenge and no login is stored"
	case len(s.Headers) > 0:
		st.Auth, st.Detail = authHeaders, "its headers get it in"
	default:
		st.Auth = authNone
	}
}

// checkLogin asks server s, with its stored login, whether it takes it,
// through the transport a gateway uses: a token it refuses is refreshed
// (and the new one stored), and a refused refresh is recorded in the
// login, as a gateway's next request would. It returns why a login is
// needed, or nil; a server that cannot be asked is no verdict (nil).
func checkLogin(ctx context.Context, tokens *oauth.Tokens, s config.Server, timeout time.Duration) *oauth.NeedsLoginError {
	hc, err := serverHTTPClient(s, 0)
	if err != nil {
		return nil
	}
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := &http.Client{Transport: tokens.Transport(s.Name, s.URL, hc.Transport, func(error) {})}
	_, err = oauth.Probe(pctx, client, s.Type, s.URL)
	var nl *oauth.NeedsLoginError
	if errors.As(err, &nl) {
		return nl
	}
	return nil
}

func runAuthLogout(ctx context.Context, g *globals, w, stderr io.Writer, name string, f authLogoutFlags) error {
	hide := func(s string) string { return s }
	var hc *http.Client
	named := f.config != ""
	cfg, err := g.loadForAuth(ctx, stderr, &f.config)
	switch {
	case err != nil && named:
		return err
	case err != nil:
		// No config named and none running (or unreadable): the login is
		// removed all the same, its requests without the "tls" settings.
		f.config = ""
	default:
		s, err := remoteServer(cfg, f.config, name)
		if err != nil {
			var ue usageError
			if !errors.As(err, &ue) || !strings.HasPrefix(err.Error(), "no server") {
				return err
			}
			// A server gone from the config may still have a login to remove.
		} else {
			name, hide = s.Name, secretsOf(s)
			if hc, err = serverHTTPClient(s, oauth.DefaultHTTPTimeout); err != nil {
				return err
			}
		}
	}
	store := oauth.NewStore(g.DataDir())
	rep, err := oauth.Logout(ctx, store, name, &oauth.LogoutOptions{HTTPClient: hc, Timeout: f.timeout})
	if err != nil {
		if errors.Is(err, oauth.ErrNoLogin) {
			return usageError{fmt.Errorf("no login of %q is stored in %s (`toolgate auth status --config FILE` shows them)", name, store.Dir())}
		}
		return err
	}
	fmt.Fprint(w, describeLogout(name, rep, hide, time.Now()))
	return nil
}

// describeLogout says what a logout removed, what it ended at the
// authorization server, and plainly what it did NOT end, why, and what to
// do: the tokens stay valid there until they expire.
func describeLogout(name string, rep *oauth.LogoutReport, hide func(string) string, now time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Logged out of %s: removed %s. A running gateway stops using it at its next request to the server.\n", name, rep.Path)
	if rep.Login == nil {
		fmt.Fprintf(&b, "NOT revoked: the login file could not be read (%s), so its tokens are unknown: revoke toolgate's access at the authorization server to end them now.\n", rep.Unread)
		return b.String()
	}
	issuer := rep.Login.Issuer
	if len(rep.Steps) == 0 {
		fmt.Fprintf(&b, "Nothing to end at the authorization server %s: the login held no live token and no client toolgate registered.\n", issuer)
		return b.String()
	}
	part := func(s oauth.LogoutStep) string {
		switch s.Part {
		case oauth.PartAccessToken:
			if exp := rep.Login.Token.Expiry; !exp.IsZero() {
				return "the access token (it expires in " + exp.Sub(now).Round(time.Second).String() + ")"
			}
			return "the access token (it does not expire)"
		case oauth.PartClient:
			return "the client " + rep.Login.Client.ID + " toolgate registered"
		}
		return "the " + s.Part
	}
	var revoked []string
	var deleted bool
	var whys []string                // the reasons, in order
	notDone := map[string][]string{} // reason → the parts it left
	tokensLeft := 0
	clientLeft := map[string]bool{} // reason → it left the client
	for _, s := range rep.Steps {
		switch {
		case s.Done && s.Part == oauth.PartClient:
			deleted = true
		case s.Done:
			revoked = append(revoked, "the "+s.Part)
		default:
			why := hide(s.Why)
			if _, ok := notDone[why]; !ok {
				whys = append(whys, why)
			}
			notDone[why] = append(notDone[why], part(s))
			if s.Part == oauth.PartClient {
				clientLeft[why] = true
			} else {
				tokensLeft++
			}
		}
	}
	if len(revoked) > 0 {
		fmt.Fprintf(&b, "Revoked at the authorization server %s: %s (RFC 7009).\n", issuer, strings.Join(revoked, " and "))
	}
	if deleted {
		fmt.Fprintf(&b, "Deleted there the client %s toolgate registered (RFC 7592).\n", rep.Login.Client.ID)
	}
	for _, why := range whys {
		verb := "revoked"
		if clientLeft[why] {
			verb = "deleted"
			if len(notDone[why]) > 1 {
				verb = "revoked or deleted"
			}
		}
		fmt.Fprintf(&b, "NOT %s at %s: %s: %s.\n", verb, issuer, strings.Join(notDone[why], " and "), oneLine(why, 300))
	}
	switch tokensLeft {
	case 0:
	case 1:
		fmt.Fprintf(&b, "That token stays valid until it expires: to end it now, revoke toolgate's access at the authorization server (its connected apps or security settings).\n")
	default:
		fmt.Fprintf(&b, "Those tokens stay valid until they expire: to end them now, revoke toolgate's access at the authorization server (its connected apps or security settings).\n")
	}
	return b.String()
}

// canSave checks that a login file can be written in dir (made if need
// be) before the user approves in a browser: a full or read-only data
// folder used to fail only after the approval, which was then lost. It
// writes and removes a file as large as a login's.
func canSave(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".probe-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	_, err = f.Write(make([]byte, 4<<10))
	if serr := f.Sync(); err == nil {
		err = serr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// serverHTTPClient is the client of the requests made for remote server s
// outside its MCP connection (a login's discovery, registration and token
// requests; the auth status probe): its "tls" settings over a plain
// transport (go-sdk's metadata fetches keep their checks on one), with
// timeout (0: the context's).
func serverHTTPClient(s config.Server, timeout time.Duration) (*http.Client, error) {
	tc, err := s.TLS.Client()
	if err != nil {
		return nil, fmt.Errorf("server %q: %w", s.Name, err)
	}
	return tlsHTTPClient(tc, timeout), nil
}

// lines sends the lines read from in on the channel it returns, closed at
// the end of in (nil for a nil in). Reading stops with the process: a line
// the user never types holds nothing up.
func lines(in io.Reader) <-chan string {
	if in == nil {
		return nil
	}
	ch := make(chan string)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(in)
		sc.Buffer(make([]byte, 0, 4096), 64<<10)
		for sc.Scan() {
			ch <- sc.Text()
		}
	}()
	return ch
}
