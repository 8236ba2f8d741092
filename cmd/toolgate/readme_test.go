package main

import (
	"cmp"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/gateway/console"
)

// The names of commands and flags are contracts scripts rely on: the tests
// of this file hold README.md's words to the command tree newRootCmd builds,
// both ways, so that a flag added without a word, or a word left behind by a
// flag that never was, fails here with where to write what.

// readmeLines is README.md, a line a string.
func readmeLines(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(string(b), "\n")
}

var (
	codeSpan = regexp.MustCompile("``?([^`]+)``?")
	// flagWord is a flag as a usage writes it: --name or -x, after a
	// space, a bracket or the span's start.
	flagWord = regexp.MustCompile(`(?:^|[\s\[(|])(--[a-z][a-z0-9-]*|-[a-zA-Z])\b`)
	// commandLine is a toolgate command line in a code span or block.
	jsonArgs    = regexp.MustCompile(`"args":\s*\[([^\]]*)\]`)
	commandLine = regexp.MustCompile(`(?:^|[\s/"'(=$])toolgate\s+([a-z][^|;&#]*)`)
)

// resolve finds the command that words (a usage's words, "toolgate" left
// out) name, longest first, under root or else under the parents given:
// "enable NAME" beside "servers disable" is servers enable. The words left
// are its arguments and flags.
func resolve(root *cobra.Command, words []string, parents ...*cobra.Command) (*cobra.Command, []string) {
	for _, p := range append([]*cobra.Command{root}, parents...) {
		cmd, rest := p, words
		for len(rest) > 0 {
			sub := findSub(cmd, rest[0])
			if sub == nil {
				break
			}
			cmd, rest = sub, rest[1:]
		}
		if cmd != p {
			return cmd, rest
		}
	}
	return nil, words
}

func findSub(cmd *cobra.Command, name string) *cobra.Command {
	for _, s := range cmd.Commands() {
		if s.Name() == name || slices.Contains(s.Aliases, name) {
			return s
		}
	}
	return nil
}

// hasFlag says whether cmd takes the flag as written (--name or -x), its
// own or one it inherits (the global flags); --help and -h are cobra's.
func hasFlag(cmd *cobra.Command, word string) bool {
	if word == "--help" || word == "-h" {
		return true
	}
	if name, ok := strings.CutPrefix(word, "--"); ok {
		return cmd.Flags().Lookup(name) != nil || cmd.InheritedFlags().Lookup(name) != nil
	}
	short := strings.TrimPrefix(word, "-")
	return cmd.Flags().ShorthandLookup(short) != nil || cmd.InheritedFlags().ShorthandLookup(short) != nil
}

// ownFlags are the flags a command defines itself, not the global ones
// (documented once, below the table), and not those marked hidden.
func ownFlags(cmd *cobra.Command) []*pflag.Flag {
	var fs []*pflag.Flag
	cmd.LocalNonPersistentFlags().VisitAll(func(f *pflag.Flag) {
		if !f.Hidden && f.Name != "help" {
			fs = append(fs, f)
		}
	})
	return fs
}

func flagNames(cmd *cobra.Command) string {
	var names []string
	for _, f := range ownFlags(cmd) {
		names = append(names, "--"+f.Name)
	}
	return strings.Join(names, " ")
}

// commandsTable is the README's "Commands" table: each row's commands
// (the code spans of its first cell, "toolgate servers disable NAME …" /
// "enable NAME"), the words of the row, and its line (1-based).
type commandRow struct {
	line  int
	cmds  []*cobra.Command
	spans []string // the first cell's usages, one a command
	text  string   // the whole row
}

func commandsTable(t *testing.T, root *cobra.Command, lines []string) (rows []commandRow, shared map[*cobra.Command]string) {
	t.Helper()
	start := slices.Index(lines, "## Commands")
	if start < 0 {
		t.Fatal(`README.md: no "## Commands" section`)
	}
	shared = map[*cobra.Command]string{}
	for i := start + 1; i < len(lines) && !strings.HasPrefix(lines[i], "## "); i++ {
		l := lines[i]
		// "Flags of the embedder (`serve`, `index`, …): `--model-dir` …"
		// documents flags several commands share, once.
		if rest, ok := strings.CutPrefix(l, "Flags of "); ok {
			par := rest
			for j := i + 1; j < len(lines) && lines[j] != ""; j++ {
				par += "\n" + lines[j]
			}
			names, flags, _ := strings.Cut(par, "):")
			for _, m := range codeSpan.FindAllStringSubmatch(names, -1) {
				cmd, _ := resolve(root, strings.Fields(m[1]))
				if cmd == nil {
					t.Errorf("README.md:%d: the shared flags name `%s`, which is no toolgate command", i+1, m[1])
					continue
				}
				shared[cmd] += flags
			}
			continue
		}
		if !strings.HasPrefix(l, "| `toolgate ") {
			continue
		}
		first, _, ok := strings.Cut(strings.ReplaceAll(l[2:], `\|`, "¦"), " | ")
		if !ok {
			t.Fatalf("README.md:%d: a Commands row without its second cell", i+1)
		}
		row := commandRow{line: i + 1, text: l}
		var prev []*cobra.Command
		for _, m := range codeSpan.FindAllStringSubmatch(first, -1) {
			words := strings.Fields(m[1])
			if len(words) > 0 && words[0] == "toolgate" {
				words = words[1:]
			}
			var parents []*cobra.Command
			for _, p := range prev {
				parents = append(parents, p.Parent())
			}
			cmd, rest := resolve(root, words, parents...)
			if cmd == nil {
				t.Errorf("README.md:%d: the Commands table's `%s` names no toolgate command", i+1, m[1])
				continue
			}
			row.cmds = append(row.cmds, cmd)
			row.spans = append(row.spans, m[1])
			// "servers [list]": the group and its default verb.
			if len(rest) > 0 && strings.HasPrefix(rest[0], "[") {
				if sub := findSub(cmd, strings.Trim(rest[0], "[]")); sub != nil {
					row.cmds = append(row.cmds, sub)
					row.spans = append(row.spans, m[1])
				}
			}
			prev = []*cobra.Command{cmd}
		}
		rows = append(rows, row)
	}
	if len(rows) == 0 {
		t.Fatal("README.md: the Commands table has no row of `toolgate …`")
	}
	return rows, shared
}

// TestREADMECommandsTable holds the README's "Commands" table to the
// command tree: every command that does something has a row, every flag of
// it (hidden ones aside) is named in that row (or, shared by several, in
// the "Flags of …" paragraph below the table), and every flag a row's usage
// writes is one the command takes.
func TestREADMECommandsTable(t *testing.T) {
	root, _ := newRootCmd(nil)
	root.InitDefaultCompletionCmd() // cobra's, added as the command line is run
	lines := readmeLines(t)
	rows, shared := commandsTable(t, root, lines)

	documented := map[*cobra.Command][]commandRow{}
	for _, row := range rows {
		for i, cmd := range row.cmds {
			documented[cmd] = append(documented[cmd], row)
			for _, m := range flagWord.FindAllStringSubmatch(row.spans[i], -1) {
				if !hasFlag(cmd, m[1]) {
					t.Errorf("README.md:%d: the Commands table writes `%s`, but %q has no flag %s (its flags: %s); fix the row, or add the flag",
						row.line, row.spans[i], cmd.CommandPath(), m[1], flagNames(cmd))
				}
			}
		}
	}

	var walk func(*cobra.Command)
	walk = func(cmd *cobra.Command) {
		for _, sub := range cmd.Commands() {
			if !sub.Hidden && sub.Name() != "help" {
				walk(sub)
			}
		}
		if cmd == root || !cmd.Runnable() || cmd.HasSubCommands() && len(ownFlags(cmd)) == 0 {
			return // a group of verbs (auth, keys, …) only
		}
		rows := documented[cmd]
		if len(rows) == 0 {
			t.Errorf("%q (%s) has no row in the README's Commands table (README.md, ## Commands): add one, `%s` and what it does",
				cmd.CommandPath(), cmd.Short, cmd.UseLine())
			return
		}
		words := shared[cmd]
		for _, row := range rows {
			words += "\n" + row.text
		}
		for _, f := range ownFlags(cmd) {
			named := regexp.MustCompile(`(^|[^a-z0-9-])--` + regexp.QuoteMeta(f.Name) + `([^a-z0-9-]|$)`).MatchString(words)
			if !named && f.Shorthand != "" {
				named = regexp.MustCompile(`(^|[\s\[(` + "`" + `])-` + f.Shorthand + `([\s\]` + "`" + `]|$)`).MatchString(words)
			}
			if !named {
				t.Errorf("flag --%s of %q (%q) is not in the README's Commands table: add it to the row of `%s` (README.md:%d)",
					f.Name, cmd.CommandPath(), f.Usage, cmd.CommandPath(), rows[0].line)
			}
		}
	}
	walk(root)
}

// mistakesShown are the command lines the README writes wrong on purpose,
// to show what toolgate answers them.
var mistakesShown = map[string]bool{
	"keys revoke --name k1": true, // exit status 2: "NAME is an argument, not a flag"
}

// TestREADMECommandLines holds every toolgate command line the README
// writes (in a code span or a code block: `toolgate search --server S`)
// to the command tree: the command is one, and each flag written after it
// one it takes.
func TestREADMECommandLines(t *testing.T) {
	root, _ := newRootCmd(nil)
	root.InitDefaultCompletionCmd()
	lines := readmeLines(t)
	inBlock := false
	checked := 0
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			inBlock = !inBlock
			continue
		}
		var texts []string
		if inBlock {
			// A command line continued with a backslash is one line, and a
			// client's JSON config that starts toolgate is the command line
			// of its "args".
			for j := i; strings.HasSuffix(lines[j], `\`) && j+1 < len(lines); j++ {
				l = strings.TrimSuffix(l, `\`) + " " + lines[j+1]
			}
			if a := jsonArgs.FindStringSubmatch(l); a != nil && strings.Contains(strings.Join(lines[max(0, i-3):i+1], " "), `toolgate"`) {
				l = "toolgate " + strings.NewReplacer(`"`, "", ",", " ").Replace(a[1])
			}
			texts = []string{l}
		} else {
			for _, m := range codeSpan.FindAllStringSubmatch(l, -1) {
				// `servers add --url …`, `learn --reset --server`: a
				// command written without toolgate, flags after it.
				if cmd, rest := resolve(root, strings.Fields(m[1])); cmd != nil && len(rest) > 0 && strings.HasPrefix(rest[0], "-") && !strings.Contains(m[1], "toolgate") {
					if !mistakesShown[m[1]] {
						m[1] = "toolgate " + m[1]
					}
				}
				texts = append(texts, m[1])
			}
		}
		for _, text := range texts {
			for _, m := range commandLine.FindAllStringSubmatch(text, -1) {
				words := strings.Fields(m[1])
				cmd, rest := resolve(root, words)
				if cmd == nil || mistakesShown[strings.TrimSpace(m[1])] {
					continue // "toolgate is …", "toolgate binary": prose, not a command
				}
				checked++
				for _, f := range flagWord.FindAllStringSubmatch(strings.Join(rest, " "), -1) {
					if !hasFlag(cmd, f[1]) {
						t.Errorf("README.md:%d: `toolgate %s`: %q has no flag %s (its flags: %s); fix the README, or add the flag",
							i+1, strings.TrimSpace(m[1]), cmd.CommandPath(), f[1], flagNames(cmd))
					}
				}
			}
		}
	}
	if checked < 50 {
		t.Errorf("only %d toolgate command lines found in README.md: is the pattern still right?", checked)
	}
}

// TestREADMERoutes holds the README's table of routes ("HTTP front and
// security") to the patterns registered: the HTTP front's (the gateway's
// own, serve's frontRoutes, the console's) and the status socket's
// (socketRoutes), each a row saying where it is served, and every
// "METHOD /path" the README writes anywhere to a route that serves it.
func TestREADMERoutes(t *testing.T) {
	h := http.NotFoundHandler()
	served := map[string][]string{} // pattern → where
	for _, p := range append(gateway.HTTPRoutes(frontRoutes(h, h, h)), console.Routes()...) {
		if p != "/" { // the catch-all: the 404 and 405 the prose describes
			served[p] = append(served[p], "HTTP front")
		}
	}
	for p := range socketRoutes(h, h, h, h) {
		served[p] = append(served[p], "status socket")
	}

	t.Logf("%d routes registered", len(served))
	lines := readmeLines(t)
	header := slices.Index(lines, "| route | served on | what |")
	if header < 0 {
		t.Fatal(`README.md: no table of routes ("| route | served on | what |") under "## HTTP front and security"`)
	}
	documented := map[string]string{} // pattern → its row's "served on"
	for i := header + 2; i < len(lines) && strings.HasPrefix(lines[i], "| "); i++ {
		cells := strings.Split(lines[i], " | ")
		if len(cells) < 3 {
			t.Fatalf("README.md:%d: a row of the routes table without its cells", i+1)
		}
		for _, m := range codeSpan.FindAllStringSubmatch(cells[0], -1) {
			where, ok := served[m[1]]
			if !ok {
				t.Errorf("README.md:%d: the routes table names `%s`, which nothing registers: correct the row (routes are registered as written: \"GET /status\", \"/mcp\")", i+1, m[1])
				continue
			}
			documented[m[1]] = cells[1]
			for _, w := range where {
				if !strings.Contains(cells[1], w) {
					t.Errorf("README.md:%d: `%s` is served on the %s, which its row (%q) does not say", i+1, m[1], w, cells[1])
				}
			}
			for _, w := range []string{"HTTP front", "status socket"} {
				if strings.Contains(cells[1], w) && !slices.Contains(where, w) {
					t.Errorf("README.md:%d: `%s` is not served on the %s, as its row says (it is on: %s)", i+1, m[1], w, strings.Join(where, ", "))
				}
			}
		}
	}
	for p, where := range served {
		if _, ok := documented[p]; !ok {
			t.Errorf("route %q (served on the %s) is not in the README's table of routes: add a row `%s` | %s | what it answers, under \"## HTTP front and security\" (README.md:%d)",
				p, strings.Join(where, ", "), p, strings.Join(where, ", "), header+1)
		}
	}

	// Every "GET /x" of the README, a line wrapped in it or not, is served
	// by one of them (HEAD as GET, a query left out, /profiles/kg/mcp by
	// /profiles/{name}/mcp), as a mux of each place matches it.
	// A mount (/ui/) is matched by the routes under it, not by itself.
	mount := func(p string) bool {
		for q := range served {
			if _, path, _ := strings.Cut(q, " "); strings.HasSuffix(p, "/") && q != p && strings.HasPrefix(cmp.Or(path, q), p) {
				return true
			}
		}
		return false
	}
	muxes := map[string]*http.ServeMux{}
	for p, where := range served {
		if mount(p) {
			continue
		}
		for _, w := range where {
			if muxes[w] == nil {
				muxes[w] = http.NewServeMux()
			}
			muxes[w].Handle(p, h)
		}
	}
	text := strings.Join(lines, "\n")
	written := regexp.MustCompile(`\b(GET|HEAD|POST|PUT|PATCH|DELETE)\s+(/[^\s` + "`" + `'"),;]*)`)
	for _, m := range written.FindAllStringSubmatchIndex(text, -1) {
		method, path := text[m[2]:m[3]], text[m[4]:m[5]]
		line := strings.Count(text[:m[0]], "\n") + 1
		if methodShown[method+" "+path] {
			continue
		}
		// A pattern as the table writes it: /ui/{$} is /ui/, {name} a name.
		path = regexp.MustCompile(`\{[a-z]+\}`).ReplaceAllString(strings.ReplaceAll(path, "{$}", ""), "x")
		r := httptest.NewRequest(method, path, nil)
		found := false
		for _, mux := range muxes {
			if _, pattern := mux.Handler(r); pattern != "" {
				found = true
			}
		}
		if !found {
			t.Errorf("README.md:%d: `%s %s` is served nowhere (the routes: the table under \"## HTTP front and security\"): correct the README, or serve it", line, method, path)
		}
	}
}

// methodShown are the requests the README writes to show a refusal.
var methodShown = map[string]bool{
	"PUT /status": true, // 405 with Allow: GET, HEAD
}

// TestREADMETeamTasksNameTheConfig holds the README's table of a team's
// common tasks to its own rule: `-c team.json` gives every command the
// gateway's data folder (toolgate.dataDir), so each command of the table
// that takes --config is written with it. `toolgate keys revoke bob` and
// `audit tail --key bob` were written without, and looked in the default
// data folder: `no such key named "bob"`.
func TestREADMETeamTasksNameTheConfig(t *testing.T) {
	root, _ := newRootCmd(nil)
	lines := readmeLines(t)
	start := slices.Index(lines, "### A team's gateway: the common tasks")
	if start < 0 {
		t.Fatal(`README.md: no "### A team's gateway: the common tasks"`)
	}
	checked := 0
	for i := start + 1; i < len(lines) && !strings.HasPrefix(lines[i], "#"); i++ {
		if !strings.HasPrefix(lines[i], "| ") {
			continue
		}
		for _, m := range codeSpan.FindAllStringSubmatch(lines[i], -1) {
			words := strings.Fields(m[1])
			if len(words) == 0 || words[0] != "toolgate" {
				continue
			}
			cmd, _ := resolve(root, words[1:])
			if cmd == nil || cmd.Flags().Lookup("config") == nil {
				continue
			}
			checked++
			if !slices.Contains(words, "-c") && !slices.Contains(words, "--config") {
				t.Errorf("README.md:%d: the team's task `%s` has no `-c team.json`: without it %q works on the default data folder, not the gateway's (toolgate.dataDir)", i+1, m[1], cmd.CommandPath())
			}
		}
	}
	if checked < 5 {
		t.Errorf("only %d commands found in the README's table of a team's common tasks: is the pattern still right?", checked)
	}
}
