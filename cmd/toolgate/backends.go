package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/toolgate/toolgate/gateway/backend"
	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/gateway/live"
	"github.com/toolgate/toolgate/gateway/mgmt"
	"github.com/toolgate/toolgate/gateway/quarantine"
	"github.com/toolgate/toolgate/index"
	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/internal/dirs"
	"github.com/toolgate/toolgate/internal/plural"
)

// unlisted is a server that `index --config` could not list.
type unlisted struct {
	Server string `json:"server"`
	State  string `json:"state"` // down, needs-login
	Error  string `json:"error"`
	Kept   int    `json:"kept"` // its tools in the index before, kept
}

// listBackendTools connects to every server in the config files (read as
// one, as serve reads them), lists their tools and disconnects. A server
// that cannot be reached keeps the tools the index in the data folder
// already has for it (with a warning), so an offline backend does not
// empty the catalog; servers no longer in the config are dropped. Those
// servers are returned too.
func (g *globals) listBackendTools(ctx context.Context, paths []string, flaws *catalog.FlawLog, stderr io.Writer) ([]catalog.Tool, []unlisted, string, error) {
	cfg, _, err := g.readConfigs(paths)
	if err != nil {
		return nil, nil, "", err
	}
	tokens := g.authTokens(paths[len(paths)-1]) // as serve: logins name the last file
	defer tokens.Close()
	opts := g.backendOptions(cfg)
	opts.RestartDelays = []time.Duration{} // list once; never restart
	// Each server that cannot be listed is said below, once, with its
	// error: the pool's "backend down" and its stderr lines said it first.
	opts.Logger = g.loggerAt(slog.LevelError)
	opts.Auth = tokens
	// The definitions are said as `index --tools` says a file's: the
	// descriptions the backends cut, the schemas the gateway cannot read.
	var cutMu sync.Mutex
	var cuts []catalog.Cut
	opts.OnDescriptionCut = func(server, tool string, bytes int) {
		cutMu.Lock()
		defer cutMu.Unlock()
		cuts = append(cuts, catalog.Cut{ID: catalog.JoinID(server, tool), Bytes: bytes})
	}
	// What each server says of itself at its handshake is kept in the
	// state file as serve's backends keep it, so that the first start on
	// this index names the servers as the next would, and a client's
	// session starts without a list_changed when they connect (it named
	// them by their tools until then).
	statePath := live.StateFile(g.DataDir())
	if st, err := live.ReadState(statePath); err == nil {
		opts.Described = func(server string) string { return st.Described[server] }
	}
	var saidMu sync.Mutex
	said := map[string]string{}
	opts.OnDescribed = func(server, text string) {
		saidMu.Lock()
		defer saidMu.Unlock()
		said[server] = text
	}
	pool := backend.New(cfg.Servers(), opts)
	defer pool.Close()
	pool.Start(ctx)

	saidMu.Lock()
	if len(said) > 0 {
		err := os.MkdirAll(g.DataDir(), 0o700)
		if err == nil {
			err = live.KeepDescribed(statePath, said)
		}
		if err != nil {
			g.logger.Debug("what the servers said of themselves is not kept for the next start", "err", err)
		}
	}
	saidMu.Unlock()
	var prev []catalog.Tool
	if ix, err := openIndexFor(g, g.logger, cfg); err == nil {
		prev = ix.Tools()
		ix.Close()
	}
	var down []unlisted
	for _, st := range pool.Status() {
		if st.State == backend.StateUp {
			continue
		}
		u := unlisted{Server: st.Name, State: string(st.State), Error: st.Err}
		for _, t := range prev {
			if t.Server == st.Name {
				u.Kept++
			}
		}
		kept := "it has no tools in the index"
		if u.Kept > 0 {
			kept = fmt.Sprintf("the index keeps the %s it had for it", plural.Of(u.Kept, "tool"))
		}
		fmt.Fprintf(stderr, "toolgate: warning: server %q is %s (%s); %s\n", st.Name, st.State, escapeUnsafe(st.Err), kept)
		down = append(down, u)
	}
	// The built-in management server's tools are catalogued as serve does.
	tools := pool.Tools()
	tools[mgmt.Name] = mgmt.Tools()
	merged := live.Merge(prev, tools, append(pool.Servers(), mgmt.Name))
	live.SetLanguages(merged, cfg)
	cutMu.Lock()
	slices.SortFunc(cuts, func(a, b catalog.Cut) int { return strings.Compare(a.ID, b.ID) })
	where := strings.Join(paths, ", ")
	theirs := slices.DeleteFunc(slices.Clone(merged), func(t catalog.Tool) bool { return t.Server == mgmt.Name })
	flaws.Warn(stderr, where, cuts, theirs)
	cutMu.Unlock()
	warnQuarantine(stderr, where, g.DataDir(), cfg.Toolgate.Security, theirs)
	return merged, down, cfg.Source(), nil
}

// warnQuarantine says which of tools a gateway on the data folder would
// quarantine, as its guard would decide with the pins as they are (written
// by nothing here), each with the rules and the words that matched, at
// most five named.
func warnQuarantine(w io.Writer, where, data string, sec config.SecuritySettings, tools []catalog.Tool) {
	guard := quarantine.New(dirs.Pins(data), &quarantine.Options{
		OnChange: sec.OnDefinitionChange, Approved: sec.ApprovedTools,
		Scanner: quarantine.Scanner{MaxTextLength: sec.MaxTextLength},
	})
	defer guard.Close()
	holds := guard.Preview(tools)
	if len(holds) == 0 {
		return
	}
	var named []string
	for _, id := range slices.Sorted(maps.Keys(holds))[:min(5, len(holds))] {
		h := holds[id]
		var why []string
		if h.Changed || len(h.Hints) > 0 {
			changed := *h
			changed.Findings = nil
			why = append(why, changed.Reason())
		}
		for _, f := range h.Findings {
			why = append(why, safeText(f.Detail())+": "+safeText(f.Excerpt)) // as tools quarantined shows it
		}
		named = append(named, fmt.Sprintf("%q (%s)", id, strings.Join(why, "; ")))
	}
	more := ""
	if len(holds) > len(named) {
		more = fmt.Sprintf(", and %d more", len(holds)-len(named))
	}
	fmt.Fprintf(w, "toolgate: warning: %s: a gateway would quarantine %s (left out of search_tools and refused by execute_tool until approved): %s%s; change the definition, or approve it once a gateway has listed it (toolgate tools quarantined, then toolgate tools approve ID), or list it in toolgate.security.approvedTools\n",
		where, plural.Of(len(holds), "tool"), strings.Join(named, ", "), more)
}

// openIndexFor opens the data folder's index as the gateway of cfg starts
// from it (index.OpenFor: the one kept for cfg when another config's was
// written since); a nil cfg opens the current one. An index of another
// format whose files read as this one's is taken, as a gateway takes it
// (index.Options.AnyFormat): its OtherFormat says so.
func openIndexFor(g *globals, log *slog.Logger, cfg *config.File) (*index.Index, error) {
	opts := &index.Options{Logger: log, AnyFormat: true}
	if cfg == nil {
		return index.Open(index.Dir(g.DataDir()), opts)
	}
	opts.Config = cfg.Source()
	return index.OpenFor(index.Dir(g.DataDir()), live.Catalogued(cfg, mgmt.Name), opts)
}
