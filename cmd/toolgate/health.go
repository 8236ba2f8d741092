package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/gateway/backend"
	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/internal/proxyenv"
	"github.com/toolgate/toolgate/internal/shellword"
)

func init() { register(newHealthCmd) }

type healthFlags struct {
	addr    string
	config  string
	ca      string
	ready   bool
	timeout time.Duration
	// dataDir is the data folder of a config's gateway (cfg's dataDir,
	// else the flag's or the default), asked for the port the gateway
	// took when its toolgate.http.addr has port 0.
	dataDir func(cfg *config.File) string
	// fallback is the address asked when none is given and no gateway on
	// the data folder serves --config ("": defaultStatusAddr; tests point
	// it at a gateway of their own).
	fallback string
}

func newHealthCmd(g *globals) *cobra.Command {
	f := healthFlags{dataDir: func(cfg *config.File) string {
		g.applyConfig(cfg.Toolgate)
		return g.DataDir()
	}}
	cmd := &cobra.Command{
		Use:   "health [--addr 127.0.0.1:8931] [--config FILE] [--ready] [--ca FILE]",
		Short: "Ask a gateway's HTTP front whether it is alive (or ready): a health check for a container without curl",
		Long: `Ask the HTTP front of a gateway (toolgate serve --http) its liveness probe,
GET /healthz, or with --ready its readiness probe, GET /readyz, and print its
answer in one line: what a container's health check runs where there is no
curl or wget (a distroless image):

  HEALTHCHECK CMD ["toolgate", "health", "--ready"]

The address is --addr, else the toolgate.http.addr of --config (whose
certificate is trusted exactly when it serves HTTPS; with port 0, or none,
the address its gateway on the data folder took), else ` + defaultStatusAddr + `,
where a gateway that says it serves another config is not --config's;
a wildcard host (0.0.0.0:8931, the address a container serves) is asked at
127.0.0.1. No API key is needed: the probes answer without one.

Exit status: 0 when the gateway answers ok (with --ready: ready), 1 when it
answers otherwise (not ready: starting, or its first index being built) or
does not answer within --timeout; 2 for bad flags.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runHealth(cmd.Context(), cmd.OutOrStdout(), f)
		},
	}
	cmd.Flags().StringVar(&f.addr, "addr", "", "gateway address host:port or URL (default: --config's toolgate.http.addr, else "+defaultStatusAddr+")")
	configFlag(cmd, &f.config)
	cmd.Flags().StringVar(&f.ca, "ca", "", caFlag)
	cmd.Flags().BoolVar(&f.ready, "ready", false, "ask GET /readyz (ready to serve) instead of GET /healthz (alive)")
	cmd.Flags().DurationVar(&f.timeout, "timeout", 5*time.Second, "how long to wait for the answer")
	return cmd
}

func runHealth(ctx context.Context, w io.Writer, f healthFlags) error {
	if err := checkCA(f.ca); err != nil {
		return err
	}
	if f.timeout <= 0 {
		return usageError{fmt.Errorf("--timeout %s: want a duration above 0, e.g. 5s", f.timeout)}
	}
	front := frontTarget{addr: f.addr}
	// fellBack: --config names no address and no gateway on the data
	// folder serves it, so the default address is asked, and whatever
	// answers there must be the config's (noneLocal says why none was
	// found on the data folder).
	fellBack, noneLocal, either := false, "", false
	if front.addr == "" && f.config != "" {
		cfg, err := config.Load(f.config)
		if err != nil {
			return err
		}
		front = configFront(cfg)
		if (front.addr == "" || anyPort(front.addr)) && f.dataDir != nil {
			// Port 0, or none (served with --http ADDR): the address the
			// gateway took, on its status socket.
			dataDir := f.dataDir(cfg)
			found, ok := configGateway(ctx, dataDir, f.config, f.timeout)
			switch {
			case ok:
				front = found
			case front.addr != "":
				return anyPortError(dataDir, f.config, front.addr)
			default:
				noneLocal, either = noneServes(ctx, dataDir, f.config, f.timeout)
				fellBack = true
			}
		} else if f.dataDir != nil {
			// Another config's gateway on the data folder holds the
			// config's address: its ok was said as the config's.
			if err := otherConfigAt(ctx, f.dataDir(cfg), front.addr, f.config, f.timeout); err != nil {
				return err
			}
		}
	}
	front.addr, front.ca = cmp.Or(front.addr, f.fallback, defaultStatusAddr), f.ca
	u, err := front.url()
	if err != nil {
		return usageError{err}
	}
	u.Path, _ = frontPath(u)
	u.Path += "/healthz"
	if f.ready {
		u.Path = strings.TrimSuffix(u.Path, "/healthz") + "/readyz"
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return usageError{err}
	}
	resp, err := front.client().Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("no answer from %s within %s (--timeout)", u, f.timeout)
		}
		if fix := gatewayTLSFix(err, front.ca); fix != "" {
			return fmt.Errorf("the gateway at %s: %w\nfix: %s", u, unwrapURLError(err), fix)
		}
		if _, ok := proxyenv.Refused(err); ok { // in one line, as health's every answer
			// With --config and none on its data folder: both said, and
			// the command that starts its gateway here.
			file, also := "FILE", ""
			if f.addr == "" && f.config != "" {
				file = shellword.Join(f.config) // its address, or the default for it
			}
			if fellBack {
				also = noneLocal
				if either {
					also += " either"
				}
			}
			return fmt.Errorf("no gateway answered at %s: %w%s: start one (toolgate serve --config %s --http %s)", u, unwrapURLError(err), also, file, u.Host)
		}
		return fmt.Errorf("no gateway answered at %s: %w", u, unwrapURLError(err))
	}
	defer resp.Body.Close()
	if err := httpsOnly(resp, u.String()); err != nil {
		return usageError{err}
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	line := oneLineBody(body)
	// Another config's gateway is said first, ready or not: its "not
	// ready" said nothing of the config it serves.
	said := false // the gateway said which configs it serves
	if fellBack {
		var err error
		if said, err = sameConfig(ctx, front, u, f.config, noneLocal); err != nil {
			return err
		}
	}
	if resp.StatusCode != http.StatusOK {
		if fellBack && !said && strings.HasPrefix(line, gateway.StartingPrefix) {
			// A gateway still starting answers /status 503 too: which
			// config it serves is not known yet, and none runs on this
			// config's data folder. Its "not ready" alone read as this
			// config's gateway starting.
			return fmt.Errorf("%s (%s from %s): that gateway cannot say yet which config it serves%s, so it may be another config's: `toolgate status --addr %s` names its config once it has started",
				line, resp.Status, u, noneLocal, u.Host)
		}
		if resp.StatusCode == http.StatusNotFound && strings.Contains(line, gateway.PrefixNotStripped) {
			// The gateway's own 404 behind a proxy that kept its path:
			// its words, ending in the fix.
			return fmt.Errorf("%s answered %s: %s", u, resp.Status, strings.TrimPrefix(strings.TrimSpace(string(body)), "Not Found: "))
		}
		if !strings.HasPrefix(line, gateway.NotReadyPrefix) {
			// A gateway's probe answers without a key, and otherwise
			// than 200 only "not ready: …": this answer is another
			// program's (a port taken by something else, a proxy's
			// error page). It read "(401 Unauthorized from …)", its
			// empty body said as the gateway's words, or a page's HTML.
			return notAProbeAnswer(resp, body, u)
		}
		return fmt.Errorf("%s (%s from %s)", line, resp.Status, u)
	}
	want := gateway.ProbeAlive
	if f.ready {
		want = gateway.ProbeReady
	}
	if line != want {
		// A 200 that is not the probe's word is another program's too (a
		// web server's welcome page, another service's "OK"): it was
		// printed as the gateway's, exit 0.
		return notAProbeAnswer(resp, body, u)
	}
	_, err = fmt.Fprintf(w, "%s (%s)\n", line, u)
	return err
}

// sameConfig checks that the gateway at u (the default address' /healthz
// or /readyz, asked for --config's gateway) serves config, as it says
// (servedConfigs): a gateway that does not say (one that wants a key, one
// still starting) is taken at its word. said reports whether it said.
func sameConfig(ctx context.Context, front frontTarget, u *url.URL, config, noneLocal string) (said bool, err error) {
	base := *u
	// Either probe's path: with --ready it asked /readyz/status, no
	// status, and took another config's gateway for one that does not say.
	base.Path = strings.TrimSuffix(strings.TrimSuffix(base.Path, "/healthz"), "/readyz")
	served := servedConfigs(ctx, &base, nil, front)
	if err := otherConfig(u.Host, served, config, noneLocal); err != nil {
		return true, errors.New(strings.ReplaceAll(err.Error(), "\n", " ")) // in one line, as health's every answer
	}
	return len(served) > 0, nil
}

// notAProbeAnswer says that u answered what no gateway's probe answers, with
// what its body says (a JSON message, a page's title, a text's start).
func notAProbeAnswer(resp *http.Response, body []byte, u *url.URL) error {
	says := "with no text"
	if b := backend.BodySays(resp.Header.Get("Content-Type"), body); b != "" {
		says = fmt.Sprintf("(%q)", b)
	}
	return fmt.Errorf("%s answered %s %s, which is not a toolgate gateway's probe (it needs no API key, and answers %s, %s or %q): another program listens at %s, or a proxy in front of the gateway answered: check --addr (toolgate status --addr %s says whether a gateway serves there)",
		u, resp.Status, says, gateway.ProbeAlive, gateway.ProbeReady, gateway.NotReadyPrefix+" …", u.Host, u.Host)
}
