package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// complete runs cobra's completion request (what the shell scripts of
// `toolgate completion` run on Tab) and returns the words offered, and
// the whole output.
func complete(t *testing.T, dataDir string, args ...string) ([]string, string) {
	t.Helper()
	cmd := toolgateCmd(t, dataDir, append([]string{"__complete"}, args...)...)
	cmd.Env = append(cmd.Env, "TOOLGATE_CONFIG=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("toolgate __complete %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	var words []string
	for _, line := range strings.Split(string(out), "\n") {
		if line == "" || strings.HasPrefix(line, ":") || strings.HasPrefix(line, "Completion ended") {
			continue
		}
		word, _, _ := strings.Cut(line, "\t")
		words = append(words, word)
	}
	return words, string(out)
}

// TestCompletion: Tab completes what a user would otherwise look up: the
// server names of the config for the commands and flags that take one,
// the profiles of the config for --profile, the data folder's API keys for
// keys revoke. Completing after -c FILE failed: cobra parses the flags
// twice, and a --config read once took the second parse for a second
// --config ("--config was given twice"), so nothing completed.
func TestCompletion(t *testing.T) {
	dataDir := t.TempDir()
	cfg := filepath.Join(t.TempDir(), "toolgate.json")
	if err := os.WriteFile(cfg, []byte(`{"mcpServers": {"memory": {"command": "true"}, "web": {"url": "https://example.invalid/mcp"}},
		"toolgate": {"profiles": {"dev": {"servers": ["memory"]}, "ops": {"servers": ["web"]}}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := toolgateCmd(t, dataDir, "keys", "create", "--name", "ci").CombinedOutput(); err != nil {
		t.Fatalf("keys create: %v\n%s", err, out)
	}
	// A held definition and one in force: tools approve offers the held one.
	sum := strings.Repeat("a", 64)
	pin := `{"pinned":"` + sum + `","firstSeen":"2026-12-01T00:00:00Z","current":"` + sum + `","seen":"2026-12-01T00:00:00Z"`
	if err := os.MkdirAll(filepath.Join(dataDir, "quarantine"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dataDir, "quarantine", "pins.json"), []byte(`{"version":1,"tools":{"memory__evil":`+pin+
		`,"quarantine":{"since":"2026-12-01T00:00:00Z","changed":true}},"memory__fine":`+pin+`}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"tools", "approve", ""}, []string{"memory__evil"}},
		{[]string{"servers", "disable", "-c", cfg, ""}, []string{"memory", "web"}},
		{[]string{"servers", "restart", "--config", cfg, "m"}, []string{"memory"}},
		{[]string{"servers", "remove", "-c", cfg, ""}, []string{"memory", "web"}},
		{[]string{"servers", "enable", "-c", cfg, ""}, []string{"memory", "web"}},
		{[]string{"auth", "login", "-c", cfg, ""}, []string{"web"}}, // a login is for http and sse servers
		{[]string{"auth", "logout", "-c", cfg, ""}, []string{"web"}},
		{[]string{"search", "-c", cfg, "--server", ""}, []string{"memory", "web"}},
		{[]string{"learn", "-c", cfg, "--reset", "--server", ""}, []string{"memory", "web"}},
		{[]string{"audit", "tail", "-c", cfg, "--server", ""}, []string{"memory", "web"}},
		{[]string{"serve", "-c", cfg, "--profile", ""}, []string{"dev", "ops"}},
		{[]string{"search", "-c", cfg, "--profile", "o"}, []string{"ops"}},
		{[]string{"keys", "create", "-c", cfg, "--profile", ""}, []string{"dev", "ops"}},
		{[]string{"keys", "revoke", ""}, []string{"ci"}},
		// One name only: a second word is no server.
		{[]string{"servers", "disable", "-c", cfg, "memory", ""}, nil},
		{[]string{"ser"}, []string{"serve", "servers"}},
		// Flags that take one of a few words: those words.
		{[]string{"search", "--mode", ""}, []string{"bm25", "vector", "hybrid", "rrf"}},
		{[]string{"serve", "--mode", "h"}, []string{"hybrid"}},
		{[]string{"eval", "--mode", ""}, []string{"bm25", "vector", "hybrid", "rrf", "all"}},
		{[]string{"import", "--format", "c"}, []string{"claude-desktop", "claude-code", "cursor", "codex"}},
		{[]string{"audit", "tail", "--decision", ""}, []string{"allowed", "denied", "rate-limited", "quarantined"}},
		{[]string{"audit", "tail", "--outcome", ""}, []string{"ok", "isError", "timeout", "down"}},
		{[]string{"status", "--log-level", ""}, []string{"debug", "info", "warn", "error"}},
	} {
		got, out := complete(t, dataDir, tc.args...)
		if !slices.Equal(got, tc.want) || strings.Contains(out, "[Error]") {
			t.Errorf("toolgate __complete %s: %q, want %q\n%s", strings.Join(tc.args, " "), got, tc.want, out)
		}
	}
}
