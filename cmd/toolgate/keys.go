package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/gateway/keys"
	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/internal/dirs"
	"github.com/toolgate/toolgate/internal/plural"
	"github.com/toolgate/toolgate/internal/termtext"
)

func init() { register(newKeysCmd) }

func newKeysCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "keys",
		Short: "Create, list, update and revoke the API keys of the HTTP front",
		Long: `API keys let clients in over HTTP (serve --http): once any key exists, every
request needs "Authorization: Bearer tg_…", and a non-loopback address needs
keys to start at all. A key's profile and --allow/--deny globs over tool IDs
(server__tool) decide which tools it can see and run; --admin keys may use
the management tools that change the config.

Keys are stored in the data folder (keys.jsonl, readable by you only) as a
SHA-256 of the secret, never the secret. A running gateway honours a new,
updated or revoked key at its next request. Replicas can share keys through a file named
by toolgate.keysFile in the config: ` + "`keys create --print-hash`" + ` prints a line of it.`,
	}
	cmd.AddCommand(newKeysCreateCmd(g), newKeysListCmd(g), newKeysUpdateCmd(g), newKeysRevokeCmd(g))
	return cmd
}

type keysCreateFlags struct {
	config    string
	spec      keys.Spec
	expires   string
	printHash bool
}

func newKeysCreateCmd(g *globals) *cobra.Command {
	var f keysCreateFlags
	cmd := &cobra.Command{
		Use:   "create --name NAME [--profile P] [--allow GLOB[,GLOB]]... [--deny GLOB[,GLOB]]... [--expires 30d] [--admin] [--print-hash] [--config FILE]",
		Short: "Create an API key and print its secret once (the last line)",
		Long: `Create an API key. Its secret is printed once, alone on the last line
(tg_…): keep it, it cannot be shown again. The data folder keeps only its
SHA-256, name and scope.

--profile limits the key to a profile of the config (checked against --config,
else the config of the gateway running on the data folder; a key whose profile
the config lacks reaches no tool); --allow keeps only the
tools matching one of its globs, --deny removes the tools matching any of
its (globs over tool IDs such as memory__* or filesystem__read_*; several
comma-separated or the flag repeated: --allow 'memory__*,toolgate__*'). --expires
takes a duration (90m, 12h, 30d, 2w) or a date (2026-12-31). --print-hash
stores nothing: it prints the key's line for a toolgate.keysFile instead.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runKeysCreate(g, cmd.OutOrStdout(), cmd.ErrOrStderr(), f, time.Now())
		},
	}
	configFlag(cmd, &f.config)
	cmd.Flags().StringVar(&f.spec.Name, "name", "", "the key's name (shown in logs and the audit log)")
	cmd.Flags().StringVar(&f.spec.Profile, "profile", "", "limit the key to this profile of the config")
	cmd.Flags().StringArrayVar(&f.spec.Allow, "allow", nil, "only tools matching this glob over tool IDs (repeatable, or several comma-separated)")
	cmd.Flags().StringArrayVar(&f.spec.Deny, "deny", nil, "never tools matching this glob (repeatable, or several comma-separated)")
	cmd.Flags().StringVar(&f.expires, "expires", "", "when the key stops working: a duration like 30d, 12h or 1y, a date like 2026-12-31 (local time) or an RFC 3339 time")
	cmd.Flags().BoolVar(&f.spec.Admin, "admin", false, "the key may use the management tools that change the config")
	cmd.Flags().BoolVar(&f.printHash, "print-hash", false, "store nothing; print the key's entry for a toolgate.keysFile")
	return cmd
}

// splitGlobs is the globs of --allow or --deny, each value one glob or
// several separated by commas (outside a [...] class), as --decision takes
// several: `--allow 'memory__*,toolgate__*'` was one glob that matched no
// tool, so the key reached none, and `keys list` showed it as the two.
// Empty ones are left out.
func splitGlobs(values []string) []string {
	var out []string
	for _, v := range values {
		depth, start := 0, 0
		for i, r := range v {
			switch {
			case r == '[':
				depth++
			case r == ']' && depth > 0:
				depth--
			case r == ',' && depth == 0:
				if g := strings.TrimSpace(v[start:i]); g != "" {
					out = append(out, g)
				}
				start = i + 1
			}
		}
		if g := strings.TrimSpace(v[start:]); g != "" {
			out = append(out, g)
		}
	}
	return out
}

// keysFiles returns the data folder's keys file and the config's keysFile
// (read from --config when given, and returned).
func (g *globals) keysFiles(cfgPath string) (data, file string, cfg *config.File, err error) {
	if cfgPath != "" {
		if cfg, err = config.Load(cfgPath); err != nil {
			return "", "", nil, err
		}
		g.applyConfig(cfg.Toolgate)
		file = cfg.Toolgate.KeysFile
	}
	return dirs.Keys(g.DataDir()), file, cfg, nil
}

func runKeysCreate(g *globals, w, errw io.Writer, f keysCreateFlags, now time.Time) error {
	f.spec.Allow, f.spec.Deny = splitGlobs(f.spec.Allow), splitGlobs(f.spec.Deny)
	if f.spec.Name == "" {
		return usageError{errors.New("keys create needs --name NAME (letters, digits, '.', '_', '@', '-'), e.g. --name ci")}
	}
	if f.expires != "" {
		t, local, err := parseExpiry(f.expires, now, neverCreate)
		if err != nil {
			return usageError{fmt.Errorf("--expires %q: %w", f.expires, err)}
		}
		if local {
			fmt.Fprintln(errw, zoneNote("--expires", f.expires, t))
		}
		f.spec.Expires = t
	}
	data, file, cfg, err := g.keysFiles(f.config)
	if err != nil {
		return err
	}
	if cfg, err = checkKeyProfile(g, errw, cfg, f.config, f.spec.Profile); err != nil {
		return err
	}
	secret, e, err := keys.New(f.spec, now)
	if err != nil {
		return usageError{err}
	}
	if file != "" {
		// A name the shared file has already would make the store
		// ambiguous (refused as a whole).
		if l, err := keys.Open(data, &keys.Options{File: file}).List(); err == nil {
			for _, k := range l {
				if k.Name == e.Name {
					return fmt.Errorf("a key named %q exists already in %s: pick another name", e.Name, k.Path)
				}
			}
		}
	}
	if len(e.Allow)+len(e.Deny) > 0 {
		log := g.logger
		if log == nil {
			log = slog.New(slog.DiscardHandler)
		}
		known, unread := indexedTools(g, log, cfg)
		warnUnmatchedGlobs(errw, known, unread, e.Allow, e.Deny, g.DataDir(), "created")
	}
	if f.printHash {
		fmt.Fprintf(w, "# The toolgate.keysFile line of key %q (nothing was stored in the data folder):\n", e.Name)
		w.Write(e.Line()) //nolint:errcheck // stdout
		fmt.Fprintln(w, secret)
		return nil
	}
	if err := keys.Add(data, e); err != nil {
		return err
	}
	if revoked, err := keys.Open(data, &keys.Options{File: file}).Revoked(); err == nil {
		for _, r := range revoked {
			if r.Name == e.Name {
				// The audit log names a key by its name alone: a leaked
				// key's refusals and the new key's calls would read alike.
				fmt.Fprintf(errw, "note: a key named %q was revoked at %s: the audit log names both %q, so `audit tail --key %s` mixes their records (a leaked key's refusals with the new key's calls); a name of its own (e.g. %s-2) keeps them apart\n",
					e.Name, r.Revoked.UTC().Format(time.RFC3339), e.Name, e.Name, e.Name)
				break
			}
		}
	}
	g.auditCommand("keys create", "", "", fmt.Sprintf("key %q (%s)", e.Name, describeScope(e)))
	fmt.Fprintf(w, "Created API key %q (%s), stored in %s as a SHA-256 of its secret.\n", e.Name, describeScope(e), data)
	fmt.Fprintln(w, "The secret is shown only this once: send it as \"Authorization: Bearer <secret>\".")
	fmt.Fprintln(w, secret)
	return nil
}

// checkKeyProfile checks a key's --profile p ("" = none) against cfg
// (read from cfgPath), else the config of the gateway running on the data
// folder, which it returns as the config in effect; with neither, it says
// on errw that p went unchecked.
func checkKeyProfile(g *globals, errw io.Writer, cfg *config.File, cfgPath, p string) (*config.File, error) {
	if p != "" && cfg == nil {
		// The config of the gateway running on the data folder, as the
		// auth commands read it: the note below was printed beside it.
		if found, err := runningConfig(context.Background(), g.DataDir()); err == nil {
			if running, err := config.Load(found); err == nil {
				cfg, cfgPath = running, found
			}
		}
	}
	if p != "" && cfg != nil {
		if err := checkProfile(cfg, p, cfgPath); err != nil {
			return cfg, err
		}
	} else if p != "" {
		// A misspelt profile makes a key that reaches no tool, found out
		// only at its first request: say it went unchecked, as for globs
		// without an index.
		fmt.Fprintf(errw, "note: --profile %q was not checked: no config was given (--config FILE, or $TOOLGATE_CONFIG); a key whose profile the gateway's config lacks reaches no tool\n", p)
	}
	return cfg, nil
}

// warnUnmatchedGlobs says which of a key's --allow and --deny globs match
// no tool of the index (known; nil: none to read, unread: why when there
// is one), with the servers (as "server__*") and tools it could have
// meant: a misspelt --deny leaves every tool allowed, a misspelt --allow
// lets none through. The key is made (done: "created", "updated") all the
// same (its tools may not be indexed yet).
func warnUnmatchedGlobs(w io.Writer, known map[string]catalog.Tool, unread error, allow, deny []string, dataDir, done string) {
	if known == nil {
		notChecked(w, "the --allow and --deny globs", dataDir, unread)
		return
	}
	servers := map[string]bool{}
	cands := make([]string, 0, len(known))
	for id, t := range known {
		cands = append(cands, id)
		servers[t.Server+catalog.Sep+"*"] = true
	}
	cands = append(cands, slices.Collect(maps.Keys(servers))...)
	slices.Sort(cands)
	for _, c := range []struct {
		flag  string
		globs []string
		means string
	}{
		{"--allow", allow, "it lets none of the index's tools through"},
		{"--deny", deny, "it denies none of the index's tools"},
	} {
		for _, glob := range c.globs {
			if matchesAny(glob, known) {
				continue
			}
			hint := ""
			if lower := strings.ToLower(glob); lower != glob && matchesAny(lower, known) {
				hint = fmt.Sprintf(" (did you mean %s? globs are case-sensitive)", lower)
			} else if near := gateway.Closest(glob, cands, 3); len(near) > 0 {
				hint = " (did you mean " + strings.Join(near, ", ") + "?)"
			}
			fmt.Fprintf(w, "warning: %s %q matches no tool of the index (%s): %s%s; the key is %s all the same\n", c.flag, glob, plural.Of(len(known), "tool"), c.means, hint, done)
		}
	}
}

func matchesAny(glob string, known map[string]catalog.Tool) bool {
	for id := range known {
		if catalog.MatchID(glob, id) {
			return true
		}
	}
	return false
}

// describeScope says what a key may do, in a few words.
func describeScope(e keys.Entry) string {
	var parts []string
	if e.Admin {
		parts = append(parts, "admin")
	}
	if e.Profile != "" {
		parts = append(parts, "profile "+e.Profile)
	}
	if len(e.Allow) > 0 {
		parts = append(parts, "allow "+strings.Join(e.Allow, " "))
	}
	if len(e.Deny) > 0 {
		parts = append(parts, "deny "+strings.Join(e.Deny, " "))
	}
	if len(parts) == 0 {
		parts = append(parts, "every tool")
	}
	if e.Expires.IsZero() {
		parts = append(parts, "never expires")
	} else {
		parts = append(parts, "expires "+e.Expires.Format(time.RFC3339))
	}
	return strings.Join(parts, "; ")
}

// parseExpiry reads --expires as flagTime does (a date without a zone in
// the zone of now, the local one: local says so), in lastExpiry at the
// latest. never is how the command makes a key that never expires, said
// of one past lastExpiry (neverCreate, neverUpdate).
func parseExpiry(s string, now time.Time, never string) (t time.Time, local bool, err error) {
	t, local, err = flagTime(s, now, true)
	if errors.Is(err, errTooFar) {
		return time.Time{}, false, fmt.Errorf("%w (the last date a key may name is %s): %s for a key that never expires", err, lastExpiry, never)
	}
	if err == nil && !t.Before(pastLastExpiry) {
		return time.Time{}, false, fmt.Errorf("%s is too far off (the last date a key may name is %s): %s for a key that never expires", t.UTC().Format(time.DateOnly), lastExpiry, never)
	}
	return t, local, err
}

// How keys create and keys update make a key that never expires. keys
// update said keys create's, which for it leaves the expiry as it was.
const (
	neverCreate = "leave --expires out"
	neverUpdate = "give --expires never"
)

// A key may expire at any time of lastExpiry, up to pastLastExpiry: a later
// one would not fit RFC 3339's four-digit years, which keys.jsonl is
// written in.
const lastExpiry = "9999-12-31"

var pastLastExpiry = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)

type keysListFlags struct {
	config  string
	asJSON  bool
	revoked bool
}

func newKeysListCmd(g *globals) *cobra.Command {
	var f keysListFlags
	cmd := &cobra.Command{
		Use:   "list [--config FILE] [--revoked] [--json]",
		Short: "List the API keys (never their secrets)",
		Long: `List every API key: those of the data folder and, with --config, those of the
config's toolgate.keysFile; for each its name, profile, globs, whether it is
an admin key, when it expires and where it comes from.

Revoked keys are refused, and kept only so that a client still sending one is
named in the audit log: the list says how many there are, and --revoked lists
them too, with when each was revoked (in --json, each with "revoked").`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runKeysList(g, cmd.OutOrStdout(), f, time.Now())
		},
	}
	configFlag(cmd, &f.config)
	cmd.Flags().BoolVar(&f.asJSON, "json", false, "print JSON instead of a table")
	cmd.Flags().BoolVar(&f.revoked, "revoked", false, "list the revoked keys too, with when each was revoked")
	return cmd
}

// listedKey is a key in `keys list --json`: the entry as stored (its
// SHA-256, never its secret), where it comes from, and whether it expired.
type listedKey struct {
	keys.Listed
	Expired bool `json:"expired"`
}

func runKeysList(g *globals, w io.Writer, f keysListFlags, now time.Time) error {
	data, file, _, err := g.keysFiles(f.config)
	if err != nil {
		return err
	}
	store := keys.Open(data, &keys.Options{File: file})
	l, err := store.List()
	if err != nil {
		return err
	}
	revoked, err := store.Revoked()
	if err != nil {
		return err
	}
	out := make([]listedKey, 0, len(l))
	for _, k := range l {
		out = append(out, listedKey{Listed: k, Expired: k.Expired(now)})
	}
	if f.asJSON {
		if f.revoked {
			for _, k := range revoked {
				out = append(out, listedKey{Listed: k})
			}
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	defer printRevoked(w, revoked, f.revoked)
	if len(out) == 0 {
		fmt.Fprintf(w, "No API keys (the data folder's are in %s). Create one with `toolgate keys create --name NAME`.\n", data)
		return nil
	}
	tw := termtext.NewTable(w)
	fmt.Fprintln(tw, "NAME\tPROFILE\tALLOW\tDENY\tADMIN\tEXPIRES\tSOURCE")
	for _, k := range out {
		exp := "never"
		switch {
		case k.Expired:
			exp = "expired " + k.Expires.Format(time.DateOnly)
		case !k.Expires.IsZero():
			exp = k.Expires.Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%v\t%s\t%s\n", k.Name, dash(k.Profile), dash(strings.Join(k.Allow, " ")), dash(strings.Join(k.Deny, " ")), k.Admin, exp, k.Source)
	}
	return tw.Flush()
}

// printRevoked follows the table of keys in force with the revoked keys
// (all: a table of them; else how many there are, and the flag that lists
// them). Each is refused; it is kept to name it when it is sent.
func printRevoked(w io.Writer, revoked []keys.Listed, all bool) {
	switch {
	case len(revoked) == 0:
	case !all:
		fmt.Fprintf(w, "%s, refused and kept only to name a client still sending one in the audit log: `toolgate keys list --revoked` lists them.\n", plural.Of(len(revoked), "revoked key"))
	default:
		fmt.Fprintln(w, "\nRevoked (refused; kept only to name a client still sending one in the audit log):")
		tw := termtext.NewTable(w)
		fmt.Fprintln(tw, "NAME\tREVOKED\tCREATED\tSOURCE")
		for _, k := range revoked {
			created := "-"
			if !k.Created.IsZero() {
				created = k.Created.Format(time.RFC3339)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", k.Name, k.Revoked.Format(time.RFC3339), created, k.Source)
		}
		tw.Flush() //nolint:errcheck // stdout
	}
}

func newKeysRevokeCmd(g *globals) *cobra.Command {
	var cfgPath string
	cmd := &cobra.Command{
		Use:   "revoke NAME [--config FILE]",
		Short: "Revoke an API key: a running gateway refuses it from its next request",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runKeysRevoke(g, cmd.OutOrStdout(), args[0], cfgPath)
		},
	}
	configFlag(cmd, &cfgPath)
	return cmd
}

// inKeysFile says whether the key named name comes from toolgate.keysFile
// file ("": none), which the commands that edit the data folder's file
// cannot change.
func inKeysFile(data, file, name string) bool {
	if file == "" {
		return false
	}
	l, err := keys.Open(data, &keys.Options{File: file}).List()
	return err == nil && slices.ContainsFunc(l, func(k keys.Listed) bool { return k.Name == name })
}

func runKeysRevoke(g *globals, w io.Writer, name, cfgPath string) error {
	data, file, _, err := g.keysFiles(cfgPath)
	if err != nil {
		return err
	}
	err = keys.Revoke(data, name, time.Now())
	if errors.Is(err, keys.ErrNotFound) && inKeysFile(data, file, name) {
		return fmt.Errorf("key %q comes from toolgate.keysFile (%s): delete its line there", name, file)
	}
	if errors.Is(err, keys.ErrNotFound) {
		return usageError{fmt.Errorf("%w (`toolgate keys list` shows the keys)", err)}
	}
	if errors.Is(err, keys.ErrNotKept) {
		g.logger.Warn("the revoked key will not be named when it is sent", "err", err)
	} else if err != nil {
		return err
	}
	g.auditCommand("keys revoke", "", "", fmt.Sprintf("key %q", name))
	fmt.Fprintf(w, "Revoked API key %q: a running gateway refuses it from its next request.\n", name)
	if left, err := keys.Open(data, &keys.Options{File: file}).Any(); err == nil && !left {
		fmt.Fprintln(w, "That was the last API key: a running gateway now lets no one in over HTTP until a key is created (`toolgate keys create`); started again on a loopback address, a gateway serves without keys.")
	}
	return nil
}

type keysUpdateFlags struct {
	config      string
	profile     string
	allow, deny []string
	expires     string
	admin       bool
	set         func(flag string) bool // the flag was given
}

func newKeysUpdateCmd(g *globals) *cobra.Command {
	var f keysUpdateFlags
	cmd := &cobra.Command{
		Use:   "update NAME [--profile P] [--allow GLOB[,GLOB]]... [--deny GLOB[,GLOB]]... [--expires 30d|never] [--admin=true|false] [--config FILE]",
		Short: "Change an API key's profile, globs, expiry or admin right; its secret stays the same",
		Long: `Change an API key's scope in place: its holder keeps the secret (a person who
changes team gets the new team's profile without a new key). Only the flags
given change: --profile P (--profile "" for none), --allow and --deny (they
replace the key's globs; --allow "" for none), --expires (a duration, a date
or never) and --admin=true or --admin=false. A running gateway applies the
new scope from its next request, its console sessions too. --profile is
checked as keys create checks it. The change is in the audit log (keys
update), with the scope before and after.

A key whose secret leaked is revoked, not updated (toolgate keys revoke).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f.set = cmd.Flags().Changed
			return runKeysUpdate(g, cmd.OutOrStdout(), cmd.ErrOrStderr(), args[0], f, time.Now())
		},
	}
	configFlag(cmd, &f.config)
	cmd.Flags().StringVar(&f.profile, "profile", "", `limit the key to this profile of the config ("" for none)`)
	cmd.Flags().StringArrayVar(&f.allow, "allow", nil, `only tools matching this glob over tool IDs, in place of the key's (repeatable, or several comma-separated; "" for none)`)
	cmd.Flags().StringArrayVar(&f.deny, "deny", nil, `never tools matching this glob, in place of the key's (repeatable, or several comma-separated; "" for none)`)
	cmd.Flags().StringVar(&f.expires, "expires", "", "when the key stops working: a duration like 30d, a date like 2026-12-31 (local time), an RFC 3339 time, or never")
	cmd.Flags().BoolVar(&f.admin, "admin", false, "the key may use the management tools that change the config (--admin=false takes it away)")
	return cmd
}

func runKeysUpdate(g *globals, w, errw io.Writer, name string, f keysUpdateFlags, now time.Time) error {
	if f.set == nil {
		f.set = func(string) bool { return false }
	}
	if !f.set("profile") && !f.set("allow") && !f.set("deny") && !f.set("expires") && !f.set("admin") {
		return usageError{fmt.Errorf("keys update %s: give what to change: --profile, --allow, --deny, --expires or --admin (toolgate keys list shows its scope now)", name)}
	}
	var expires time.Time
	if f.set("expires") && f.expires != "never" {
		t, local, err := parseExpiry(f.expires, now, neverUpdate)
		if err != nil {
			return usageError{fmt.Errorf("--expires %q: %w", f.expires, err)}
		}
		if !t.After(now) {
			return usageError{fmt.Errorf("--expires %q: %s is not in the future (to end the key, toolgate keys revoke %s)", f.expires, t.Format(time.RFC3339), name)}
		}
		if local {
			fmt.Fprintln(errw, zoneNote("--expires", f.expires, t))
		}
		expires = t.UTC()
	}
	data, file, cfg, err := g.keysFiles(f.config)
	if err != nil {
		return err
	}
	if f.set("profile") {
		if cfg, err = checkKeyProfile(g, errw, cfg, f.config, f.profile); err != nil {
			return err
		}
	}
	before, after, err := keys.Update(data, name, func(e *keys.Entry) error {
		if f.set("profile") {
			e.Profile = f.profile
		}
		if f.set("allow") {
			e.Allow = splitGlobs(f.allow)
		}
		if f.set("deny") {
			e.Deny = splitGlobs(f.deny)
		}
		if f.set("expires") {
			e.Expires = expires
		}
		if f.set("admin") {
			e.Admin = f.admin
		}
		if err := e.Validate(); err != nil {
			return usageError{err} // a glob that does not parse, as keys create says it
		}
		return nil
	})
	if errors.Is(err, keys.ErrNotFound) && inKeysFile(data, file, name) {
		return fmt.Errorf("key %q comes from toolgate.keysFile (%s): change its line there", name, file)
	}
	if errors.Is(err, keys.ErrNotFound) {
		return usageError{fmt.Errorf("%w (`toolgate keys list` shows the keys in force; a revoked key cannot be updated: create a new one)", err)}
	}
	if err != nil {
		return err
	}
	if (f.set("allow") || f.set("deny")) && len(after.Allow)+len(after.Deny) > 0 {
		log := g.logger
		if log == nil {
			log = slog.New(slog.DiscardHandler)
		}
		known, unread := indexedTools(g, log, cfg)
		warnUnmatchedGlobs(errw, known, unread, after.Allow, after.Deny, g.DataDir(), "updated")
	}
	was, is := describeScope(before), describeScope(after)
	if was == is {
		fmt.Fprintf(w, "API key %q already had this scope (%s): nothing changed.\n", name, is)
		return nil
	}
	g.auditCommand("keys update", "", "", fmt.Sprintf("key %q: %s → %s", name, was, is))
	fmt.Fprintf(w, "Updated API key %q: %s (was: %s).\n", name, is, was)
	fmt.Fprintln(w, "Its secret is the same: a running gateway applies the new scope from its next request.")
	if before.Admin && !after.Admin {
		if l, err := keys.Open(data, &keys.Options{File: file}).List(); err == nil && !slices.ContainsFunc(l, func(k keys.Listed) bool { return k.Admin && k.Revoked.IsZero() }) {
			fmt.Fprintf(w, "That was the last admin key: over HTTP no key may now add or remove servers through the management tools, nor read what is `hidden from this API key` (the toolgate commands on this machine still can); `toolgate keys update NAME --admin=true` gives a key the right again.\n")
		}
	}
	return nil
}
