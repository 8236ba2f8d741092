package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/gateway/live"
	"github.com/toolgate/toolgate/gateway/policy"
	"github.com/toolgate/toolgate/gateway/quarantine"
	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/internal/dirs"
	"github.com/toolgate/toolgate/internal/plural"
	"github.com/toolgate/toolgate/internal/shellword"
)

func init() { register(newToolsCmd) }

func newToolsCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tools",
		Short: "Review and approve quarantined tool definitions",
		Long: `The gateway scans every tool definition a backend lists (name, title,
description, input schema) for hidden instructions, instructions to read
credentials, invisible Unicode and overlong text, and pins each definition's
hash when first seen. A flagged tool, or one whose definition changed since
it was pinned (toolgate.security.onDefinitionChange, default "quarantine"),
or whose annotation hints claim less caution than when it was pinned
(readOnlyHint false to true, destructiveHint true to false, ...), is quarantined: left out of search_tools and refused by execute_tool until a
person approves it. Decisions live in the data folder (quarantine/pins.json);
a running gateway honours an approval at its next request.`,
	}
	cmd.AddCommand(newToolsQuarantinedCmd(g), newToolsApproveCmd(g))
	return cmd
}

// pinsPath is the quarantine's pins file for the data folder (of --config
// when given), and that config (nil without one).
func (g *globals) pinsPath(cfgPath string) (string, *config.File, error) {
	var cfg *config.File
	if cfgPath != "" {
		var err error
		if cfg, err = config.Load(cfgPath); err != nil {
			return "", nil, err
		}
		g.applyConfig(cfg.Toolgate)
	}
	return dirs.Pins(g.DataDir()), cfg, nil
}

type quarantinedTool struct {
	Tool string `json:"tool"`
	// SHA256 is the held definition's hash as shown, its hints included
	// (Pin.Shown): `tools approve --sha256` takes it (or its start).
	SHA256 string `json:"sha256"`
	quarantine.Hold
	// Changes are how the held definition's texts differ from those
	// pinned, for a tool held because its definition changed.
	Changes *quarantine.Changes `json:"changes,omitempty"`
}

func newToolsQuarantinedCmd(g *globals) *cobra.Command {
	var cfgPath string
	var asJSON, full bool
	cmd := &cobra.Command{
		Use:   "quarantined [--config FILE] [--json] [--full]",
		Short: "List the quarantined tools and why each is held",
		Long: `List the quarantined tools: why each is held, what changed since its
definition was pinned, the held definition and the command that approves it.
A text longer than ` + fmt.Sprint(shownChars) + ` characters (a description, an input schema, a
change) is cut there, with how many characters were left out; --full prints
every text whole. --json prints every text whole, always.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			path, cfg, err := g.pinsPath(cfgPath)
			if err != nil {
				return err
			}
			return runToolsQuarantined(cmd.OutOrStdout(), path, cfg, asJSON, full)
		},
	}
	configFlag(cmd, &cfgPath)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON instead of text")
	cmd.Flags().BoolVar(&full, "full", false, fmt.Sprintf("print every text whole (it is cut at %d characters)", shownChars))
	return cmd
}

// runToolsQuarantined lists the tools held in the pins file at path; with
// cfg (--config, $TOOLGATE_CONFIG), those of its servers, as GET /status
// lists them (quarantine.OutsideConfig), the others named below. Without
// full, each text is cut at shownChars characters (JSON is whole).
func runToolsQuarantined(w io.Writer, path string, cfg *config.File, asJSON, full bool) error {
	out := []quarantinedTool{}
	var outside, approved, unlisted, others []string
	notRun := outsideConfig(cfg)
	var globs []string
	if cfg != nil {
		globs = cfg.Toolgate.Security.ApprovedTools
	}
	// One pin at a time: only the held ones are kept (at 50,000 tools
	// the file is 40 MB).
	pinned, err := quarantine.EachPin(path, func(id string, p *quarantine.Pin) {
		switch {
		case p.Hold == nil:
		case notRun(id):
			outside = append(outside, id)
		case othersOnly(cfg, id, p):
			others = append(others, id)
		case !p.Unlisted.IsZero():
			unlisted = append(unlisted, id)
		case quarantine.Approved(globs, id):
			// Held in the pins (a gateway of another config, or one that
			// has not listed it since), but not by a gateway of cfg, which
			// GET /status shows.
			approved = append(approved, id)
		default:
			out = append(out, quarantinedTool{Tool: id, SHA256: p.Shown(), Hold: *p.Hold, Changes: p.Changes()})
		}
	})
	if err != nil {
		return err
	}
	slices.SortFunc(out, func(a, b quarantinedTool) int { return strings.Compare(a.Tool, b.Tool) })
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	if len(unlisted) > 0 {
		// Said last, below the list, or in place of it (after the others).
		slices.Sort(unlisted)
		defer fmt.Fprintf(w, "Not listed: %s that %s no longer %s (%s; renamed or removed): no gateway serves %s; listed again with the same definition, %s held again.\n",
			plural.Of(len(unlisted), "held tool"), plural.Pick(len(unlisted), "its server", "their servers"), plural.Pick(len(unlisted), "lists", "list"),
			safeText(strings.Join(unlisted, ", ")), plural.Pick(len(unlisted), "it", "them"), plural.Pick(len(unlisted), "it is", "they are"))
	}
	if len(others) > 0 {
		// Said last, below the list, or in place of it (after the others).
		slices.Sort(others)
		defer fmt.Fprintf(w, "Not listed: %s that only gateways of other configs on this data folder list, with a server of the same name (%s): no gateway of %s serves %s.\n",
			plural.Of(len(others), "held tool"), safeText(strings.Join(others, ", ")), cfg.Path, plural.Pick(len(others), "it", "them"))
	}
	if len(approved) > 0 {
		// Said last, below the list, or in place of it (after outside).
		slices.Sort(approved)
		defer fmt.Fprintf(w, "Not listed: %s that toolgate.security.approvedTools of %s approves (%s): a gateway of it serves them, whatever their definition.\n",
			plural.Of(len(approved), "held tool"), cfg.Path, safeText(strings.Join(approved, ", ")))
	}
	if len(outside) > 0 {
		// Said last, below the list, or in place of it.
		slices.Sort(outside)
		defer fmt.Fprintf(w, "Not listed: %s of servers that %s does not run (%s): no gateway of it serves them; should the server come back, they are held again.\n",
			plural.Of(len(outside), "held tool"), cfg.Path, safeText(strings.Join(outside, ", ")))
	}
	if len(out) == 0 {
		of := ""
		if cfg != nil && len(outside)+len(approved)+len(unlisted)+len(others) > 0 {
			of = " of " + cfg.Path + "'s servers"
		}
		fmt.Fprintf(w, "No tool%s is quarantined (%s pinned in %s).\n", of, plural.Of(pinned, "definition"), path)
		return nil
	}
	shown := func(s string) string { return escapeUnsafe(s) }
	if !full {
		shown = func(s string) string { return escapeUnsafe(cutShown(s)) }
	}
	for _, q := range out {
		fmt.Fprintf(w, "%s  (since %s)\n", safeText(q.Tool), q.Since.Local().Format(time.DateTime))
		if q.Changed {
			fmt.Fprintln(w, "  - its definition changed since it was first seen or approved")
		}
		if len(q.Hints) > 0 {
			fmt.Fprintf(w, "  - its annotations claim less caution than when it was first seen or approved: %s\n", strings.Join(q.Hints, ", "))
		}
		for _, fd := range q.Findings {
			fmt.Fprintf(w, "  - %s: %s\n", safeText(fd.Detail()), safeText(fd.Excerpt)) // a field may be a property name the backend chose
		}
		writeChanges(w, q.Changes, shown)
		if d := q.Definition; d != nil {
			// What approving it lets through, as the backend wrote it
			// (hidden characters escaped).
			fmt.Fprintf(w, "  definition (sha256 %s):\n", shortHash(q.SHA256))
			if d.Title != "" {
				fmt.Fprintf(w, "    title: %s\n", indentLines(shown(d.Title), "      "))
			}
			if d.AnnotationsTitle != "" {
				fmt.Fprintf(w, "    annotations.title: %s\n", indentLines(shown(d.AnnotationsTitle), "      "))
			}
			if d.Hints != nil && *d.Hints != (quarantine.Hints{}) {
				b, _ := json.Marshal(d.Hints)
				fmt.Fprintf(w, "    annotations: %s\n", b)
			}
			fmt.Fprintf(w, "    description: %s\n", indentLines(shown(d.Description), "      "))
			if d.InputSchema != "" {
				fmt.Fprintf(w, "    inputSchema: %s\n", shown(d.InputSchema))
			}
			if d.OutputSchema != "" {
				fmt.Fprintf(w, "    outputSchema: %s\n", shown(d.OutputSchema))
			}
			if d.Cut {
				fmt.Fprintln(w, "    (cut: a text is longer than shown)")
			}
		}
		if cfg != nil && q.Source != "" && q.Source != quarantine.ConfigSource(cfg) {
			// One pin a tool ID: the definition held is the one a server
			// of the same name in another config lists (heldForAnother).
			fmt.Fprintf(w, "  listed by the gateway of %s (another config on this data folder, with a server of the same name), not %s's\n", safeText(q.Source), safeText(cfg.Path))
			fmt.Fprintf(w, "  approve: toolgate tools approve %s --sha256 %s --config %s\n", safeText(q.Tool), shortHash(q.SHA256), safeText(shellword.Join(q.Source)))
			continue
		}
		fmt.Fprintf(w, "  approve: toolgate tools approve %s --sha256 %s\n", safeText(q.Tool), shortHash(q.SHA256))
	}
	return nil
}

// shownChars is how many characters of a text `tools quarantined` prints
// without --full: a held description may be 16 KB (an overlong text is
// one reason to hold it), which filled screens around the rest.
const shownChars = 2000

// cutShown is s cut at shownChars characters, saying how many more there
// are and how to see them.
func cutShown(s string) string {
	n := utf8.RuneCountInString(s)
	if n <= shownChars {
		return s
	}
	i := 0
	for range shownChars {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	return fmt.Sprintf("%s… (%d more characters: --full shows all)", s[:i], n-shownChars)
}

// writeChanges writes what a changed definition changed, a word diff of
// each text ("[-removed-]", "{+added+}"; hidden text decoded and escaped
// as in the findings' excerpts), each text as shown says.
func writeChanges(w io.Writer, c *quarantine.Changes, shown func(string) string) {
	if c == nil {
		return
	}
	if c.NotKept != "" {
		fmt.Fprintf(w, "  changes since %s: %s\n", c.Against, c.NotKept)
		return
	}
	fmt.Fprintf(w, "  changes since %s:\n", c.Against)
	for _, f := range c.Fields {
		fmt.Fprintf(w, "    %s: %s\n", f.Field, indentLines(shown(f.Diff), "      "))
		if f.Note != "" {
			fmt.Fprintf(w, "      (%s)\n", f.Note)
		}
	}
}

// outsideConfig says whether a tool ID is of a server that no gateway of
// cfg runs (not in it, or disabled there), whose held tools GET /status
// leaves out (quarantine.OutsideConfig): `tools quarantined` names them
// below its list, `tools approve` refuses them. Without cfg, none is.
func outsideConfig(cfg *config.File) func(id string) bool {
	if cfg == nil {
		return func(string) bool { return false }
	}
	configured := policy.NewConfigured(live.Catalogued(cfg, config.BuiltinServer))
	return func(id string) bool { return quarantine.OutsideConfig(id, configured.Has) }
}

// othersOnly says whether pin p of tool id (of a server cfg runs) is listed
// only by gateways of other configs on the data folder
// (quarantine.Pin.Sources, which do not name cfg): no gateway of cfg holds
// it, as GET /status shows (Snapshot.ListedBy). Without cfg, or for a pin
// written before the sources were kept, it is not.
func othersOnly(cfg *config.File, id string, p *quarantine.Pin) bool {
	if cfg == nil {
		return false
	}
	server, _, err := catalog.SplitID(id)
	_, ok := cfg.MCPServers[server]
	return err == nil && ok && !p.ListedBy(quarantine.ConfigSource(cfg))
}

// shortHash is the start of a SHA-256 that names a definition.
func shortHash(h string) string { return h[:min(len(h), 12)] }

// indentLines indents every line of s but the first.
func indentLines(s, indent string) string {
	return strings.ReplaceAll(s, "\n", "\n"+indent)
}

func newToolsApproveCmd(g *globals) *cobra.Command {
	var cfgPath, reviewed string
	cmd := &cobra.Command{
		Use:   "approve ID [--sha256 HASH] [--config FILE]",
		Short: "Approve a tool's current definition: a running gateway releases it at its next request",
		Long: `Approve the definition of tool ID (server__tool) as the gateway last listed it:
it is shown and run again, until its definition changes. Review it first
(` + "`toolgate tools quarantined`" + ` shows why it is held, the definition and its
sha256). With --sha256 (the hash shown there, or its start) only that
definition is approved: if the backend listed another since, nothing is
approved and the command fails. With --config, a tool of a server that
config does not run (removed, or disabled in it) is refused: add the
server back first, and review what it lists; so is a definition held that
the gateway of another config lists (a server of the same name there),
which that config's --config approves.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, _, err := catalog.SplitID(args[0]); err != nil {
				return usageError{err}
			}
			if cmd.Flags().Changed("sha256") && !isHexPrefix(reviewed) {
				return usageError{fmt.Errorf("--sha256 %q: give the definition's sha256 as toolgate tools quarantined shows it (at least 8 hex digits)", reviewed)}
			}
			path, cfg, err := g.pinsPath(cfgPath)
			if err != nil {
				return err
			}
			if outsideConfig(cfg)(args[0]) {
				// A tool held for a server since removed (or disabled)
				// may be why it was: approved now, its definition would
				// run unreviewed should the server come back.
				server, _, _ := catalog.SplitID(args[0])
				return usageError{fmt.Errorf("%s is of server %q, which %s does not run (not there, or disabled): nothing was approved. Add the server back (or enable it) first, then review what it lists (toolgate tools quarantined --config %s) and approve that; a server another gateway on this data folder runs: give that gateway's --config",
					args[0], server, cfg.Path, shellword.Join(cfg.Path))}
			}
			if err := heldForAnother(path, cfg, args[0]); err != nil {
				return err
			}
			approved, err := quarantine.Approve(path, args[0], reviewed, time.Now())
			if errors.Is(err, quarantine.ErrUnknownTool) {
				return usageError{err}
			}
			if err != nil {
				return fmt.Errorf("approve %s: %w", args[0], err)
			}
			g.auditCommand("tools approve", args[0], "", "definition sha256 "+approved)
			fmt.Fprintf(cmd.OutOrStdout(), "Approved %s (definition sha256 %s): a running gateway shows and runs it from its next request.\n", args[0], shortHash(approved))
			return nil
		},
	}
	configFlag(cmd, &cfgPath)
	cmd.Flags().StringVar(&reviewed, "sha256", "", "approve only this definition (its sha256 as tools quarantined shows it, or its start)")
	return cmd
}

// heldForAnother refuses (a usage error) the approval, with --config cfg,
// of a tool whose held definition a gateway of another config on the data
// folder listed (quarantine.Hold.Source: a server of the same name there
// that lists another definition). Approved, it would be pinned, and the
// definition cfg's server lists would be held at its next listing: the
// approval of cfg's tool would take it away.
func heldForAnother(path string, cfg *config.File, id string) error {
	if cfg == nil {
		return nil
	}
	f, err := quarantine.Read(path)
	if err != nil {
		return nil // Approve says what is wrong with the file
	}
	p := f.Tools[id]
	if p == nil || p.Hold == nil || p.Hold.Source == "" || p.Hold.Source == quarantine.ConfigSource(cfg) {
		return nil
	}
	return usageError{fmt.Errorf("%s: the definition held for review is the one the gateway of %s lists, not %s's: nothing was approved. Review it with toolgate tools quarantined --config %s and approve it with that --config (approved, it is pinned, and the definition that %s's server lists is held at its next listing; servers of one name that run other programs are best given other names)",
		id, p.Hold.Source, cfg.Path, shellword.Join(p.Hold.Source), cfg.Path)}
}

// isHexPrefix says whether s can name a SHA-256 by its start: 8 to 64 hex
// digits.
func isHexPrefix(s string) bool {
	return len(s) >= 8 && len(s) <= 64 && strings.Trim(s, "0123456789abcdefABCDEF") == ""
}
