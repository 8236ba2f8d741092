package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestUsageErrorsExitTwo holds the README's exit status 2 ("bad flags or
// arguments") for every kind of command-line mistake, with a message that
// names the command and what to do. A typo in a verb of a command that
// groups verbs used to print that command's help and exit 0, so a script's
// `toolgate keys revok ci` revoked nothing and succeeded.
func TestUsageErrorsExitTwo(t *testing.T) {
	dataDir := t.TempDir()
	cfg := filepath.Join(t.TempDir(), "toolgate.json")
	if err := os.WriteFile(cfg, []byte(`{"mcpServers": {"one": {"command": "true"}, "two": {"url": "https://example.invalid/mcp"}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--bogus"}, "unknown flag: --bogus (see toolgate --help)"},
		{[]string{"serve", "--bogus"}, "serve: unknown flag: --bogus (see toolgate serve --help)"},
		// A misspelt flag: the command's closest flag, its own or inherited
		// (cobra suggests commands only).
		{[]string{"status", "--jsn"}, "status: unknown flag: --jsn: did you mean --json? (see toolgate status --help)"},
		{[]string{"status", "-json"}, "status: unknown shorthand flag: 'j' in -json: did you mean --json? (see toolgate status --help)"},
		{[]string{"servers", "add", "x", "--confg", cfg, "--", "true"}, "servers add: unknown flag: --confg: did you mean --config?"},
		{[]string{"status", "--lg-level", "debug"}, "status: unknown flag: --lg-level: did you mean --log-level?"},
		{[]string{"serve", "--config"}, "serve: flag needs an argument: --config"},
		{[]string{"eval", "--limit-queries", "many"}, `eval: invalid argument "many" for "--limit-queries"`},
		{[]string{"statuss"}, `unknown command "statuss" for "toolgate": did you mean "status"?`},
		// An unknown command before a flag: the command named, not the flag
		// (it said `unknown flag: --config: a flag of toolgate audit tail, …`);
		// check and validate are what servers does to a config.
		{[]string{"serv", "--config", cfg}, `unknown command "serv" for "toolgate": did you mean "serve"? (see toolgate --help)`},
		{[]string{"check", "--config", cfg}, `unknown command "check" for "toolgate": did you mean "servers"? (see toolgate --help)`},
		{[]string{"validate", "-c", cfg}, `unknown command "validate" for "toolgate": did you mean "servers"? (see toolgate --help)`},
		{[]string{"keys", "revok", "ci"}, `unknown command "revok" for "toolgate keys": did you mean "revoke"?`},
		{[]string{"auth", "bogus"}, `unknown command "bogus" for "toolgate auth"`},
		{[]string{"servers", "disabel", "memory"}, `unknown command "disabel" for "toolgate servers": did you mean "disable"?`},
		{[]string{"keys", "revoke"}, "keys revoke: accepts 1 arg(s), received 0 (usage: toolgate keys revoke NAME"},
		{[]string{"import"}, "import: requires at least 1 arg(s), only received 0 (usage: toolgate import FILE..."},
		{[]string{"import", "--dry-run", cfg}, "--dry-run shows the change --into makes to a config file: give --into CONFIG, or leave --dry-run out"},
		{[]string{"import", "--format", "claude-code", importData(t, "proj/.vscode/mcp.json")}, "--format claude-code finds no servers in it, and it reads as a vscode file (4 servers): leave --format out, or give --format vscode"},
		// Words given to a command that takes none: said so, with the flag
		// the word may have meant; cobra said `unknown command "k1" for
		// "toolgate keys create"`, as if k1 were a verb.
		{[]string{"status", "extra"}, `status takes no arguments (got "extra") (usage: toolgate status [--addr`},
		{[]string{"keys", "create", "k1"}, "keys create takes no arguments; did you mean --name k1? (usage: toolgate keys create --name NAME"},
		{[]string{"serve", cfg}, "serve takes no arguments; did you mean --config " + cfg + "?"},
		{[]string{"servers", cfg}, `unknown command "` + cfg + `" for "toolgate servers": did you mean --config ` + cfg + "?"},
		{[]string{"status", "127.0.0.1:8931"}, "status takes no arguments; did you mean --addr 127.0.0.1:8931?"},
		{[]string{"logs", "100"}, "logs takes no arguments; did you mean --lines 100?"},
		{[]string{"learn", "reset"}, "learn takes no arguments; did you mean --reset?"},
		{[]string{"models", "fetch", "small"}, `models fetch takes no arguments (got "small") (usage: toolgate models fetch`},
		// The other way round: a flag for what the command takes as its argument.
		{[]string{"keys", "revoke", "--name", "k1"}, "keys revoke: unknown flag: --name: NAME is an argument, not a flag: toolgate keys revoke NAME"},
		{[]string{"servers", "remove", "--server", "one", "-c", cfg}, "servers remove: unknown flag: --server: NAME is an argument, not a flag: toolgate servers remove NAME"},
		// A flag of another command: which commands take it (it said
		// only "unknown flag").
		{[]string{"search", "--http", "127.0.0.1:8931", "read file"}, "search: unknown flag: --http: a flag of toolgate serve (see toolgate search --help)"},
		{[]string{"status", "--tools", "t.jsonl"}, "status: unknown flag: --tools: a flag of toolgate eval, toolgate index (see toolgate status --help)"},
		{[]string{"keys", "list", "--no-browser"}, "keys list: unknown flag: --no-browser: a flag of toolgate auth login (see"},
		{[]string{"search", "--limit", "0", "read file"}, "--limit 0: want 1 to 50 (leave it out for the default, 5)"},
		{[]string{"search", "--limit", "-3", "read file"}, "--limit -3: want 1 to 50 (leave it out for the default, 5)"},
		{[]string{"--log-level", "loud", "status"}, `--log-level "loud": want debug, info, warn or error`},
		// A NAME that is not there (these exited 1; auth login and logout:
		// TestAuthCommandErrors).
		{[]string{"servers", "remove", "nope", "-c", cfg}, `there is no server named "nope" in ` + cfg + ` (servers: one, two)`},
		{[]string{"servers", "disable", "nope", "-c", cfg}, `there is no server named "nope" in the config (servers: one, two)`},
		{[]string{"servers", "enable", "nope", "-c", cfg}, `there is no server named "nope" in the config (servers: one, two)`},
		{[]string{"servers", "restart", "nope", "-c", cfg}, `there is no server named "nope" in the config (servers: one, two)`},
		{[]string{"keys", "revoke", "nope"}, `no such key named "nope" in ` + filepath.Join(dataDir, "keys.jsonl")},
		{[]string{"tools", "approve", "one__nope"}, `no tool of that ID has been listed: "one__nope"`},
		// An entry its flags make invalid (these exited 1, as a broken file does).
		{[]string{"servers", "add", "web", "-c", cfg, "--url", "ftp://example.com/mcp"}, `mcpServers["web"].url: "ftp://example.com/mcp" is not an absolute http(s) URL`},
		{[]string{"servers", "add", "a__b", "-c", cfg, "--", "true"}, `invalid server name "a__b"`},
		// The built-in server's name: reserved, and another named (it read
		// as a rule of characters).
		{[]string{"servers", "add", "toolgate", "-c", cfg, "--", "true"}, `the name "toolgate" is reserved for the gateway's own management tools (toolgate__list_servers, …): choose another name, e.g. "toolgate-server"`},
		// --config given twice: the last one is not taken silently.
		{[]string{"servers", "add", "dup", "-c", cfg, "-c", cfg + ".2", "--", "true"}, "toolgate servers add edits one config file, and --config was given twice (" + cfg + ", then " + cfg + ".2): give it once"},
		{[]string{"servers", "remove", "one", "-c", cfg, "--config", cfg}, "toolgate servers remove edits one config file, and --config was given twice"},
		{[]string{"servers", "restart", "one", "-c", cfg, "-c", cfg}, "toolgate servers restart reads one config file"},
		{[]string{"eval", "--tools", cfg, "--queries", cfg, "--exact-names"}, "--queries and --exact-names exclude each other"},
		{[]string{"search", " "}, "search needs a query, e.g. toolgate search list files in a directory"},
		// NAME left out: the command's first word was taken for it, and
		// the error said to give the command.
		{[]string{"servers", "add", "-c", cfg, "--", "node", "server.js"}, "servers add needs the server's NAME before its command: toolgate servers add NAME --config FILE -- COMMAND"},
		{[]string{"servers", "add", "-c", cfg}, "servers add needs the server's NAME"},
		// A mistyped --http exited 1, as a failed start does.
		{[]string{"serve", "-c", cfg, "--http", "8931"}, `--http "8931": want host:port, e.g. 127.0.0.1:8931`},
		{[]string{"serve", "-c", cfg, "--http", "0.0.0.0:8931"}, "pass --allow-remote if you really mean it (it also needs API keys"},
		// A config without profiles said "(profiles: )".
		{[]string{"search", "-c", cfg, "--profile", "dev", "read file"}, `--profile "dev": the config defines no profiles: add one to it, "toolgate": {"profiles": {"dev": `},
		{[]string{"serve", "-c", cfg, "--profile", "dev"}, `--profile "dev": the config defines no profiles`},
		{[]string{"keys", "create", "--name", "k", "-c", cfg, "--profile", "dev"}, `--profile "dev": ` + cfg + ` defines no profiles`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			cmd := toolgateCmd(t, dataDir, tc.args...)
			cmd.Env = append(cmd.Env, "TOOLGATE_CONFIG=")
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), tc.want) {
				t.Errorf("toolgate %s: %v\n%s\nwant exit status 2 and %q", strings.Join(tc.args, " "), err, out, tc.want)
			}
		})
	}
	// A verb group alone still shows its help.
	for _, args := range [][]string{{"keys"}, {"auth"}, {}} {
		if out, err := toolgateCmd(t, dataDir, args...).CombinedOutput(); err != nil || !strings.Contains(string(out), "Available Commands:") {
			t.Errorf("toolgate %s: %v, want its help and exit status 0\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// TestTakenNameExitsOne: a NAME that is taken already is a command that
// failed (exit status 1, as the README's table says), for a key as for a
// server; one that is not there is a bad argument (exit status 2, above).
func TestTakenNameExitsOne(t *testing.T) {
	dataDir := t.TempDir()
	cfg := filepath.Join(t.TempDir(), "toolgate.json")
	if err := os.WriteFile(cfg, []byte(`{"mcpServers": {"one": {"command": "true"}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := toolgateCmd(t, dataDir, "keys", "create", "--name", "k1").CombinedOutput(); err != nil {
		t.Fatalf("keys create: %v\n%s", err, out)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"keys", "create", "--name", "k1"}, `a key named "k1" exists already`},
		{[]string{"servers", "add", "one", "-c", cfg, "--", "true"}, `a server named "one" is in ` + cfg + ` already`},
	} {
		cmd := toolgateCmd(t, dataDir, tc.args...)
		cmd.Env = append(cmd.Env, "TOOLGATE_CONFIG=")
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(out), tc.want) {
			t.Errorf("toolgate %s: %v\n%s\nwant exit status 1 and %q", strings.Join(tc.args, " "), err, out, tc.want)
		}
	}
}

// --expires: a date the calendar lacks says so; days, weeks and years are
// calendar ones; an expiry past what keys.jsonl can hold is refused (a
// hundred million days overflowed to 2246, silently).
func TestParseExpiry(t *testing.T) {
	now := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct{ in, want, err string }{
		{in: "30d", want: "2027-01-03T10:00:00Z"},
		{in: "2w", want: "2026-12-18T10:00:00Z"},
		{in: "1y", want: "2027-12-04T10:00:00Z"},
		{in: "12h", want: "2026-12-04T22:00:00Z"},
		{in: "2026-12-31", want: "2026-12-31T00:00:00Z"},
		{in: "2027-01-01T10:00:00+02:00", want: "2027-01-01T08:00:00Z"},
		{in: "2026-02-30", err: "not a date: day out of range"},
		{in: "2026-13-01", err: "not a date: month out of range"},
		{in: "0d", err: "want a positive number of days, weeks or years"},
		{in: "-5d", err: "want a duration like 90m, 12h, 30d, 2w or 1y, a date like 2026-12-31 (or today, yesterday, tomorrow) or a date and time like 2026-12-31T18:00 (in local time), or an RFC 3339 time"},
		{in: "100000000d", err: "100000000d is too far off (the last date a key may name is 9999-12-31): leave --expires out for a key that never expires"},
		{in: "9000y", err: "11026-12-04 is too far off (the last date a key may name is 9999-12-31)"},
		// After year 9999, which a date cannot write: the limit, not
		// "want a duration like …".
		{in: "10000-01-01", err: "10000-01-01 is too far off (the last date a key may name is 9999-12-31): leave --expires out"},
		{in: "10000-01-01T00:00:00Z", err: "10000-01-01T00:00:00Z is too far off (the last date a key may name is 9999-12-31)"},
		// Any time of the last day: it was refused as "9999-12-31 is too
		// far off (the last date a key may name is 9999-12-31)".
		{in: "9999-12-31", want: "9999-12-31T00:00:00Z"},
		{in: "9999-12-31T23:59:59Z", want: "9999-12-31T23:59:59Z"},
		{in: "9999-12-31T23:59:59-01:00", err: "10000-01-01 is too far off (the last date a key may name is 9999-12-31)"},
	} {
		got, _, err := parseExpiry(tc.in, now, neverCreate)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: %v, %v; want the error %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || got.UTC().Format(time.RFC3339) != tc.want {
			t.Errorf("%s: %v, %v; want %s", tc.in, got, err, tc.want)
		}
	}
}
