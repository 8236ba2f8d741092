package backend

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// DefaultEnvAllow is the part of the gateway's environment that a stdio
// backend inherits; everything else (API keys, tokens, cloud credentials the
// gateway happens to run with) stays out unless the server's own "env" sets it.
// An entry ending in "*" is a prefix.
//
// What is in and why: PATH/HOME/USER/LOGNAME/SHELL/TMPDIR/TERM so that
// commands, caches and temp files work; LANG, LANGUAGE, LC_* and TZ for
// locale and time; XDG_* for per-user folders; the proxy variables and the CA
// bundle locations because npx/uvx must reach their registries through the
// same network setup as the user. Not in: npm_config_* (may carry registry
// auth tokens), NODE_OPTIONS (changes code that runs), cloud and API
// credentials. Options.EnvAllow adds names; a server's "env" adds values.
var DefaultEnvAllow = []string{
	"PATH", "HOME", "USER", "LOGNAME", "SHELL", "TMPDIR", "TERM",
	"LANG", "LANGUAGE", "LC_*", "TZ", "XDG_*",
	"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY",
	"http_proxy", "https_proxy", "no_proxy", "all_proxy",
	"SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS",
}

// childEnv builds a child's environment: the allowlisted part of parent plus
// own (own wins). The result is sorted for stable logs and tests.
func childEnv(parent []string, allow []string, own map[string]string) []string {
	vars := map[string]string{}
	for _, kv := range parent {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			continue
		}
		if envAllowed(k, allow) {
			vars[k] = v
		}
	}
	for k, v := range own {
		vars[k] = v
	}
	out := make([]string, 0, len(vars))
	for k, v := range vars {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}

func envAllowed(name string, allow []string) bool {
	for _, a := range allow {
		if p, ok := strings.CutSuffix(a, "*"); ok {
			if strings.HasPrefix(name, p) {
				return true
			}
		} else if a == name {
			return true
		}
	}
	return false
}

func envLookup(env []string, name string) string {
	for _, kv := range slices.Backward(env) {
		if k, v, ok := strings.Cut(kv, "="); ok && k == name {
			return v
		}
	}
	return ""
}

// errNotFound says a command is not on the child's PATH.
var errNotFound = errors.New("not found")

// lookPath resolves name like a shell would with the child's PATH (which the
// server's env may override), relative to dir for names containing a slash.
func lookPath(name, pathEnv, dir string) (string, error) {
	if strings.Contains(name, "/") {
		p := name
		if !filepath.IsAbs(p) && dir != "" {
			p = filepath.Join(dir, p)
		}
		if err := executable(p); err != nil {
			return "", err
		}
		return name, nil
	}
	for d := range strings.SplitSeq(pathEnv, string(os.PathListSeparator)) {
		if d == "" {
			d = "."
		}
		p := filepath.Join(d, name)
		err := executable(p)
		if err == nil {
			return p, nil
		}
		if errors.Is(err, errBadInterpreter) {
			return "", err // what a shell runs too, and fails on
		}
	}
	return "", fmt.Errorf("%q %w in PATH", name, errNotFound)
}

func executable(p string) error { return runnable(p, 0) }

// runnable is executable for a file named by depth #! lines before it.
func runnable(p string, depth int) error {
	fi, err := os.Stat(p)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%q %w", p, errNotFound)
		}
		return err
	}
	if fi.IsDir() {
		return fmt.Errorf("%q is a directory", p)
	}
	if fi.Mode()&0o111 == 0 {
		return fmt.Errorf("%q is not executable", p)
	}
	return interpreter(p, depth)
}

// errBadInterpreter says a script's #! line names a program that cannot run.
var errBadInterpreter = errors.New("which cannot run")

// interpreter checks the program a script's #! line names, as the kernel
// reads it (the first 256 bytes, an absolute path): execve fails with
// ENOENT when it does not exist, which read "start /path/to/script: no
// such file or directory" of a script that is there. The usual case is a
// Python virtualenv's console script (mcp-server-…) whose venv was moved
// or rebuilt: its #! line names the venv's old python. A file that cannot
// be read, or is not a script, is left to the start, and so is a chain of
// scripts longer than the kernel follows (a script that names itself).
func interpreter(script string, depth int) error {
	if depth >= maxInterpreters {
		return nil
	}
	f, err := os.Open(script)
	if err != nil {
		return nil
	}
	defer f.Close()
	head := make([]byte, 256)
	n, _ := io.ReadFull(f, head)
	line, ok := bytes.CutPrefix(head[:n], []byte("#!"))
	if !ok {
		return nil
	}
	line, _, _ = bytes.Cut(line, []byte("\n"))
	fields := strings.Fields(string(line))
	if len(fields) == 0 || !filepath.IsAbs(fields[0]) {
		return nil
	}
	err = runnable(fields[0], depth+1)
	if err == nil || errors.Is(err, errBadInterpreter) {
		return err // the script it names names one that cannot run
	}
	why := err.Error()
	if errors.Is(err, errNotFound) {
		why = "it is not there"
	}
	return fmt.Errorf("%q names %q on its #! line, %w: %s: install it, or correct that line (a Python virtualenv's scripts name the venv's own python: recreate the venv, or reinstall the server into it)",
		script, fields[0], errBadInterpreter, why)
}

// maxInterpreters is how many #! lines in a chain the kernel follows
// (Linux: a script may name a script, four deep).
const maxInterpreters = 4
