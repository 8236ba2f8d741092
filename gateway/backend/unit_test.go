package backend

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolgate/toolgate/gateway/config"
)

func TestChildEnv(t *testing.T) {
	parent := []string{
		"PATH=/usr/bin", "HOME=/home/u", "LC_ALL=C.UTF-8", "XDG_CACHE_HOME=/c",
		"AWS_SECRET_ACCESS_KEY=nope", "GITHUB_TOKEN=nope", "npm_config__authToken=nope",
		"EXTRA_ONE=1", "NOEQUALS", "=weird",
	}
	tests := []struct {
		name  string
		allow []string
		own   map[string]string
		want  []string
	}{
		{
			name:  "default allowlist",
			allow: DefaultEnvAllow,
			want:  []string{"HOME=/home/u", "LC_ALL=C.UTF-8", "PATH=/usr/bin", "XDG_CACHE_HOME=/c"},
		},
		{
			name:  "own env wins and adds",
			allow: DefaultEnvAllow,
			own:   map[string]string{"PATH": "/opt/bin", "API_KEY": "k"},
			want:  []string{"API_KEY=k", "HOME=/home/u", "LC_ALL=C.UTF-8", "PATH=/opt/bin", "XDG_CACHE_HOME=/c"},
		},
		{
			name:  "extra names and prefixes",
			allow: append([]string{"EXTRA_*", "GITHUB_TOKEN"}, DefaultEnvAllow...),
			want:  []string{"EXTRA_ONE=1", "GITHUB_TOKEN=nope", "HOME=/home/u", "LC_ALL=C.UTF-8", "PATH=/usr/bin", "XDG_CACHE_HOME=/c"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := childEnv(parent, tc.allow, tc.own)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("childEnv (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLookPath(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "tool")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "data"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// Scripts whose #! line names what cannot run (a moved virtualenv's
	// python): "start …: no such file or directory" of a file that is there.
	bin := filepath.Join(dir, "bin")
	scripts := map[string]string{
		"venv":   "#!" + filepath.Join(dir, "old-venv", "bin", "python3") + " -u\nimport sys\n",
		"chain":  "#!" + filepath.Join(bin, "venv") + "\n",
		"self":   "#!" + filepath.Join(bin, "self") + "\n", // the kernel stops it: left to the start
		"env":    "#!/usr/bin/env python3\n",
		"binary": "\x7fELF\x02\x01\x01",
		"data":   "#!" + filepath.Join(dir, "data") + "\n",
		"spaced": "#! \t" + exe + "\n",
	}
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, text := range scripts {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(text), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	badVenv := fmt.Sprintf("%q names %q on its #! line, which cannot run: it is not there: install it, or correct that line", filepath.Join(bin, "venv"), filepath.Join(dir, "old-venv", "bin", "python3"))
	tests := []struct {
		name, cmd, path, dir string
		want                 string
		wantErr              string
	}{
		{name: "on PATH", cmd: "tool", path: "/nonexistent:" + dir, want: exe},
		{name: "not on PATH", cmd: "tool", path: "/nonexistent", wantErr: "not found in PATH"},
		{name: "absolute", cmd: exe, want: exe},
		{name: "relative to cwd", cmd: "./tool", dir: dir, want: "./tool"},
		{name: "not executable", cmd: filepath.Join(dir, "data"), wantErr: "not executable"},
		{name: "directory", cmd: dir, wantErr: "is a directory"},
		{name: "interpreter not there", cmd: filepath.Join(bin, "venv"), wantErr: badVenv},
		{name: "interpreter not there, on PATH", cmd: "venv", path: dir + ":" + bin, wantErr: badVenv},
		{name: "a script naming such a script", cmd: filepath.Join(bin, "chain"), wantErr: badVenv},
		{name: "interpreter not executable", cmd: filepath.Join(bin, "data"), wantErr: fmt.Sprintf("on its #! line, which cannot run: %q is not executable", filepath.Join(dir, "data"))},
		{name: "a script naming itself", cmd: filepath.Join(bin, "self"), want: filepath.Join(bin, "self")},
		{name: "env", cmd: filepath.Join(bin, "env"), want: filepath.Join(bin, "env")},
		{name: "not a script", cmd: filepath.Join(bin, "binary"), want: filepath.Join(bin, "binary")},
		{name: "space after #!", cmd: filepath.Join(bin, "spaced"), want: filepath.Join(bin, "spaced")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := lookPath(tc.cmd, tc.path, tc.dir)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("lookPath = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestFindID(t *testing.T) {
	tests := []struct {
		name, head, tail string
		want             string
		ok               bool
	}{
		{name: "go-sdk order", head: `{"jsonrpc":"2.0","id":17,"result":{"content":[{"type":"text","text":"xxxx`, want: "17", ok: true},
		{name: "id first", head: `{"id":"abc","jsonrpc":"2.0","result":`, want: `"abc"`, ok: true},
		{name: "typescript order", head: `{"result":{"content":[`, tail: `xxxx"}]},"jsonrpc":"2.0","id":5}`, want: "5", ok: true},
		{name: "string id with escapes", tail: `,"id":"a\"b"}` + "\n", want: `"a\"b"`, ok: true},
		{name: "none", head: `{"result":{"text":"`, tail: `xxxxx"}}`, ok: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := findID([]byte(tc.head), []byte(tc.tail))
			if got != tc.want || ok != tc.ok {
				t.Errorf("findID = %q, %v; want %q, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
	if _, ok := responseID([]byte(`{"jsonrpc":"2.0","id":3,"method":"sampling/createMessage"`), nil); ok {
		t.Errorf("responseID took a request's id")
	}
}

func TestReadLine(t *testing.T) {
	in := "short\n" + strings.Repeat("a", 100) + "\nlast-no-newline"
	br := bufio.NewReaderSize(strings.NewReader(in), 16)
	var got []string
	for {
		line, n, head, tail, err := readLine(br, 50)
		switch {
		case line == nil && n > 0:
			got = append(got, "TOOLONG:"+string(head[:5])+"…"+strings.TrimSpace(string(tail[len(tail)-5:])))
		case n > 0:
			got = append(got, string(line))
		}
		if err != nil {
			break
		}
	}
	want := []string{"short\n", "TOOLONG:aaaaa…aaaa", "last-no-newline"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("lines (-want +got):\n%s", diff)
	}
}

func FuzzReadLineFindID(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`+"\n"+`banner`), 20)
	f.Add([]byte(`{"result":{},"jsonrpc":"2.0","id":"x"}`), 8)
	f.Fuzz(func(t *testing.T, data []byte, max int) {
		if max <= 0 || max > 1<<16 {
			return
		}
		br := bufio.NewReaderSize(bytes.NewReader(data), 16)
		total := 0
		for {
			line, n, head, tail, err := readLine(br, max)
			total += n
			if line != nil && len(line) > max {
				t.Fatalf("line of %d bytes exceeds max %d", len(line), max)
			}
			if id, ok := findID(head, tail); ok && id == "" {
				t.Fatal("empty id")
			}
			if err != nil {
				break
			}
		}
		if total != len(data) {
			t.Fatalf("consumed %d of %d bytes", total, len(data))
		}
	})
}

func TestMasker(t *testing.T) {
	mask := newMasker(config.Server{
		Env:     map[string]string{"API_KEY": "abcd-1234-secret", "DEBUG": "1"},
		Headers: map[string]string{"Authorization": "Bearer tok_0123456789"},
	})
	tests := []struct{ in, want string }{
		{"using key abcd-1234-secret now", "using key *** now"},
		{"auth tok_0123456789 ok", "auth *** ok"},
		{"Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.x.y", "Authorization: Bearer ***"},
		{"token=zzzzzzzz other=1", "token=*** other=1"},
		{`{"password": "hunter22"}`, `{"password": "***"}`},
		{"key sk-ant-0123456789abcdefghij", "key sk-***"},
		{"gh ghp_0123456789abcdefghijABCD", "gh gh*_***"},
		{"debug level 1", "debug level 1"},
	}
	for _, tc := range tests {
		if got := mask(tc.in); got != tc.want {
			t.Errorf("mask(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// A secret in what a server said is masked in an OwnWords, which stays
// one: a key that is not admin still reads the gateway's words, and
// errors.Is still sees its mark and cause.
func TestMaskKeepsOwnWords(t *testing.T) {
	mask := newErrMasker(config.Server{Env: map[string]string{"API_KEY": "abcd-1234-secret"}})
	cause := errors.New("dial with abcd-1234-secret: EOF")
	err := maskErr(&UnavailableError{Server: "s", Err: &OwnWords{Before: "the connection closed before the server answered (", Said: cause,
		After: "): " + ErrMayHaveRun.Error(), Mark: ErrMayHaveRun}}, mask)
	if want := `backend "s" is unavailable: the connection closed before the server answered (dial with ***: EOF): ` + ErrMayHaveRun.Error(); err.Error() != want {
		t.Errorf("masked: %q\nwant %q", err, want)
	}
	if want := `backend "s" is unavailable: the connection closed before the server answered (` + HiddenFromKey + "): " + ErrMayHaveRun.Error(); ErrForKey(err) != want {
		t.Errorf("masked, for a key: %q\nwant %q", ErrForKey(err), want)
	}
	if !errors.Is(err, ErrMayHaveRun) || !errors.Is(err, cause) {
		t.Errorf("masked: errors.Is no longer sees ErrMayHaveRun (%v) or the cause (%v)", errors.Is(err, ErrMayHaveRun), errors.Is(err, cause))
	}
}

// A command not found says the search path to the operator, and not to a
// model (ForModel): it is the host's layout, and a model cannot change it.
func TestForModelLeavesOutThePath(t *testing.T) {
	_, err := resolveCommand(config.Server{Name: "time", Type: config.TypeStdio, Command: "toolgate-no-such-command-xyz"}, []string{"PATH=/opt/secret/bin:/usr/bin"})
	if err == nil || !strings.Contains(err.Error(), "PATH=/opt/secret/bin:/usr/bin") {
		t.Fatalf("the operator's error lacks the path: %v", err)
	}
	got := ForModel(`server "time" is down: ` + err.Error())
	if want := `server "time" is down: command "toolgate-no-such-command-xyz" not found in PATH: check command/PATH (the server's "env" may set PATH)`; got != want {
		t.Errorf("ForModel: %q\nwant %q", got, want)
	}
}

// TestCheckCommandSaysAll: an entry with a variable unset and a command
// not installed is said to lack both, so that it is fixed in one pass (it
// was said to want the variable and, once that was set, the command), as
// `toolgate servers`, `toolgate import` and a gateway's down state say it.
// The command is not looked for when an unset variable is in what finds
// it: it holds "" there.
func TestCheckCommandSaysAll(t *testing.T) {
	env := []string{"PATH=/usr/bin:/bin"}
	srv := config.Server{Name: "clock", Type: config.TypeStdio, Command: "toolgate-no-such-command-xyz",
		Env: map[string]string{"TOKEN": ""}, Unset: []config.UnsetVar{{Name: "CLOCK_TOKEN", Field: "env.TOKEN"}}}
	err := CheckCommand(srv, env)
	for _, want := range []string{"variable ${CLOCK_TOKEN} (env.TOKEN) is not set in toolgate's environment", `; and command "toolgate-no-such-command-xyz" not found in PATH`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckCommand: %v\nwant it to say %q", err, want)
		}
	}
	for _, field := range []string{"command", "cwd", "env.PATH"} {
		s := srv
		s.Unset = []config.UnsetVar{{Name: "V", Field: field}}
		if err := CheckCommand(s, env); err == nil || strings.Contains(err.Error(), "not found") {
			t.Errorf("unset variable in %s: %v, want the variable alone", field, err)
		}
	}
	srv.Command = "sh"
	if err := CheckCommand(srv, env); err == nil || strings.Contains(err.Error(), "; and") {
		t.Errorf("a command that is found: %v, want the variable alone", err)
	}
	srv.Unset = nil
	if err := CheckCommand(srv, env); err != nil {
		t.Errorf("nothing lacking: %v", err)
	}
}

// TestMaskKeepsRefused: a RefusedError (a call the server refused for
// want of a scope) stays one, masked inside, as an UnavailableError does:
// execute_tool reads its Err, which showed a configured secret that the
// error's own text hid.
func TestMaskKeepsRefused(t *testing.T) {
	mask := newErrMasker(config.Server{Env: map[string]string{"API_KEY": "abcd-1234-secret"}})
	cause := errors.New(`{"error":"insufficient_scope","key":"abcd-1234-secret"}`)
	err := maskErr(&RefusedError{Server: "s", Err: &OwnWords{Before: "the server answered 403 (", Said: cause, After: "): log in again"}}, mask)
	var r *RefusedError
	if !errors.As(err, &r) {
		t.Fatalf("masked: %T, no longer a RefusedError", err)
	}
	for _, text := range []string{err.Error(), ErrText(r.Err), ErrForKey(err), ErrForKey(r.Err)} {
		if strings.Contains(text, "abcd-1234-secret") {
			t.Errorf("the secret shows: %q", text)
		}
	}
	if !errors.Is(err, cause) {
		t.Error("masked: errors.Is no longer sees the cause")
	}
}
