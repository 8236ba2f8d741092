package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/netip"
	"net/url"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/gateway/backend"
	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/gateway/live"
	"github.com/toolgate/toolgate/gateway/local"
	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/internal/dirs"
	"github.com/toolgate/toolgate/internal/hostport"
	"github.com/toolgate/toolgate/internal/plural"
	"github.com/toolgate/toolgate/internal/proxyenv"
	"github.com/toolgate/toolgate/internal/shellword"
	"github.com/toolgate/toolgate/internal/storage"
	"github.com/toolgate/toolgate/internal/termtext"
	"github.com/toolgate/toolgate/search"
)

func init() { register(newStatusCmd) }

// envKey holds the API key `toolgate status` sends to a gateway with keys.
const envKey = "TOOLGATE_KEY"

// defaultStatusAddr is where `toolgate status` looks when neither --addr nor
// a config with toolgate.http.addr says otherwise.
const defaultStatusAddr = "127.0.0.1:8931"

type statusFlags struct {
	addr    string
	config  string
	ca      string // --ca
	asJSON  bool
	timeout time.Duration
	// dataDir is the data folder whose gateways to ask when no address
	// is given (cfg is --config's, or nil); nil: ask none.
	dataDir func(cfg *config.File) string
	// fallback is the address asked when none is given and no gateway
	// runs on the data folder ("": defaultStatusAddr; tests point it
	// where nothing listens).
	fallback string
	// named says that the data folder was named (--data-dir or
	// $TOOLGATE_DATA_DIR): a gateway at the fallback address that runs on
	// another one is not its gateway.
	named bool
	// configFromEnv says that config is $TOOLGATE_CONFIG's, not given
	// with --config: the gateways serving other configs, left out, are
	// named on stderr (nil: not said).
	configFromEnv bool
	stderr        io.Writer
}

func newStatusCmd(g *globals) *cobra.Command {
	var f statusFlags
	cmd := &cobra.Command{
		Use:   "status [--addr 127.0.0.1:8931] [--config FILE] [--json]",
		Short: "Show the backends of the running gateways (stdio or HTTP)",
		Long: `Show each backend's state, tool count, restarts, last error and how long it
has been in its state, then the catalog's generation and the config reloads
(with the last error of each), of every gateway running on the data folder,
or of the one at --addr. With --json each gateway's JSON report is printed as
is, one after the other (jq reads them as a stream).

Without --addr (and without a toolgate.http.addr in --config), it asks every
gateway running on the data folder (--data-dir, $TOOLGATE_DATA_DIR, the
config's dataDir, or the default): each toolgate serve, on stdio or HTTP,
answers on a socket of its own in the folder's run/, so the gateways an MCP
client started on stdio are found too, each with its PID and its client's
name. With --config (or $TOOLGATE_CONFIG), only those serving that file;
with $TOOLGATE_CONFIG, those left out are named on stderr (--config ''
shows every one). When none runs there, it asks ` + defaultStatusAddr + `; a gateway there
that runs on another data folder than the one --data-dir (or
$TOOLGATE_DATA_DIR) names is not its gateway, and status says so (exit 1).
The storage line says whether the data folder can take writes, and while
it cannot, since when, why, the fix and what each failing store does.
With a toolgate.http.addr in --config and no $` + envKey + `, the gateway on the
data folder serving that config answers on its socket; only when none does is
its address asked. A gateway with API keys needs one at its --addr (the socket
needs none: it is its user's only): put it in $` + envKey + ` (not on the command
line, where other users of the machine could read it).
Exit status: 0 when every backend is up or idle (lazy, not started yet)
and the data folder takes writes, 3 when a gateway answers but some
backend is down or still connecting, the data folder cannot take writes
(or a store of it fails), search runs BM25 only although its configured
mode needs the model, or it cannot read its API keys; 1 when no gateway
answers.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f.named = g.dataDir != "" || os.Getenv(dirs.EnvData) != ""
			f.configFromEnv, f.stderr = f.config != "" && !cmd.Flags().Changed("config"), cmd.ErrOrStderr()
			f.dataDir = func(cfg *config.File) string {
				if cfg != nil {
					g.applyConfig(cfg.Toolgate)
				}
				return g.DataDir()
			}
			return runStatus(cmd.Context(), cmd.OutOrStdout(), f)
		},
	}
	cmd.Flags().StringVar(&f.addr, "addr", "", "gateway address host:port or URL (default: the gateways on the data folder, else "+defaultStatusAddr+")")
	cmd.Flags().StringVarP(&f.config, "config", "c", os.Getenv("TOOLGATE_CONFIG"), "take the address from this config's toolgate.http.addr, and the data folder from its dataDir ($TOOLGATE_CONFIG)")
	cmd.Flags().StringVar(&f.ca, "ca", "", caFlag)
	cmd.Flags().BoolVar(&f.asJSON, "json", false, "print the JSON report instead of a table")
	cmd.Flags().DurationVar(&f.timeout, "timeout", 5*time.Second, "how long to wait for the gateway")
	return cmd
}

// statusURL turns --addr (host:port, :port or a URL) into the /status URL.
func statusURL(addr string) (string, error) {
	u, err := gatewayURL(addr)
	if err != nil {
		return "", err
	}
	u.Path, _ = frontPath(u)
	u.Path += "/status"
	return u.String(), nil
}

// frontPath is where the gateway is served in u's path: "" at the root,
// "/toolgate" behind a reverse proxy that serves it under /toolgate/,
// without the MCP endpoint the path may end in (/mcp, or a profile's
// /profiles/NAME/mcp, whose NAME is profile).
func frontPath(u *url.URL) (base, profile string) {
	p, ok := strings.CutSuffix(strings.TrimSuffix(u.Path, "/"), "/mcp")
	if !ok {
		return p, ""
	}
	if dir, name := path.Split(p); name != "" && strings.HasSuffix(dir, "/profiles/") {
		return strings.TrimSuffix(dir, "/profiles/"), name
	}
	return p, ""
}

// gatewayURL turns --addr (host:port, :port or a URL) into the gateway's
// URL as given (path included); a host left out, or a wildcard one (the
// address a front listens on), is 127.0.0.1.
func gatewayURL(addr string) (*url.URL, error) {
	if !strings.Contains(addr, "://") {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			if fix := hostport.IPv6Fix(addr); fix != "" {
				return nil, fmt.Errorf("--addr %q: want host:port, e.g. %s, or a URL: %s", addr, defaultStatusAddr, fix)
			}
			return nil, fmt.Errorf("--addr %q: want host:port, e.g. %s, or a URL", addr, defaultStatusAddr)
		}
		if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
			host = "127.0.0.1"
		}
		// Built, not written out: a zone (fe80::1%eth0) is %25 in a URL.
		addr = (&url.URL{Scheme: "http", Host: net.JoinHostPort(host, port)}).String()
	}
	u, err := url.Parse(addr)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--addr %q: want host:port, e.g. %s, or an http(s) URL", addr, defaultStatusAddr)
	}
	return u, nil
}

func runStatus(ctx context.Context, w io.Writer, f statusFlags) error {
	if err := checkCA(f.ca); err != nil {
		return err
	}
	front := frontTarget{addr: f.addr}
	var cfg *config.File
	if front.addr == "" && f.config != "" {
		var err error
		if cfg, err = config.Load(f.config); err != nil {
			return err
		}
		// The config's gateway: its address, and its certificate (pinned)
		// when it serves HTTPS.
		front = configFront(cfg)
	}
	front.ca = f.ca
	addr := front.addr
	if f.timeout <= 0 {
		f.timeout = 5 * time.Second
	}
	// No address: the gateways on the data folder, else the default one.
	noneLocal, dataDir := "", ""
	if addr == "" && f.dataDir != nil {
		dataDir = f.dataDir(cfg)
		// With --config FILE, the gateways on the data folder that
		// serve FILE: every config without a dataDir shares the
		// default one, and another's gateway there was printed as
		// FILE's, exit 0.
		var keep func(*gateway.ProcessInfo) bool
		var others []string
		if cfg != nil {
			keep = servingConfig(f.config, &others)
		}
		if n, err := statusLocal(ctx, w, dataDir, f, keep); n > 0 {
			envConfigNote(f, dataDir, others)
			return err
		}
		either := false
		if cfg != nil {
			noneLocal, either = noneServes(ctx, dataDir, f.config, f.timeout)
		} else {
			noneLocal, either = noGatewayOn(dataDir), noneAtAll(dataDir)
		}
		if either {
			noneLocal += " either"
		} else if f.configFromEnv {
			noneLocal += fmt.Sprintf("; %s is $TOOLGATE_CONFIG: `toolgate status --config ''` asks every gateway on the data folder", f.config)
		}
	}
	if addr != "" && f.addr == "" && cfg != nil && f.dataDir != nil && (os.Getenv(envKey) == "" || anyPort(addr)) {
		// The config's address, and no key to send it: on the gateway's
		// own machine, the gateway on the data folder serving the config
		// answers on its status socket, which needs none (its front
		// answered 401, "put one in $TOOLGATE_KEY"). An address of port
		// 0 is the gateway's socket's alone to name.
		var others []string
		if n, err := statusLocal(ctx, w, f.dataDir(cfg), f, servingConfig(f.config, &others)); n > 0 {
			envConfigNote(f, f.dataDir(cfg), others)
			return err
		}
		if anyPort(addr) {
			return anyPortError(f.dataDir(cfg), f.config, addr)
		}
	}
	if addr != "" && f.addr == "" && cfg != nil && f.dataDir != nil {
		// Another config's gateway on the data folder holds FILE's
		// address (a config copied with its toolgate.http.addr): it
		// answered as FILE's, to an admin key, or a 401 without one.
		if err := otherConfigAt(ctx, f.dataDir(cfg), addr, f.config, f.timeout); err != nil {
			return err
		}
	}
	// The front's own --timeout, from here: the sockets above are each
	// asked within one, and a gateway there that does not answer used it
	// all (FILE's gateway, asked after it, was said not to answer, with
	// "start one").
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	fellBack := addr == ""
	if fellBack {
		addr = cmp.Or(f.fallback, defaultStatusAddr)
	}
	front.addr = addr
	fu, err := front.url()
	if err != nil {
		return usageError{err}
	}
	u, err := statusURL(fu.String())
	if err != nil {
		return usageError{err}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	if k := os.Getenv(envKey); k != "" {
		req.Header.Set("Authorization", "Bearer "+k)
	}
	// A connection the kernel took (the listener's queue) but no answer:
	// something listens, and is out of file descriptors or stuck; not
	// absent.
	var connected atomic.Bool
	req = req.WithContext(httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		ConnectDone: func(_, _ string, err error) { connected.Store(err == nil) },
	}))
	resp, err := front.client().Do(req)
	if err != nil {
		if connected.Load() && errors.Is(err, context.DeadlineExceeded) {
			return exitError{noAnswer(u, f.timeout), degradedExit}
		}
		if fix := gatewayTLSFix(err, front.ca); fix != "" {
			return fmt.Errorf("the gateway at %s: %w\nfix: %s", u, unwrapURLError(err), fix)
		}
		file := "" // --addr given: whatever config it serves
		if cfg != nil {
			file = f.config
		}
		return fmt.Errorf("no gateway answered at %s: %w%s\n%s", u, unwrapURLError(err), noneLocal, startOne(hostOf(u), file))
	}
	if err := httpsOnly(resp, u); err != nil {
		resp.Body.Close()
		return usageError{err}
	}
	body, rep, err := readStatus(resp, u)
	if err != nil {
		return err
	}
	if fellBack && cfg != nil {
		var served []string
		if rep.Process != nil {
			served = rep.Process.Config
		}
		if len(served) == 0 && os.Getenv(envKey) == "" {
			// Asked without a key, a gateway says its configs: one that
			// names none was started without a config file.
			return fmt.Errorf("the gateway at %s serves no config file, not %s%s\n%s", hostOf(u), f.config, noneLocal, startOne(hostOf(u), f.config))
		}
		if len(served) == 0 {
			// An API key that is not admin is not told the configs
			// (process.config left out): it printed that gateway's
			// status as FILE's, whatever it served, as --data-dir did.
			return fmt.Errorf("the gateway at %s does not say the configs it serves to this API key (not admin), so it may serve another one than %s%s\n"+
				"Ask it with an admin key in $%s to check, or with --addr %s to take its status as it is",
				hostOf(u), f.config, noneLocal, envKey, hostOf(u))
		}
		if err := otherConfig(hostOf(u), served, f.config, noneLocal); err != nil {
			return err
		}
	}
	if fellBack && cfg == nil && f.named && rep.Storage != nil {
		if err := otherDataDir(hostOf(u), rep.Storage.DataDir, dataDir, noneLocal); err != nil {
			return err
		}
	}
	if err := writeStatus(w, body, rep, f.asJSON); err != nil {
		return err
	}
	return degraded(rep)
}

// otherDataDir is the error of a gateway at host, asked at the default
// address for the data folder named (--data-dir), that runs on another
// one (its storage's, served): its status is not that folder's gateway's
// (which a SIGKILL or a crash stopped, say). nil when it runs on dataDir.
// A gateway that does not say its folder (served "": an API key that is
// not admin is not told it) cannot be told from another folder's, and no
// gateway answered on dataDir's own socket: that is an error too, with the
// ways to ask it anyway.
func otherDataDir(host, served, dataDir, noneLocal string) error {
	if dataDir == "" {
		return nil
	}
	if served == "" {
		return fmt.Errorf("the gateway at %s does not say its data folder to this API key (not admin), so it may run on another one than %s%s\n"+
			"Ask it with an admin key in $%s to check, or with --addr %s to take its status as it is",
			host, dataDir, noneLocal, envKey, host)
	}
	if sameFolder(served, dataDir) {
		return nil
	}
	return fmt.Errorf("the gateway at %s runs on another data folder (%s), not %s%s\n%s",
		host, served, dataDir, noneLocal, startOne(host, ""))
}

// sameFolder says that a and b are one folder: the same path once made
// absolute, or the same file (a symlink, a bind mount).
func sameFolder(a, b string) bool {
	if absPaths([]string{a})[0] == absPaths([]string{b})[0] {
		return true
	}
	fa, errA := os.Stat(a)
	fb, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(fa, fb)
}

// otherConfig is the error of a gateway at host, asked at the default
// address for config's, that serves other configs (served; the gateway of
// `make run`, say): its status and health are not config's. nil when it
// serves config or does not say (served empty).
func otherConfig(host string, served []string, config, noneLocal string) error {
	if len(served) == 0 || servesFile(served, config) {
		return nil
	}
	return fmt.Errorf("the gateway at %s serves another config (%s), not %s%s\n%s",
		host, strings.Join(served, " + "), config, noneLocal, startOne(host, config))
}

// servesConfig reports whether the gateway p serves config (the path as
// given; servesFile).
func servesConfig(p *gateway.ProcessInfo, config string) bool { return servesFile(p.Config, config) }

// servesFile reports whether served, the configs a gateway names (absolute
// paths), hold config (the path as given): by its absolute path, or the
// same file by another path (a symlink: a gateway serving the file by its
// own path was said to serve another config).
func servesFile(served []string, config string) bool {
	want := absPaths([]string{config})[0]
	if slices.Contains(served, want) {
		return true
	}
	fi, err := os.Stat(want)
	if err != nil {
		return false
	}
	return slices.ContainsFunc(served, func(c string) bool {
		ci, err := os.Stat(c)
		return err == nil && os.SameFile(fi, ci)
	})
}

// servingConfig is statusLocal's keep of the gateways serving config; it
// appends each other one to others, with what it serves.
func servingConfig(config string, others *[]string) func(*gateway.ProcessInfo) bool {
	return func(p *gateway.ProcessInfo) bool {
		if servesConfig(p, config) {
			return true
		}
		*others = append(*others, strings.TrimPrefix(processLine(p, false), ", ")+" serves "+servedBy(p))
		return false
	}
}

// envConfigNote says on stderr which gateways on dataDir status left out
// when its config is $TOOLGATE_CONFIG's (exported for the commands that
// edit the file): a plain `toolgate status` showed the gateways serving it
// alone, without a word of the others.
func envConfigNote(f statusFlags, dataDir string, others []string) {
	if !f.configFromEnv || f.stderr == nil || len(others) == 0 {
		return
	}
	fmt.Fprintf(f.stderr, "note: status shows the gateways on the data folder %s that serve $TOOLGATE_CONFIG (%s); %s there: %s. `toolgate status --config ''` shows every one\n",
		dataDir, f.config, strconv.Itoa(len(others))+" "+plural.Pick(len(others), "other runs", "others run"), strings.Join(others, "; "))
}

// servedBy says what the gateway p serves: its configs, or that it was
// started without one.
func servedBy(p *gateway.ProcessInfo) string {
	if len(p.Config) == 0 {
		return "no config file"
	}
	return strings.Join(p.Config, " + ")
}

// noneServes is what status and health with --config add when no gateway
// on dataDir serves config: those there and what each serves (it said "no
// gateway runs on the data folder … either" beside one of another config),
// else noGatewayOn's words; either says that the sentence takes an
// "either" (no gateway runs there at all).
func noneServes(ctx context.Context, dataDir, config string, timeout time.Duration) (msg string, either bool) {
	var others []string
	how := ""
	for _, g := range localGateways(ctx, dataDir, timeout) {
		switch p := g.rep.Process; {
		case g.err != nil || p == nil:
			others = append(others, g.name()+" does not answer, so which config it serves is not known")
		case servesConfig(p, config):
			// health asks an HTTP front: FILE's gateway on stdio has
			// none, and was named as serving FILE after "no gateway
			// … serves FILE".
			how = " over HTTP"
			others = append(others, fmt.Sprintf("%s serves it on %s, with no HTTP front to ask: `%s` reports it, from its status socket",
				g.name(), p.Transport, shellword.Join("toolgate", "status", "--config", config)))
		default:
			others = append(others, g.name()+" serves "+servedBy(p))
		}
	}
	if len(others) == 0 {
		return noGatewayOn(dataDir), noneAtAll(dataDir)
	}
	return fmt.Sprintf("; no gateway on the data folder %s serves %s%s (%s)", dataDir, config, how, strings.Join(others, "; ")), false
}

// otherConfigAt is the error of a gateway on dataDir whose front listens at
// addr (config's toolgate.http.addr) and serves another config: its status
// socket says so without a key. nil when none does.
func otherConfigAt(ctx context.Context, dataDir, addr, config string, timeout time.Duration) error {
	want, err := gatewayURL(addr)
	if err != nil {
		return nil // said where the address is asked
	}
	for _, g := range localGateways(ctx, dataDir, timeout) {
		p := g.rep.Process
		if g.err != nil || p == nil || p.Addr == "" || servesConfig(p, config) {
			continue
		}
		if u, err := gatewayURL(p.Addr); err == nil && sameListener(ctx, u.Host, want.Host) {
			return fmt.Errorf("the gateway at %s, pid %d, serves another config (%s), not %s, whose toolgate.http.addr it holds: give %s another address (its gateway cannot listen there while that one does), or pass --addr %s to ask that gateway as it is",
				want.Host, p.PID, servedBy(p), config, config, want.Host)
		}
	}
	return nil
}

// sameListener says that the host:port a and b reach one listener: the
// same port, on hosts written alike or resolving to a common address
// (localhost:9100 and 127.0.0.1:9100 were two, so another config's gateway
// at 127.0.0.1 was taken for that of a config written localhost).
func sameListener(ctx context.Context, a, b string) bool {
	if a == b {
		return true
	}
	ha, pa, err := net.SplitHostPort(a)
	if err != nil {
		return false
	}
	hb, pb, err := net.SplitHostPort(b)
	if err != nil || pa != pb {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	ia, err := net.DefaultResolver.LookupNetIP(ctx, "ip", ha)
	if err != nil {
		return false
	}
	ib, err := net.DefaultResolver.LookupNetIP(ctx, "ip", hb)
	if err != nil {
		return false
	}
	return slices.ContainsFunc(ia, func(x netip.Addr) bool {
		return slices.ContainsFunc(ib, func(y netip.Addr) bool { return x.Unmap() == y.Unmap() })
	})
}

// noAnswer is the fault of a gateway that took the connection to u but sent
// no answer within timeout.
func noAnswer(u string, timeout time.Duration) error {
	return fmt.Errorf("%s took the connection but sent no answer within %s: a gateway that runs out of file descriptors cannot accept it "+
		"(its log says `the HTTP front cannot accept connections`, with the fix), or one that is stopped or stuck", u, timeout)
}

// readStatus reads a GET /status answer from u: the body as sent and the
// report, or why it is none.
func readStatus(resp *http.Response, u string) ([]byte, gateway.StatusReport, error) {
	defer resp.Body.Close()
	var rep gateway.StatusReport
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, rep, fmt.Errorf("read %s: %w", u, err)
	}
	// A 401 without the gateway's challenge is another program's (a port
	// taken by something else, a proxy's login): said as such below. It
	// read "the gateway needs an API key: put one in $TOOLGATE_KEY".
	if gateway.OwnKeyRefusal(resp) {
		fix := gateway.NeedsKeyFix("$" + envKey)
		if resp.Request != nil && resp.Request.Header.Get("Authorization") != "" {
			said := ""
			if gateway.OwnKeyRefusal(resp) {
				said = string(body)
			}
			fix = gateway.KeyRefusedFix("$"+envKey, said) // not "put one in" where it was
		}
		return nil, rep, fmt.Errorf("%s answered %s: %s", u, resp.Status, fix)
	}
	if resp.StatusCode == http.StatusServiceUnavailable && strings.HasPrefix(string(body), gateway.KeysUnreadable) {
		// The gateway runs but lets no one in (fail closed): degraded, not
		// absent.
		return nil, rep, exitError{fmt.Errorf("%s answered %s: the gateway runs but cannot read its API keys, so it refuses every request; "+
			"its log says why (a key file that does not parse, or that every user may write, or a data folder it can no longer read): fix that and it lets requests in again at once", u, resp.Status), degradedExit}
	}
	if resp.StatusCode == http.StatusServiceUnavailable && strings.HasPrefix(string(body), gateway.StartingPrefix) {
		// The front answers from the moment its address is taken; the
		// report, once the gateway serves (within 10 s of its start).
		return nil, rep, exitError{fmt.Errorf("%s answered %s: the gateway is starting (%s): ask again in a few seconds", u, resp.Status, oneLineBody(body)), degradedExit}
	}
	if resp.StatusCode == http.StatusNotFound && strings.Contains(string(body), gateway.PrefixNotStripped) {
		// The gateway's own 404 behind a proxy that kept its path: its
		// words whole, the fix at their end (cut at 120 characters, with
		// "another program may listen", the fix was lost).
		return nil, rep, fmt.Errorf("%s answered %s: %s", u, resp.Status, strings.TrimPrefix(strings.TrimSpace(string(body)), "Not Found: "))
	}
	if resp.StatusCode != http.StatusOK {
		return nil, rep, notAStatus(resp, body, u, "")
	}
	if err := json.Unmarshal(body, &rep); err != nil {
		// A 200 that is no report is another program's too (a web
		// server's welcome page): it said "invalid character '<'".
		return nil, rep, notAStatus(resp, body, u, ", which is no status report")
	}
	return body, rep, nil
}

// notAStatus says that u answered what no gateway's GET /status answers,
// with what its body says (a page's title, not its HTML), then what.
func notAStatus(resp *http.Response, body []byte, u, what string) error {
	says := "no text"
	if b := backend.BodySays(resp.Header.Get("Content-Type"), body); b != "" {
		says = strconv.Quote(b)
	}
	return fmt.Errorf("%s answered %s: %s%s\n(is it a toolgate gateway serving /status? another program may listen at %s, or a proxy in front of the gateway answered: check --addr)", u, resp.Status, says, what, hostOf(u))
}

// writeStatus prints a report: its JSON as the gateway sent it, or the
// table.
func writeStatus(w io.Writer, body []byte, rep gateway.StatusReport, asJSON bool) error {
	if asJSON {
		_, err := w.Write(body)
		return err
	}
	return printStatus(w, rep)
}

// noGatewayOn says that no gateway was found on dataDir, and why none could
// be when its sockets cannot be listed.
func noGatewayOn(dataDir string) string {
	if why := whyUnlisted(dataDir); why != "" {
		return "; " + why
	}
	if held := socketless(dataDir); held != "" {
		return fmt.Sprintf("; no gateway on the data folder %s has a status socket, but %s", dataDir, held)
	}
	return fmt.Sprintf("; no gateway runs on the data folder %s", dataDir)
}

// noneAtAll says that noGatewayOn(dataDir) says no gateway runs there (a
// sentence that takes an "either").
func noneAtAll(dataDir string) bool { return whyUnlisted(dataDir) == "" && socketless(dataDir) == "" }

// socketless names the toolgate processes that hold a store of dataDir
// (the PID in the lock of the learned pairs or of the embedding cache)
// without a status socket there, with their command lines, or says "".
// Such a process is a gateway older than the status sockets (2026-12-03),
// still running beside a newer toolgate or run again at a rollback, which
// answers only at its own --http address; or an index, eval or learn run.
// A lock whose process is gone (a crash leaves Badger's behind) is
// passed over.
func socketless(dataDir string) string {
	var pids []int
	held := map[int][]string{}
	for _, store := range []struct{ name, dir string }{
		{"learned pairs", learnDirIn(dataDir)},
		{"embedding cache", dirs.EmbeddingCache(dataDir)},
	} {
		pid, err := strconv.Atoi(lockPID(store.dir))
		if err != nil || pid <= 0 || pid == os.Getpid() || !processRuns(pid) || len(local.SocketsOf(dataDir, pid)) > 0 {
			continue
		}
		if held[pid] == nil {
			pids = append(pids, pid)
		}
		held[pid] = append(held[pid], store.name)
	}
	if len(pids) == 0 {
		return ""
	}
	var each []string
	for _, pid := range pids {
		line := fmt.Sprintf("pid %d holds its %s", pid, strings.Join(held[pid], " and "))
		if cmd := processCommandLine(pid); cmd != "" {
			line += " (" + cmd + ")"
		}
		each = append(each, line)
	}
	return strings.Join(each, ", ") + ": a gateway older than the status sockets (2026-12-03), which answers only at its own --http address, " +
		"or a toolgate index, eval or learn run, which lets them go when it ends"
}

// processRuns says whether a process of that PID runs (another user's
// too).
func processRuns(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// processCommandLine is the command line of process pid as a shell would take
// it, control characters escaped, or "" where /proc does not say.
func processCommandLine(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || len(b) == 0 {
		return ""
	}
	return termtext.Escape(shellword.Join(strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")...))
}

// whyUnlisted says why the gateways on dataDir cannot be listed from its
// status sockets, or "" when they can.
func whyUnlisted(dataDir string) string {
	if _, err := os.Stat(dataDir); errors.Is(err, fs.ErrNotExist) {
		// Most often no gateway has started on it yet (a first run, a
		// misspelt --data-dir); else it was removed under running
		// gateways, which serve on and make their sockets again once the
		// folder is back.
		serve := []string{"toolgate", "serve", "--config", "FILE"}
		if dataDir != dirs.DefaultData("") {
			serve = append(serve, "--data-dir", dataDir)
		}
		return fmt.Sprintf("the data folder %s does not exist: no gateway has started on it yet (`%s` starts one, which makes it), "+
			"or it was removed under the ones running on it (`pgrep -af 'toolgate serve'` shows them, --addr asks one at its --http address, and `%s` brings their status sockets back within %s)",
			dataDir, shellword.Join(serve...), shellword.Join("mkdir", "-p", dataDir), local.DefaultRetry)
	}
	if err := local.Unreadable(dataDir); err != nil {
		why := err.Error()
		if errors.Is(err, fs.ErrPermission) {
			why += ": they are another user's; run this as that user"
		}
		return fmt.Sprintf("the gateways on the data folder %s cannot be listed (%s)", dataDir, why)
	}
	return ""
}

// localGateway is a gateway found on the data folder: its status socket,
// and its report (the body as sent) or why there is none.
type localGateway struct {
	sock string
	body []byte
	rep  gateway.StatusReport
	err  error
}

// name is how messages call g: by its PID and front when it answered.
func (g localGateway) name() string {
	if g.err == nil && g.rep.Process != nil {
		return strings.TrimPrefix(processLine(g.rep.Process, false), ", ")
	}
	return "the gateway at " + g.sock
}

// askLocal asks the gateway at the status socket sock for its report;
// gone says nobody listens there (a gateway that was killed).
func askLocal(ctx context.Context, sock string, timeout time.Duration) (g localGateway, gone bool) {
	g.sock = sock
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, local.URL, nil)
	if err != nil {
		g.err = err
		return g, false
	}
	resp, err := local.Client(sock, timeout).Do(req)
	switch ne := net.Error(nil); {
	case err == nil:
		g.body, g.rep, g.err = readStatus(resp, sock)
	case local.Gone(err):
		return g, true
	case errors.As(err, &ne) && ne.Timeout():
		g.err = fmt.Errorf("%s took the connection but sent no answer within %s: the gateway is stopped (SIGSTOP, a frozen container), stuck, or out of file descriptors", sock, timeout)
	default:
		g.err = unwrapURLError(err)
	}
	return g, false
}

// localGateways asks every gateway with a status socket on dataDir, passing
// over the sockets nobody listens on.
func localGateways(ctx context.Context, dataDir string, timeout time.Duration) []localGateway {
	var out []localGateway
	for _, sock := range local.Sockets(dataDir) {
		if g, gone := askLocal(ctx, sock, timeout); !gone {
			out = append(out, g)
		}
	}
	return out
}

// statusLocal prints the report of each gateway with a status socket on
// dataDir (of those keep takes, when it is not nil: a gateway that does
// not answer is not taken) and returns how many answered (a socket nobody
// listens on, left by a gateway that was killed, is passed over); the error
// says which are degraded.
func statusLocal(ctx context.Context, w io.Writer, dataDir string, f statusFlags, keep func(*gateway.ProcessInfo) bool) (int, error) {
	gws := localGateways(ctx, dataDir, f.timeout)
	if keep != nil {
		gws = slices.DeleteFunc(gws, func(g localGateway) bool { return g.err != nil || g.rep.Process == nil || !keep(g.rep.Process) })
	}
	var bad []string
	for i, g := range gws {
		if i > 0 && !f.asJSON {
			fmt.Fprintln(w)
		}
		if g.err != nil {
			if !f.asJSON { // stdout stays a stream of reports; the exit error says it
				fmt.Fprintf(w, "gateway at %s: %v\n", g.sock, g.err)
			}
			bad = append(bad, g.name()+" does not answer")
			continue
		}
		if err := writeStatus(w, g.body, g.rep, f.asJSON); err != nil {
			return len(gws), err
		}
		for _, r := range degradedReasons(g.rep) {
			if p := g.rep.Process; p != nil {
				r = fmt.Sprintf("pid %d: %s", p.PID, r)
			}
			bad = append(bad, r)
		}
	}
	if len(bad) > 0 {
		return len(gws), exitError{fmt.Errorf("degraded: %s", strings.Join(bad, "; ")), degradedExit}
	}
	return len(gws), nil
}

// degradedExit is the exit status of `status` when the gateway runs but
// not every backend can serve.
const degradedExit = 3

// degraded reports the backends that are neither up nor idle as an
// exitError, so scripts and health checks can tell a degraded gateway from
// a healthy one without parsing the table.
func degraded(rep gateway.StatusReport) error {
	bad := degradedReasons(rep)
	if len(bad) == 0 {
		return nil
	}
	return exitError{fmt.Errorf("degraded: %s", strings.Join(bad, ", ")), degradedExit}
}

// degradedReasons says what keeps the gateway of rep from serving fully.
func degradedReasons(rep gateway.StatusReport) []string {
	var bad []string
	for _, b := range rep.Backends {
		switch b.State {
		case backend.StateUp, backend.StateIdle:
		case backend.StateNeedsLogin:
			bad = append(bad, b.Name+" needs a login")
		default:
			bad = append(bad, fmt.Sprintf("%s is %s", b.Name, b.State))
		}
		if b.StepUp != nil && b.State != backend.StateNeedsLogin {
			// Up, and its calls that need the scopes fail 403.
			bad = append(bad, b.Name+" asks for more scopes (a step-up)")
		}
	}
	if st := rep.Storage; st != nil && st.Failing() {
		if st.Writable {
			bad = append(bad, "a store of the data folder fails ("+strings.Join(failingWriters(st), ", ")+")")
		} else {
			bad = append(bad, "the data folder cannot take writes")
		}
	}
	if sec := rep.Security; sec != nil && sec.PinsFault != nil {
		bad = append(bad, "the quarantine pins file cannot be read (the last decisions stand)")
	}
	if sec := rep.Security; sec != nil && sec.KeysFault != "" {
		bad = append(bad, "the API keys cannot be read (the HTTP front refuses every request)")
	}
	if st := rep.Search; st != nil && st.BM25Only {
		bad = append(bad, "search runs BM25 only: "+oneLine(st.Reason, 200))
	}
	if _, problem, _ := rep.Process.FrontExpiry(time.Now()); problem != "" {
		bad = append(bad, "the HTTPS front's certificate "+problem)
	}
	for _, b := range rep.Backends {
		if _, problem := b.CertNotice(time.Now()); problem != "" {
			bad = append(bad, b.Name+"'s client certificate "+problem)
		}
		if _, expired := b.LoginNotice(time.Now()); expired {
			bad = append(bad, b.Name+"'s login has expired")
		}
	}
	return bad
}

// keysFaultFix is what to do about SecurityStatus.KeysFault.
const keysFaultFix = "mend what the error names (toolgate keys list says it too): requests are let in again at once"

func printStatus(w io.Writer, rep gateway.StatusReport) error {
	fmt.Fprintf(w, "toolgate %s%s, up %s: %d of %d backends up\n", rep.Version, processLine(rep.Process, true), rep.Uptime, rep.Up, rep.Total)
	if p := rep.Process; p != nil && len(p.Config) > 0 {
		fmt.Fprintf(w, "config: %s\n", strings.Join(p.Config, ", "))
	}
	if line, _, ok := rep.Process.FrontExpiry(time.Now()); ok {
		fmt.Fprintln(w, line)
	}
	if line := rep.Process.FrontUnreadable(clock); line != "" {
		fmt.Fprintln(w, escapeUnsafe(line))
	}
	if st := rep.Stats; st != nil {
		printLoopStats(w, st)
	}
	if st := rep.Search; st != nil {
		printRanking(w, st)
	}
	if l := rep.Learning; l != nil {
		printLearning(w, l)
	}
	if st := rep.Storage; st != nil {
		printStorage(w, st)
	}
	if sec := rep.Security; sec != nil {
		a := sec.Audit
		fmt.Fprintf(w, "audit log: %s written, %d lost, %s\n", plural.Of(int(a.Written), "record"), a.Dropped, plural.Of(int(a.Errors), "failed write"))
		if len(sec.KeysWithoutProfile) > 0 {
			fmt.Fprintf(w, "API keys that reach no tool, their profile not in the config: %s\n  fix: %s\n", escapeUnsafe(keyProfiles(sec.KeysWithoutProfile)), keysWithoutProfileFix)
		}
		if len(sec.KeysExpiring) > 0 {
			for _, k := range sec.KeysExpiring {
				fmt.Fprintln(w, escapeUnsafe(k.Notice(time.Now())))
			}
			fmt.Fprintf(w, "  fix: %s\n", gateway.KeysExpiringFix)
		}
		if len(sec.Quarantined) > 0 {
			// The backend's names, held because they may be hostile: a
			// terminal escape in one is what held it (nameText).
			ids := make([]string, len(sec.Quarantined))
			for i, id := range sec.Quarantined {
				ids[i] = nameText(id)
			}
			fmt.Fprintf(w, "quarantined: %s (`toolgate tools quarantined` says why)\n", strings.Join(ids, ", "))
		}
		if f := sec.PinsFault; f != nil {
			file := f.File
			if file == "" {
				file = "the file" // a key that is not admin is not told its path
			}
			fmt.Fprintf(w, "quarantine pins: %s CANNOT BE READ since %s: %s\n  fix: %s\n", file, clock(f.Since), oneLine(f.Error, 200), f.Fix)
		}
		if f := sec.KeysFault; f != "" {
			fmt.Fprintf(w, "API keys: CANNOT BE READ, so the HTTP front refuses every request (503): %s\n  fix: %s\n", escapeUnsafe(oneLine(f, 400)), keysFaultFix)
		}
	}
	printSchemaFlaws(w, rep.SchemaFlaws)
	fmt.Fprintln(w)
	tw := termtext.NewTable(w)
	fmt.Fprintln(tw, "SERVER\tSTATE\tFOR\tTRANSPORT\tTOOLS\tRESTARTS\tPID\tPROTOCOL\tLAST ERROR")
	for _, b := range rep.Backends {
		pid := "-"
		if b.PID != 0 {
			pid = fmt.Sprint(b.PID)
		}
		if b.ServerPID != 0 {
			pid += fmt.Sprintf(" (server %d)", b.ServerPID)
		}
		errText := b.Err
		if errText == "" {
			errText = b.LastErr
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\n", b.Name, b.State, b.For, b.Transport, b.Tools, b.Restarts, pid,
			dash(b.Protocol), dash(oneLine(errText, 100)))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// The command a login needs is too long for the table: in full below it.
	for _, b := range rep.Backends {
		if b.State == backend.StateNeedsLogin {
			fmt.Fprintf(w, "\n%s\n", escapeUnsafe(b.Err))
		}
	}
	// So is the command a down server's error ends in (a login its server
	// no longer takes, which answers 500): the table cut it, and `auth
	// status` says "logged in". An error the table holds whole is not said
	// twice.
	for _, b := range rep.Backends {
		if b.State == backend.StateDown && strings.Contains(b.Err, "`toolgate ") && oneLine(b.Err, 100) != b.Err {
			fmt.Fprintf(w, "\n%s\n", escapeUnsafe(b.Err))
		}
	}
	// And a step-up: the server is up, and its calls that need the
	// scopes fail 403 until the login, as `toolgate auth status` says.
	for _, b := range rep.Backends {
		if su := b.StepUp; su != nil && b.State != backend.StateNeedsLogin {
			fmt.Fprintf(w, "\n%s\n", escapeUnsafe(stepUpLine(b.Name, su)))
		}
	}
	// So are client certificates to renew, or whose file cannot be read,
	// and logins whose access token cannot be refreshed.
	for _, b := range rep.Backends {
		if line, _ := b.CertNotice(time.Now()); line != "" {
			fmt.Fprintf(w, "\n%s\n", line)
		}
		if line, _ := b.LoginNotice(time.Now()); line != "" {
			fmt.Fprintf(w, "\n%s\n", escapeUnsafe(line))
		}
	}
	return nil
}

// processLine is ", pid 4242 (stdio, client claude-ai 0.1.0)" for p, or
// "" without it (a gateway from before the process section); with state,
// also what it does now that a name should not carry (a log level other
// than info).
func processLine(p *gateway.ProcessInfo, state bool) string {
	if p == nil {
		return ""
	}
	how := p.Transport
	if p.TLS {
		how = "https" // the front's scheme, as a URL would write it
	}
	switch {
	case p.Addr != "":
		how += " " + p.Addr
	case p.Client != "":
		how += ", client " + p.Client
	case p.Transport == "stdio":
		how += ", no client yet"
	}
	if p.ExitWhenIdle != "" {
		how += ", stops after " + p.ExitWhenIdle + " without a request"
	}
	if state && p.LogLevel != "" && p.LogLevel != "info" {
		how += ", log level " + p.LogLevel
	}
	return fmt.Sprintf(", pid %d (%s)", p.PID, how)
}

// printLoopStats prints the runtime loop's counters: the catalog served and
// the config reloads, with the last error of each.
func printLoopStats(w io.Writer, st *live.Stats) {
	fmt.Fprintf(w, "catalog: generation %d, %s", st.CatalogGeneration, plural.Of(st.CatalogTools, "tool"))
	if st.Reindexing {
		fmt.Fprint(w, " (re-indexing)")
	}
	if st.DisabledTools > 0 {
		// Not in the count, which is what search_tools ranks.
		fmt.Fprintf(w, ", %d more held back by disabled servers", st.DisabledTools)
	}
	if st.LastIndexError != "" {
		fmt.Fprintf(w, "; last re-index error at %s: %s", clock(st.LastIndexErrorAt), oneLine(st.LastIndexError, 100))
	}
	fmt.Fprintf(w, "\nconfig reloads: %d", st.ReloadGeneration)
	r := st.LastReload
	if r != nil && r.Error != "" {
		// The latest is the rejection: said once, with what it means.
		fmt.Fprintf(w, ", the last REJECTED at %s (%s): %s; the config before it stays in effect", clock(r.At), r.Trigger, oneLine(r.Error, 100))
	} else if r != nil {
		fmt.Fprintf(w, ", the last applied at %s (%s)", clock(r.At), r.Trigger)
	}
	if st.LastReloadError != "" && (r == nil || r.Error == "") {
		fmt.Fprintf(w, "; last rejected at %s: %s", clock(st.LastReloadErrorAt), oneLine(st.LastReloadError, 100))
	}
	if len(st.RestartPending) > 0 {
		fmt.Fprintf(w, "; changed since the start, waiting for a restart: %s", strings.Join(st.RestartPending, ", "))
	}
	fmt.Fprintln(w)
	if r != nil && r.Warning != "" {
		fmt.Fprintf(w, "config WARNING: %s\n", r.Warning)
	}
	if len(st.Disabled) > 0 {
		// Not in the table (they do not run), and their tools are held
		// back: say why search_tools shows none of them.
		fmt.Fprintf(w, "disabled at run time: %s (stopped, tools hidden; `toolgate servers enable NAME` starts one again)\n", strings.Join(st.Disabled, ", "))
	}
}

// printSchemaFlaws prints the tools whose input schema the gateway cannot
// read, one a line with why, in the words of serve's log and toolgate
// index (catalog.SchemaFlaw), then those whose schema is over 32 KB and
// those whose name MCP does not recommend; nothing when there are none. Not a reason
// of degraded: the gateway serves them, as their servers would.
func printSchemaFlaws(w io.Writer, f *gateway.SchemaFlaws) {
	if f == nil {
		return
	}
	list := func(count int, tools []catalog.ToolFlaw) {
		for _, t := range tools {
			// The backend's names and words: quoted and escaped, as quarantined names.
			fmt.Fprintf(w, "  %s: %s\n", nameText(t.Tool), oneLine(t.Flaw, 200))
		}
		if more := count - len(tools); more > 0 {
			fmt.Fprintf(w, "  and %d more (toolgate status --json lists the first %d; serve's log names each)\n", more, gateway.MaxSchemaFlawsShown)
		}
	}
	if f.Count > 0 {
		fmt.Fprintf(w, "schema flaws: the input schema of %s %s: %s; ask %s server's author to fix it\n",
			plural.Of(f.Count, "tool"), catalog.SchemaFlaw, catalog.SchemaFlawEffect(f.Count), plural.Pick(f.Count, "its", "their"))
		list(f.Count, f.Tools)
	}
	if h := f.HugeSchemas; h != nil && h.Count > 0 {
		fmt.Fprintf(w, "schema flaws: the input schema of %s is over %d KB: %s\n", plural.Of(h.Count, "tool"), catalog.MaxSchemaShown>>10, catalog.HugeSchema)
		list(h.Count, h.Tools)
	}
	if n := f.Names; n != nil && n.Count > 0 {
		fmt.Fprintf(w, "schema flaws: the name of %s %s: %s\n", plural.Of(n.Count, "tool"), catalog.NameFlaw, catalog.NameFlawEffect(n.Count))
		list(n.Count, n.Tools)
	}
}

// printRanking prints how searches rank: "search: hybrid (model …)", or
// BM25 only, why and the fix; and searches waiting for a slot, if any.
func printRanking(w io.Writer, st *search.State) {
	switch {
	case st.BM25Only:
		fmt.Fprintf(w, "search: BM25 ONLY (configured %s): %s\n", st.Configured, oneLine(st.Reason, 300))
	case st.Model != "":
		fmt.Fprintf(w, "search: %s (model %s)\n", st.Mode, st.Model)
	default:
		fmt.Fprintf(w, "search: %s\n", st.Mode)
	}
	if st.Waiting > 0 {
		fmt.Fprintf(w, "searches: %d ranking, %d waiting for one of %d slots\n", st.Running, st.Waiting, st.Slots)
	}
}

// printLearning prints the learned pairs ranked with, and who holds them.
func printLearning(w io.Writer, l *gateway.LearningStatus) {
	switch l.Holder {
	case gateway.ThisGateway:
		fmt.Fprintf(w, "learning: %s for %s\n", plural.Of(l.Pairs, "pair"), plural.Of(l.Tools, "tool"))
	case "":
		fmt.Fprintf(w, "learning: %s\n", l.Error)
	default:
		fmt.Fprintf(w, "learning: %s for %s, through %s, which holds them\n", plural.Of(l.Pairs, "pair"), plural.Of(l.Tools, "tool"), l.Holder)
	}
}

// printStorage prints the data folder's health: one line while it is
// fine, the fault, its fix and each failing writer while it is not.
func printStorage(w io.Writer, st *storage.Report) {
	state := "writable"
	if !st.Writable {
		state = "NOT WRITABLE"
	}
	dir := st.DataDir
	if dir == "" {
		dir = "the data folder" // a key that is not admin is not told its path
	}
	fmt.Fprintf(w, "storage: %s %s", dir, state)
	if st.Failing() {
		if st.Writable {
			fmt.Fprintf(w, ", but %s failing", strings.Join(failingWriters(st), ", "))
		}
		fmt.Fprintf(w, " since %s: %s\n  fix: %s", clock(st.Since), oneLine(st.Error, 200), st.Fix)
		for _, wr := range st.Writers {
			if !wr.OK {
				failures := "failures"
				if wr.Failures == 1 {
					failures = "failure"
				}
				fmt.Fprintf(w, "\n  %s: failing since %s (%d %s; %s): %s", wr.Name, clock(wr.Since), wr.Failures, failures, wr.Degraded, oneLine(wr.Error, 120))
			}
		}
	} else if st.LastError != "" {
		fmt.Fprintf(w, "; last error at %s: %s", clock(st.LastErrorAt), oneLine(st.LastError, 100))
	}
	for _, wr := range st.Writers {
		if wr.Shared != "" {
			fmt.Fprintf(w, "\n  %s: %s", wr.Name, wr.Shared)
		}
	}
	if st.Open != "" {
		fmt.Fprintf(w, "\n  OPEN to every user of this machine (the searches' queries, the learned pairs, the audit log, the logins): %s\n  fix: %s", escapeUnsafe(st.Open), escapeUnsafe(st.OpenFix))
	}
	fmt.Fprintln(w)
}

// failingWriters names the writers whose last report was a failure.
func failingWriters(st *storage.Report) []string {
	var names []string
	for _, wr := range st.Writers {
		if !wr.OK {
			names = append(names, wr.Name)
		}
	}
	return names
}

// clock renders t in local time, to the second.
func clock(t time.Time) string { return t.Local().Format("2006-01-02 15:04:05") }

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// statusLine squeezes s onto one line of at most n runes.

func oneLineBody(b []byte) string { return oneLine(string(b), 200) }

func hostOf(u string) string {
	if pu, err := url.Parse(u); err == nil {
		return pu.Host
	}
	return defaultStatusAddr
}

// startOne is the fix of no gateway answering at addr (host:port): the
// command that serves config there ("": FILE, none was given; it said
// FILE where --config named it, as health does not).
func startOne(addr, config string) string {
	file := "FILE"
	if config != "" {
		file = shellword.Join(config)
	}
	return fmt.Sprintf("(start one with `toolgate serve --config %s --http %s`, or point --addr at the one running)", file, addr)
}

// unwrapURLError drops net/http's `Get "url":` prefix (the URL is already
// in the message).
func unwrapURLError(err error) error {
	if r, ok := proxyenv.Refused(err); ok {
		return r.Error(err) // nothing listens at …, not Go's dial tcp …
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// stepUpLine is what toolgate status says of the step-up su that server
// asked for: the scopes and the login that asks for them, or, when they
// could not be recorded for it, what to do instead.
func stepUpLine(server string, su *backend.StepUp) string {
	scopes := ""
	if len(su.Scopes) > 0 { // hidden from an API key that is not admin
		scopes = " (" + strings.Join(su.Scopes, " ") + ")"
	}
	if su.NotRecorded != "" {
		return fmt.Sprintf("%s asks for more scopes%s: %s: `%s`", server, scopes, su.NotRecorded, su.Login)
	}
	return fmt.Sprintf("%s asks for more scopes%s: run `%s`", server, scopes, su.Login)
}
