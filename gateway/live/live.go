// Package live owns the runtime loop of `toolgate serve`: what keeps the
// catalog, the search index and the rules of what is shown in step with the
// backend pool, the config files and the state in the data folder while the
// gateway serves.
//
//   - Catalog sync: each backend's first listing, tools/list_changed,
//     reconnect or restart asks for a re-index; the new index is built off to
//     the side and swapped into the search engine, so searches never wait.
//     Servers built into the gateway (Options.Builtin: the management
//     server) are catalogued with the pool's.
//   - Policy rules: the loop keeps the rules of its policy.Set that follow
//     the config and the state (which servers are configured, which are
//     disabled, the profiles). The tools of a server a reload removed or
//     that was disabled leave search_tools and execute_tool at once, before
//     the re-index and before the pool stops the server.
//   - Reloads: a change of a config file (watched) or a value on
//     Options.Reload (main feeds it SIGHUP) applies what changed to the pool.
//   - Enable/disable: SetDisabled stops or starts a server and keeps the
//     choice in the data folder (StateFile), not in the user's config; a
//     change of that file (`toolgate servers disable`) applies too.
//   - Warm start: the index of the last run answers while backends connect.
//
// A Loop is the gateway's Searcher (the whole catalog: the gateway asks the
// Policy what each caller may see), and it counts what it did (Stats: the
// catalog and reload generations, the last errors), which GET /status shows
// and tests wait on. main only wires: it builds the pool with the Loop's
// servers and hooks (Servers, ToolsChanged, Cataloged), then calls Run,
// hands the gateway's Refresh to OnChange (search_tools' description names
// the servers), and calls Close at the end.
package live

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/gateway/audit"
	"github.com/toolgate/toolgate/gateway/backend"
	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/gateway/policy"
	"github.com/toolgate/toolgate/index"
	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/internal/storage"
	"github.com/toolgate/toolgate/search"
)

// Pool is what the loop needs of the backend pool.
type Pool interface {
	// Start connects every backend and returns when each is up or down;
	// StartAsync connects them in the background.
	Start(ctx context.Context)
	StartAsync(ctx context.Context)
	// Tools is every listed backend's tools by server; Servers the
	// configured servers.
	Tools() map[string][]*mcp.Tool
	Servers() []string
	// Reconfigure makes the pool run servers and says what it changed.
	Reconfigure(ctx context.Context, servers []config.Server) backend.Diff
	// ReconfigureWhy is Reconfigure, why saying why a server leaves (nil:
	// removed from the config; backend.Disabled).
	ReconfigureWhy(ctx context.Context, servers []config.Server, why func(server string) error) backend.Diff
	// Restart stops server and starts it again with the same entry.
	Restart(server string) error
}

var _ Pool = (*backend.Pool)(nil)

// Storage is the data folder's health as the loop's index writer uses it (serve passes an
// *storage.Writer; nil Options.Storage is storage.Unchecked).
type Storage = storage.Gate

// Defaults of Options.
const (
	DefaultDebounce     = 250 * time.Millisecond
	DefaultLockWait     = 2 * time.Minute
	DefaultStorageRetry = 10 * time.Second
)

// Options configure a Loop. A nil *Options means defaults.
type Options struct {
	Logger *slog.Logger // nil = discard
	// Embedder embeds the catalog and the queries; nil = BM25 only.
	Embedder index.Embedder
	// Search configures the engine (mode, weights); nil = search's defaults.
	// Its Logger defaults to Logger.
	Search *search.Options
	// SearchFrom, if set, makes the engine's options of a config's
	// toolgate.search: a reload that changes them applies them from the
	// next search on (Engine.Reconfigure). Nil: a change of
	// toolgate.search takes effect on restart.
	SearchFrom func(config.SearchSettings) *search.Options
	// SecurityFrom, if set, applies a config's toolgate.security when a
	// reload changes it (serve: the quarantine guard decides again) and
	// returns the tools the change released from quarantine and those it
	// holds now, which the reload logs. Nil: a change of it takes effect
	// on restart.
	SecurityFrom func(config.SecuritySettings) (released, held []string)
	// HTTPAddrCheck, if set, checks a toolgate.http.addr that a reload
	// changes, which the next start listens on (this one keeps its
	// listener): an address it cannot take now (in use, not this
	// machine's) is said at once in the log and in the reload's Warning,
	// rather than found by the restart that fails on it. Nil: not checked
	// (the gateway does not serve the config's address).
	HTTPAddrCheck func(addr string) error
	// HTTPAddrIgnored says why this gateway serves no config's
	// toolgate.http.addr, at this start or the next ("" = it does): serve
	// --http given on the command line, which wins at every start, or an
	// MCP client that starts it on stdio. A reload that changes the
	// address then waits for no restart, and the log says so.
	HTTPAddrIgnored string
	// ConfigPaths are the config files to watch and reload, read as one
	// (config.ParseDocs: later files over earlier ones); none = no reloads.
	// ConfigDocs are the documents New's cfg was parsed from: a reload that
	// finds the same content does nothing (nil = the first look applies
	// the files as they are then).
	ConfigPaths []string
	ConfigDocs  []config.Doc
	// Reload asks for a reload of ConfigPaths even when their content did
	// not change (main registers SIGHUP on it); nil = only file changes.
	Reload <-chan os.Signal
	// Audit, if set, takes the audit records of the reloads the watcher
	// and Reload's signals apply (action "config reload"; auditReload).
	Audit interface{ Write(audit.Record) }
	// Policy is the set of rules the loop keeps in step: it puts the rules
	// "config", "disabled" and "profile" (other rules in it are left
	// alone). nil = a set of the loop's own; Policy returns it.
	Policy *policy.Set
	// Builtin are servers built into the gateway, by name, with their
	// tools (the management server, config.BuiltinServer): catalogued
	// like the pool's servers, never started, stopped or disabled.
	Builtin map[string][]*mcp.Tool
	// StatePath is the file that keeps the servers disabled at run time
	// across restarts (StateFile of the data folder; "" = in memory only).
	// The loop watches it: `toolgate servers disable` applies at once.
	StatePath string
	// Debounce is how long a burst of changes settles before the loop acts:
	// tool-list changes before a re-index, file events before a reload
	// (default DefaultDebounce).
	Debounce time.Duration
	// LockWait bounds the wait for another toolgate building in the same
	// index folder (default DefaultLockWait).
	LockWait time.Duration
	// Storage is asked before each index is written to the data folder
	// (nil: every build is written). While it refuses, or when a write
	// fails for lack of storage, the index is built in memory instead and
	// served (Stats.IndexInMemory), and the loop tries to write it to disk
	// again every StorageRetry (default DefaultStorageRetry).
	Storage      Storage
	StorageRetry time.Duration
	// ColdWait, when above 0, bounds how long Run waits for the first
	// index on a cold start (no index of the last run): past it Run
	// returns, the index is built in the background, and a search waits
	// for it at most ColdWait too, then is answered with a *BuildingError
	// (how far the build is, and to try again). 0: Run returns once the
	// index is built, or with the error that stopped it. An error of a
	// build in the background goes to ColdFailed.
	ColdWait time.Duration
	// ColdFailed, with ColdWait, is called with the error of a first index
	// built in the background (Run would have returned it); serve stops
	// with it. Nil: logged only.
	ColdFailed func(error)
	// Indexed, if set, is called with the catalog of every index the loop
	// starts serving (the first, then each re-index), on the loop's
	// goroutine: `toolgate serve` checks the learned pairs against the
	// tools' definitions there.
	Indexed func(tools []catalog.Tool)
	// Settled, if set, is called with the catalog a cold start's first
	// index holds, before it is served, then with the catalog served each
	// time the loop has acted on a change of the servers' listings (a
	// re-index, or none when the catalog is the one served), on the
	// loop's goroutine (never two calls at once): `toolgate serve` saves
	// the verdicts of its tools' input schemas there (index.SaveChecks),
	// for the next start. A warm start's catalog is not passed before the
	// servers list: checking it then would take the CPU of the client's
	// first searches.
	Settled func(tools []catalog.Tool)
}

func (o *Options) withDefaults() Options {
	var r Options
	if o != nil {
		r = *o
	}
	if r.Logger == nil {
		r.Logger = slog.New(slog.DiscardHandler)
	}
	var so search.Options
	if r.Search != nil {
		so = *r.Search
	}
	if so.Logger == nil {
		so.Logger = r.Logger
	}
	r.Search = &so
	if r.Debounce <= 0 {
		r.Debounce = DefaultDebounce
	}
	if r.LockWait <= 0 {
		r.LockWait = DefaultLockWait
	}
	if r.Storage == nil {
		r.Storage = storage.Unchecked
	}
	if r.StorageRetry <= 0 {
		r.StorageRetry = DefaultStorageRetry
	}
	return r
}

// Stats are the loop's counters, served in GET /status. Tests wait on them
// rather than on logs. Fields are only ever added.
type Stats struct {
	// CatalogGeneration counts the indexes served: 1 for the first (the
	// warm one, or the one built at start), then one more each time a
	// re-index is swapped in. 0 until Run.
	CatalogGeneration uint64 `json:"catalogGeneration"`
	// CatalogTools is how many tools of the index served search_tools
	// ranks: those of the servers disabled at run time are left out
	// (DisabledTools), as toolgate_catalog_tools leaves them out.
	CatalogTools int `json:"catalogTools"`
	// DisabledTools is how many tools of the index served belong to
	// servers disabled at run time (Disabled): held back, hidden until the
	// server is enabled again.
	DisabledTools int `json:"disabledTools,omitempty"`
	// Reindexing says a re-index is wanted or running (a backend listed
	// new tools, a reload changed servers): the catalog is not in step yet.
	Reindexing bool `json:"reindexing"`
	// LastIndexError is why the latest failed re-index failed (the previous
	// index is still served), kept after later successes; LastIndexErrorAt
	// says when.
	LastIndexError   string    `json:"lastIndexError,omitempty"`
	LastIndexErrorAt time.Time `json:"lastIndexErrorAt,omitzero"`
	// Building says the first index of a cold start is being built in the
	// background (Options.ColdWait): searches are answered with how far
	// it is (BuildingTools of BuildingTotal tools embedded; 0 of 0 while
	// the backends connect, before the tools are known).
	Building      bool `json:"building,omitempty"`
	BuildingTools int  `json:"buildingTools,omitempty"`
	BuildingTotal int  `json:"buildingTotal,omitempty"`
	// IndexInMemory says the index served was built in memory because the
	// data folder could not take it (GET /status's storage section says
	// why); it is written there once the folder can.
	IndexInMemory bool `json:"indexInMemory,omitempty"`
	// ReloadGeneration counts config reloads, applied or rejected. A look
	// at a file whose content did not change is neither.
	ReloadGeneration uint64 `json:"reloadGeneration"`
	// LastReload is the latest of them.
	LastReload *Reload `json:"lastReload,omitempty"`
	// LastReloadError is why the latest rejected reload was rejected (the
	// config in effect stayed), kept after later successes;
	// LastReloadErrorAt says when.
	LastReloadError   string    `json:"lastReloadError,omitempty"`
	LastReloadErrorAt time.Time `json:"lastReloadErrorAt,omitzero"`
	// RestartPending names the toolgate settings the config in effect
	// changed since the start and that wait for a restart (over every
	// reload, not only the last one's RestartOnly).
	RestartPending []string `json:"restartPending,omitempty"`
	// Disabled lists the servers disabled at run time (SetDisabled, the
	// state file), sorted; their tools are hidden and they do not run.
	Disabled []string `json:"disabled,omitempty"`
}

// Reload is one config reload: applied (Error empty) or rejected.
type Reload struct {
	At      time.Time `json:"at"`
	Trigger string    `json:"trigger"`         // "file changed", "SIGHUP", "start", "retry" (of a file that could not be read for want of descriptors or memory)
	Error   string    `json:"error,omitempty"` // why it was rejected
	// What the pool did, by server name (backend.Diff).
	Added     []string `json:"added,omitempty"`
	Removed   []string `json:"removed,omitempty"`
	Changed   []string `json:"changed,omitempty"`
	Updated   []string `json:"updated,omitempty"`
	Unchanged []string `json:"unchanged,omitempty"`
	// Applied names the toolgate settings that changed and apply from now
	// on ("toolgate.search"); RestartOnly those that changed but take
	// effect on the next start ("toolgate.embed", ...).
	Applied     []string `json:"applied,omitempty"`
	RestartOnly []string `json:"restartOnly,omitempty"`
	// Warning says what in RestartOnly the next start could not apply as
	// things stand: a new toolgate.http.addr in use by another program.
	Warning string `json:"warning,omitempty"`
	// Fields are the entry's fields that changed, by server of Changed
	// and Updated (backend.Diff.Fields: "fs": ["maxResultBytes"]).
	Fields map[string][]string `json:"fields,omitempty"`
}

// Loop is the runtime loop of one gateway. It implements the gateway's
// Searcher. New prepares it (and opens the warm index), Run starts it, Close
// stops every goroutine it started and waits for them.
type Loop struct {
	dir  string
	opts Options
	log  *slog.Logger
	pool Pool // set by Run

	eng    atomic.Pointer[search.Engine] // set by Run, cleared by Close
	policy *policy.Set
	kick   chan struct{}          // a re-index is wanted (capacity 1: requests merge)
	hook   atomic.Pointer[func()] // OnChange's f

	convMu sync.Mutex
	conv   map[string]converted // catalogOf's, by server: the last build's
	// toSweep is the catalog the last build indexed, to sweep the
	// embedding cache with (sweepable, sweepCache). Only the goroutine
	// that builds reads and writes it.
	toSweep []catalog.Tool

	mu      sync.Mutex
	current []catalog.Tool // the catalog served (or about to be)
	// servedFP is the fingerprint of the index served when it was opened
	// from (or written to) the index folder with the embedder's model (or
	// with none known yet); "" otherwise. A re-index whose catalog has it
	// changes nothing, unless the embedder's model is not the one that
	// made the index's vectors (modelBack).
	servedFP string
	// servedModel is the model ID of the served index's vectors ("" for
	// an index without them).
	servedModel string
	warm        *index.Index // opened by New, handed to the engine by Run
	coldWhy     string       // why New found no index to start warm from ("": none there; BuildingError.Why)
	// servedTools counts the tools of the index served by server:
	// Stats.CatalogTools, DisabledTools and CatalogToolsByServer are
	// read from it (ranked).
	servedTools map[string]int
	stats       Stats
	changed     chan struct{} // closed and replaced when stats change
	// cold is closed once the first index of a cold start built in the
	// background (Options.ColdWait) is served, or its build failed
	// (coldErr, set before); nil when Run built none so.
	cold    chan struct{}
	coldErr error
	// coldBuilt is closed once that index is built, before the embedding
	// cache is compacted and the index served; nil with cold.
	coldBuilt chan struct{}
	// coldDetached: Run returned while that index was built, so that its
	// build's error goes to Options.ColdFailed.
	coldDetached bool
	// listed holds, while that index is built, the tools each server
	// listed so far (ToolsChanged) and the built-in servers', by server
	// and name, and listedIDs their IDs, sorted: Tool and IDs answer from
	// them until the index is served (then listed is nil), so that
	// execute_tool runs a tool it does not need the index for. They are
	// the listings the quarantine observed (serve's OnToolsChanged
	// observes a listing before it calls ToolsChanged), not the pool's
	// tools, which a listing changes before it is observed.
	listed    map[string]map[string]*mcp.Tool
	listedIDs []string
	// coldDeadline, when set (tests), is the channel Options.ColdWait's
	// deadline comes on in Run and in a search's wait (waitCold), in place
	// of a timer's.
	coldDeadline <-chan time.Time

	reloadMu sync.Mutex                  // serializes reloads and enable/disable
	applied  atomic.Pointer[config.File] // the config in effect
	started  config.Settings             // the toolgate settings the process started with
	hash     [sha256.Size]byte
	watchers []*config.Watcher // the config files'
	stateW   *config.Watcher   // the state file's
	// restartsSeen are the state file's restart requests last read
	// (applyRestarts); reloadMu guards it.
	restartsSeen map[string]uint64
	// described is the state file's Described as read at New (Described).
	described map[string]string
	// saidNow is what each server said of itself as last kept
	// (SetDescribed), starting from described: written back with the
	// state file when it went with its folder (holdState); descMu guards it.
	descMu  sync.Mutex
	saidNow map[string]string
	// stateSeen is set once the state file (or its lock file) was found,
	// and stateHeld while the file is gone with its folder (see
	// holdState); reloadMu guards both.
	stateSeen, stateHeld bool
	// stateApply reads the state file and applies it (watchState's), and
	// stateRecheck does so once more after stateConfirm; stateGoneAt is
	// when the file was found deleted, its lock file beside it (see
	// holdState). reloadMu guards them.
	stateApply, stateRecheck func()
	stateGoneAt              time.Time

	cancel context.CancelFunc
	// runCtx is Run's context: servers the pool starts for a reload or an
	// enable live as long as it, not as long as the call that asked.
	runCtx context.Context
	wg     sync.WaitGroup
}

// New prepares the loop for the index in dir (index.Dir of the data folder)
// and the config cfg. It opens the index of the last run when that can
// answer for cfg right away (see Warm); nothing runs until Run.
func New(dir string, cfg *config.File, opts *Options) *Loop {
	o := opts.withDefaults()
	l := &Loop{dir: dir, opts: o, log: o.Logger, kick: make(chan struct{}, 1), changed: make(chan struct{}), policy: o.Policy}
	if l.policy == nil {
		l.policy = policy.NewSet()
	}
	l.applied.Store(cfg)
	l.started = cfg.Toolgate
	if o.ConfigDocs != nil {
		l.hash = docsHash(o.ConfigDocs)
	}
	st, err := ReadState(o.StatePath)
	if err != nil {
		l.log.Warn("cannot read the state file; no server is disabled", "file", o.StatePath, "err", err)
	}
	names := l.catalogued(cfg)
	l.policy.Put(policy.NewConfigured(names))
	l.policy.Put(policy.NewDisabled(st.Disabled))
	l.restartsSeen = st.RestartRequests
	l.described, l.saidNow = st.Described, maps.Clone(st.Described)
	l.policy.PutProfiles(cfg.Toolgate.Profiles)
	l.stats.Disabled = l.disabledHere()
	l.warm, l.current, l.coldWhy = l.openWarm(names, cfg.Source())
	return l
}

// OnChange makes the loop call f after each change of the servers or tools
// that searches see: a re-index swapped in, a config reload applied (a
// server added, removed, changed or described anew). The gateway's Refresh
// goes here: search_tools' description names the servers. f runs on the
// loop's goroutines and must not block for long. It may be set before or
// after Run; a later call replaces it.
func (l *Loop) OnChange(f func()) { l.hook.Store(&f) }

// changedHook calls the OnChange hook, if any.
func (l *Loop) changedHook() {
	if f := l.hook.Load(); f != nil && *f != nil {
		(*f)()
	}
}

// Policy is the set of rules the loop keeps in step (Options.Policy).
func (l *Loop) Policy() *policy.Set { return l.policy }

// Config is the config in effect: New's, then each applied reload's.
func (l *Loop) Config() *config.File { return l.applied.Load() }

// Servers are the servers the pool is to run now: the config's enabled
// servers but those disabled at run time. main builds the pool with them.
func (l *Loop) Servers() []config.Server { return l.runnable(l.applied.Load()) }

func (l *Loop) runnable(cfg *config.File) []config.Server {
	off := l.policy.Disabled()
	var out []config.Server
	for _, s := range cfg.Servers() {
		if !off.Has(s.Name) {
			out = append(out, s)
		}
	}
	return out
}

// catalogued is Catalogued with the loop's built-in servers.
func (l *Loop) catalogued(cfg *config.File) []string {
	return Catalogued(cfg, slices.Collect(maps.Keys(l.opts.Builtin))...)
}

// Catalogued names the servers whose tools the catalog holds for cfg: its
// enabled servers (disabled at run time or not: their tools stay, hidden,
// so that enabling one shows them at once) and the built-in ones, sorted.
// Its policy.Configured rule hides the tools of any other server.
func Catalogued(cfg *config.File, builtin ...string) []string {
	var names []string
	for _, s := range cfg.Servers() {
		names = append(names, s.Name)
	}
	names = append(names, builtin...)
	slices.Sort(names)
	return slices.Compact(names)
}

// Warm reports whether Run will answer from the index of the last run while
// the backends connect.
func (l *Loop) Warm() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.warm != nil
}

// ToolsChanged asks for a re-index; it is the pool's OnToolsChanged hook
// (a backend listed its tools: first connect, list_changed, restart).
// While a cold start's first index is built, the listing is also what
// Tool and IDs answer from. The listing's read-only hints apply to the
// readOnly profiles at once (policy.Set.ToolsListed), before the re-index.
func (l *Loop) ToolsChanged(server string, tools []*mcp.Tool) {
	l.policy.ToolsListed(server, notReadOnly(tools))
	l.list(server, tools)
	l.refresh()
}

// notReadOnly names the tools of a listing that do not declare
// readOnlyHint: true: go-sdk decodes a hint left out as false, MCP's
// default, and backend.Catalog keeps that value in the catalog's
// annotations (catalog.Tool.ReadOnly reads it). Read from the decoded
// listing, not through backend.Catalog: that encodes every schema, 55 ms
// at 10,000 tools, for each listing.
func notReadOnly(tools []*mcp.Tool) []string {
	var out []string
	for _, t := range tools {
		if t != nil && t.Name != "" && (t.Annotations == nil || !t.Annotations.ReadOnlyHint) {
			out = append(out, t.Name)
		}
	}
	return out
}

// list makes tools server's listing in l.listed, while that is kept (a
// cold start's first index being built).
func (l *Loop) list(server string, tools []*mcp.Tool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.listed == nil {
		return
	}
	byName := make(map[string]*mcp.Tool, len(tools))
	for _, t := range tools {
		if t != nil && t.Name != "" {
			byName[t.Name] = t
		}
	}
	l.listed[server] = byName
	ids := make([]string, 0, len(l.listedIDs)+len(byName))
	for s, byName := range l.listed {
		for name := range byName {
			ids = append(ids, s+catalog.Sep+name)
		}
	}
	slices.Sort(ids)
	l.listedIDs = ids
}

// Catalog returns the tools of the catalog served (or, before Run, of the
// warm index about to be), hidden servers' tools included.
func (l *Loop) Catalog() []catalog.Tool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.current)
}

// Known returns the tool of server and name in the catalog served: the
// pool's Options.Known, so that a listing like the catalog served shares
// its memory.
func (l *Loop) Known(server, name string) (catalog.Tool, bool) {
	l.mu.Lock()
	cur := l.current // sorted by ID, never changed in place
	l.mu.Unlock()
	probe := catalog.Tool{Server: server, Name: name}
	i, ok := slices.BinarySearchFunc(cur, &probe, func(t catalog.Tool, p *catalog.Tool) int { return catalog.CompareID(&t, p) })
	if !ok {
		return catalog.Tool{}, false
	}
	return cur[i], true
}

// Cataloged reports whether the catalog served holds tools of server. The
// pool's Lazy hook uses it: a lazy server starts on its first call only
// when search already knows its tools.
func (l *Loop) Cataloged(server string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, t := range l.current {
		if t.Server == server {
			return true
		}
	}
	return false
}

// builtinChanged reports whether the built-in servers' tools (Options.
// Builtin) differ from theirs in tools, a catalog served (their fields, as
// catalog.Fingerprint sees them).
func (l *Loop) builtinChanged(tools []catalog.Tool) bool {
	if len(l.opts.Builtin) == 0 {
		return false
	}
	var served []catalog.Tool
	for _, t := range tools {
		if _, ok := l.opts.Builtin[t.Server]; ok {
			served = append(served, t)
		}
	}
	return catalog.Fingerprint(served) != catalog.Fingerprint(backend.Catalog(l.opts.Builtin))
}

// Run starts pool and the loop, and returns once searches can be answered:
// after a warm start at once (backends connect in the background), else
// once every backend is up or down and the index is built, or, with
// Options.ColdWait, after that long at most (the build goes on in the
// background, see Stats.Building). An error means that first index could
// not be built. The loop's goroutines run until ctx ends or Close. Run is
// called once.
func (l *Loop) Run(ctx context.Context, pool Pool) error {
	l.pool = pool
	l.mu.Lock()
	ix := l.warm
	l.warm = nil
	l.mu.Unlock()
	ctx, l.cancel = context.WithCancel(ctx)
	l.runCtx = ctx
	if ix != nil {
		l.log.Info("warm start: answering from the last catalog while backends connect", "tools", ix.Len(), "dir", l.dir)
		pool.StartAsync(ctx) // each backend's first listing triggers a re-index
		l.serve(ctx, ix, false)
		if l.builtinChanged(ix.Tools()) {
			// An upgrade that changed the management tools: index their
			// definitions now, not at a backend's first listing (a slow
			// one's, or never a lazy one's), while search showed the last
			// run's and execute_tool checked arguments against them.
			l.log.Info("warm start: the built-in tools' definitions changed since the last run: re-indexing them")
			l.refresh()
		}
		if f := ix.OtherFormat(); f != 0 {
			// An upgrade that changed the format (or a rollback): build
			// this toolgate's from the last catalog now, not at the first
			// listing (lazy servers may never list).
			l.log.Info("warm start from an index of another format: answering from it while the index of this format is built", "format", f, "this_version_writes", index.FormatVersion)
			l.refresh()
		}
		l.vectorsNeeded() // an index built in bm25 mode, served in another
		return nil
	}
	if l.opts.ColdWait <= 0 {
		ix, inMemory, err := l.coldBuild(ctx, nil)
		if err != nil {
			return err
		}
		l.settledHook(ix.Tools())
		l.serve(ctx, ix, inMemory)
		return nil
	}
	cold, built := make(chan struct{}), make(chan struct{})
	l.mu.Lock()
	l.cold, l.coldBuilt = cold, built
	l.listed = map[string]map[string]*mcp.Tool{}
	l.mu.Unlock()
	for server, tools := range l.opts.Builtin {
		l.list(server, tools)
	}
	l.update(func(s *Stats) { s.Building = true })
	l.wg.Go(func() {
		ix, inMemory, err := l.coldBuild(ctx, built)
		if err != nil {
			l.mu.Lock()
			l.coldErr = err
			detached := l.coldDetached
			l.mu.Unlock()
			l.update(func(s *Stats) { s.Building = false })
			close(cold)
			if detached && ctx.Err() == nil { // else Run returns err
				l.log.Error("the first index could not be built", "err", err)
				if l.opts.ColdFailed != nil {
					l.opts.ColdFailed(err)
				}
			}
			return
		}
		l.settledHook(ix.Tools())
		l.serve(ctx, ix, inMemory)
		close(cold)
		l.changedHook() // search_tools' description: the servers now listed
	})
	if err := l.untilCold(ctx, cold, built); err != nil {
		return err
	}
	select {
	case <-cold:
		l.mu.Lock()
		err := l.coldErr
		l.mu.Unlock()
		return err
	default:
	}
	// The build's error is Run's until Run returns without one, then
	// ColdFailed's: each is told once.
	l.mu.Lock()
	err := l.coldErr
	l.coldDetached = err == nil
	l.mu.Unlock()
	if err != nil {
		return err
	}
	l.log.Info("cold start: answering the client while the index is built (searches say how far it is)", "after", l.opts.ColdWait)
	return nil
}

// untilCold waits until cold is closed (the first index of a cold start
// served, or its build failed), for Options.ColdWait at most, unless the
// index is built (built closed) by then: only the embedding cache's
// compaction and the serving remain, so it waits for them. Run answered
// the client then, which listed no tools and got a list_changed a moment
// later; a search answered "being built (N of N tools embedded)" moments
// before the index was served. The error is ctx's, when it ended first.
func (l *Loop) untilCold(ctx context.Context, cold, built <-chan struct{}) error {
	t := time.NewTimer(l.opts.ColdWait)
	defer t.Stop()
	deadline := t.C
	if l.coldDeadline != nil {
		deadline = l.coldDeadline
	}
	select {
	case <-cold:
	case <-deadline:
		select {
		case <-built:
			select {
			case <-cold:
			case <-ctx.Done():
				return ctx.Err()
			}
		default:
		}
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// coldBuild starts every backend and builds the first index from their
// tools (a cold start). built, if not nil, is closed once the index is
// built, before the embedding cache is compacted.
func (l *Loop) coldBuild(ctx context.Context, built chan struct{}) (*index.Index, bool, error) {
	l.pool.Start(ctx)
	if err := ctx.Err(); err != nil {
		return nil, false, err // stopped while backends connected: nothing to index
	}
	// The listings of the start are in the index built next: their
	// requests for a re-index are spent (one made while it builds
	// stays).
	l.update(func(*Stats) {
		select {
		case <-l.kick:
		default:
		}
	})
	ix, inMemory, err := l.build(ctx)
	if err != nil {
		return nil, false, err
	}
	if built != nil {
		close(built)
	}
	// Nothing searches yet: the vectors the build stored go into one
	// level of the embedding cache now, not at the first searches
	// (embed.Cached.Compact), after the day's sweep, whose deletions are
	// compacted with them.
	l.sweepCache(ctx, false)
	if c, ok := l.opts.Embedder.(interface{ Compact() error }); ok {
		if err := c.Compact(); err != nil {
			l.log.Warn("embedding cache not compacted after the build", "err", err)
		}
	}
	return ix, inMemory, nil
}

// serve makes ix the index searched and starts the loop's goroutines:
// the catalog sync, the state file's and the config files' watches.
func (l *Loop) serve(ctx context.Context, ix *index.Index, inMemory bool) {
	eng := search.New(ix, l.opts.Embedder, l.opts.Search)
	// A reload while a cold start's first index was built (the management
	// tools run meanwhile: add_server) found no engine to apply a change
	// of toolgate.search to: the first engine starts with it. Under
	// reloadMu, so that a reload sees either no engine or this one.
	l.reloadMu.Lock()
	reconfigured := false
	if cur := l.applied.Load().Toolgate.Search; l.opts.SearchFrom != nil && !same(l.started.Search, cur) {
		eng.Reconfigure(l.opts.SearchFrom(cur))
		reconfigured = true
	}
	l.eng.Store(eng)
	l.reloadMu.Unlock()
	l.mu.Lock()
	l.listed, l.listedIDs = nil, nil // the index answers from now on
	l.mu.Unlock()
	l.update(func(s *Stats) { s.Building, s.BuildingTools, s.BuildingTotal = false, 0, 0 })
	l.swapped(ix, inMemory)
	if reconfigured {
		// Built in bm25 mode, and a reload made it one that reads vectors
		// meanwhile.
		defer l.vectorsNeeded() // once the sync loop runs
	}

	l.wg.Add(1)
	go l.syncLoop(ctx)
	// The state file is followed before the reload loop starts, so a
	// reload (a SIGHUP, a saved config) comes after every file is
	// followed, or said not to be.
	if l.opts.StatePath != "" {
		l.watchState(ctx)
	}
	if len(l.opts.ConfigPaths) > 0 {
		var changed []<-chan struct{}
		// A config that can be read only once (a pipe) is not watched nor
		// read again at start; a reload (SIGHUP) says why it cannot apply.
		once := config.ReadOnce(l.opts.ConfigPaths...)
		if once != nil {
			l.log.Info("the config is read once: changes to it cannot be applied while the gateway runs", "err", once)
		}
		for _, path := range l.opts.ConfigPaths {
			if once != nil {
				break
			}
			w, err := config.Watch(path, &config.WatchOptions{Logger: l.log, Debounce: l.opts.Debounce, Meanwhile: reloadMeanwhile})
			if err != nil {
				l.log.Warn("not watching the config file for changes; "+reloadMeanwhile, "file", path, "err", err)
				continue
			}
			l.watchers = append(l.watchers, w) // Close reads them after l.wg.Wait
			changed = append(changed, w.C)
		}
		// A change between the caller's read of the files and the watch
		// start: applied before Run returns.
		short := false
		if once == nil {
			_, short = l.reload(ctx, "start", "file", false)
		}
		l.wg.Add(1)
		go l.reloadLoop(ctx, merge(ctx, &l.wg, changed), short)
	}
}

// reloadMeanwhile is what an operator does while the config file is not
// watched.
const reloadMeanwhile = "send SIGHUP to reload it"

// Close stops the loop, waits for its goroutines and closes the index. The
// pool is the caller's to close (after the loop).
func (l *Loop) Close() error {
	if l.cancel != nil {
		l.cancel()
	}
	l.wg.Wait()
	var err error
	for _, w := range append(l.watchers, l.stateW) {
		if w != nil {
			err = errors.Join(err, w.Close())
		}
	}
	l.watchers, l.stateW = nil, nil
	if eng := l.eng.Swap(nil); eng != nil {
		err = errors.Join(err, eng.Close())
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.warm != nil { // New without Run
		err = errors.Join(err, l.warm.Close())
		l.warm = nil
	}
	return err
}

// Stats returns the counters as of now.
func (l *Loop) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stats
}

// Wait blocks until cond holds for the counters, or ctx ends (then it
// returns ctx's error), and returns the counters it saw last.
func (l *Loop) Wait(ctx context.Context, cond func(Stats) bool) (Stats, error) {
	for {
		l.mu.Lock()
		st, ch := l.stats, l.changed
		l.mu.Unlock()
		if cond(st) {
			return st, nil
		}
		select {
		case <-ctx.Done():
			return st, ctx.Err()
		case <-ch:
		}
	}
}

// update changes the counters under the lock and wakes Wait.
// disabledHere are the servers of the config in effect disabled at run
// time: Stats.Disabled. The state file may name servers of another
// gateway's config on the same data folder, which this one does not run
// and so does not call disabled (toolgate servers enable would otherwise
// wait for it to start one it does not have).
func (l *Loop) disabledHere() []string {
	cfg := l.applied.Load()
	return slices.DeleteFunc(l.policy.Disabled().Servers(), func(s string) bool {
		_, ok := cfg.MCPServers[s]
		return !ok
	})
}

func (l *Loop) update(f func(*Stats)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f(&l.stats)
	// The servers disabled or the index served may have changed.
	per, held := l.ranked()
	l.stats.CatalogTools, l.stats.DisabledTools = 0, held
	for _, n := range per {
		l.stats.CatalogTools += n
	}
	close(l.changed)
	l.changed = make(chan struct{})
}

// CatalogToolsByServer counts, by server, the tools of the index served
// that search_tools ranks: 0 for a server disabled at run time, whose
// tools the index holds back. toolgate_catalog_tools reads it;
// Stats.CatalogTools is its sum.
func (l *Loop) CatalogToolsByServer() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	per, _ := l.ranked()
	return per
}

// ranked splits servedTools into the tools search_tools ranks, by server
// (0 for a server disabled at run time), and how many tools the disabled
// servers hold back. l.mu is held.
func (l *Loop) ranked() (per map[string]int, held int) {
	per = make(map[string]int, len(l.servedTools))
	for server, n := range l.servedTools {
		if slices.Contains(l.stats.Disabled, server) {
			per[server], held = 0, held+n
		} else {
			per[server] = n
		}
	}
	return per, held
}

// errNotRunning answers searches before Run and after Close.
var errNotRunning = errors.New("the tool catalog is not loaded (the gateway is starting or stopping)")

// Search ranks the tools of the catalog that q.Filter lets through: the
// gateway sets it from the Policy for each caller (Policy().Filter).
func (l *Loop) Search(ctx context.Context, q search.Query) (search.Result, error) {
	eng := l.eng.Load()
	if eng == nil {
		if err := l.waitCold(ctx); err != nil {
			return search.Result{}, err
		}
		if eng = l.eng.Load(); eng == nil {
			return search.Result{}, errNotRunning
		}
	}
	return eng.Search(ctx, q)
}

// BuildingError answers a search while the first index of a cold start is
// built in the background (Options.ColdWait): how far it is, and why the
// start is cold.
type BuildingError struct {
	Tools, Total int // tools embedded of those to embed; 0 of 0 while the backends connect
	// Why there was no index to start from: "" for none in the data
	// folder ("first start on this data folder"); else, say, "the index in
	// the data folder does not fit this config: it was built with another
	// model". It said "first start" whatever the reason.
	Why string
}

func (e *BuildingError) Error() string {
	why := e.Why
	if why == "" {
		why = "first start on this data folder"
	}
	if e.Total == 0 {
		return fmt.Sprintf("the gateway is starting its servers to build the tool index (%s); try again in a few seconds", why)
	}
	return fmt.Sprintf("the tool index is being built (%d of %d tools embedded; %s); try again in a few seconds", e.Tools, e.Total, why)
}

// waitCold waits, at most Options.ColdWait (longer once the index is
// built: untilCold), for the first index of a cold start built in the
// background, and says why there is none: a *BuildingError while it is
// built, the error that stopped its build. Nil once it is served, and
// when Run built none (then the loop is not running).
func (l *Loop) waitCold(ctx context.Context) error {
	l.mu.Lock()
	cold, built := l.cold, l.coldBuilt
	l.mu.Unlock()
	if cold == nil {
		return nil
	}
	_ = l.untilCold(ctx, cold, built) // ctx's end is answered as a deadline
	select {
	case <-cold:
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.coldErr != nil {
			return fmt.Errorf("the tool index could not be built: %w", l.coldErr)
		}
		return nil
	default:
	}
	return l.Building() // nil: served meanwhile, or failed: the caller looks again
}

// progress counts the first index's build (Stats.Building); a re-index's
// is not counted.
func (l *Loop) progress(done, total int) {
	l.mu.Lock()
	building := l.stats.Building
	l.mu.Unlock()
	if building {
		l.update(func(s *Stats) {
			if s.Building {
				s.BuildingTools, s.BuildingTotal = done, total
			}
		})
	}
}

// SearchState says how searches rank now (GET /status's "search"): nil
// before Run and after Close.
func (l *Loop) SearchState() *search.State {
	eng := l.eng.Load()
	if eng == nil {
		return nil
	}
	st := eng.State()
	return &st
}

// RefreshLearned makes searches rank with the learned pairs as they are
// now (search.Engine.RefreshLearned) rather than from the next search on,
// once a background rebuild is done: `toolgate learn` changed them.
func (l *Loop) RefreshLearned(ctx context.Context) error {
	eng := l.eng.Load()
	if eng == nil {
		return errNotRunning
	}
	return eng.RefreshLearned(ctx)
}

// Tool looks a tool up in the catalog served (whoever may see it: the
// gateway asks the Policy), or, while a cold start's first index is
// built, among the tools the servers listed so far.
func (l *Loop) Tool(id string) (catalog.Tool, bool) {
	if eng := l.eng.Load(); eng != nil {
		return eng.Tool(id)
	}
	server, name, err := catalog.SplitID(id)
	if err != nil {
		return catalog.Tool{}, false
	}
	l.mu.Lock()
	t, ok := l.listed[server][name]
	l.mu.Unlock()
	if !ok {
		return catalog.Tool{}, false
	}
	return backend.Catalog(map[string][]*mcp.Tool{server: {t}})[0], true
}

var _ policy.CatalogNumberer = (*Loop)(nil)

// CatalogGeneration is Stats().CatalogGeneration while an index is served
// (it counts the indexes swapped in, after each swap), 0 before (a cold
// start's listings change without it) and after Close: the number that
// policy.Set.Sight keeps a caller's view of the catalog by.
func (l *Loop) CatalogGeneration() uint64 {
	if l == nil || l.eng.Load() == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stats.CatalogGeneration
}

// IDs lists the tools of the catalog served, or, while a cold start's
// first index is built, those the servers listed so far.
func (l *Loop) IDs() []string {
	if eng := l.eng.Load(); eng != nil {
		return eng.IDs()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.listedIDs)
}

// Building says, without waiting, why there is no index to search yet:
// a *BuildingError while a cold start's first index is built (what a
// search answers past its wait); nil otherwise.
func (l *Loop) Building() error {
	if l.eng.Load() != nil {
		return nil
	}
	st := l.Stats()
	if !st.Building {
		return nil
	}
	return &BuildingError{Tools: st.BuildingTools, Total: st.BuildingTotal, Why: l.coldWhy}
}

// merge forwards a value of any of chans to the channel it returns, until
// ctx ends (wg counts the goroutines). nil for no channels.
func merge(ctx context.Context, wg *sync.WaitGroup, chans []<-chan struct{}) <-chan struct{} {
	switch len(chans) {
	case 0:
		return nil
	case 1:
		return chans[0]
	}
	out := make(chan struct{}, 1)
	for _, c := range chans {
		wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case <-c:
					select {
					case out <- struct{}{}:
					default:
					}
				}
			}
		})
	}
	return out
}
