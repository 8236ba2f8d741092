package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/pmezard/go-difflib/difflib"
	"github.com/spf13/cobra"
	"github.com/tidwall/pretty"

	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/gateway/config/importer"
	"github.com/toolgate/toolgate/internal/mask"
	"github.com/toolgate/toolgate/internal/plural"
	"github.com/toolgate/toolgate/internal/shellword"
)

func init() { register(newImportCmd) }

type importFlags struct {
	format string
	into   string
	dryRun bool
}

func newImportCmd(*globals) *cobra.Command {
	var f importFlags
	cmd := &cobra.Command{
		Use:   "import FILE... [--format F] [--into CONFIG] [--dry-run]",
		Short: "Turn the MCP server configs of Claude, Cursor, VS Code, Windsurf, Gemini CLI, Zed or Codex into one toolgate config",
		Long: `Read the MCP servers other clients are configured with and print one toolgate
config holding all of them:

  Claude Desktop   claude_desktop_config.json
  Claude Code      .mcp.json, and ~/.claude.json (user-level and per-project servers)
  Cursor           .cursor/mcp.json, ~/.cursor/mcp.json
  VS Code          .vscode/mcp.json ("servers" and "inputs"), or settings.json's "mcp"
  Windsurf         ~/.codeium/windsurf/mcp_config.json
  Gemini CLI       ~/.gemini/settings.json, .gemini/settings.json
  Zed              ~/.config/zed/settings.json, .zed/settings.json ("context_servers")
  Codex            ~/.codex/config.toml, .codex/config.toml ([mcp_servers.NAME])

The kind of each file is told from its content; --format forces one
(` + strings.Join(importer.Formats, ", ") + `). Files are merged in the order
given, a later server of the same name replacing an earlier one (each such
conflict is listed on stderr). VS Code's ${input:ID} values (which VS Code
prompts for) become ${ID} variables, named on stderr, to set in the
gateway's environment; ${env:NAME} becomes ${NAME}. Nothing secret is
written that was not in one of the files already. An entry that starts
toolgate itself is left out. A server whose name differs only in case from
one before it (in an earlier file, or in the --into config), which one config
cannot hold, is imported once when its entry is the same, else as
NAME-FORMAT (memory-cursor), said on stderr.

--into CONFIG adds the servers to an existing config file instead (atomically,
keeping its other keys; its servers of the same name are replaced), and
--dry-run shows the change to it as a diff without writing it.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, files []string) error {
			return runImport(cmd.OutOrStdout(), cmd.ErrOrStderr(), files, f)
		},
	}
	cmd.Flags().StringVar(&f.format, "format", "", "the kind of every file: "+strings.Join(importer.Formats, ", ")+" (default: told from the content)")
	cmd.Flags().StringVar(&f.into, "into", "", "add the servers to this toolgate config file instead of printing a config")
	cmd.Flags().BoolVar(&f.dryRun, "dry-run", false, "with --into: print the change as a diff and write nothing")
	return cmd
}

func runImport(stdout, stderr io.Writer, files []string, f importFlags) error {
	if f.format != "" && !slices.Contains(importer.Formats, f.format) {
		return usageError{fmt.Errorf("--format %q: use one of %s", f.format, strings.Join(importer.Formats, ", "))}
	}
	if f.dryRun && f.into == "" {
		return usageError{errors.New("--dry-run shows the change --into makes to a config file: give --into CONFIG, or leave --dry-run out to print the config")}
	}
	var results []*importer.Result
	var inputs []importer.Input
	for _, path := range files {
		data, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("import: %w", err)
		}
		r, err := importer.Read(path, data, f.format)
		if err != nil {
			return err
		}
		if f.format != "" && len(r.Servers) == 0 {
			// A forced kind that finds nothing where the file's own kind
			// finds servers: say so, not "0 servers".
			if d, err := importer.Read(path, data, ""); err == nil && len(d.Servers) > 0 && d.Format != r.Format {
				return usageError{fmt.Errorf("%s: --format %s finds no servers in it, and it reads as a %s file (%s): leave --format out, or give --format %s", path, f.format, d.Format, plural.Of(len(d.Servers), "server"), d.Format)}
			}
		}
		fmt.Fprintf(stderr, "%s (%s): %s: %s\n", path, r.Format, plural.Of(len(r.Servers), "server"), strings.Join(r.Servers, ", "))
		for _, n := range r.Notes {
			fmt.Fprintf(stderr, "  note: %s\n", n)
		}
		results = append(results, r)
		inputs = append(inputs, r.Inputs...)
	}
	// Names differing only in case, across the files or beside the
	// config imported into: said here, not by --into's refusal.
	var taken []importer.Named
	if f.into != "" {
		if data, err := os.ReadFile(f.into); err == nil {
			for _, name := range config.ServerNames(data) {
				entry, _ := config.ServerEntry(data, name)
				taken = append(taken, importer.Named{Name: name, Entry: entry, From: f.into})
			}
		}
	}
	notes, err := importer.SeparateCaseTwins(taken, results)
	if err != nil {
		return err
	}
	for _, n := range notes {
		fmt.Fprintf(stderr, "note: %s\n", n)
	}
	var docs []config.Doc
	from := map[string]string{} // server → the file it is imported from (the last, as Merge keeps)
	for _, r := range results {
		docs = append(docs, r.Doc)
		for _, name := range r.Servers {
			from[name] = r.Doc.Path
		}
	}
	merged, conflicts, err := config.Merge(docs)
	if err != nil {
		return err
	}
	for _, c := range conflicts {
		fmt.Fprintf(stderr, "conflict: %s\n", c)
	}
	if len(inputs) > 0 {
		fmt.Fprintln(stderr, "VS Code prompted for these values; the servers now read them from the gateway's environment — set them there:")
		for _, in := range inputs {
			what := in.Description
			if in.Password {
				what = strings.TrimSpace(what + " (secret)")
			}
			fmt.Fprintf(stderr, "  %s  (input %q) %s\n", in.Var, in.ID, what)
		}
	}
	if cfg := validServers(merged, ""); cfg != nil {
		// A disabled server is left out: no gateway starts it.
		if bad := wouldStartDown(cfg, nil); len(bad) > 0 {
			fmt.Fprintln(stderr, "warning: with this shell's environment these servers CANNOT START (a gateway shows them down until fixed; one started with another environment may start them):")
			for _, name := range slices.Sorted(maps.Keys(bad)) {
				fmt.Fprintf(stderr, "  %s: %s\n", name, bad[name])
			}
		}
	}
	// As toolgate servers lists them and serve logs them.
	if note := unbracedNote(merged, ""); note != "" {
		fmt.Fprintf(stderr, "warning: %s\n", note)
	}
	if f.into == "" {
		warnInvalid(stderr, merged, from)
		if _, err := stdout.Write(pretty.PrettyOptions(merged, &pretty.Options{Width: 80, Indent: "  "})); err != nil {
			return err
		}
		warnReadableStdout(stderr, stdout, merged)
		return nil
	}
	return importInto(stdout, stderr, f.into, merged, from, f.dryRun)
}

// withSources names, in each problem of err (a config's) with one of the
// imported servers, the file that server came from: the one to edit.
func withSources(err error, from map[string]string) error {
	var ce *config.Error
	if errors.As(err, &ce) {
		for _, fe := range ce.Errs {
			fe.From = from[fe.Server]
		}
	}
	return err
}

// importInto adds the merged document's servers to the config file at
// path, keeping its other keys; dryRun prints the change as a diff.
func importInto(stdout, stderr io.Writer, path string, merged []byte, from map[string]string, dryRun bool) error {
	defer config.LockFiles([]string{path})() // one read-modify-write: see config.Edit
	old, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		old = []byte("{\n  \"mcpServers\": {}\n}\n")
	} else if err != nil {
		return fmt.Errorf("import --into: %w", err)
	}
	if err := config.CheckJSON(path, old); err != nil {
		return fmt.Errorf("import --into: %w: fix it first", err)
	}
	var doc struct {
		MCPServers map[string]json.RawMessage `json:"mcpServers"`
	}
	if err := json.Unmarshal(merged, &doc); err != nil {
		return fmt.Errorf("import: %w", err)
	}
	data := old
	for _, name := range slices.Sorted(maps.Keys(doc.MCPServers)) {
		if prev, ok := config.ServerEntry(data, name); ok && !config.SameEntry(prev, doc.MCPServers[name]) {
			fmt.Fprintf(stderr, "conflict: server %q is in %s already: replacing its entry with the imported one\n", name, path)
		}
		if data, err = config.SetServer(data, name, doc.MCPServers[name]); err != nil {
			return fmt.Errorf("import --into %s: %w", path, err)
		}
	}
	// Checked as the gateway will read it (a variable this shell lacks
	// leaves its server unable to start, not the file invalid).
	if _, err := config.Parse(data, path, nil); err != nil {
		return fmt.Errorf("import --into: the result would not be a valid config, so %s is left as it is: %w", path, withSources(err, from))
	}
	if dryRun {
		// The text, whatever the file's encoding (UTF-16 from PowerShell).
		a, _ := config.Text(old)
		b, _ := config.Text(data)
		diff, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
			A: difflib.SplitLines(string(a)), B: difflib.SplitLines(string(b)),
			FromFile: path, ToFile: path + " (imported)", Context: 3,
		})
		if err != nil {
			return err
		}
		if diff == "" {
			fmt.Fprintf(stderr, "%s has these servers already: nothing to change\n", path)
		}
		_, err = io.WriteString(stdout, diff)
		return err
	}
	if err := config.WriteFile(path, data); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "wrote %s (%s imported)\n", path, plural.Of(len(doc.MCPServers), "server"))
	warnReadable(stderr, path, doc.MCPServers)
	return nil
}

// warnReadable warns when the servers imported into the config at path
// hold secrets written out and the file is readable by other users.
// config.WriteFile makes a new file 0600 but keeps an existing one's mode
// (0644, as an editor made it): its owner may have chosen it (a service
// that reads it through its group), so it is said, not changed.
func warnReadable(stderr io.Writer, path string, servers map[string]json.RawMessage) {
	fi, err := os.Stat(path)
	if err != nil {
		return
	}
	warnReadableMode(stderr, path, path, fi, servers)
}

// warnReadableStdout is warnReadable for the config printed to a file by
// the shell's redirect (`toolgate import … > servers.json`, the README's
// first command), which the shell makes 0644 under the usual umask.
// Nothing is said for a terminal or a pipe.
func warnReadableStdout(stderr io.Writer, stdout io.Writer, merged []byte) {
	f, ok := stdout.(*os.File)
	if !ok {
		return
	}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return
	}
	var doc struct {
		MCPServers map[string]json.RawMessage `json:"mcpServers"`
	}
	if json.Unmarshal(merged, &doc) != nil {
		return
	}
	path := f.Name()
	// The file's own path (os.Stdout is named /dev/stdout), where Linux says it.
	if p, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", f.Fd())); err == nil && filepath.IsAbs(p) {
		path = p
	}
	warnReadableMode(stderr, path+" (stdout)", path, fi, doc.MCPServers)
}

// warnReadableMode says what warnReadable says of the file fi, named name
// in the warning and path in its chmod command.
func warnReadableMode(stderr io.Writer, name, path string, fi os.FileInfo, servers map[string]json.RawMessage) {
	if fi.Mode().Perm()&0o044 == 0 || !othersReach(path) {
		return
	}
	if secrets := clearSecrets(servers); len(secrets) > 0 {
		fmt.Fprintf(stderr, "warning: %s is readable by other users (mode %04o) and now holds secrets written out (%s): run `chmod 600 %s`, or have the servers read them from the gateway's environment (\"${NAME}\")\n",
			name, fi.Mode().Perm(), strings.Join(secrets, ", "), shellword.Join(path))
	}
}

// clearSecrets names the secrets servers' entries hold written out
// (mask.InClear), "github: env GITHUB_PERSONAL_ACCESS_TOKEN", sorted.
func clearSecrets(servers map[string]json.RawMessage) []string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(servers)) {
		var e struct {
			Args    []string          `json:"args"`
			Env     map[string]string `json:"env"`
			Headers map[string]string `json:"headers"`
			URL     string            `json:"url"`
			OAuth   struct {
				ClientSecret string `json:"clientSecret"`
			} `json:"oauth"`
		}
		if json.Unmarshal(servers[name], &e) != nil {
			continue
		}
		for _, k := range slices.Sorted(maps.Keys(e.Env)) {
			if mask.InClear(k, e.Env[k]) {
				out = append(out, name+": env "+k)
			}
		}
		for _, k := range slices.Sorted(maps.Keys(e.Headers)) {
			if mask.InClear(k, e.Headers[k]) {
				out = append(out, name+": header "+k)
			}
		}
		// A key after a flag named like one: --api-key KEY, --token=KEY.
		masked, _ := mask.Args(e.Args, mask.Hidden)
		for i, m := range masked {
			if m == e.Args[i] {
				continue
			}
			flag, val, eq := strings.Cut(e.Args[i], "=")
			if !eq {
				flag, val = e.Args[i-1], e.Args[i]
			}
			if len(val) >= mask.MinLen {
				out = append(out, name+": args "+flag)
			}
		}
		if mask.InClear("url", e.URL) { // ?api_key=…, a token's shape
			out = append(out, name+": url")
		}
		if mask.InClear("clientSecret", e.OAuth.ClientSecret) {
			out = append(out, name+": oauth.clientSecret")
		}
	}
	return out
}

// validServers is the config of data's servers that are valid, for what
// the others lack to be said beside what is wrong with the invalid ones
// (warnInvalid, toolgate servers): a file with one invalid server said
// nothing of another that cannot start, until that one was fixed. path is
// the file data was read from, whose folder relative paths ("cwd") are
// resolved against ("" for a document of no file: import's). nil when no
// server is valid, or the file is wrong outside its servers.
func validServers(data []byte, path string) *config.File {
	cfg, _, _, err := config.ParseDocs([]config.Doc{{Data: data, Path: path}}, nil)
	var ce *config.Error
	if err == nil || !errors.As(err, &ce) {
		return cfg
	}
	for _, fe := range ce.Errs {
		if fe.Server == "" {
			return nil
		}
		if data, _, err = config.DeleteServer(data, fe.Server); err != nil {
			return nil
		}
	}
	cfg, _, _, err = config.ParseDocs([]config.Doc{{Data: data, Path: path}}, nil)
	if err != nil {
		return nil
	}
	return cfg
}

// warnInvalid lists on stderr what would keep the config from loading
// (a server's variables aside: the gateway's environment may set them),
// each problem with the file its server came from.
func warnInvalid(stderr io.Writer, data []byte, from map[string]string) {
	if _, err := config.Parse(data, "", nil); err != nil {
		fmt.Fprintf(stderr, "warning: toolgate would not load this config as it is; fix these first:\n%v\n", withSources(err, from))
	}
}

// othersReach reports whether another user may reach the file at path: no
// folder on its way that this user owns lets only its owner through (no
// search bit for its group or others: 0700, a home folder as Fedora makes
// it). A file of mode 0644 in such a folder is read by no one else (root
// aside), and warnReadable said it was. A folder that cannot be looked at
// counts as letting others through.
func othersReach(path string) bool {
	dir, err := filepath.Abs(filepath.Dir(path))
	if err == nil {
		dir, err = filepath.EvalSymlinks(dir)
	}
	if err != nil {
		return true
	}
	uid := os.Geteuid()
	for {
		fi, err := os.Stat(dir)
		if err != nil {
			return true
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && fi.Mode().Perm()&0o011 == 0 && int(st.Uid) == uid {
			return false
		}
		up := filepath.Dir(dir)
		if up == dir {
			return true
		}
		dir = up
	}
}
