package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/embed"
	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/gateway/live"
	"github.com/toolgate/toolgate/gateway/policy"
	"github.com/toolgate/toolgate/gateway/quarantine"
	"github.com/toolgate/toolgate/index"
	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/internal/dirs"
	"github.com/toolgate/toolgate/internal/termtext"
	"github.com/toolgate/toolgate/search"
)

func init() { register(newSearchCmd) }

type searchFlags struct {
	mode    string
	limit   int
	limitOn bool // --limit given: 0 is then a mistake, not "the default"
	server  string
	json    bool
	profile string
	configs []string
	explain bool
}

func newSearchCmd(g *globals) *cobra.Command {
	f := &searchFlags{}
	cmd := &cobra.Command{
		Use:   `search QUERY...`,
		Short: "Query the index in the data folder without starting any backend",
		Long: `search ranks the tools of the index that serve or index last built, as
search_tools would, for QUERY (several words are one query, quoted or not),
and shows the score breakdown: the fused score, its keyword part (BM25 over the
query's best) and its vector part (the cosine, normalised per query: how far
above the catalog's mean cosine, as a share of the best's), and the absolute
confidence. No backend is started.
Modes other than bm25 need the embedding model that built the index; without
it search falls back to BM25 and says so.

With --config (or $TOOLGATE_CONFIG), the config's toolgate settings apply as in
serve: its data folder and embedder, and toolgate.search's mode, weights,
minConfidence, stepWeight and limits, so the answer is the one search_tools
gives. Flags given on the command line win.

Tools that search_tools hides are left out here too, and counted below the
answer: those of servers disabled at run time (toolgate servers disable),
quarantined definitions (toolgate tools quarantined) and, with --config, those
of servers the config does not have and, with --profile, those outside the
profile. Those that would have ranked in the answer are named, with that rank
and why each is hidden.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if strings.TrimSpace(strings.Join(args, "")) == "" {
				return usageError{errors.New(`search needs a query, e.g. toolgate search list files in a directory`)}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			f.limitOn = cmd.Flags().Changed("limit")
			g.quietUnlessAsked(cmd)
			// Several words are one query, as quoted.
			return runSearch(cmd.Context(), g, f, strings.Join(args, " "), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.mode, "mode", "", "ranking: hybrid, bm25, vector or rrf (default: the config's toolgate.search.mode, else hybrid)")
	// The limits of search_tools, whose ranking this command shows.
	fl.IntVar(&f.limit, "limit", 0, fmt.Sprintf("number of results (default %d or the config's toolgate.search.defaultLimit; at most %d or its maxLimit)", gateway.DefaultLimit, gateway.MaxLimit))
	fl.StringVar(&f.server, "server", "", "only tools of this server")
	fl.BoolVar(&f.json, "json", false, "print the result as one JSON object")
	fl.BoolVar(&f.explain, "explain", false, "say per tool which of the query's words (as the keyword ranking reads them: lower case, stemmed, without stop words) its name, server, description and parameters hold")
	fl.StringVar(&f.profile, "profile", "", "search as a client limited to this profile of the config's toolgate.profiles (needs --config)")
	configsFlag(cmd, &f.configs)
	g.addEmbedFlags(cmd)
	return cmd
}

// searchOutput is the --json shape: the search_tools structured output plus
// the effective mode.
type searchOutput struct {
	Query   string           `json:"query"`
	Mode    search.Mode      `json:"mode"`
	Tools   []searchToolJSON `json:"tools"`
	NoMatch bool             `json:"noMatch,omitempty"`
	Warning string           `json:"warning,omitempty"`
	// Hidden counts the index's tools left out as search_tools leaves
	// them out, by the policy rule that hides them ("config", "disabled",
	// "profile", "quarantine").
	Hidden map[string]int `json:"hidden,omitempty"`
	// HiddenHits are the hidden tools that would have ranked in the
	// answer were they not hidden, each with that rank and why it is
	// hidden: a server's author learns which of their tools a query
	// missed, and what to do about it.
	HiddenHits []hiddenHit `json:"hiddenHits,omitempty"`
	// QueryTerms are the query's words as the keyword ranking reads them
	// (--explain).
	QueryTerms []string `json:"queryTerms,omitempty"`
}

// hiddenHit is a tool search_tools hides that would rank Rank (from 1)
// in a search of every tool of the index.
type hiddenHit struct {
	Name   string `json:"name"`
	Rank   int    `json:"rank"`
	Rule   string `json:"rule"`
	Reason string `json:"reason"`
}

type searchToolJSON struct {
	Name        string          `json:"name"`
	Server      string          `json:"server"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"inputSchema,omitempty"`
	// OutputSchema is the tool's outputSchema, as its server listed it:
	// what its structuredContent holds (absent when it declares none).
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	Score        float64         `json:"score"`
	Keyword      float64         `json:"keyword"`
	Vector       float64         `json:"vector"`
	Confidence   float64         `json:"confidence"`
	Clause       string          `json:"clause,omitempty"` // the step of the request that found it
	// Matched are the query terms each keyword field holds (--explain):
	// "name", "server", "description", "params".
	Matched map[string][]string `json:"matched,omitempty"`
}

func runSearch(ctx context.Context, g *globals, f *searchFlags, q string, stdout, stderr io.Writer) error {
	// The config's search settings, as serve reads them (its data
	// folder and embedder settings apply through readConfigs).
	var settings config.SearchSettings
	var cfg *config.File
	if len(f.configs) > 0 {
		var err error
		if cfg, _, err = g.readConfigs(f.configs); err != nil {
			return err
		}
		settings = cfg.Toolgate.Search
	}
	if f.profile != "" {
		if cfg == nil {
			return usageError{fmt.Errorf("--profile %q needs the config that defines it: add --config FILE (or set $TOOLGATE_CONFIG)", f.profile)}
		}
		if err := checkProfile(cfg, f.profile, "the config"); err != nil {
			return err
		}
	}
	mode := search.Mode(settings.Mode)
	if f.mode != "" {
		m, err := search.ParseMode(f.mode)
		if err != nil {
			return usageError{fmt.Errorf("--mode: %w", err)}
		}
		mode = m
	}
	defLimit, maxLimit := gateway.Limits(settings.DefaultLimit, settings.MaxLimit)
	if f.limit == 0 && !f.limitOn {
		f.limit = defLimit
	}
	if f.limit < 1 || f.limit > maxLimit {
		return usageError{fmt.Errorf("--limit %d: want 1 to %d (leave it out for the default, %d)", f.limit, maxLimit, defLimit)}
	}
	ix, err := openIndexFor(g, g.logger, cfg)
	if err != nil {
		return err
	}
	if other := ix.OtherFormat(); other != 0 {
		// It refused such an index until a gateway had rebuilt it.
		fmt.Fprintf(stderr, "toolgate: note: the index in %s is of format %d, this toolgate's is %d (written by an older or newer toolgate): searched as it is; a gateway of this toolgate rebuilds it when it starts, as does toolgate index --config FILE\n",
			index.Dir(g.DataDir()), other, index.FormatVersion)
	}
	vis := searchVisibility(g, ix, cfg, f.profile, stderr)
	seen := vis.see(ix)
	// As search_tools: an unknown server is a mistake of the caller's,
	// answered with the servers there are.
	if f.server, err = seen.checkServer(f.server); err != nil {
		ix.Close()
		return err
	}
	// ix is owned by the engine from here on.

	out := searchOutput{Query: q, Hidden: seen.hidden}
	var emb index.Embedder
	if mode != search.ModeBM25 && ix.HasVectors() {
		// One session using every core, as serve's: one query to embed,
		// and a second session would load the weights again.
		e, closer, err := g.openEmbedder(ctx, func(o *embed.Options) { o.Sessions = 1 })
		switch {
		case err != nil:
			var ue usageError
			if errors.As(err, &ue) {
				ix.Close()
				return err
			}
			out.Warning = "semantic ranking off, showing BM25 only: " + err.Error()
		case e.ModelID() != ix.ModelID():
			closer.Close()
			out.Warning = modelMismatch(ix.ModelID(), e.ModelID())
		default:
			emb = e
			defer closer.Close()
		}
	} else if mode != search.ModeBM25 && !ix.HasVectors() {
		out.Warning = "the index has no vectors (built BM25-only): showing BM25 only"
	}
	if out.Warning != "" && !f.json {
		fmt.Fprintf(stderr, "toolgate: warning: %s\n", out.Warning)
	}

	// What serve learned from use ranks here too: from the store, or from
	// the gateway that holds it.
	usage, done, err := learnedUsage(ctx, g)
	if err == nil {
		defer done()
	} else if !f.json {
		fmt.Fprintf(stderr, "toolgate: note: ranking without the learned pairs: %v\n", err)
	}
	// Degraded mode is already reported above (or was asked for with --mode bm25).
	eng := search.New(ix, emb, searchOptions(settings, mode, usage))
	defer eng.Close()
	if err := eng.RefreshLearned(ctx); err != nil {
		fmt.Fprintf(stderr, "toolgate: note: ranking without the learned pairs: %v\n", err)
	}
	res, err := eng.Search(ctx, search.Query{Text: q, Limit: f.limit, Server: f.server, Mode: mode, Filter: vis.set.Filter(vis.caller)})
	if err != nil {
		return err
	}
	out.Mode = res.Mode
	out.NoMatch = res.NoMatch
	if len(seen.hidden) > 0 {
		// The same search over every tool: the hidden ones that would
		// have ranked are named.
		all, err := eng.Search(ctx, search.Query{Text: q, Limit: f.limit, Server: f.server, Mode: mode})
		if err != nil {
			return err
		}
		for i, h := range all.Hits {
			if d := vis.set.Decide(vis.caller, h.Tool); !d.Allowed {
				out.HiddenHits = append(out.HiddenHits, hiddenHit{Name: h.Tool.ID(), Rank: i + 1, Rule: d.Rule, Reason: d.Reason})
			}
		}
	}
	out.Tools = []searchToolJSON{}
	for _, h := range res.Hits {
		out.Tools = append(out.Tools, searchToolJSON{
			Name: h.Tool.ID(), Server: h.Tool.Server, Description: h.Tool.Description,
			InputSchema: h.Tool.InputSchema, OutputSchema: h.Tool.OutputSchema, Score: h.Score, Keyword: h.Keyword, Vector: h.Vector, Confidence: h.Confidence,
			Clause: h.Clause,
		})
	}
	if f.explain {
		ids := make([]string, len(out.Tools))
		for i, t := range out.Tools {
			ids[i] = t.Name
		}
		terms, found, err := ix.Matched(q, ids)
		if err != nil {
			return err
		}
		out.QueryTerms = append([]string{}, terms...) // said even when none
		for i := range out.Tools {
			out.Tools[i].Matched = found[out.Tools[i].Name]
		}
	}
	if f.json {
		return json.NewEncoder(stdout).Encode(out)
	}
	printSearch(stdout, out, f.server != "")
	return nil
}

// searchOptions are the ranking options of the config's toolgate.search
// (serve's and `toolgate search --config`'s one source), in mode.
func searchOptions(s config.SearchSettings, mode search.Mode, usage search.Usage) *search.Options {
	return &search.Options{Mode: mode, KeywordWeight: s.KeywordWeight, VectorWeight: s.VectorWeight,
		MinConfidence: zeroIsOff(s.MinConfidence), StepWeight: zeroIsOff(s.StepWeight), Usage: usage}
}

// zeroIsOff maps a setting of toolgate.search whose 0 turns a feature off
// (minConfidence: never answer noMatch; stepWeight: whole queries only)
// onto search.Options, where 0 is the default and a negative value is off:
// unset is search's default.
func zeroIsOff(c *float64) float64 {
	switch {
	case c == nil:
		return 0
	case *c == 0:
		return -1
	}
	return *c
}

func printSearch(w io.Writer, out searchOutput, filtered bool) {
	if len(out.Tools) == 0 {
		msg := "no matching tools"
		if filtered {
			msg += " on that server"
		}
		fmt.Fprintf(w, "%s (mode %s)\n", msg, out.Mode)
		printHidden(w, out)
		return
	}
	tw := termtext.NewTable(w)
	fmt.Fprintf(tw, "#\tSCORE\tKEYWORD\tVECTOR\tCONF\tTOOL\tDESCRIPTION\n")
	for i, t := range out.Tools {
		desc := oneLine(t.Description, 70)
		if t.Clause != "" {
			desc = fmt.Sprintf("[for %q] %s", oneLine(t.Clause, 40), desc)
		}
		fmt.Fprintf(tw, "%d\t%.3f\t%.3f\t%.3f\t%.2f\t%s\t%s\n", i+1, t.Score, t.Keyword, t.Vector, t.Confidence, escapeUnsafe(t.Name), desc)
	}
	tw.Flush()
	fmt.Fprintf(w, "mode: %s\n", out.Mode)
	if out.NoMatch {
		fmt.Fprintln(w, "no match: no tool reaches the minimum confidence; these are only the closest")
	}
	printHidden(w, out)
	if out.QueryTerms != nil {
		printExplain(w, out)
	}
}

// explainFields are the keyword fields --explain names, in its order.
var explainFields = []string{"name", "server", "description", "params"}

// printExplain prints, per tool, the query terms each field holds and
// those none holds.
func printExplain(w io.Writer, out searchOutput) {
	fmt.Fprintf(w, "query words as the keyword ranking reads them: %s\n", strings.Join(out.QueryTerms, ", "))
	for i, t := range out.Tools {
		var parts []string
		in := map[string]bool{}
		for _, f := range explainFields {
			if m := t.Matched[f]; len(m) > 0 {
				parts = append(parts, f+": "+strings.Join(m, ", "))
				for _, term := range m {
					in[term] = true
				}
			}
		}
		if len(parts) == 0 {
			parts = append(parts, "no word of the query (its keyword score is 0)")
		}
		var none []string
		for _, term := range out.QueryTerms {
			if !in[term] {
				none = append(none, term)
			}
		}
		if len(none) > 0 && len(in) > 0 {
			parts = append(parts, "in none: "+strings.Join(none, ", "))
		}
		fmt.Fprintf(w, "%d. %s\n", i+1, safeText(strings.Join(parts, "; ")))
	}
}

// visibility is what search_tools shows on the data folder, as every
// gateway on it decides: the policy rules a gateway keeps that a search
// from the command line can know, and the caller they decide for.
type visibility struct {
	set    *policy.Set
	caller *policy.Caller
}

// searchVisibility builds the rules of a gateway on the data folder for
// the index ix: the servers disabled at run time (its state file), the
// quarantine's decisions (its pins file, with the config's approvedTools)
// and, with cfg, its profiles and the servers it has. The last applies only
// to an index that holds a tool of one of cfg's servers: one that holds
// none was built from something else (a tools file, `toolgate index
// --tools`), and cfg then brings only its settings. The caller is a local
// client limited to profile ("" = none), as serve --profile limits one. A
// state file that cannot be read is noted on stderr: as serve then, no
// server is disabled.
func searchVisibility(g *globals, ix *index.Index, cfg *config.File, profile string, stderr io.Writer) visibility {
	data := g.DataDir()
	set := policy.NewSet()
	var approved []string
	if cfg != nil {
		configured := policy.NewConfigured(live.Catalogued(cfg, config.BuiltinServer))
		if slices.ContainsFunc(ix.Tools(), func(t catalog.Tool) bool { return t.Server != config.BuiltinServer && configured.Has(t.Server) }) {
			set.Put(configured)
		}
		set.Put(policy.NewProfiles(cfg.Toolgate.Profiles))
		approved = cfg.Toolgate.Security.ApprovedTools
	}
	st, err := live.ReadState(live.StateFile(data))
	if err != nil {
		fmt.Fprintf(stderr, "toolgate: note: showing the tools of servers disabled at run time too: %v\n", err)
	}
	set.Put(policy.NewDisabled(st.Disabled))
	guard := quarantine.New(dirs.Pins(data), &quarantine.Options{Approved: approved, Logger: g.logger, Command: g.command})
	set.Put(guard.Snapshot().Rule())
	return visibility{set: set, caller: &policy.Caller{Transport: policy.TransportStdio, Session: policy.NewSession(profile, profile != "")}}
}

// seen is what the caller sees of an index's tools.
type seen struct {
	servers []string       // the servers with a tool the caller sees, sorted
	hidden  map[string]int // tools hidden, by rule
	why     map[string]string
}

// see decides every tool of ix for the caller.
func (v visibility) see(ix *index.Index) seen {
	s := seen{hidden: map[string]int{}, why: map[string]string{}}
	for _, t := range ix.Tools() {
		d := v.set.Decide(v.caller, t)
		if d.Allowed {
			s.servers = append(s.servers, t.Server)
			continue
		}
		s.hidden[d.Rule]++
		if _, ok := s.why[t.Server]; !ok {
			s.why[t.Server] = d.Reason
		}
	}
	slices.Sort(s.servers)
	s.servers = slices.Compact(s.servers)
	if len(s.hidden) == 0 {
		s.hidden = nil
	}
	return s
}

// checkServer is the server --server means (serverMeant, among those the
// caller sees and those hidden), or the usage error of one the caller sees
// no tool of ("" = every server), naming why when the index has the
// server's tools but hides them.
func (s seen) checkServer(server string) (string, error) {
	if server == "" || slices.Contains(s.servers, server) {
		return server, nil
	}
	server, err := serverMeant(server, slices.Concat(s.servers, slices.Collect(maps.Keys(s.why))))
	if err != nil {
		return server, err
	}
	if slices.Contains(s.servers, server) {
		return server, nil
	}
	if why, ok := s.why[server]; ok {
		return server, usageError{fmt.Errorf("--server %q: search_tools hides its tools: %s", server, why)}
	}
	return server, usageError{fmt.Errorf("--server %q: there is no server of that name in the index (servers: %s); leave --server out to search them all",
		server, strings.Join(s.servers, ", "))}
}

// hiddenWords says what each rule hides, in printHidden's order.
var hiddenWords = []struct{ rule, words string }{
	{policy.RuleDisabled, "of servers disabled at run time"},
	{quarantine.RuleName, "quarantined"},
	{policy.RuleConfig, "of servers the config does not have"},
	{policy.RuleProfile, "outside the profile"},
}

// printHidden prints how many tools search_tools hides, and why, then
// those that would have ranked, with their rank and why each is hidden.
func printHidden(w io.Writer, out searchOutput) {
	printHiddenCounts(w, out.Hidden)
	for _, h := range out.HiddenHits {
		fmt.Fprintf(w, "  %s would rank %d: %s\n", escapeUnsafe(h.Name), h.Rank, escapeUnsafe(h.Reason))
	}
}

// printHiddenCounts prints how many tools search_tools hides, by rule.
func printHiddenCounts(w io.Writer, hidden map[string]int) {
	var parts []string
	total := 0
	for _, h := range hiddenWords {
		if n := hidden[h.rule]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, h.words))
			total += n
		}
	}
	if total == 0 {
		return
	}
	noun := "tools"
	if total == 1 {
		noun = "tool"
	}
	if len(parts) == 1 {
		fmt.Fprintf(w, "hidden as search_tools hides them: %s %s\n", noun, parts[0])
		return
	}
	fmt.Fprintf(w, "hidden as search_tools hides them: %d %s (%s)\n", total, noun, strings.Join(parts, ", "))
}

// modelMismatch is the warning of an index built with the model indexID
// searched with the model embID ("all-MiniLM-L6-v2/fp32@759c3cd2b7fe"):
// the fix is the other variant when the variants differ, else the other
// model folder, whose files differ (it said to pick the same
// --model-variant of two fp32 models).
func modelMismatch(indexID, embID string) string {
	fix := "or pick the same --model-variant"
	if variant, _, _ := strings.Cut(indexID, "@"); strings.HasPrefix(embID, variant+"@") {
		fix = "or give --model-dir (or $TOOLGATE_MODELS_DIR) the models folder it was built with: the model files differ"
	}
	return fmt.Sprintf("the index was built with %s but the embedder is %s: showing BM25 only (rebuild with toolgate index, %s)", indexID, embID, fix)
}
