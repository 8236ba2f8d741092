package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/toolgate/toolgate/embed"
	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/gateway/backend"
	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/gateway/live"
	"github.com/toolgate/toolgate/gateway/local"
	"github.com/toolgate/toolgate/gateway/mgmt"
	"github.com/toolgate/toolgate/index"
	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/internal/dirs"
	"github.com/toolgate/toolgate/internal/linerpc"
	"github.com/toolgate/toolgate/internal/storage"
	"github.com/toolgate/toolgate/internal/telemetry"
	"github.com/toolgate/toolgate/internal/tlsfiles"
	"github.com/toolgate/toolgate/search"
)

func init() { register(newServeCmd) }

type serveFlags struct {
	configs     []string
	http        string
	allowRemote bool
	mode        string
	profile     string
	idle        time.Duration // --exit-when-idle
	// httpFromConfig: http is the config's toolgate.http.addr, not --http.
	httpFromConfig bool
}

// addrSetting names where the HTTP address came from, in its errors.
func addrSetting(fromConfig bool) string {
	if fromConfig {
		return "toolgate.http.addr"
	}
	return "--http"
}

// serveCommand is the command that serves what this gateway serves (its
// config files, its --http address, its data folder) with /mcp limited to
// profile: what toolgate__activate_profile quotes to an HTTP client, which
// has no session to switch. It quoted `toolgate serve --profile NAME`,
// which serve refuses without --config, and which would serve another
// data folder than a --data-dir one.
func (f serveFlags) serveCommand(g *globals) func(profile string) string {
	return func(profile string) string {
		words := append([]string{"toolgate", "serve"}, configArgs(f.configs)...)
		if f.http != "" && !f.httpFromConfig {
			words = append(words, "--http", f.http)
		}
		if f.allowRemote {
			words = append(words, "--allow-remote")
		}
		if f.mode != "" {
			words = append(words, "--mode", f.mode)
		}
		return g.commandWith(g.configDataDir, append(words, "--profile", profile)...)
	}
}

// lastConfig is the last --config file, made absolute: the one servers add
// and toolgate__add_server write.
func (f serveFlags) lastConfig() string {
	return absPaths(f.configs[len(f.configs)-1:])[0]
}

func newServeCmd(g *globals) *cobra.Command {
	var f serveFlags
	cmd := &cobra.Command{
		Use:   "serve --config FILE [--config FILE...] [--http 127.0.0.1:PORT] [--profile NAME]",
		Short: "Run the gateway: MCP on stdio (default) or streamable HTTP at /mcp",
		Long: `Run the gateway. It connects to every server in the config file (the
Claude-compatible "mcpServers" format), indexes their tools, and serves MCP with
two tools: search_tools and execute_tool.

Without --http it speaks MCP on stdin/stdout (what an MCP client launches);
logs always go to stderr. Without --http, the config's toolgate.http.addr is
served over HTTP when no MCP client started it (stdin not a pipe: a service,
a terminal). With --http it serves streamable HTTP at /mcp,
GET /healthz, GET /status, Prometheus metrics at GET /metrics and the web
console at /ui/ on a loopback address. Traces are exported over OTLP/HTTP when
toolgate.telemetry.otlpEndpoint or OTEL_EXPORTER_OTLP_ENDPOINT is set.

--config may be given several times (a user's file, then a project's): the
files are read as one, later over earlier (servers and profiles replaced
whole by name, settings key by key).

--profile NAME limits the stdio client (and /mcp) to a profile of
toolgate.profiles; over HTTP, /profiles/NAME/mcp serves each profile.

It watches the config files and applies a change while it runs (SIGHUP
reloads too): removed servers stop and their tools leave search at once,
added ones start, changed ones restart, the others keep running. A config
that does not parse is logged and changes nothing. Timeouts, profiles,
management, search (mode unless --mode is given, weights, minConfidence,
stepWeight, limits) and security (approvedTools, onDefinitionChange,
maxTextLength: the quarantine decides again) apply at once; the other settings
outside "mcpServers" (http, telemetry, dataDir, embed, learn, restart,
maxConcurrentConnects, keysFile, audit, limits) take effect on the next start.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runServe(cmd.Context(), g, f)
		},
	}
	configsFlag(cmd, &f.configs)
	cmd.Flags().StringVar(&f.profile, "profile", "", "limit the stdio client and /mcp to this profile of toolgate.profiles")
	cmd.Flags().StringVar(&f.http, "http", "", "serve streamable HTTP on this address (e.g. 127.0.0.1:8931) instead of stdio")
	cmd.Flags().BoolVar(&f.allowRemote, "allow-remote", false, "allow --http on a non-loopback address")
	cmd.Flags().StringVar(&f.mode, "mode", "", "ranking mode: hybrid, bm25, vector or rrf (default: config, else hybrid)")
	cmd.Flags().DurationVar(&f.idle, "exit-when-idle", 0, "with --http: stop once no MCP request has come for this long and none runs (0: never; toolgate connect --start passes its --idle)")
	g.addEmbedFlags(cmd)
	return cmd
}

// serveGCPercent is serve's GOGC unless the environment sets one: between
// collections the Go heap grows to 1.5 times what is live, not twice. The
// gateway's heap is mostly the catalog (long-lived) and its garbage comes
// in bursts (backends' listings), so collecting sooner costs little CPU
// where it counts: at 50,000 tools (toolgate-bench --sections startup
// --sizes 50000) peak RSS 481–511 → 425 MiB; the client figures at 10,000
// tools are in the README's Performance section.
const serveGCPercent = 50

// setServeGC applies serveGCPercent when GOGC is not set.
func setServeGC() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(serveGCPercent)
	}
}

func runServe(ctx context.Context, g *globals, f serveFlags) error {
	if len(f.configs) == 0 {
		return usageError{errors.New("serve needs --config FILE (an mcpServers JSON file, e.g. examples/toolgate.json)")}
	}
	setServeGC()
	// Registered first: a SIGHUP during start-up must not kill the gateway
	// (the default action) nor stop it (the other commands' stop); the loop
	// reads it once it runs.
	g.stop.KeepHangup()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	catchSIGPIPE()
	cfg, docs, err := g.readConfigs(f.configs)
	if err != nil {
		return err
	}
	log := g.logger
	live.LogBareReferences(log, cfg.Servers())
	warnConfigsOpen(log, f.configs)
	if len(cfg.MCPServers) == 0 {
		log.Warn("the config has no servers yet: search_tools finds only the gateway's own management tools until one is added",
			"config", strings.Join(f.configs, " + "),
			"fix", addServerFix(f.lastConfig()))
	}
	if f.profile != "" {
		if err := checkProfile(cfg, f.profile, "the config"); err != nil {
			return err
		}
	}
	start := time.Now()
	// Traces: off unless an OTLP endpoint is configured; spans still
	// queued at exit are sent first (bounded).
	tracing, err := telemetry.Start(ctx, &telemetry.Options{
		Endpoint: cfg.Toolgate.Telemetry.OTLPEndpoint, Getenv: os.Getenv, Version: version, Logger: log})
	if err != nil {
		return err
	}
	if tracing != nil {
		log.Info("exporting traces over OTLP/HTTP", "endpoint", tracing.Endpoint)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := tracing.Close(cctx); err != nil {
			log.Warn("traces not all sent at exit", "err", err)
		}
	}()
	s := cfg.Toolgate.Search
	var flagMode search.Mode // --mode, over the config's
	if f.mode != "" {
		if flagMode, err = search.ParseMode(f.mode); err != nil {
			return usageError{fmt.Errorf("--mode: %w", err)}
		}
	}
	modeOf := func(s config.SearchSettings) search.Mode { return cmp.Or(flagMode, search.Mode(s.Mode)) }
	// The HTTP address is taken before anything starts, so that a taken
	// port is an error at once rather than after the backends are up.
	// Without --http, the config's toolgate.http.addr is served, unless
	// an MCP client started this gateway (its stdin a pipe or a socket):
	// that client speaks on stdio and would wait for an answer that never
	// comes, while the gateway served HTTP and outlived it. The same file
	// gives `toolgate connect` and `status` their address. addrIgnored
	// says why the config's address is not served, now or at the next
	// start (a reload that changes it then waits for no restart).
	addrFromConfig, addrIgnored := false, ""
	switch a := cfg.Toolgate.HTTP.Addr; {
	case f.http != "":
		addrIgnored = "serve --http " + f.http + " given on the command line wins over it"
	case stdioClient(os.Stdin):
		addrIgnored = "an MCP client started this gateway on stdio, where it answers"
		if a != "" {
			log.Info("serving MCP on stdio to the client that started this gateway; the config's toolgate.http.addr is not served (toolgate serve --http serves it)", "addr", a)
		}
	case a != "":
		f.http, addrFromConfig, f.httpFromConfig = a, true, true
	}
	switch {
	case f.idle < 0:
		return usageError{fmt.Errorf("--exit-when-idle %s: want a duration of 0 (never) or more", f.idle)}
	case f.idle > 0 && f.http == "":
		return usageError{errors.New("--exit-when-idle needs --http: a gateway on stdio stops when its client leaves")}
	case f.http == "" && nullStdin(os.Stdin):
		// It used to read the end of /dev/null as its client leaving and
		// exit 0 at once: a unit or a container without --http stopped
		// as soon as it started, "successfully", and was not restarted.
		return usageError{errors.New("nothing to serve: stdin is /dev/null (a service, `docker run` without -i, nohup), so no MCP client speaks on stdio, and no HTTP address is given: pass --http 127.0.0.1:8931 (or set toolgate.http.addr in the config) to serve HTTP, or let an MCP client start the gateway")}
	case f.http == "" && term.IsTerminal(int(os.Stdin.Fd())):
		// Someone typed `toolgate serve` to start a gateway: it said
		// "gateway ready" and nothing listened, and a line typed got a
		// JSON-RPC parse error. It still serves stdio (an MCP message
		// may be typed to try it), but says what it does.
		log.Warn("stdin is a terminal: this gateway speaks MCP (JSON-RPC, one message a line) on stdin and stdout, to the MCP client that starts it, and nothing listens on the network",
			"fix", "to run a gateway that clients reach, pass --http 127.0.0.1:8931 (or set toolgate.http.addr in the config); to use it from an MCP client, give the client this command instead of running it here")
	}
	// A mistyped --http, or a non-loopback one without --allow-remote, is
	// the command line's mistake: exit status 2, before anything starts.
	// The config's address is the config's (exit status 1), checked as
	// early: it was checked only once the API keys were, so that a
	// non-loopback one without keys and --allow-remote took two refusals,
	// keys first, each naming a --http flag never given.
	if f.http != "" {
		err := gateway.CheckListenSetting(addrSetting(addrFromConfig), f.http, f.allowRemote, g.remoteReady(cfg))
		switch {
		case err != nil && addrFromConfig:
			return err
		case err != nil:
			return usageError{err}
		}
	}
	// A data folder copied or restored by another user: all that this user
	// may not use, with one fix, before the keys or the pins refuse the
	// first of them alone.
	if names, fix := storage.Unusable(g.DataDir()); names != "" {
		log.Warn("the data folder holds files and folders this user may not use: the API keys, pins, learned pairs and other stores among them are refused until it may",
			"entries", names, "fix", fix)
	}
	// Keys before the address: a non-loopback address without keys is
	// refused before it is bound.
	sec, err := g.checkKeys(cfg, f, log)
	if err != nil {
		return err
	}
	pins, err := checkPins(g.pinsFile())
	if err != nil {
		return err
	}
	if err := checkState(live.StateFile(g.DataDir())); err != nil {
		return err
	}
	defer sec.Close() // last: the gateway has stopped writing to the audit log
	var ln net.Listener
	var hf *httpFront      // the HTTP front, served from the moment ln is taken
	stage := &startStage{} // what the start does, for GET /readyz
	stage.set("opening the data folder")
	var stdin *linerpc.Watched
	var frontCert *tlsfiles.ServerCert // toolgate.http.tls: the front serves HTTPS
	if f.http != "" {
		if t := cfg.Toolgate.HTTP.TLS; t != nil {
			if frontCert, err = tlsfiles.Server(t.Cert, t.Key); err != nil {
				return fmt.Errorf("toolgate.http.tls: %w", err)
			}
			warnExpiry(log, t.Cert, frontCert.Leaf(), time.Now())
			warnNoNames(log, t.Cert, frontCert.Leaf())
			frontCert.OnChange(func(err error) { certChanged(log, t.Cert, frontCert, err) })
			if fix := tlsfiles.Exposed(t.Key); fix != "" {
				log.Warn("the HTTPS front's private key is readable by every user of this machine", "file", t.Key, "fix", fix)
			}
		}
		if ln, err = gateway.Listen(f.http, f.allowRemote); err != nil {
			return err
		}
		defer ln.Close()
		warnTakenTwin(log, ln, frontCert != nil)
		// Served at once: the probes answer while the gateway starts, and
		// the other requests wait for it (gateway.Starting).
		hf = startFront(ctx, ln, frontCert, log, stage.why)
		defer hf.stop()
	} else {
		// A stdio client that closes stdin while the gateway starts (a
		// cold start waits for every backend) stops it as a signal does,
		// at once rather than once the start is done.
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		stdin = linerpc.WatchStdin()
		// So does one that closes its end of stdout, at once: a write
		// finds it only at the next reply, which a call in flight held
		// back for as long as it ran, for a client gone.
		stdout := linerpc.WatchReaderGone(os.Stdout)
		defer stdout.Stop()
		go func() {
			select {
			case <-stdin.Ended():
				if ctx.Err() == nil {
					log.Info("the stdio client closed stdin: stopping")
				}
				cancel()
			case <-stdout.Gone():
				if ctx.Err() == nil {
					log.Info("the stdio client closed stdout: stopping")
				}
				cancel()
			case <-ctx.Done():
			}
		}()
	}

	// The data folder: a start creates it; one that cannot take writes is
	// served from memory (see README, Reliability) until it can.
	health := g.health()
	err = health.Prepare()
	if err == nil {
		err = health.Check()
	}
	if err != nil {
		log.Error("the data folder cannot take writes: serving with the index in memory and without storing embeddings or refreshed logins until it can (GET /status, storage)",
			"dir", health.Dir(), "err", err, "fix", storage.Fix(health.Dir(), err))
	}
	// An arbitrary container uid without HOME gets /tmp/.local/share:
	// the keys, logins and learned pairs would go with the container.
	if why := dirs.DataInTemp(g.dataDir, g.configDataDir); why != "" {
		log.Warn("the data folder is in the temp folder: shared with every user of this machine, cleaned at boot, gone with a container, and the API keys, logins, audit log and learned pairs in it with it",
			"dir", health.Dir(), "reason", why, "fix", storage.OwnFolders)
	}
	// Made so by a toolgate before 0700, and left so (not chmod'ed here:
	// the operator may have reasons; the fix is said instead).
	if open, fix := health.Exposed(); open != "" {
		log.Warn("folders of the data folder are open to every user of this machine (the searches' queries, the learned pairs, the audit log, the logins)", "folders", open, "fix", fix)
	}
	// The audit log and the quarantine's pins, in the data folder.
	sec.open(cfg, log, health, pins)

	// Stopping, in this order and within the stop's budget (defers run
	// last first): the HTTP front or stdio (Serve returns), the runtime
	// loop, the backends, the logins, the embedding cache.
	// One session (each holds the weights and an arena: ~110 MiB) using
	// every core: a search embeds one short query, as fast as with two.
	// It loads in the background while the index opens and the client's
	// handshake is answered; the first search waits for it. In bm25 mode
	// no search reads vectors, and it loads only once something asks for
	// them (o.Lazy): a reload to a mode that reads them, a search of the
	// console's playground in one over an index that has them. It loaded
	// at every start: some 155 MiB of RSS (VmHWM 219 MiB against 65) that
	// a gateway run in bm25 mode to save memory held for nothing.
	startMode := modeOf(s)
	stage.set("opening the embedding cache")
	emb, embCloser, embErr := g.openEmbedder(ctx, func(o *embed.Options) {
		o.Sessions, o.Background, o.Lazy = 1, true, !startMode.NeedsVectors()
	})
	if embErr != nil {
		if ctx.Err() == nil { // else stopping already (stdin closed): no fault of the model's
			log.Warn("semantic ranking is off: search_tools runs BM25-only and says \"mode\": \"bm25\" (run `toolgate doctor`)", "reason", embErr)
		}
		emb, embCloser = nil, io.NopCloser(nil)
	}
	defer g.stop.Close("embedding cache", embCloser.Close)

	// Learning from use: the learned pairs the ranking reads and the
	// gateway records; closed after the runtime loop (its engine's
	// rebuilds read them).
	var usage search.Usage
	var learner gateway.Learner
	var indexed func([]catalog.Tool)
	stage.set("opening the learned pairs")
	learning := g.openLearning(cfg, health)
	if learning != nil {
		defer g.stop.Close("learned pairs", learning.Close)
		usage, learner, indexed = learning, learning, learning.indexed
	}

	// The runtime loop: warm start (it opens the last run's index now),
	// catalog sync with the pool and the built-in management server, the
	// policy's rules, config reloads (file watch and SIGHUP; a change of
	// toolgate.search applies at once, its limits through the gateway's
	// OnChange, see front.serve), the servers disabled at run time (the
	// state file). A first index built in the background (coldStartWait)
	// that fails stops the gateway with its error, as a cold start that
	// failed before it answered did.
	ctx, stopCold := context.WithCancelCause(ctx)
	defer stopCold(nil)
	var coldErr atomic.Pointer[error]
	var addrCheck func(string) error // nil: the next start serves --http, or stdio, not the config's address
	if addrFromConfig {
		addrCheck = func(addr string) error { return canListen(addr, ln, f.allowRemote, g.remoteReady(cfg)) }
	}
	// The flaws of a definition (a schema the gateway cannot read, a name
	// MCP does not recommend) are logged once per definition, as
	// `toolgate index --config` says them, before the index that serves it.
	// The verdicts of the schemas the last run saved are taken as they
	// are: a warm start resolves only the schemas that changed.
	var flaws catalog.FlawLog
	ixDir := index.Dir(g.DataDir())
	checks := index.ReadChecks(ixDir)
	flaws.Seed(checks)
	// The tools of the catalog served whose input schema it cannot read,
	// with the verdicts logged (GET /status's "schemaFlaws"); nil until
	// the catalog settles.
	var flawed atomic.Pointer[[]catalog.ToolFlaw]
	// And those over catalog.MaxSchemaShown and with a name MCP does not
	// recommend (catalog.ShownFlaws), stored before flawed.
	var shown atomic.Pointer[[2][]catalog.ToolFlaw]
	settled := func(tools []catalog.Tool) {
		huge, names := catalog.ShownFlaws(tools)
		shown.Store(&[2][]catalog.ToolFlaw{huge, names})
		all, now := flaws.Settled(tools)
		flawed.Store(&all)
		var err error
		if checks, err = index.SaveChecks(ixDir, now, checks); err != nil {
			log.Debug("the verdicts of the tools' input schemas are not saved: the next start checks them again", "file", ixDir, "err", err)
		}
	}
	stage.set("opening the tool index of the last run")
	var pool *backend.Pool // made below, before the loop runs (and reloads)
	var lv *live.Loop
	lv = live.New(index.Dir(g.DataDir()), cfg, &live.Options{
		ColdWait:   coldStartWait,
		ColdFailed: func(err error) { coldErr.Store(&err); stopCold(err) },
		Logger:     log,
		Embedder:   emb,
		Search:     searchOptions(s, modeOf(s), usage),
		SearchFrom: func(s config.SearchSettings) *search.Options { return searchOptions(s, modeOf(s), usage) },
		SecurityFrom: func(s config.SecuritySettings) ([]string, []string) {
			return sec.guard.Reconfigure(s, func() []catalog.Tool { return listed(pool, lv) })
		},
		Settled:         settled,
		HTTPAddrCheck:   addrCheck,
		HTTPAddrIgnored: addrIgnored,
		Indexed:         indexed,
		ConfigPaths:     f.configs,
		ConfigDocs:      docs,
		Reload:          hup,
		Audit:           sec.audit,
		Storage:         health.Writer("index", "the index is built in memory"),
		Builtin:         map[string][]*mcp.Tool{mgmt.Name: mgmt.Tools()},
		StatePath:       live.StateFile(g.DataDir()),
		Policy:          sec.policy, // key scopes and quarantine first; the loop adds its rules
	})
	sec.config = lv.Config
	if ln != nil { // keys are asked for over HTTP alone
		sec.profiles = func() map[string]config.Profile { return lv.Config().Toolgate.Profiles }
	}
	// A lazy server starts on its first execute_tool, so search needs its
	// tools from the catalog; one the catalog lacks starts now, once.
	// Remote servers that need a login get their tokens from the data
	// folder; closed after the pool.
	tokens := g.authTokens(f.configs[len(f.configs)-1])
	defer g.stop.Close("logins", tokens.Close)
	opts := g.backendOptions(cfg)
	opts.Auth = tokens
	// Quarantine decides on each listing before the re-index it asks for;
	// the tools of the warm catalog count as listed.
	sec.guard.Observe(lv.Catalog())
	opts.OnToolsChanged = func(server string, tools []*mcp.Tool) {
		listed := backend.Catalog(map[string][]*mcp.Tool{server: tools})
		sec.guard.ObserveServer(server, listed)
		flaws.Listed(log, server, listed)
		lv.ToolsChanged(server, tools)
	}
	opts.Known = lv.Known // a listing like the warm catalog is held once
	// What each server said of itself at its last handshake (the state
	// file) describes it in search_tools until it connects: a warm start's
	// description is the last run's, and the handshake, saying the same,
	// sends the client no tools/list_changed (it did a second into every
	// stdio session).
	opts.Described, opts.OnDescribed = lv.Described, lv.SetDescribed
	opts.Lazy = func(s config.Server) bool { return s.Lazy && lv.Cataloged(s.Name) }
	// On a warm start the backends connect once the model is loaded and
	// the first search is answered, or firstSearchWait after the model
	// loaded without one (at once when a call needs one): started
	// alongside, they took the CPU the client's first search waits for.
	// In bm25 mode no search waits for a model, and nor do they: they wait
	// for the first search alone (they waited for the model's load too).
	firstSearch := newFirstSearch()
	switch r, ok := emb.(interface{ Ready(context.Context) error }); {
	case !startMode.NeedsVectors():
		opts.StartAfter = func(ctx context.Context) { firstSearch.wait(ctx, firstSearchWait) }
	case ok:
		opts.StartAfter = func(ctx context.Context) {
			if r.Ready(ctx) == nil {
				firstSearch.wait(ctx, firstSearchWait)
			}
		}
	}
	pool = backend.New(lv.Servers(), opts) // the config's, but those disabled at run time
	defer g.stop.Close("backends", pool.Close)
	// GET /status, on the HTTP front and on the status socket in the data
	// folder, from the start: `toolgate status` finds a gateway on stdio
	// there, a cold start's connecting backends included.
	proc := &process{info: gateway.ProcessInfo{PID: os.Getpid(), Transport: "stdio", Config: absPaths(f.configs)}, level: g.level}
	if ln != nil {
		proc.info.Transport, proc.info.Addr = "http", ln.Addr().String()
		if frontCert != nil {
			proc.info.TLS, proc.info.TLSCert, proc.cert = true, cfg.Toolgate.HTTP.TLS.Cert, frontCert
		}
	}
	if f.idle > 0 {
		proc.info.ExitWhenIdle = f.idle.String()
	}
	ranking := func() *search.State {
		st := lv.SearchState()
		if st != nil && st.BM25Only && embErr != nil {
			st.Reason = embErr.Error() // no embedder at all: what it lacks
		}
		return st
	}
	sopts := &gateway.StatusOptions{Version: version, Started: start, Loop: lv, Storage: health,
		Security: sec.status, Policy: lv.Policy(), Catalog: lv, Process: proc.report, Search: ranking}
	if learning != nil {
		sopts.Learning = learning.status
	}
	sopts.SchemaFlaws = func() ([]catalog.ToolFlaw, bool) {
		if all := flawed.Load(); all != nil {
			return *all, true
		}
		return nil, false
	}
	sopts.ShownFlaws = func() (huge, names []catalog.ToolFlaw) {
		if s := shown.Load(); s != nil {
			return s[0], s[1]
		}
		return nil, nil
	}
	status := gateway.StatusHandler(pool, sopts)
	level := logLevelHandler(g.level, log)
	var learn http.Handler
	if learning != nil {
		learn = learning.handler(learnDir(g), lv.Catalog, lv.RefreshLearned)
	}
	sock := local.Serve(g.DataDir(), socketRoutes(status, g.logRing.Handler(), level, learn), &local.Options{Logger: log, Refuse: health.Replaced})
	defer g.stop.Close("status socket", sock.Close)
	if learning != nil {
		// A store opened in a data folder made again: the socket too, at
		// once (it is looked for every 10 s), so that a gateway whose store
		// went with the old folder finds this one to hand its pairs to.
		renew := sock.Renew
		learning.onHold.Store(&renew)
	}
	warm := lv.Warm()
	stage.set("starting its servers")
	stage.lv.Store(lv) // a cold start's first index: how far it is
	err = lv.Run(ctx, pool)
	defer g.stop.Close("runtime loop", lv.Close) // before the pool: the loop stops using it first
	defer g.stop.Begin()                         // whatever ended serving, the stop is bounded
	if err != nil {
		hf.stop() // first, as when serving: the requests waiting are answered
		if ctx.Err() != nil {
			return nil // stopped while starting: a stop, not a failure
		}
		return err
	}

	err = (&front{cfg: cfg, flags: f, serveCommand: f.serveCommand(g), log: log, start: start, pool: pool, lv: lv, emb: emb,
		learner: learner, sec: sec, health: health, tracing: tracing, ln: ln, http: hf, cert: frontCert, stdin: stdin, warm: warm,
		firstSearch: firstSearch, status: status, statusOpts: sopts, proc: proc, ranking: ranking}).serve(ctx)
	if p := coldErr.Load(); p != nil {
		return *p
	}
	return err
}

// listed is each tool as its server listed it last (what the quarantine
// guard observed), and for a server that has not listed since the start (a
// lazy one not started yet) its tools in the catalog served.
func listed(pool *backend.Pool, lv *live.Loop) []catalog.Tool {
	if pool == nil {
		return lv.Catalog()
	}
	byServer := pool.Tools()
	tools := backend.Catalog(byServer)
	for _, t := range lv.Catalog() {
		if _, ok := byServer[t.Server]; !ok {
			tools = append(tools, t)
		}
	}
	return tools
}

// coldStartWait is how long a cold start (no index in the data folder)
// waits for its first index before it answers the client, and how long a
// search waits for it after that: past it the index is built in the
// background and searches say how far it is (live.Options.ColdWait). A
// client may give up on a server that does not answer its handshake
// within 60 s; 10,000 tools took 85 s to index on 2 cores.
const coldStartWait = 10 * time.Second

// stdioClient reports whether f, the gateway's stdin, is a pipe or a
// socket: what an MCP client that starts a server on stdio gives it. A
// service's stdin (/dev/null) and a terminal are neither.
func stdioClient(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&(os.ModeNamedPipe|os.ModeSocket) != 0
}

// nullStdin reports whether f, the gateway's stdin, is the null device:
// what a service manager or a container without -i gives a process, and
// never what an MCP client does.
func nullStdin(f *os.File) bool {
	fi, err := f.Stat()
	if err != nil {
		return false
	}
	null, err := os.Stat(os.DevNull)
	return err == nil && os.SameFile(fi, null)
}

// warnConfigsOpen warns of each config file that every user of this
// machine may change (storage.OthersMayWrite): the gateway runs the
// commands its servers name, and reads it again when it changes, so any
// of them could run a program as this user, with the backends' secrets.
// A warning, not a refusal (as a TLS key others may read): file systems
// without Unix modes (WSL's /mnt/c, a vboxsf share) show every file 0777,
// and chmod cannot change that there.
func warnConfigsOpen(log *slog.Logger, paths []string) {
	for _, p := range paths {
		if how, fix := storage.OthersMayWrite(p); how != "" {
			log.Warn("the config file "+how+": anyone could add a server, whose command the gateway runs as this user (it reads the file again when it changes)", "config", p, "fix", fix)
		}
	}
}

// configArgs are "--config FILE" for each of paths, made absolute: how a
// command quoted for the user names the config files this one read.
func configArgs(paths []string) []string {
	var args []string
	for _, c := range absPaths(paths) {
		args = append(args, "--config", c)
	}
	return args
}

// absPaths is paths made absolute where they can be.
func absPaths(paths []string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		if a, err := filepath.Abs(p); err == nil {
			p = a
		}
		out[i] = p
	}
	return out
}

// process is what GET /status says of this gateway process.
type process struct {
	info  gateway.ProcessInfo
	gw    atomic.Pointer[gateway.Gateway] // once serving: the stdio client's name
	level *slog.LevelVar                  // the log's level now
	cert  *tlsfiles.ServerCert            // the HTTPS front's certificate (nil: none)
}

func (p *process) report() *gateway.ProcessInfo {
	i := p.info
	if p.level != nil {
		i.LogLevel = levelName(p.level.Level())
	}
	if p.cert != nil {
		if leaf := p.cert.Leaf(); leaf != nil {
			i.TLSNotBefore, i.TLSNotAfter = &leaf.NotBefore, &leaf.NotAfter
		}
		if since, err := p.cert.Fault(); err != nil {
			i.TLSError, i.TLSErrorSince = err.Error(), &since
		}
	}
	if gw := p.gw.Load(); gw != nil && i.Transport == "stdio" {
		i.Client = gw.StdioClient()
	}
	return &i
}

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// warnTakenTwin warns when another program listens on the other loopback
// of the front's port ([::1]:8931 beside 127.0.0.1:8931): a client given
// localhost:8931 that tries that family first reached it instead of the
// gateway (a 404, an answer in another protocol, a hang) with nothing in
// the gateway's log to say why.
func warnTakenTwin(log *slog.Logger, ln net.Listener, https bool) {
	twin := gateway.TakenTwin(ln)
	if twin == "" {
		return
	}
	scheme := "http"
	if https {
		scheme = "https"
	}
	_, port, _ := net.SplitHostPort(twin)
	log.Warn("another program listens on "+twin+", the other loopback address of this port: a client given localhost:"+port+
		" that tries it first (Node, curl and Go try ::1 first where localhost is both ::1 and 127.0.0.1) reaches that program, not this gateway",
		"fix", "give clients "+(&url.URL{Scheme: scheme, Host: ln.Addr().String(), Path: "/mcp"}).String()+" rather than localhost, "+
			"or stop that program (ss -ltnp 'sport = :"+port+"' names it), or serve on another port")
}

// catchSIGPIPE keeps a process that an MCP client started (serve, connect)
// alive when the client closes the read end of its stdout or stderr (it
// quit, or it never reads stderr): Go's default for fds 1 and 2 is to die
// of SIGPIPE at the next reply or log line. Caught rather than ignored, so
// that backends do not inherit SIG_IGN: a write then fails with EPIPE, a
// lost log line, or a broken stdio transport that ends the session and
// stops the process cleanly. Kept until the process exits: the stop logs
// after the command returns.
func catchSIGPIPE() { signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE) }

// readerMayLeave runs a command that writes its result after work a kill
// would waste or leave open (eval, index, learn): when the reader of its
// output has gone (| head -1, a jq that failed), run's next write fails
// with EPIPE and the command exits 0 with its stores closed, rather than
// die of SIGPIPE (exit status 141, which fails a CI step run with
// pipefail) with the work done.
func readerMayLeave(g *globals, what string, run func() error) error {
	catchSIGPIPE()
	err := run()
	if errors.Is(err, syscall.EPIPE) {
		if g.logger != nil {
			g.logger.Debug(what+" stopped: its output's reader has gone", "err", err)
		}
		return nil
	}
	return err
}

// socketRoutes are the routes of the status socket in the data folder
// (local.Serve): the status report, the log's last lines, the log level,
// and, with learning on (learn not nil), the learned pairs.
func socketRoutes(status, logs, level, learn http.Handler) map[string]http.Handler {
	routes := map[string]http.Handler{"GET /status": status, "GET /logs": logs, "GET /loglevel": level, "POST /loglevel": level}
	if learn != nil {
		routes["GET /learn"], routes["POST /learn"] = learn, learn
	}
	return routes
}
