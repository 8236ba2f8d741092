package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// TestHelpTextFacts holds what `toolgate CMD --help` shows to facts a
// newcomer reads it for, command by command: every flag is described, no
// default is an empty "[]" or a Go type name, and every flag the usage line
// writes is one the command takes.
func TestHelpTextFacts(t *testing.T) {
	root, _ := newRootCmd(nil)
	root.InitDefaultCompletionCmd()
	useFlag := regexp.MustCompile(`(?:^|[\s\[(|])(--[a-z][a-z0-9-]*|-[a-zA-Z])\b`)
	var walk func(*cobra.Command)
	walk = func(cmd *cobra.Command) {
		for _, sub := range cmd.Commands() {
			if !sub.Hidden {
				walk(sub)
			}
		}
		cmd.InitDefaultHelpFlag()
		usages := cmd.Flags().FlagUsages() + cmd.InheritedFlags().FlagUsages()
		for _, bad := range []string{"(default [])", "float64Slice", "intSlice", "stringSlice", "durationSlice"} {
			if strings.Contains(usages, bad) {
				t.Errorf("%s --help shows %q: name the value in the flag's usage (`LIST`) and leave an empty default unsaid\n%s", cmd.CommandPath(), bad, usages)
			}
		}
		cmd.Flags().VisitAll(func(f *pflag.Flag) {
			if strings.TrimSpace(f.Usage) == "" {
				t.Errorf("%s --%s has no description", cmd.CommandPath(), f.Name)
			}
			if n := strings.Count(f.Usage, "(default"); n > 1 {
				t.Errorf("%s --%s says its default %d times: %q", cmd.CommandPath(), f.Name, n, f.Usage)
			}
		})
		// A usage line that writes flags writes --config among them when
		// the command takes it: health's and status's left it out, so
		// their --help read as if only --addr found the gateway.
		if f := cmd.LocalFlags().Lookup("config"); f != nil && strings.Contains(cmd.Use, "[-") && !strings.Contains(cmd.Use, "--config") && !strings.Contains(cmd.Use, "-c ") {
			t.Errorf("%s takes --config, but its usage line %q does not write it", cmd.CommandPath(), cmd.Use)
		}
		for _, m := range useFlag.FindAllStringSubmatch(cmd.Use, -1) {
			name := m[1]
			var f *pflag.Flag
			if strings.HasPrefix(name, "--") {
				f = cmd.Flags().Lookup(name[2:])
			} else {
				f = cmd.Flags().ShorthandLookup(name[1:])
			}
			if f == nil {
				t.Errorf("%s: its usage line %q writes %s, a flag it does not take", cmd.CommandPath(), cmd.Use, name)
			}
		}
	}
	walk(root)
}

// TestGlobalFlagsNameTheirEnv: --log-level and --log-format default to
// $TOOLGATE_LOG_LEVEL and $TOOLGATE_LOG_FORMAT (README, Global flags), and
// their help says so, as --data-dir's and --config's do.
func TestGlobalFlagsNameTheirEnv(t *testing.T) {
	root, _ := newRootCmd(nil)
	for flag, env := range map[string]string{"log-level": "$TOOLGATE_LOG_LEVEL", "log-format": "$TOOLGATE_LOG_FORMAT", "data-dir": "$TOOLGATE_DATA_DIR"} {
		if u := root.PersistentFlags().Lookup(flag).Usage; !strings.Contains(u, env) {
			t.Errorf("--%s: %q does not name %s, its default", flag, u, env)
		}
	}
}

// TestHelpTopics: `toolgate help TOPIC` with a topic that is no command
// is a usage error (exit status 2) with the command meant, as `toolgate
// TOPIC` is; it printed the whole help of toolgate (or of the group) and
// exited 0. An unknown shell of `completion` is one too: it printed the
// completion help and exited 0.
func TestHelpTopics(t *testing.T) {
	dataDir := t.TempDir()
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"help", "serv"}, 2, `unknown help topic "serv" for "toolgate": did you mean "serve"?`},
		{[]string{"help", "keys", "revok"}, 2, `unknown help topic "revok" for "toolgate keys": did you mean "revoke"?`},
		{[]string{"help", "xyzzy"}, 2, `unknown help topic "xyzzy" for "toolgate" (see toolgate --help)`},
		{[]string{"help", "keys", "revoke"}, 0, "toolgate keys revoke NAME"},
		{[]string{"help", "search", "list", "files"}, 0, "toolgate search QUERY..."},
		{[]string{"help"}, 0, "Available Commands:"},
		{[]string{"completion", "tcsh"}, 2, `unknown command "tcsh" for "toolgate completion"`},
		{[]string{"completion", "bsh"}, 2, `did you mean "bash"?`},
		{[]string{"completion"}, 0, "Available Commands:"},
		{[]string{"completion", "bash"}, 0, "__start_toolgate"},
	} {
		out, err := toolgateCmd(t, dataDir, tc.args...).CombinedOutput()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != tc.code || !strings.Contains(string(out), tc.want) {
			t.Errorf("toolgate %s: exit status %d\n%s\nwant exit status %d and %q", strings.Join(tc.args, " "), code, out, tc.code, tc.want)
		}
	}
}

// TestConfigFromEnvEverywhere holds the README's "Every --config defaults
// to $TOOLGATE_CONFIG" for status and logs, which look for gateways on the
// config's data folder: they took no $TOOLGATE_CONFIG and looked in the
// default one, where `servers disable` (which does) found none.
func TestConfigFromEnvEverywhere(t *testing.T) {
	dataDir, configData := t.TempDir(), t.TempDir()
	cfg := filepath.Join(t.TempDir(), "toolgate.json")
	if err := os.WriteFile(cfg, []byte(`{"mcpServers": {"one": {"command": "true"}}, "toolgate": {"dataDir": "`+configData+`"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	root, _ := newRootCmd(nil)
	var walk func(*cobra.Command)
	walk = func(cmd *cobra.Command) {
		for _, sub := range cmd.Commands() {
			walk(sub)
		}
		if f := cmd.Flags().Lookup("config"); f != nil && !strings.Contains(f.Usage, "$TOOLGATE_CONFIG") {
			t.Errorf("%s --config: %q does not name $TOOLGATE_CONFIG, its default", cmd.CommandPath(), f.Usage)
		}
	}
	walk(root)
	for _, args := range [][]string{{"logs"}, {"status"}} {
		cmd := toolgateCmd(t, dataDir, args...)
		cmd.Env = append(cmd.Env, "TOOLGATE_CONFIG="+cfg, "TOOLGATE_DATA_DIR=")
		out, _ := cmd.CombinedOutput()
		if !strings.Contains(string(out), "no gateway runs on the data folder "+configData) {
			t.Errorf("TOOLGATE_CONFIG=%s toolgate %s:\n%s\nwant it to look on the config's data folder %s", cfg, strings.Join(args, " "), out, configData)
		}
	}
}

// TestHelpCommandLines holds every toolgate command line a command's help
// writes (`toolgate --data-dir DIR keys list`, `keys create --print-hash`,
// `--since 1h --decision denied,rate-limited` under audit tail) to the
// command tree, as TestREADMECommandLines holds the README's: the command
// is one, each flag written is one it takes, and a line without
// placeholders' brackets parses as the command's flags.
func TestHelpCommandLines(t *testing.T) {
	root, _ := newRootCmd(nil)
	root.InitDefaultCompletionCmd()
	checked := 0
	check := func(where *cobra.Command, line string) {
		for _, m := range commandLine.FindAllStringSubmatch(line, -1) {
			text := m[1]
			for _, end := range []string{")", " >", ", ", "`", ": "} { // the line goes on in prose, or in the shell
				text, _, _ = strings.Cut(text, end)
			}
			text = strings.TrimRight(strings.TrimSpace(text), ".,:\"")
			cmd, rest := resolve(root, strings.Fields(text))
			if cmd == nil {
				continue // prose: "toolgate finds …"
			}
			checked++
			for _, f := range flagWord.FindAllStringSubmatch(strings.Join(rest, " "), -1) {
				if !hasFlag(cmd, f[1]) {
					t.Errorf("%s --help writes `toolgate %s`: %q has no flag %s (its flags: %s)", where.CommandPath(), text, cmd.CommandPath(), f[1], flagNames(cmd))
				}
			}
			if strings.ContainsAny(text, "[]|…") || strings.Contains(text, "...") {
				continue
			}
			fresh, _ := newRootCmd(nil)
			c, args := resolve(fresh, strings.Fields(text))
			if len(args) > 0 && strings.HasPrefix(args[len(args)-1], "-") {
				args = args[:len(args)-1] // a flag named, not given: (toolgate serve --http)
			}
			if err := c.ParseFlags(args); err != nil {
				t.Errorf("%s --help writes `toolgate %s`, which does not parse: %v", where.CommandPath(), text, err)
			}
		}
	}
	var walk func(*cobra.Command)
	walk = func(cmd *cobra.Command) {
		for _, sub := range cmd.Commands() {
			walk(sub)
		}
		for _, line := range strings.Split(cmd.Long+"\n"+cmd.Short, "\n") {
			// `keys create --print-hash`: a command written without
			// toolgate, flags after it.
			for _, m := range codeSpan.FindAllStringSubmatch(line, -1) {
				if c, rest := resolve(root, strings.Fields(m[1])); c != nil && len(rest) > 0 && strings.HasPrefix(rest[0], "-") && !strings.Contains(m[1], "toolgate") {
					line += " `toolgate " + m[1] + "`"
				}
			}
			// A filter example of the command itself: --since 1h --decision …
			if strings.Contains(line, ": --") {
				for _, ex := range strings.Split(line, ": ")[1:] {
					words := strings.Fields(ex)
					n := 0
					for n+1 < len(words) && strings.HasPrefix(words[n], "--") && !strings.HasPrefix(words[n+1], "(") {
						n += 2 // --flag value, as many as there are
					}
					if n > 0 {
						line += " toolgate " + strings.TrimPrefix(cmd.CommandPath(), root.Name()+" ") + " " + strings.Join(words[:n], " ")
					}
				}
			}
			check(cmd, line)
		}
	}
	walk(root)
	if checked < 20 {
		t.Errorf("only %d toolgate command lines found in the help texts: is the pattern still right?", checked)
	}
}

// TestVersionFlag: `toolgate --version` prints the build's version and
// commit (what eval's "run" and GET /status name), the first thing a
// newcomer asks a binary; it was an unknown flag (exit status 2).
func TestVersionFlag(t *testing.T) {
	want, _ := buildCommit()
	for _, arg := range []string{"--version", "-v"} {
		out, err := toolgateCmd(t, t.TempDir(), arg).CombinedOutput()
		if err != nil || string(out) != "toolgate "+version+" (commit "+want+")\n" {
			t.Errorf("toolgate %s: %v %q, want %q", arg, err, out, "toolgate "+version+" (commit "+want+")\n")
		}
	}
}
