package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/gateway/local"
	"github.com/toolgate/toolgate/internal/logring"
	"github.com/toolgate/toolgate/internal/plural"
)

func init() { register(newLogsCmd) }

type logsFlags struct {
	pid    int
	n      int
	follow bool
	level  string // --level: set the gateways' log level first
	config string
	every  time.Duration // how often -f asks (tests shorten it)
}

func newLogsCmd(g *globals) *cobra.Command {
	f := logsFlags{every: 500 * time.Millisecond}
	cmd := &cobra.Command{
		Use:   "logs [--config FILE] [--pid N] [-n 50] [-f] [--level L]",
		Short: "Print the last log lines of the gateways running on the data folder",
		Long: `Print the last log lines of each gateway running on the data folder (those
toolgate status lists), stdio ones included: a gateway an MCP client started
logs to a stderr the client may keep where no one looks, or close. Each
gateway keeps its last ` + strconv.Itoa(logring.DefaultLines) + ` lines in memory, as its stderr got them (at
its log level), and answers on its status socket.

With several gateways each one's lines come under a heading line; -f
prefixes each line with its gateway's PID instead. --pid picks one.
-f follows: it prints new lines as they come until interrupted. It follows
the data folder: a gateway that starts meanwhile (a restart, a new client's
stdio gateway) joins, and with none running (at the start too) it waits
for the next. With --pid it ends when that gateway stops.

--level sets the log level of those gateways first (debug, info, warn or
error), without a restart: their stderr gets the lines of that level too.
With -f the level found is put back when following ends (unless it was
changed again meanwhile); without it the level stays until it is set again
or the gateway restarts.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.n < 0 {
				return usageError{fmt.Errorf("-n %d: want 0 (every line kept) or more", f.n)}
			}
			if f.level != "" {
				if _, err := parseLogLevel(f.level); err != nil {
					return usageError{fmt.Errorf("--level %w", err)}
				}
			}
			if _, err := dataFolderConfig(g, f.config); err != nil {
				return err
			}
			if f.follow {
				g.stop.Quiet() // Ctrl-C ends the following, not the gateway
			}
			return runLogs(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), g.DataDir(), f)
		},
	}
	cmd.Flags().IntVar(&f.pid, "pid", 0, "only the gateway with this process ID (toolgate status shows them)")
	cmd.Flags().IntVarP(&f.n, "lines", "n", 50, "how many of the last lines to print (0: every line kept)")
	cmd.Flags().BoolVarP(&f.follow, "follow", "f", false, "keep printing new lines as they come")
	cmd.Flags().StringVar(&f.level, "level", "", "set the gateways' log level first: debug, info, warn or error (with -f, until it ends)")
	cmd.Flags().StringVarP(&f.config, "config", "c", os.Getenv("TOOLGATE_CONFIG"), "take the data folder from this config's dataDir ($TOOLGATE_CONFIG)")
	return cmd
}

// logsPage asks the gateway at sock for its lines after seq (at most n).
func logsPage(ctx context.Context, sock string, after uint64, n int) (logring.Page, error) {
	var p logring.Page
	u := local.LogsURL + "?" + url.Values{"after": {strconv.FormatUint(after, 10)}, "n": {strconv.Itoa(n)}}.Encode()
	_, err := askSocket(ctx, sock, http.MethodGet, u, nil, &p, "`toolgate logs`")
	return p, err
}

// askSocket sends a request to the gateway's status socket at sock (in,
// when not nil, as its JSON body) and decodes its JSON answer into out.
// An answer other than 200 is an error, with its status code, that
// suggests a gateway from before feature (the command that needs the
// route).
func askSocket(ctx context.Context, sock, method, u string, in, out any, feature string) (int, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return 0, err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return 0, err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := local.Client(sock, 5*time.Second).Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return resp.StatusCode, fmt.Errorf("%s answered %s: %s (a gateway from before %s? restart it)", sock, resp.Status, oneLineBody(b), feature)
	}
	return resp.StatusCode, json.NewDecoder(resp.Body).Decode(out)
}

// followed is one gateway `logs` reads from: where, what it is called, and
// the last line printed.
type followed struct {
	gw   localGateway
	last uint64
	gone bool
	// was is the log level --level replaced ("" when it changed none).
	was string
}

// runLogs prints the gateways' lines on w; what --level did goes to
// notes.
func runLogs(ctx context.Context, w, notes io.Writer, dataDir string, f logsFlags) error {
	var gws []*followed
	var pids []string
	for _, gw := range localGateways(ctx, dataDir, 5*time.Second) {
		pid := 0
		if gw.err == nil && gw.rep.Process != nil {
			pid = gw.rep.Process.PID
			pids = append(pids, strconv.Itoa(pid))
		}
		if f.pid == 0 || f.pid == pid {
			gws = append(gws, &followed{gw: gw})
		}
	}
	switch {
	case len(gws) == 0 && f.follow && f.pid == 0:
		// -f follows the data folder: it waits for the next gateway
		// (below), as when the last one it followed stops.
	case len(gws) == 0 && len(pids) == 0:
		return fmt.Errorf("%s (a gateway on another one: --data-dir or --config)", strings.TrimPrefix(noGatewayOn(dataDir), "; "))
	case len(gws) == 0:
		return fmt.Errorf("no gateway with pid %d runs on the data folder %s (pids: %s)", f.pid, dataDir, strings.Join(pids, ", "))
	}
	prefix := func(g *followed) string {
		if len(gws) == 1 || !f.follow || g.gw.rep.Process == nil {
			return ""
		}
		return fmt.Sprintf("[%d] ", g.gw.rep.Process.PID)
	}
	var failed []string
	setLevel := func(g *followed) {
		got, err := setLogLevel(ctx, g.gw.sock, f.level, "")
		if err != nil {
			g.gone = true
			failed = append(failed, fmt.Sprintf("%s: %v", g.gw.name(), unwrapURLError(err)))
			return
		}
		until := "until `toolgate logs --level " + got.Was + "` or a restart"
		switch {
		case got.Started == got.Level:
			until = "the level it was started at (as after a restart); `toolgate logs --level " + got.Was + "` sets it back"
		case got.Started != "":
			until += " (which gives " + got.Started + ", the level it was started at)"
		default: // a gateway of before 2026-12-07 does not say it
			until += " (which gives the level it was started at: its --log-level or $TOOLGATE_LOG_LEVEL, else info)"
		}
		if f.follow {
			until = "while this follows"
		}
		if got.Was != got.Level {
			g.was = got.Was
			fmt.Fprintf(notes, "toolgate: %s: log level %s → %s, %s\n", g.gw.name(), got.Was, got.Level, until)
		} else {
			fmt.Fprintf(notes, "toolgate: %s: log level %s already\n", g.gw.name(), got.Level)
		}
	}
	if f.level != "" {
		for _, g := range gws {
			setLevel(g)
		}
		if f.follow {
			defer func() { restoreLogLevels(ctx, notes, gws, f.level) }() // the gateways that joined too
		}
	}
	for i, g := range gws {
		if g.gone {
			continue
		}
		p, err := logsPage(ctx, g.gw.sock, 0, f.n)
		if err != nil {
			g.gone = true
			failed = append(failed, fmt.Sprintf("%s: %v", g.gw.name(), unwrapURLError(err)))
			continue
		}
		if len(gws) > 1 && !f.follow {
			if i > 0 {
				fmt.Fprintln(w)
			}
			fmt.Fprintf(w, "== %s\n", g.gw.name())
		}
		for _, l := range p.Lines {
			fmt.Fprintln(w, prefix(g)+escapeLine(l.Text))
		}
		g.last = p.Last
	}
	if f.follow {
		// Without --pid it follows the data folder: a gateway that starts
		// meanwhile (a restart, a new client's stdio gateway) joins, and
		// with none running it waits for the next; with --pid it ends
		// when that one stops.
		folder := f.pid == 0
		known := map[string]bool{}
		for _, g := range gws {
			known[g.gw.sock] = true
		}
		alive := func() bool { return slices.ContainsFunc(gws, func(g *followed) bool { return !g.gone }) }
		tick := time.NewTicker(f.every)
		defer tick.Stop()
		looks, waiting := 0, false
		for folder || alive() {
			select {
			case <-ctx.Done():
				return nil
			case <-tick.C:
			}
			if looks++; folder && looks%followScan == 0 {
				for _, sock := range local.Sockets(dataDir) {
					if known[sock] {
						continue
					}
					gw, gone := askLocal(ctx, sock, time.Second)
					if gone || gw.err != nil || gw.rep.Process == nil {
						continue // a killed gateway's socket, or one still starting: looked at again
					}
					known[sock] = true
					g := &followed{gw: gw}
					gws = append(gws, g)
					waiting = false
					if f.level != "" {
						setLevel(g)
					}
					fmt.Fprintf(w, "%s(%s started)\n", prefix(g), g.gw.name())
				}
			}
			for _, g := range gws {
				if g.gone {
					continue
				}
				p, err := logsPage(ctx, g.gw.sock, g.last, 0)
				if err != nil {
					if ctx.Err() != nil {
						return nil
					}
					g.gone = true
					fmt.Fprintf(w, "%s(%s stopped)\n", prefix(g), g.gw.name())
					continue
				}
				if len(p.Lines) > 0 && p.Lines[0].Seq > g.last+1 {
					// More came between two looks than the gateway keeps.
					fmt.Fprintf(w, "%s(%s not kept)\n", prefix(g), plural.Of(int(p.Lines[0].Seq-g.last-1), "line"))
				}
				for _, l := range p.Lines {
					fmt.Fprintln(w, prefix(g)+escapeLine(l.Text))
				}
				g.last = max(g.last, p.Last)
			}
			if folder && !waiting && !alive() {
				waiting = true
				fmt.Fprintf(w, "(no gateway runs on the data folder now: waiting for the next; Ctrl-C ends)\n")
			}
		}
	}
	if len(failed) > 0 {
		return errors.New("no log from " + strings.Join(failed, "; "))
	}
	return nil
}

// followScan is how many of -f's looks at its gateways' lines come to one
// look for gateways that started meanwhile (every 2 s by default).
const followScan = 4

// restoreLogLevels puts back the levels --level replaced in the gateways
// followed that still run, unless one was changed again meanwhile (by
// another `logs --level`): that one is left as it is.
func restoreLogLevels(ctx context.Context, notes io.Writer, gws []*followed, set string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	for _, g := range gws {
		if g.was == "" || g.gone {
			continue
		}
		switch _, err := setLogLevel(ctx, g.gw.sock, g.was, set); {
		case err == nil:
			fmt.Fprintf(notes, "toolgate: %s: log level %s again\n", g.gw.name(), g.was)
		case errors.Is(err, errLevelChanged):
			fmt.Fprintf(notes, "toolgate: %s: log level left as it is (changed since this set it to %s)\n", g.gw.name(), set)
		}
	}
}
