package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/gateway/bridge"
	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/internal/datafile"
	"github.com/toolgate/toolgate/internal/linerpc"
	"github.com/toolgate/toolgate/internal/shellword"
)

func init() { register(newConnectCmd) }

type connectFlags struct {
	addr    string
	config  string
	profile string
	ca      string        // --ca
	start   bool          // start a gateway when none answers
	idle    time.Duration // … which stops after this long without a request
	silence time.Duration // --silence
	// fallback is the address tried when none is given and no gateway on
	// the data folder serves the config ("": defaultStatusAddr; tests
	// point it where nothing listens, as a developer's own gateway may
	// answer at the default).
	fallback string
}

// silenceOption is bridge.Options.Silence of --silence (given: the flag
// was set): left out, the bridge's default; 0, never (negative there).
func (f connectFlags) silenceOption(given bool) (time.Duration, error) {
	switch {
	case !given:
		return 0, nil
	case f.silence < 0:
		return 0, usageError{fmt.Errorf("--silence %s: want a duration above 0 (how long a call may hear nothing from the gateway), or 0 to never check", f.silence)}
	case f.silence == 0:
		return -1, nil
	}
	return f.silence, nil
}

// defaultConnectIdle is connect --idle's default: how long a gateway that
// connect --start started runs without a request.
const defaultConnectIdle = 10 * time.Minute

func newConnectCmd(g *globals) *cobra.Command {
	var f connectFlags
	cmd := &cobra.Command{
		Use:   "connect [--addr 127.0.0.1:8931] [--profile NAME] [--silence 45s] [-c FILE [--start [--idle 10m]]]",
		Short: "Connect an MCP client on stdio to a gateway running over HTTP (one gateway for many clients)",
		Long: `Connect an MCP client that speaks only stdio to a gateway served over
streamable HTTP (toolgate serve --http), as if it were a gateway of its own:
point the client's config at "toolgate connect" instead of "toolgate serve".
Every client then shares one gateway: one set of backend processes, one
embedding model in memory, one index, its API keys and scopes, its audit log
and what it learns from use, instead of a gateway per client session.

It relays the client's JSON-RPC messages to the gateway's /mcp (or
/profiles/NAME/mcp with --profile) and the answers back, with the progress,
log messages and questions the gateway sends during a call. The gateway's
HTTP front keeps no session: a gateway restarted while clients are connected
answers their next call, and a call made while it restarts (it answered, and
now refuses connections, or closes them before it takes the call) waits up to
5 s for it. A call it cannot take (it is down, it refuses the
key) is answered with an error that says why and how to fix it.

A call that hears nothing from the gateway for --silence (default: three of
the beats it says it sends while it answers, 45s) is taken as dead (a Wi-Fi
gone, a VPN that reconnected, a sleep) and answered so; a gateway that says
no beat (an older one) is pinged then, and the call ends only if the ping
gets no answer. --silence 0 never checks.

The gateway: --addr (host:port or URL), else --config's toolgate.http.addr,
else the one gateway serving HTTP on the data folder (found as toolgate
status finds it), else ` + defaultStatusAddr + `. With --config, only a gateway
serving that file will do: one running for another config is passed over on
the data folder, and refused at an address (exit status 2).
A gateway with API keys needs one: put it in $` + envKey + `.

With --start (and --config), when no gateway answers there, connect starts
one in the background: toolgate serve --config FILE --http ADDR
--exit-when-idle ` + defaultConnectIdle.String() + ` (--idle), on this data folder. The next clients find
it; it stops once no client has sent a request for --idle, and a client
that calls after that starts it again. Two clients started together start
one gateway: the second finds the address taken and uses the first's.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			catchSIGPIPE()
			if err := checkCA(f.ca); err != nil {
				return err
			}
			silence, err := f.silenceOption(cmd.Flags().Changed("silence"))
			if err != nil {
				return err
			}
			u, front, err := bridgeURL(cmd.Context(), g, f)
			if err != nil {
				return err
			}
			key := os.Getenv(envKey)
			opts := bridge.Options{URL: u, Key: key, KeyEnv: "$" + envKey, Logger: g.logger,
				Fix: func(err error) string { return gatewayTLSFix(err, front.ca) }, Down: front.down, Silence: silence}
			if front.pin != "" || front.ca != "" {
				opts.Client = front.client()
			}
			if f.start {
				s, err := newStarter(g, f, u, front)
				if err != nil {
					return err
				}
				if err := s.ensure(cmd.Context()); err != nil {
					return err
				}
				if opts.URL, err = s.at(u); err != nil {
					return err
				}
				opts.Revive = s.ensure
			}
			g.logger.Info("relaying the stdio client to the gateway", "url", opts.URL, "api_key", key != "")
			// A client that closes its end of stdout is gone, as serve
			// sees it: at once, not at the next answer, which a call in
			// flight held back for as long as it ran.
			ctx, cancel := context.WithCancel(cmd.Context())
			defer cancel()
			var outGone atomic.Bool
			if out, ok := cmd.OutOrStdout().(*os.File); ok {
				w := linerpc.WatchReaderGone(out)
				defer w.Stop()
				go func() {
					select {
					case <-w.Gone():
						outGone.Store(true)
						g.logger.Info("the stdio client closed stdout: stopping")
						cancel()
					case <-ctx.Done():
					}
				}()
			}
			err = bridge.Run(ctx, cmd.InOrStdin(), cmd.OutOrStdout(), opts)
			if cmd.Context().Err() != nil || outGone.Load() {
				return nil // a signal (the stop's exit status says it), or the client gone
			}
			return err
		},
	}
	cmd.Flags().StringVar(&f.addr, "addr", "", "gateway address host:port or URL (default: the gateway serving HTTP on the data folder, else "+defaultStatusAddr+")")
	cmd.Flags().StringVarP(&f.config, "config", "c", os.Getenv("TOOLGATE_CONFIG"), "take the address from this config's toolgate.http.addr, and the data folder from its dataDir; with --start, the config the gateway serves ($TOOLGATE_CONFIG)")
	cmd.Flags().StringVar(&f.profile, "profile", "", "connect to this profile of the gateway's toolgate.profiles (/profiles/NAME/mcp)")
	cmd.Flags().StringVar(&f.ca, "ca", "", caFlag)
	cmd.Flags().BoolVar(&f.start, "start", false, "start a gateway serving --config when none answers (and again when it has stopped)")
	cmd.Flags().DurationVar(&f.idle, "idle", defaultConnectIdle, "with --start: the gateway it starts stops after this long without a request")
	cmd.Flags().DurationVar(&f.silence, "silence", 0, "how long a call may hear nothing from the gateway before its connection is taken as dead (0: never; default: three of the beats the gateway says it sends, 45s; a gateway that says none is pinged then, and the call ends only if the ping gets no answer)")
	return cmd
}

// bridgeURL is the MCP endpoint connect relays to (see its help), and the
// front it belongs to (HTTPS, the certificate to pin).
func bridgeURL(ctx context.Context, g *globals, f connectFlags) (string, frontTarget, error) {
	front := frontTarget{addr: f.addr}
	anyAddr := "" // the config's toolgate.http.addr when its port is 0 and --start starts there
	if f.config != "" {
		cfg, err := config.Load(f.config)
		if err != nil {
			return "", front, err
		}
		g.applyConfig(cfg.Toolgate)
		// Only a gateway serving the config will do: its address unless
		// --addr gives one, HTTPS with its certificate pinned when the
		// config has toolgate.http.tls.
		cf := configFront(cfg)
		switch {
		case front.addr != "":
			cf.addr = front.addr
		case anyPort(cf.addr):
			// Port 0: a free port at each start, which the gateway's
			// status socket names (it relayed to port 0 itself). With
			// --start, one is started there when none runs (it started
			// one at the default address).
			if f.start {
				anyAddr = cf.addr
			}
			cf.addr = ""
		}
		front = cf
	}
	front.ca = f.ca
	addr := front.addr
	// With --config, the gateway must serve it: one left running for
	// another config (`make run`'s) is not this client's.
	want := ""
	if f.config != "" {
		want = absPaths([]string{f.config})[0]
	}
	// The gateways serving HTTP on the data folder (their status sockets
	// need no key): asked only to find one, or to see which config the
	// one at the address serves.
	var local []*gateway.ProcessInfo
	var onStdio []string // those serving the config with no front to relay to
	if addr == "" || want != "" {
		for _, gw := range localGateways(ctx, g.DataDir(), 5*time.Second) {
			switch p := gw.rep.Process; {
			case gw.err != nil || p == nil:
			case p.Transport == "http" && p.Addr != "":
				local = append(local, p)
			case want != "" && servesConfig(p, f.config):
				onStdio = append(onStdio, strings.TrimPrefix(processLine(p, false), ", ")+" serves it on stdio, which connect cannot relay to")
			}
		}
	}
	if addr == "" {
		var found, passed []string
		for _, p := range local {
			if want == "" || servesConfig(p, f.config) {
				found = append(found, fmt.Sprintf("pid %d at %s", p.PID, p.Addr))
				front = processFront(p)
			} else {
				passed = append(passed, fmt.Sprintf("pid %d at %s serves %s", p.PID, p.Addr, strings.Join(p.Config, " + ")))
			}
		}
		if len(found) > 1 {
			return "", front, usageError{fmt.Errorf("several gateways serve HTTP on the data folder %s (%s): choose one with --addr", g.DataDir(), strings.Join(found, ", "))}
		}
		if front.addr == "" && anyAddr != "" {
			front.addr = anyAddr // the starter learns the port the gateway it starts binds
		}
		if front.addr == "" {
			front.addr = cmp.Or(f.fallback, defaultStatusAddr)
			front.down = fallbackFix(g.DataDir(), f.config, passed, onStdio)
			if len(passed) > 0 {
				g.logger.Warn("no gateway on the data folder serves the config; trying the default address", "config", want, "default", front.addr, "passed_over", strings.Join(passed, "; "))
			}
		}
		addr = front.addr
	}
	u, err := front.url()
	if err != nil {
		return "", front, usageError{err}
	}
	if served := servedConfigs(ctx, u, local, front); want != "" && len(served) > 0 && !servesFile(served, f.config) {
		if f.addr != "" {
			// The address was given: "pass --addr" was no fix.
			return "", front, usageError{fmt.Errorf("the gateway at %s (--addr) serves another config (%s), not %s: point --addr at the gateway serving %s, or leave --config out to use this one",
				u.Host, strings.Join(served, " + "), want, f.config)}
		}
		return "", front, usageError{fmt.Errorf("the gateway at %s serves another config (%s), not %s: give %s a port of its own (toolgate.http.addr), or pass --addr",
			u.Host, strings.Join(served, " + "), want, f.config)}
	}
	// A path is where the gateway is served (a reverse proxy's
	// /toolgate): its /mcp, or a profile's, is under it. One that ends in
	// /mcp is the endpoint itself. (A path was taken as the endpoint:
	// --addr https://host/toolgate posted to /toolgate, the proxy's 404.)
	base, named := frontPath(u)
	switch {
	case f.profile != "" && named != "" && named != f.profile:
		return "", front, usageError{fmt.Errorf("--profile %s with --addr %s: give the gateway's address without the path of profile %s (the profile's is /profiles/%s/mcp under it)", f.profile, addr, named, f.profile)}
	case f.profile != "":
		u.Path = base + "/profiles/" + url.PathEscape(f.profile) + "/mcp"
	case !strings.HasSuffix(strings.TrimSuffix(u.Path, "/"), "/mcp"):
		u.Path = base + "/mcp"
	}
	return u.String(), front, nil
}

// fallbackFix is what connect says when nothing answers at the default
// address it fell back to: that no gateway on the data folder serves
// config (those passed over, each with the config it serves; those serving
// it on stdio, which it cannot relay to: it said "none runs there" beside
// them), and the fix.
func fallbackFix(dataDir, config string, passed, onStdio []string) string {
	if config == "" {
		return fmt.Sprintf("no gateway serves HTTP on the data folder %s, so connect tried the default address: start one there (toolgate serve --http ADDR), or pass --addr", dataDir)
	}
	var why []string
	if len(passed) > 0 {
		why = append(why, "those there serve other configs: "+strings.Join(passed, "; "))
	}
	why = append(why, onStdio...)
	how := ""
	switch {
	case len(onStdio) > 0:
		how = " over HTTP"
	case len(why) == 0:
		why = []string{"none runs there"}
	}
	return fmt.Sprintf("no gateway on the data folder %s serves %s%s (%s), so connect tried the default address: pass --start to start one for it, or serve it there (toolgate serve --config %s --http ADDR), or pass --addr",
		dataDir, config, how, strings.Join(why, "; "), shellword.Join(config))
}

// starter starts the gateway connect relays to when none answers (connect
// --start), once at a time.
type starter struct {
	g      *globals
	config string
	addr   string // host:port
	idle   time.Duration
	health string       // the gateway's /healthz
	client *http.Client // for the front (its certificate pinned when it serves HTTPS)

	mu sync.Mutex
}

func newStarter(g *globals, f connectFlags, mcpURL string, front frontTarget) (*starter, error) {
	if f.config == "" {
		return nil, usageError{errors.New("--start needs --config FILE (or $TOOLGATE_CONFIG): the servers the gateway it starts serves")}
	}
	if f.idle <= 0 {
		return nil, usageError{fmt.Errorf("--idle %s: want a duration above 0", f.idle)}
	}
	u, err := url.Parse(mcpURL)
	if err != nil {
		return nil, err
	}
	return &starter{g: g, config: f.config, addr: u.Host, idle: f.idle, health: u.Scheme + "://" + u.Host + "/healthz", client: front.client()}, nil
}

// startWait is how long a started gateway has to answer; startGrace how
// long one that exited (another took the address first) has to be
// replaced by the gateway at the address.
const (
	startWait  = 2 * time.Minute
	startGrace = 15 * time.Second
	// unsureWait is how long a gateway that answers may go unnamed by
	// any status socket before it is taken for the one started.
	unsureWait = 3 * time.Second
)

// at is mcpURL at the address the gateway serves: the port the gateway
// started on a port 0 bound (see ensure).
func (s *starter) at(mcpURL string) (string, error) {
	u, err := url.Parse(mcpURL)
	if err != nil {
		return "", err
	}
	s.mu.Lock()
	u.Host = s.addr
	s.mu.Unlock()
	return u.String(), nil
}

// setAddr makes addr (host:port) the address the starter checks and
// starts gateways at.
func (s *starter) setAddr(addr string) {
	u, err := url.Parse(s.health)
	if err != nil {
		return
	}
	u.Host = addr
	s.addr, s.health = addr, u.String()
}

// startLock is the file in the data folder that connect --start holds
// while it starts a gateway on a port 0 (toolgate.http.addr): two clients
// started together would each start one, where on a fixed port the second
// finds the address taken and uses the first's.
const startLock = "connect-start.lock"

// ensure returns once a gateway answers at the address, starting one when
// none does. On a port 0 (the config's toolgate.http.addr) the gateway is
// started there, the port it binds is read from its status socket, and
// the gateways started after it (when it has stopped) bind that port
// again, so that the client's URL stays the same.
func (s *starter) ensure(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if anyPort(s.addr) {
		// The gateway would make the data folder: the lock is in it.
		if err := os.MkdirAll(s.g.DataDir(), 0o700); err != nil {
			return fmt.Errorf("start a gateway: %w", err)
		}
		unlock, err := datafile.Lock(filepath.Join(s.g.DataDir(), startLock))
		if err != nil {
			return fmt.Errorf("start a gateway: %w", err)
		}
		defer unlock()
		// Another client's, started while this one waited for the lock.
		if front, ok := configGateway(ctx, s.g.DataDir(), s.config, 5*time.Second); ok {
			if a, err := gatewayURL(front.addr); err == nil {
				s.setAddr(a.Host)
			}
		}
	}
	if !anyPort(s.addr) && s.healthy(ctx) {
		return nil
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(exe, "--data-dir", s.g.DataDir(), "--log-level", s.g.logLevel, "--log-format", s.g.logFormat,
		"serve", "--config", s.config, "--http", s.addr, "--exit-when-idle", s.idle.String())
	// Its own session: it outlives this client, and a signal to the
	// client's process group does not reach it. No stdio: the gateway's
	// log is `toolgate logs`.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start a gateway: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	s.g.logger.Info("started a gateway for the clients on the data folder", "pid", cmd.Process.Pid, "addr", s.addr, "exit_when_idle", s.idle)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	deadline := time.NewTimer(startWait)
	defer deadline.Stop()
	var exitErr error
	var unsure time.Time // when a gateway first answered that no status socket named yet
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case exitErr = <-exited:
			// Another client's gateway took the address first, or this
			// one failed: which one, the address says within startGrace.
			exited = nil
			deadline.Reset(startGrace)
		case <-deadline.C:
			by := fmt.Sprintf("did not answer within %s", startWait)
			if exited == nil {
				by = fmt.Sprintf("exited (%v)", exitErr)
			}
			return fmt.Errorf("the gateway started for %s %s: run `toolgate serve --config %s --http %s` to see why", s.addr, by, s.config, s.addr)
		case <-tick.C:
		}
		if anyPort(s.addr) {
			// The port it bound, once its status socket says.
			if a := s.boundBy(ctx, cmd.Process.Pid); a != "" {
				s.setAddr(a)
				s.g.logger.Info("the gateway started serves a free port (toolgate.http.addr has port 0)", "pid", cmd.Process.Pid, "addr", a)
			}
			continue
		}
		if s.healthy(ctx) {
			// It said "started a gateway" of a process that is gone, or
			// that is going: another gateway answers while the one started
			// has yet to exit from its failed bind (seen under load).
			pid := s.servingPID(ctx)
			if exited == nil || pid != 0 && pid != cmd.Process.Pid {
				s.g.logger.Info("the gateway started exited: another client's gateway took the address first, and this client uses it", "pid", cmd.Process.Pid, "addr", s.addr)
				return nil
			}
			// A gateway that answers before its status socket is open
			// (it binds its address first) may be another's, with this
			// one about to exit: the next ticks say, for a few seconds
			// at most (a status socket the data folder cannot hold never
			// opens). Both clients of a race said they had started the
			// gateway they used.
			if pid == cmd.Process.Pid || !unsure.IsZero() && time.Since(unsure) > unsureWait {
				return nil
			}
			if unsure.IsZero() {
				unsure = time.Now()
			}
		}
	}
}

// servingPID is the pid of the gateway on the data folder that serves the
// address, as its status socket says, or 0 when none says so. A gateway
// binds its address before it opens its socket: one that lost the address
// never says it serves it.
func (s *starter) servingPID(ctx context.Context) int {
	for _, gw := range localGateways(ctx, s.g.DataDir(), 2*time.Second) {
		if p := gw.rep.Process; gw.err == nil && p != nil && p.Transport == "http" {
			if a, err := gatewayURL(p.Addr); err == nil && a.Host == s.addr {
				return p.PID
			}
		}
	}
	return 0
}

// boundBy is the address (host:port) the gateway of pid on the data
// folder serves, as its status socket says, or "" while it says none.
func (s *starter) boundBy(ctx context.Context, pid int) string {
	for _, gw := range localGateways(ctx, s.g.DataDir(), 2*time.Second) {
		if p := gw.rep.Process; gw.err == nil && p != nil && p.PID == pid && p.Transport == "http" && p.Addr != "" {
			if a, err := gatewayURL(p.Addr); err == nil && !anyPort(a.Host) {
				return a.Host
			}
		}
	}
	return ""
}

// healthy reports whether a gateway answers GET /healthz at the address.
func (s *starter) healthy(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.health, nil)
	if err != nil {
		return false
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// servedConfigs are the config files of the gateway at u: from its status
// socket when it runs on the data folder (local), else its GET /status; nil
// when it does not answer or does not say (an API key that is not admin,
// or none, does not see them).
func servedConfigs(ctx context.Context, u *url.URL, local []*gateway.ProcessInfo, front frontTarget) []string {
	for _, p := range local {
		if a, err := gatewayURL(p.Addr); err == nil && a.Host == u.Host {
			return p.Config
		}
	}
	su, err := statusURL(u.String())
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, su, nil)
	if err != nil {
		return nil
	}
	if k := os.Getenv(envKey); k != "" {
		req.Header.Set("Authorization", "Bearer "+k)
	}
	resp, err := front.client().Do(req)
	if err != nil {
		return nil
	}
	_, rep, err := readStatus(resp, su)
	if err != nil || rep.Process == nil {
		return nil
	}
	return rep.Process.Config
}
