package backend

import (
	"net/url"
	"os"
	"strings"

	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/internal/mask"
)

// Secrets lists the configured secret values of servers: their env and
// header values, OAuth client secrets, the query values, password and
// key-like path segments of their URLs (hosted servers often take a key as
// ?api_key=… or as a segment of the path, …/mcp/sk-ak-…/sse, and Go's HTTP
// errors quote the whole URL), a URL's user name given without a password
// (https://TOKEN@host/…), and the keys on a command line (see
// commandLineSecrets). Masks built from them (package mask) hide them in
// what toolgate writes down.
func Secrets(servers ...config.Server) []string {
	var vals []string
	for _, srv := range servers {
		if u, err := url.Parse(srv.URL); err == nil && srv.URL != "" {
			for _, vs := range u.Query() {
				vals = append(vals, vs...)
			}
			if p, ok := u.User.Password(); ok {
				vals = append(vals, p)
			} else if u.User != nil {
				vals = append(vals, u.User.Username())
			}
			for _, seg := range strings.Split(u.Path, "/") {
				if mask.KeyLike(seg) {
					vals = append(vals, seg)
				}
			}
		}
		for _, v := range srv.Env {
			vals = append(vals, v)
		}
		for _, v := range srv.Headers {
			vals = append(vals, v)
		}
		if srv.OAuth != nil {
			vals = append(vals, srv.OAuth.ClientSecret)
		}
		vals = append(vals, commandLineSecrets(srv)...)
	}
	return vals
}

// commandLineSecrets lists the keys a server's entry puts on its command
// line or in its URL, which the errors of a server that exits (and what it
// echoes on stderr), /status and toolgate__server_status show: the value of
// a flag named like a secret (--api-key KEY, --token=KEY: mask.SecretName),
// and the value of each variable of toolgate's environment named like one
// (GITHUB_TOKEN, OPENAI_API_KEY) that the command, args, cwd or url hold,
// as a ${VAR} reference puts it there.
func commandLineSecrets(srv config.Server) []string {
	_, vals := mask.Args(srv.Args, mask.Hidden)
	line := strings.Join(append([]string{srv.Command, srv.Cwd, srv.URL}, srv.Args...), "\x00")
	for _, kv := range os.Environ() {
		name, val, _ := strings.Cut(kv, "=")
		if len(val) >= mask.MinLen && mask.SecretName(name) && strings.Contains(line, val) {
			vals = append(vals, val)
		}
	}
	return vals
}

// newMasker returns a function that hides the server's configured secrets
// and common credential patterns in a line of backend output.
func newMasker(srv config.Server) func(string) string {
	return mask.New(Secrets(srv)).String
}

// newErrMasker returns a function that hides the server's configured
// secrets (its URL's among them) in the text of an error.
func newErrMasker(srv config.Server) func(string) string {
	return mask.New(Secrets(srv)).Configured
}

// maskedError is an error whose text had secrets hidden; errors.Is and
// errors.As still see the error it hides them in.
type maskedError struct {
	err error
	msg string
}

func (e *maskedError) Error() string { return e.msg }
func (e *maskedError) Unwrap() error { return e.err }

// MaskError is maskErr for the commands: an error whose text had the
// secrets mask knows hidden, errors.Is and errors.As still seeing err.
func MaskError(err error, mask func(string) string) error { return maskErr(err, mask) }

// maskErr hides the secrets mask knows in err's text: a backend's errors
// reach /status, the console, logs and execute_tool's answer. An
// UnavailableError and a RefusedError stay one (the gateway reads their
// Err), masked inside, and OwnWords stays them, each part masked (what a key that is not admin
// reads of it stays the gateway's words), as do a refusal's and a login's
// errors around them.
func maskErr(err error, mask func(string) string) error {
	if err == nil || mask == nil {
		return err
	}
	switch e := err.(type) {
	case *UnavailableError:
		if inner := maskErr(e.Err, mask); inner != e.Err {
			return &UnavailableError{Server: e.Server, Err: inner}
		}
		return err
	case *RefusedError:
		if inner := maskErr(e.Err, mask); inner != e.Err {
			return &RefusedError{Server: e.Server, Err: inner}
		}
		return err
	case *OwnWords:
		m := OwnWords{Before: mask(e.Before), Said: maskErr(e.Said, mask), After: mask(e.After), Mark: e.Mark}
		if e.Then != nil {
			m.Then, _ = maskErr(e.Then, mask).(*OwnWords)
		}
		if m != *e {
			return &m
		}
		return err
	case refusedError:
		if inner := maskErr(e.error, mask); inner != e.error {
			return refusedError{inner}
		}
		return err
	case *loginError:
		if inner := maskErr(e.err, mask); inner != e.err {
			return &loginError{server: e.server, err: inner}
		}
		return err
	}
	if msg := mask(err.Error()); msg != err.Error() {
		return &maskedError{err: err, msg: msg}
	}
	return err
}
