package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/user"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/gateway/audit"
	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/internal/dirs"
	"github.com/toolgate/toolgate/internal/mask"
	"github.com/toolgate/toolgate/internal/plural"
	"github.com/toolgate/toolgate/internal/shellword"
	"github.com/toolgate/toolgate/internal/termtext"
)

func init() { register(newAuditCmd) }

func newAuditCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Read the audit log: who searched and ran what, and what was refused",
		Long: `The gateway writes one JSON line per search_tools and execute_tool call, per
management action and per refused request to audit/audit.jsonl in the data
folder (rotated by size: audit.jsonl.1 is the newest older file). Each line
holds the time, the key's name, the session, the client's name, the
profile and route the call came through, the tool,
the decision (allowed, denied, rate-limited, quarantined), the outcome (ok,
isError, timeout, down), the duration, the result's size and a SHA-256 of
the arguments — their values only with audit.arguments "masked".`,
	}
	cmd.AddCommand(newAuditTailCmd(g), newAuditRotateCmd(g))
	return cmd
}

func newAuditRotateCmd(g *globals) *cobra.Command {
	var cfgPath string
	cmd := &cobra.Command{
		Use:   "rotate [--config FILE]",
		Short: "Rotate the audit log now: audit.jsonl becomes audit.jsonl.1, as the gateway does by size",
		Long: `Rotate the audit log now, as the gateway does when it reaches
toolgate.audit.maxFileBytes: audit.jsonl becomes audit.jsonl.1, the older
files move up by one, and those past toolgate.audit.maxFiles (default 5) are
removed. Running gateways write a new audit.jsonl from their next record
(none is lost: one written meanwhile lands in audit.jsonl.1), and audit tail
reads on across it. To keep a week's records past the gateway's rotations,
rotate and copy audit.jsonl.1 away.

The config (--config, else the one the gateway running on the data folder
serves) gives the data folder and maxFiles; with neither, no rotated file is
removed (the gateway removes those past its maxFiles at its next rotation).
Renaming audit.jsonl by hand to audit.jsonl.1 replaces an older .1 and its
records: this command shifts the numbered files first.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runAuditRotate(cmd.Context(), g, cmd.OutOrStdout(), cmd.ErrOrStderr(), cfgPath)
		},
	}
	configFlag(cmd, &cfgPath)
	return cmd
}

func runAuditRotate(ctx context.Context, g *globals, w, errw io.Writer, cfgPath string) error {
	maxFiles, from := 0, ""
	if cfgPath == "" {
		// The running gateway's maxFiles, so that its rotated files past
		// the default are not removed here.
		if found, err := runningConfig(ctx, g.DataDir()); err == nil {
			cfgPath = found
		}
	}
	if cfgPath != "" {
		cfg, err := config.Load(cfgPath)
		if err != nil {
			return err
		}
		g.applyConfig(cfg.Toolgate)
		maxFiles, from = cfg.Toolgate.Audit.MaxFiles, " (toolgate.audit.maxFiles of "+cfgPath+")"
		if maxFiles <= 0 {
			from = " (the default: " + cfgPath + " sets no toolgate.audit.maxFiles)"
		}
	}
	if maxFiles <= 0 && from == "" {
		// No config to say how many the gateway keeps: the default would
		// remove what a larger toolgate.audit.maxFiles keeps.
		maxFiles = audit.KeepEvery
	} else if maxFiles <= 0 {
		maxFiles = audit.DefaultMaxFiles
	}
	path := dirs.Audit(g.DataDir())
	dropped, err := audit.Rotate(path, maxFiles)
	if errors.Is(err, audit.ErrNothingToRotate) {
		fmt.Fprintf(errw, "toolgate: the audit log at %s holds no record: nothing rotated (a --data-dir other than the gateway's?)\n", path)
		return nil
	}
	if err != nil {
		return fmt.Errorf("rotate the audit log %s: %w", path, err)
	}
	rotated := audit.Rotated(path, 1)
	what := fmt.Sprintf("%s rotated to %s, keeping %d rotated files", path, filepath.Base(rotated), maxFiles)
	if maxFiles == audit.KeepEvery {
		what = fmt.Sprintf("%s rotated to %s, keeping every rotated file (no config gave toolgate.audit.maxFiles)", path, filepath.Base(rotated))
	}
	if len(dropped) > 0 {
		names := make([]string, len(dropped))
		for i, d := range dropped {
			names[i] = filepath.Base(d)
		}
		what += "; removed " + strings.Join(names, ", ")
	}
	g.auditCommand("audit rotate", "", "", what)
	fmt.Fprintf(w, "Rotated the audit log: %s is now %s; running gateways write a new %s from their next record.\n", filepath.Base(path), rotated, filepath.Base(path))
	if maxFiles == audit.KeepEvery {
		fmt.Fprintln(w, "Keeping every rotated file (no --config given, and no gateway serving one runs on the data folder, so its toolgate.audit.maxFiles is not known: give --config FILE to remove those past it).")
		fmt.Fprintf(w, "A gateway removes those past its toolgate.audit.maxFiles at its next rotation: to keep these records, copy %s away now.\n", rotated)
		return nil
	}
	fmt.Fprintf(w, "Keeping %d rotated files%s", maxFiles, from)
	if len(dropped) > 0 {
		fmt.Fprintf(w, "; removed the oldest: %s", strings.Join(dropped, ", "))
	}
	fmt.Fprintf(w, ".\nTo keep these records past the next %d rotations, copy %s away now.\n", maxFiles, rotated)
	return nil
}

type auditTailFlags struct {
	config string
	follow bool
	filter audit.Filter
	n      int
	asJSON bool
	// since and until are --since and --until as given; decisions and
	// outcomes --decision and --outcome. nSet says -n was given.
	since, until        string
	decisions, outcomes []string
	nSet                bool
	// servedBy is --served-by as given (filter.Config: as a gateway
	// names its config).
	servedBy string
}

func newAuditTailCmd(g *globals) *cobra.Command {
	var f auditTailFlags
	cmd := &cobra.Command{
		Use:   "tail [-f] [--key K] [--tool T] [--server S] [--profile P] [--served-by FILE] [--since WHEN] [--until WHEN] [--decision D] [--outcome O] [-n N] [--json] [--config FILE]",
		Short: "Print the last records of the audit log (-f: and the ones that follow)",
		Long: `Print the last records of the audit log (-f: and the ones that follow),
oldest first, from the rotated files too.

--since and --until take a time back from now (90m, 12h, 2d, 1w), a date
(2026-12-05, from midnight; today and yesterday too) or a date and time
(2026-12-05T18:00), both in local time (a note on stderr says so), or an
RFC 3339 time (with Z or an offset, as written); with either,
every record in that span is printed unless -n is given. --decision
(allowed, denied, rate-limited, quarantined) and --outcome (ok, isError,
timeout, down) take one value or several, comma-separated or repeated.
Filters add up: --since 1h --decision denied,rate-limited prints what was
refused in the last hour; --since yesterday --until today what was done
yesterday; --server memory --tool toolgate__disable_server who disabled
memory (or tried to). With gateways of several configs on one
data folder, --served-by FILE prints the records of the gateway serving that
config file (each record's config).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f.nSet = cmd.Flags().Changed("lines")
			if f.follow {
				g.stop.Quiet() // Ctrl-C ends the following, not a gateway
			}
			return runAuditTail(cmd.Context(), g, cmd.OutOrStdout(), cmd.ErrOrStderr(), f)
		},
	}
	configFlag(cmd, &f.config)
	cmd.Flags().BoolVarP(&f.follow, "follow", "f", false, "keep printing records as they are written (Ctrl-C ends)")
	cmd.Flags().StringVar(&f.filter.Key, "key", "", "only the records of this API key (its name): its calls, and keys create/update/revoke of it")
	cmd.Flags().StringVar(&f.filter.Tool, "tool", "", "only the records of this tool (server__tool) or action (search_tools)")
	cmd.Flags().StringVar(&f.filter.Server, "server", "", "only the records of this server: its tools' calls (server__…) and the management actions on it (toolgate__disable_server, servers remove …)")
	cmd.Flags().StringVar(&f.filter.Profile, "profile", "", "only the records of calls limited to this profile: the route's (/profiles/NAME/mcp), the stdio session's, or the API key's")
	cmd.Flags().StringVar(&f.servedBy, "served-by", "", "only the records of the gateway serving this config file (gateways of several configs on one data folder)")
	cmd.Flags().StringVar(&f.since, "since", "", "only the records from this time on: 90m, 12h, 2d (back from now), 2026-12-05, yesterday, today or 2026-12-05T18:00 (local time) or an RFC 3339 time")
	cmd.Flags().StringVar(&f.until, "until", "", "only the records before this time (as --since)")
	cmd.Flags().StringSliceVar(&f.decisions, "decision", nil, "only the records of these decisions: "+strings.Join(audit.Decisions, ", "))
	cmd.Flags().StringSliceVar(&f.outcomes, "outcome", nil, "only the records of these outcomes: "+strings.Join(audit.Outcomes, ", "))
	cmd.Flags().IntVarP(&f.n, "lines", "n", 20, "how many records to print first (0 = all; with --since or --until, all unless given)")
	cmd.Flags().BoolVar(&f.asJSON, "json", false, "print the records as JSON lines, as stored")
	return cmd
}

// auditFollowPoll is how often `audit tail -f` looks for new records.
const auditFollowPoll = 250 * time.Millisecond

func runAuditTail(ctx context.Context, g *globals, w, stderr io.Writer, f auditTailFlags) error {
	if f.n < 0 {
		return usageError{fmt.Errorf("--lines %d: want 0 (every record) or more", f.n)}
	}
	if err := f.parseFilter(time.Now(), stderr); err != nil {
		return usageError{err}
	}
	maxFiles := 0
	if f.config != "" {
		cfg, err := config.Load(f.config)
		if err != nil {
			return err
		}
		g.applyConfig(cfg.Toolgate)
		maxFiles = cfg.Toolgate.Audit.MaxFiles
	}
	path := dirs.Audit(g.DataDir())
	rd := audit.NewReader(path, maxFiles, f.filter)
	defer rd.Close()
	// Printed as read (every record with -n 0: the whole log is never
	// held), through a buffer flushed before the warnings and each record
	// -f prints.
	bw := bufio.NewWriterSize(w, 64<<10)
	print := func(r audit.Record) {
		if f.asJSON {
			// As stored: a newer toolgate's fields kept. A control or
			// format character that encoding/json leaves as it is (a bidi
			// override, a C1 control from a reason quoting a server) is
			// printed as its JSON escape: the same record, safe on a
			// terminal.
			b := []byte(r.Raw)
			if len(b) == 0 {
				b, _ = json.Marshal(r)
			}
			bw.WriteString(termtext.EscapeJSON(string(b)))
			bw.WriteByte('\n')
			return
		}
		bw.WriteString(formatRecord(r))
		bw.WriteByte('\n')
	}
	printed, err := rd.TailFunc(f.n, print)
	if ferr := bw.Flush(); err == nil {
		err = ferr
	}
	if err != nil {
		return fmt.Errorf("read the audit log: %w", err)
	}
	if printed == 0 {
		fmt.Fprintf(stderr, "toolgate: %s\n", noAuditRecords(path, rd.Found(), f))
	}
	if n := rd.Unnamed(); n > 0 {
		fmt.Fprintf(stderr, "toolgate: note: %s no config (written by a toolgate of before 2026-12-07, or by a command): --served-by leaves %s out\n",
			plural.Pick(n, "1 record names", fmt.Sprintf("%d records name", n)), plural.Pick(n, "it", "them"))
	}
	if n := rd.Skipped(); n > 0 {
		fmt.Fprintf(stderr, "toolgate: warning: %d line(s) of the audit log (%s) are not records (cut short by a crash or a full disk, or edited by hand): left out\n", n, path)
	}
	if !f.follow {
		return nil
	}
	return rd.Follow(ctx, auditFollowPoll, func(r audit.Record) {
		print(r)
		bw.Flush()
	})
}

// parseFilter completes f.filter from --since, --until, --decision and
// --outcome (now: the time --since 2h counts back from, in the zone a time
// without one is read in, which note is told).
func (f *auditTailFlags) parseFilter(now time.Time, note io.Writer) error {
	for _, b := range []struct {
		flag, v string
		t       *time.Time
	}{{"--since", f.since, &f.filter.Since}, {"--until", f.until, &f.filter.Until}} {
		if b.v == "" {
			continue
		}
		t, local, err := flagTime(b.v, now, false)
		if err != nil {
			return fmt.Errorf("%s %s: %w", b.flag, b.v, err)
		}
		if local {
			fmt.Fprintln(note, "toolgate: "+zoneNote(b.flag, b.v, t))
		}
		*b.t = t
	}
	if s, u := f.filter.Since, f.filter.Until; !s.IsZero() && !u.IsZero() && !s.Before(u) {
		return fmt.Errorf("--since %s is not before --until %s: no record can be in that span", f.since, f.until)
	}
	if f.servedBy != "" {
		f.filter.Config = (&config.File{Path: f.servedBy}).Source()
	}
	if (f.since != "" || f.until != "") && !f.nSet {
		f.n = 0
	}
	var err error
	if f.filter.Decisions, err = oneOf("--decision", f.decisions, audit.Decisions); err != nil {
		return err
	}
	f.filter.Outcomes, err = oneOf("--outcome", f.outcomes, audit.Outcomes)
	return err
}

// oneOf is each of vs as written in valid (in any case), or an error that
// names the one that is not there and the values there are.
func oneOf(flag string, vs, valid []string) ([]string, error) {
	var out []string
	for _, v := range vs {
		i := slices.IndexFunc(valid, func(s string) bool { return strings.EqualFold(s, strings.TrimSpace(v)) })
		if i < 0 {
			return nil, fmt.Errorf("%s %q: want one of %s (several comma-separated)", flag, v, strings.Join(valid, ", "))
		}
		out = append(out, valid[i])
	}
	return out, nil
}

// noAuditRecords says why `audit tail` printed nothing: no log in this
// data folder (found: the Reader's Found; often the wrong folder), or no
// record that the filter lets through.
func noAuditRecords(path string, found bool, f auditTailFlags) string {
	if !found {
		return fmt.Sprintf("no audit log at %s: a gateway serving with this data folder writes it (--data-dir, $TOOLGATE_DATA_DIR or the config's dataDir choose the folder)", path)
	}
	var by []string
	for _, b := range [][2]string{{"--key", f.filter.Key}, {"--tool", f.filter.Tool}, {"--server", f.filter.Server}, {"--profile", f.filter.Profile}, {"--served-by", f.filter.Config}, {"--since", f.since}, {"--until", f.until},
		{"--decision", strings.Join(f.filter.Decisions, ",")}, {"--outcome", strings.Join(f.filter.Outcomes, ",")}} {
		if b[1] != "" {
			by = append(by, shellword.Join(b[0], b[1]))
		}
	}
	if len(by) == 0 {
		return fmt.Sprintf("the audit log at %s holds no records yet", path)
	}
	msg := fmt.Sprintf("no record of the audit log at %s matches %s", path, strings.Join(by, " "))
	if k := f.filter.Key; mask.Tokens(k) != k {
		// A key so named (before keys create refused such names, or
		// from a keysFile) is written masked, as every field is: none
		// of its records matched, and nothing said why.
		msg += fmt.Sprintf(": the audit log writes this name as %s (it looks like a credential, and the log masks those): %s finds its records, with those of any other key whose name it writes so; a key named otherwise (keys create --name NEW, then keys revoke %s) is found by its name",
			mask.Tokens(k), shellword.Join("audit", "tail", "--key", mask.Tokens(k)), shellword.Join(k))
	}
	return msg
}

// auditCommand records a management action taken from the command line in
// the data folder's audit log, as done by the local user, on server ("" for
// none). A record that cannot be written is reported on stderr, never
// dropped silently.
func (g *globals) auditCommand(action, tool, server, what string) {
	g.auditRecord(audit.Record{Action: action, Tool: tool, Server: server, Reason: what})
}

// auditKeyCommand records a keys command that acted on the API key name
// (audit tail --key name finds it).
func (g *globals) auditKeyCommand(action, name, what string) {
	g.auditRecord(audit.Record{Action: action, ManagedKey: name, Reason: what})
}

// auditRecord appends r, a command's record: allowed, ok, by the user
// running it.
func (g *globals) auditRecord(r audit.Record) {
	r.Client = "unknown user"
	if u, err := user.Current(); err == nil {
		r.Client = u.Username
	}
	r.Transport, r.Decision, r.Outcome = "cli", audit.Allowed, audit.OK
	if err := audit.Append(dirs.Audit(g.DataDir()), r); err != nil {
		g.logger.Error("audit record lost", "action", r.Action, "tool", r.Tool, "err", err)
	}
}

// auditConfigChange records `servers add|remove` in the audit log of the
// data folder the changed config file names (toolgate.dataDir, else the
// default one).
func (g *globals) auditConfigChange(path, action, server string) {
	if cfg, _, _, err := config.ReadFiles([]string{path}, nil); err == nil {
		g.applyConfig(cfg.Toolgate)
	} else {
		g.logger.Warn("the audit record goes to the default data folder: the config cannot be read again", "config", path, "err", err)
	}
	g.auditCommand(action, "", server, fmt.Sprintf("server %q in %s", server, path))
}

// formatRecord is one record on one line, for people. Every field a
// client chose (the tool name, the route, the client name, the session,
// a reason quoting them) is printed safely: one with a control or format
// character (a newline that would forge a record, a terminal escape, bidi
// overrides) is quoted with them escaped.
func formatRecord(r audit.Record) string {
	parts := []string{r.Time.Local().Format("2006-01-02 15:04:05.000"), "key=" + dash(safeText(r.Key)), safeText(r.Action)}
	if r.Tool != "" {
		parts = append(parts, safeText(r.Tool))
	}
	switch {
	case r.Route != "" && r.Status != 0:
		parts = append(parts, fmt.Sprintf("%s→%d", safeText(r.Route), r.Status))
	case r.Route == "POST /mcp":
		// An MCP call through the default route, as most are: left to
		// --json. A profile's route (POST /profiles/kg/mcp) is printed.
	case r.Route != "":
		// A record with no status (the console's buttons wrote none, an
		// MCP call through a profile's route): not "→0", which no answer
		// was.
		parts = append(parts, safeText(r.Route))
	}
	parts = append(parts, safeText(r.Decision))
	if r.Outcome != "" {
		parts = append(parts, safeText(r.Outcome))
	}
	if r.Action != "http" && r.Action != audit.ConfigReload && r.Transport != "cli" {
		parts = append(parts, fmt.Sprintf("%.0fms %dB", r.DurationMs, r.ResultBytes))
	}
	if r.Count > 0 {
		// A record that stands for an API key's refusals alike: how many,
		// since when (its time is the last one's).
		parts = append(parts, fmt.Sprintf("×%d since %s", r.Count, r.FirstTime.Local().Format("2006-01-02 15:04:05.000")))
	}
	if r.TrimmedBytes > 0 {
		parts = append(parts, fmt.Sprintf("trimmed=%dB", r.TrimmedBytes))
	}
	if r.Profile != "" {
		parts = append(parts, "profile="+safeText(r.Profile))
	}
	if r.KeyProfile != "" {
		parts = append(parts, "keyProfile="+safeText(r.KeyProfile))
	}
	if r.Client != "" {
		parts = append(parts, "client="+safeText(r.Client))
	}
	if r.Remote != "" {
		parts = append(parts, "remote="+safeText(r.Remote))
	}
	if r.Session != "" {
		parts = append(parts, "session="+safeText(r.Session))
	}
	if r.ArgumentsSHA256 != "" {
		parts = append(parts, "args=sha256:"+safeText(r.ArgumentsSHA256[:min(12, len(r.ArgumentsSHA256))]))
	}
	if r.Reason != "" {
		parts = append(parts, "("+safeText(r.Reason)+")")
	}
	if r.OutputMismatch != "" {
		parts = append(parts, "(result does not fit the output schema: "+safeText(r.OutputMismatch)+")")
	}
	// Last: what the line said before records named their config is
	// left as it was.
	if r.Config != "" {
		parts = append(parts, "config="+safeText(r.Config))
	}
	return strings.Join(parts, "  ")
}
