package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
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
		{[]string{"serve", "--config"}, "serve: flag needs an argument: --config"},
		{[]string{"eval", "--limit-queries", "many"}, `eval: invalid argument "many" for "--limit-queries"`},
		{[]string{"statuss"}, `unknown command "statuss" for "toolgate": did you mean "status"?`},
		{[]string{"keys", "revok", "ci"}, `unknown command "revok" for "toolgate keys": did you mean "revoke"?`},
		{[]string{"auth", "bogus"}, `unknown command "bogus" for "toolgate auth"`},
		{[]string{"servers", "disabel", "memory"}, `unknown command "disabel" for "toolgate servers": did you mean "disable"?`},
		{[]string{"keys", "revoke"}, "keys revoke: accepts 1 arg(s), received 0 (usage: toolgate keys revoke NAME"},
		{[]string{"import"}, "import: requires at least 1 arg(s), only received 0 (usage: toolgate import FILE..."},
		{[]string{"status", "extra"}, `unknown command "extra" for "toolgate status"`},
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
