package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/gateway/backend"
	"github.com/toolgate/toolgate/gateway/backend/backendtest"
	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/gateway/live"
	"github.com/toolgate/toolgate/gateway/local"
	"github.com/toolgate/toolgate/internal/dirs"
	"github.com/toolgate/toolgate/internal/logring"
	"github.com/toolgate/toolgate/internal/shellword"
	"github.com/toolgate/toolgate/internal/storage"
	"github.com/toolgate/toolgate/internal/testenv"
)

// decodeReports reads the stream of JSON reports `status --json` prints.
func decodeReports(t *testing.T, out string) []gateway.StatusReport {
	t.Helper()
	var reps []gateway.StatusReport
	dec := json.NewDecoder(strings.NewReader(out))
	for {
		var rep gateway.StatusReport
		if err := dec.Decode(&rep); errors.Is(err, io.EOF) {
			return reps
		} else if err != nil {
			t.Fatalf("status --json: %v\n%s", err, out)
		}
		reps = append(reps, rep)
	}
}

// `toolgate status` without an address finds every gateway on the data
// folder: one an MCP client started on stdio, named by its client, and
// one on HTTP. A gateway that stops removes its socket; one that is killed
// leaves it, and is passed over; with none left, status says so.
func TestStatusFindsLocalGateways(t *testing.T) {
	cfg := fakeConfig(t, map[string]string{"fake": backendtest.ModeNormal}, map[string]any{"learn": map[string]any{"enabled": false}})
	data := t.TempDir()
	// Both in a mode that reads vectors: in bm25 mode a gateway opens no
	// embedding cache, and neither would find it held.
	stdio := toolgateCmd(t, data, "serve", "--config", cfg, "--mode", "hybrid")
	stdio.Stderr = testLog(t, "stdio: ")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "status-test", Version: "1.2.3"}, nil).Connect(ctx, &mcp.CommandTransport{Command: stdio}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	addr, _, stopHTTP := startGatewayStop(t, data, cfg, "--mode", "hybrid")

	// Two gateways on one data folder share it: the second runs without
	// the embedding cache the first holds, which status notes (no fault).
	var reps []gateway.StatusReport
	testenv.Eventually(t, "both gateways with their backend up", func() bool {
		out, _, _ := runToolgate(t, data, "status", "--json")
		reps = decodeReports(t, out)
		return len(reps) == 2 && reps[0].Up == 1 && reps[1].Up == 1
	})
	byTransport := map[string]*gateway.ProcessInfo{}
	for _, r := range reps {
		if r.Process == nil {
			t.Fatalf("a report without its process: %+v", r)
		}
		byTransport[r.Process.Transport] = r.Process
	}
	abs, _ := filepath.Abs(cfg)
	if p := byTransport["stdio"]; p == nil || p.PID != stdio.Process.Pid || p.Client != "status-test 1.2.3" || len(p.Config) != 1 || p.Config[0] != abs {
		t.Errorf("the stdio gateway's process: %+v, want pid %d, client status-test 1.2.3, config %s", p, stdio.Process.Pid, abs)
	}
	if p := byTransport["http"]; p == nil || p.Addr != addr || p.Client != "" {
		t.Errorf("the HTTP gateway's process: %+v, want addr %s", p, addr)
	}
	out, stderr, err := runToolgate(t, data, "status")
	if err != nil {
		t.Errorf("status: %v, want exit status 0\n%s%s", err, out, stderr)
	}
	for _, want := range []string{
		"  embedding cache: held by another toolgate on the data folder (pid ",
		"pid " + itoa(stdio.Process.Pid) + " (stdio, client status-test 1.2.3), up ",
		" (http " + addr + "), up ",
		"config: " + abs,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}

	// health --config of a config without toolgate.http.addr, served with
	// --http ADDR: the address its gateway on the data folder took (it
	// asked 127.0.0.1:8931, another gateway's or nobody's).
	if out, stderr, err := runToolgate(t, data, "health", "--config", cfg); err != nil || out != "ok (http://"+addr+"/healthz)\n" {
		t.Errorf("health --config of a gateway served with --http %s: %v, %q %q", addr, err, out, stderr)
	}

	// Killed: its socket stays, nobody listens; stopped: its socket goes.
	// (The client session reaps the process: a Wait here would race it.)
	sock := ""
	if socks := local.SocketsOf(data, stdio.Process.Pid); len(socks) == 1 {
		sock = socks[0]
	}
	if sock == "" {
		t.Fatalf("no socket of pid %d among %v", stdio.Process.Pid, local.Sockets(data))
	}
	if err := stdio.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the killed gateway's socket refusing", func() bool { _, gone := askLocal(ctx, sock, time.Second); return gone })
	stopHTTP()
	if n := len(local.Sockets(data)); n != 1 {
		t.Errorf("%d sockets left, want the killed gateway's", n)
	}
	// (Then 127.0.0.1:8931 is asked, where a developer's `make run` may
	// answer: only ours must be gone.)
	out, stderr, err = runToolgate(t, data, "status", "--json", "--timeout", "2s")
	for _, r := range decodeReports(t, out) {
		if p := r.Process; p != nil && (p.PID == stdio.Process.Pid || p.Addr == addr) {
			t.Errorf("status lists a gateway that is gone: %+v", p)
		}
	}
	if out == "" && (err == nil || !strings.Contains(stderr, "no gateway runs on the data folder "+data)) {
		t.Errorf("status with no gateway left: %v\n%s", err, stderr)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// Several gateways on one data folder: the reports one after the other,
// the degraded ones named by PID in the exit status 3, a socket nobody
// listens on passed over, one that takes the connection but does not
// answer reported as such.
func TestStatusLocalSeveral(t *testing.T) {
	data := t.TempDir()
	serve := func(pid int, state backend.State) {
		src := statusSource{{Name: "srv" + itoa(pid), Transport: "stdio", State: state, Tools: 2}}
		proc := &gateway.ProcessInfo{PID: pid, Transport: "stdio", Client: "client" + itoa(pid)}
		s := local.Serve(data, statusRoute(gateway.StatusHandler(src, &gateway.StatusOptions{Version: "9.9.9", Process: func() *gateway.ProcessInfo { return proc }})), nil)
		t.Cleanup(func() { s.Close() })
	}
	serve(1, backend.StateUp)
	serve(2, backend.StateDown)
	stale := filepath.Join(dirs.Sockets(data), "3-00000000.sock")
	ln, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	f := statusFlags{dataDir: func(*config.File) string { return data }, timeout: 2 * time.Second}

	var out bytes.Buffer
	requireDegraded(t, runStatus(context.Background(), &out, f), "degraded: pid 2: srv2 is down")
	if got := out.String(); !strings.Contains(got, "pid 1 (stdio, client client1)") || !strings.Contains(got, "pid 2 (stdio, client client2)") || strings.Contains(got, "3-00000000") {
		t.Errorf("status:\n%s", got)
	}
	out.Reset()
	f.asJSON = true
	requireDegraded(t, runStatus(context.Background(), &out, f), "pid 2: srv2 is down")
	if reps := decodeReports(t, out.String()); len(reps) != 2 || reps[0].Process.PID == reps[1].Process.PID {
		t.Errorf("status --json: %d reports\n%s", len(reps), out.String())
	}

	// A gateway that takes the connection and never answers (stuck).
	stuck := filepath.Join(dirs.Sockets(data), "4-00000000.sock")
	sl, err := net.Listen("unix", stuck)
	if err != nil {
		t.Fatal(err)
	}
	defer sl.Close()
	go func() {
		for {
			c, err := sl.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	out.Reset()
	f.asJSON, f.timeout = false, 300*time.Millisecond
	requireDegraded(t, runStatus(context.Background(), &out, f), "the gateway at "+stuck+" does not answer")
	if got := out.String(); !strings.Contains(got, "took the connection but sent no answer") || !strings.Contains(got, "pid 1 (stdio") {
		t.Errorf("status with a stuck gateway:\n%s", got)
	}
	out.Reset()
	f.asJSON = true
	requireDegraded(t, runStatus(context.Background(), &out, f), "the gateway at "+stuck+" does not answer")
	if reps := decodeReports(t, out.String()); len(reps) != 2 {
		t.Errorf("status --json with a stuck gateway: %d reports, want the two that answer\n%s", len(reps), out.String())
	}
}

// `servers restart` waits for each gateway on the data folder to count the
// restart: one that does not run the server is said to, one that does not
// restart it within the wait fails the command, naming it.
func TestServersRestartWaits(t *testing.T) {
	data := t.TempDir()
	serve := func(pid int, servers ...string) {
		var src statusSource
		for _, s := range servers {
			src = append(src, backend.Status{Name: s, Transport: "stdio", State: backend.StateUp})
		}
		proc := &gateway.ProcessInfo{PID: pid, Transport: "stdio", Client: "client" + itoa(pid)}
		s := local.Serve(data, statusRoute(gateway.StatusHandler(src, &gateway.StatusOptions{Process: func() *gateway.ProcessInfo { return proc }})), nil)
		t.Cleanup(func() { s.Close() })
	}
	serve(1, "other")
	serve(2, "memory") // never counts a restart: it only serves a status
	old := restartWait
	restartWait = 300 * time.Millisecond
	t.Cleanup(func() { restartWait = old })
	var out bytes.Buffer
	g := &globals{dataDir: data}
	err := runServersRestart(context.Background(), &out, g, "", "memory")
	if err == nil || !strings.Contains(err.Error(), `server "memory" was not restarted by pid 2 (stdio, client client2) within 300ms`) {
		t.Errorf("servers restart: %v", err)
	}
	for _, want := range []string{"pid 1 (stdio, client client1): does not run memory", "pid 2 (stdio, client client2): not restarted within 300ms"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("servers restart's output lacks %q:\n%s", want, out.String())
		}
	}
	if st, err := live.ReadState(live.StateFile(data)); err != nil || st.RestartRequests["memory"] != 1 {
		t.Errorf("state file: %+v, %v", st, err)
	}
}

// A gateway still building a cold start's first index applies a restart
// once the index is served (it reads the state file then): `servers
// restart` says so and ends well, where it said the server was not
// restarted within the wait and failed.
func TestServersRestartWhileBuilding(t *testing.T) {
	data := t.TempDir()
	src := statusSource{backend.Status{Name: "memory", Transport: "stdio", State: backend.StateUp}}
	proc := &gateway.ProcessInfo{PID: 1, Transport: "stdio", Client: "client1"}
	loop := &statsSteps{steps: []live.Stats{{Building: true, BuildingTools: 3, BuildingTotal: 10}}}
	s := local.Serve(data, statusRoute(gateway.StatusHandler(src, &gateway.StatusOptions{Loop: loop, Process: func() *gateway.ProcessInfo { return proc }})), nil)
	t.Cleanup(func() { s.Close() })
	old := restartWait
	restartWait = 300 * time.Millisecond
	t.Cleanup(func() { restartWait = old })
	var out bytes.Buffer
	if err := runServersRestart(context.Background(), &out, &globals{dataDir: data}, "", "memory"); err != nil {
		t.Errorf("servers restart while the gateway builds its first index: %v\n%s", err, out.String())
	}
	want := "pid 1 (stdio, client client1): not yet: it is building its first index (3 of 10 tools embedded) and applies the request once the index is served"
	if !strings.Contains(out.String(), want) {
		t.Errorf("servers restart's output lacks %q:\n%s", want, out.String())
	}
	if st, err := live.ReadState(live.StateFile(data)); err != nil || st.RestartRequests["memory"] != 1 {
		t.Errorf("state file: %+v, %v", st, err)
	}
}

// Without --config, `servers restart|disable|enable` check NAME against
// the gateways running on the data folder: a name none of them has is a
// usage error that lists theirs, and the state file is left alone (a typo
// was written there, and the command ended well).
func TestServersNameCheckedAgainstRunning(t *testing.T) {
	data := t.TempDir()
	var src statusSource
	for _, s := range []string{"time", "memory"} {
		src = append(src, backend.Status{Name: s, Transport: "stdio", State: backend.StateUp})
	}
	proc := &gateway.ProcessInfo{PID: 1, Transport: "stdio", Client: "client1"}
	srv := local.Serve(data, statusRoute(gateway.StatusHandler(src, &gateway.StatusOptions{Process: func() *gateway.ProcessInfo { return proc }})), nil)
	t.Cleanup(func() { srv.Close() })
	g := &globals{dataDir: data}
	want := `no gateway running on the data folder ` + data + ` has a server "memroy": they have memory, time (`
	for name, run := range map[string]func() error{
		"restart": func() error { return runServersRestart(context.Background(), io.Discard, g, "", "memroy") },
		"disable": func() error { return runServersToggle(context.Background(), io.Discard, g, "", "memroy", true) },
		"enable":  func() error { return runServersToggle(context.Background(), io.Discard, g, "", "memroy", false) },
	} {
		err := run()
		var usage usageError
		if !errors.As(err, &usage) || !strings.Contains(err.Error(), want) {
			t.Errorf("servers %s memroy: %v, want a usage error that says %q", name, err, want)
		}
	}
	if _, err := os.Stat(live.StateFile(data)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the state file was written for a server no gateway has: %v", err)
	}
	// A server the state file disabled, of a config no gateway runs now,
	// can still be enabled.
	err := live.EditState(live.StateFile(data), func(st live.State) (live.State, bool, error) {
		next, changed := st.With("elsewhere", true)
		return next, changed, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := runServersToggle(context.Background(), io.Discard, g, "", "elsewhere", false); err != nil {
		t.Errorf("servers enable elsewhere: %v", err)
	}
	if st, err := live.ReadState(live.StateFile(data)); err != nil || len(st.Disabled) != 0 {
		t.Errorf("state after enabling: %+v, %v", st, err)
	}
}

// statsSteps is a loop's counters that move one step at each look, and
// stay at the last.
type statsSteps struct {
	mu    sync.Mutex
	steps []live.Stats
}

func (s *statsSteps) Stats() live.Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.steps[0]
	if len(s.steps) > 1 {
		s.steps = s.steps[1:]
	}
	return st
}

// servers remove clears a removed server's "disabled" in state.json only
// once each gateway running on the data folder has dropped it from its
// config (else one could start it between the two changes): one that
// still lists it leaves the name disabled, with a warning saying how to
// clear it.
func TestServersRemoveClearsDisabledOnceDropped(t *testing.T) {
	old := restartWait
	restartWait = 300 * time.Millisecond
	t.Cleanup(func() { restartWait = old })
	for _, c := range []struct {
		name    string
		stats   []live.Stats
		cleared bool
	}{
		{"dropped", []live.Stats{{Disabled: []string{"mem"}}, {Disabled: []string{"mem"}}, {}}, true},
		{"kept", []live.Stats{{Disabled: []string{"mem"}}}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			data := t.TempDir()
			file := live.StateFile(data)
			if err := live.WriteState(file, live.State{Disabled: []string{"mem", "other"}}); err != nil {
				t.Fatal(err)
			}
			proc := &gateway.ProcessInfo{PID: 1, Transport: "stdio", Client: "client1"}
			h := gateway.StatusHandler(statusSource{}, &gateway.StatusOptions{Loop: &statsSteps{steps: c.stats}, Process: func() *gateway.ProcessInfo { return proc }})
			srv := local.Serve(data, statusRoute(h), nil)
			t.Cleanup(func() { srv.Close() })
			var out bytes.Buffer
			if err := clearDisabled(context.Background(), &out, data, "mem"); err != nil {
				t.Fatal(err)
			}
			st, err := live.ReadState(file)
			if err != nil {
				t.Fatal(err)
			}
			want := []string{"mem", "other"}
			if c.cleared {
				want = []string{"other"}
			}
			if !slices.Equal(st.Disabled, want) {
				t.Errorf("disabled after remove: %v, want %v\n%s", st.Disabled, want, out.String())
			}
			if !c.cleared && !strings.Contains(out.String(), `warning: "mem" stays disabled at run time`) {
				t.Errorf("no warning:\n%s", out.String())
			}
		})
	}
}

// statusSteps is a backend's status that moves one step at each look,
// and stays at the last.
type statusSteps struct {
	mu    sync.Mutex
	steps []backend.Status
}

func (s *statusSteps) Status() []backend.Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.steps[0]
	if len(s.steps) > 1 {
		s.steps = s.steps[1:]
	}
	return []backend.Status{st}
}

// servers restart says how the server stands once its restart is over,
// and fails when that is down.
func TestServersRestartSaysState(t *testing.T) {
	data := t.TempDir()
	serve := func(pid int, steps ...backend.Status) {
		proc := &gateway.ProcessInfo{PID: pid, Transport: "stdio", Client: "client" + itoa(pid)}
		s := local.Serve(data, statusRoute(gateway.StatusHandler(&statusSteps{steps: steps}, &gateway.StatusOptions{Process: func() *gateway.ProcessInfo { return proc }})), nil)
		t.Cleanup(func() { s.Close() })
	}
	up := backend.Status{Name: "time", Transport: "stdio", State: backend.StateUp, Tools: 2}
	connecting, back, down := up, up, up
	connecting.Restarts, connecting.State = 1, backend.StateConnecting
	back.Restarts, back.Tools = 1, 3
	down.Restarts, down.State, down.Err = 1, backend.StateDown, `backend "time": command "uvx" not found in PATH (PATH=/usr/bin): check command/PATH`
	serve(1, up, up, connecting, connecting, back)
	serve(2, up, connecting, down)
	var out bytes.Buffer
	err := runServersRestart(context.Background(), &out, &globals{dataDir: data}, "", "time")
	if err == nil || !strings.Contains(err.Error(), `server "time" is down after it was restarted by pid 2 (stdio, client client2): fix what its error says`) {
		t.Errorf("servers restart: %v", err)
	}
	for _, want := range []string{"pid 1 (stdio, client client1): restarted: up, 3 tools\n",
		`pid 2 (stdio, client client2): restarted, but DOWN: backend "time": command "uvx" not found in PATH (PATH=/usr/bin): check command/PATH` + "\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("servers restart's output lacks %q:\n%s", want, out.String())
		}
	}
}

func statusRoute(h http.Handler) map[string]http.Handler {
	return map[string]http.Handler{"GET /status": h}
}

// `toolgate logs` prints a stdio gateway's log from its socket; -f follows
// the data folder: a restart asked from the shell shows up, a gateway that
// stops says so, one that starts later joins, and it ends when
// interrupted. With --pid it ends when that gateway stops.
func TestLogs(t *testing.T) {
	cfg := fakeConfig(t, map[string]string{"fake": backendtest.ModeNormal}, map[string]any{"learn": map[string]any{"enabled": false}})
	data := t.TempDir()
	stdio := toolgateCmd(t, data, "serve", "--config", cfg, "--mode", "bm25")
	stdio.Stderr = testLog(t, "stdio: ")
	_, cs := connectStdio(t, stdio, 3*time.Minute)
	out, stderr, err := runToolgate(t, data, "logs", "-n", "0")
	if err != nil || !strings.Contains(out, `msg="gateway ready"`) {
		t.Fatalf("logs: %v\n%s%s", err, out, stderr)
	}
	if _, stderr, err := runToolgate(t, data, "logs", "--pid", "1"); err == nil || !strings.Contains(stderr, "no gateway with pid 1 runs on the data folder") || !strings.Contains(stderr, itoa(stdio.Process.Pid)) {
		t.Errorf("logs --pid 1: %v\n%s", err, stderr)
	}
	// The level changes without a restart, and the report says so.
	if _, stderr, err := runToolgate(t, data, "logs", "--level", "debug", "-n", "0"); err != nil || !strings.Contains(stderr, "log level info → debug") {
		t.Errorf("logs --level debug: %v\n%s", err, stderr)
	}
	if out, _, _ := runToolgate(t, data, "status", "--json"); len(decodeReports(t, out)) != 1 || decodeReports(t, out)[0].Process.LogLevel != "debug" {
		t.Errorf("status --json after logs --level debug: want process.logLevel debug\n%s", out)
	}

	startFollow := func(args ...string) (*exec.Cmd, func(what string)) {
		t.Helper()
		follow := toolgateCmd(t, data, append([]string{"logs", "-f", "-n", "1"}, args...)...)
		lines := startLines(t, follow, "logs: ")
		return follow, func(what string) {
			t.Helper()
			timeout := time.After(time.Minute)
			for {
				select {
				case l, ok := <-lines:
					if !ok {
						t.Fatalf("logs -f %v ended before %q", args, what)
					}
					if strings.Contains(l, what) {
						return
					}
				case <-timeout:
					t.Fatalf("logs -f %v did not print %q within a minute", args, what)
				}
			}
		}
	}
	ended := func(follow *exec.Cmd, what string) {
		t.Helper()
		done := make(chan error, 1)
		go func() { done <- follow.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("logs -f %s: %v", what, err)
			}
		case <-time.After(time.Minute):
			follow.Process.Kill()
			t.Fatalf("logs -f still runs a minute after %s", what)
		}
	}
	follow, waitLine := startFollow()
	// Its first look printed the last line (-n 1): the restart's line comes
	// after it. A restart asked before that look would be one of the lines
	// -n 1 leaves out (a loaded machine starts `logs -f` slower than
	// `servers restart` ends).
	waitLine("")
	if out, err := toolgateCmd(t, data, "servers", "restart", "fake").CombinedOutput(); err != nil {
		t.Fatalf("servers restart: %v\n%s", err, out)
	}
	waitLine("server restarted: requested by `toolgate servers restart`")
	cs.Close() // the gateway stops; -f says so and waits for the next
	waitLine("stopped)")
	waitLine("(no gateway runs on the data folder now: waiting for the next; Ctrl-C ends)")

	// The next gateway joins, its lines from its start.
	next := toolgateCmd(t, data, "serve", "--config", cfg, "--mode", "bm25")
	next.Stderr = testLog(t, "next: ")
	_, cs2 := connectStdio(t, next, 3*time.Minute)
	waitLine(fmt.Sprintf("pid %d", next.Process.Pid))
	waitLine(`msg="gateway ready"`)
	byPID, waitPID := startFollow("--pid", itoa(next.Process.Pid), "-n", "0")
	waitPID(`msg="gateway ready"`)
	cs2.Close()
	waitPID("stopped)")
	ended(byPID, "--pid after its gateway stopped")
	waitLine("stopped)")
	if err := follow.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	ended(follow, "after an interrupt")
}

// logGateway serves, on data's status socket until the test ends, a stdio
// gateway's status and its log: the ring returned, keeping lines lines.
func logGateway(t *testing.T, data string, lines int) *logring.Ring {
	t.Helper()
	ring := logring.New(lines)
	proc := &gateway.ProcessInfo{PID: 7, Transport: "stdio"}
	s := local.Serve(data, map[string]http.Handler{
		"GET /status": gateway.StatusHandler(statusSource{}, &gateway.StatusOptions{Process: func() *gateway.ProcessInfo { return proc }}),
		"GET /logs":   ring.Handler(),
	}, nil)
	t.Cleanup(func() { s.Close() })
	return ring
}

// logs prints a line's control and format characters as escapes: a
// gateway logging with --log-format json writes a backend's bidi override
// (U+202E) and C1 controls (U+009B, a terminal's CSI) as they came, since
// JSON escapes only those below U+0020, and they reached the terminal.
// Its escapes (\u202e; DEL as \u007f, not Go's \x7f) keep the line the
// same JSON.
func TestLogsEscapeTerminalText(t *testing.T) {
	data := t.TempDir()
	ring := logGateway(t, data, 10)
	// As slog's JSON handler writes it: U+202E and U+009B as they are.
	line := "{\"level\":\"INFO\",\"msg\":\"backend stderr\",\"server\":\"evil\",\"line\":\"all good \u202eop \u009b31mred \\u001b]0;x\\u0007\x7f\U000E0001\"}"
	fmt.Fprintln(ring, line)
	fmt.Fprintln(ring, `{"msg":"plain"}`)
	for _, follow := range []bool{false, true} {
		ctx, cancel := context.WithCancel(context.Background())
		var out testenv.LogBuffer
		done := make(chan error, 1)
		go func() {
			done <- runLogs(ctx, &out, io.Discard, data, logsFlags{follow: follow, n: 10, every: time.Hour})
		}()
		testenv.Eventually(t, "the lines", func() bool { return strings.Contains(out.String(), "plain") })
		cancel()
		<-done
		got := out.String()
		want := `"line":"all good \u202eop \u009b31mred \u001b]0;x\u0007\u007f\udb40\udc01"}`
		if strings.ContainsAny(got, "\u202e\u009b") || !strings.Contains(got, want) {
			t.Errorf("logs (-f %v) printed %q, want the line with %s", follow, got, want)
		}
		var v map[string]any
		if err := json.Unmarshal([]byte(strings.SplitN(got, "\n", 2)[0]), &v); err != nil || v["line"] != "all good \u202eop \u009b31mred \x1b]0;x\a\x7f\U000E0001" {
			t.Errorf("the escaped line reads %v as JSON (%v)", v["line"], err)
		}
	}
}

// logs -f says how many lines went by unkept when more came between two
// looks than the gateway keeps, and ends with its context.
func TestLogsFollowSaysWhatWasNotKept(t *testing.T) {
	data := t.TempDir()
	ring := logGateway(t, data, 3)
	fmt.Fprintln(ring, "first")
	ctx, cancel := context.WithCancel(context.Background())
	var out testenv.LogBuffer
	done := make(chan error, 1)
	go func() { done <- runLogs(ctx, &out, io.Discard, data, logsFlags{follow: true, n: 10, every: time.Hour}) }()
	testenv.Eventually(t, "the first page", func() bool { return strings.Contains(out.String(), "first") })
	cancel() // its next look is an hour away: only the context ends it
	if err := <-done; err != nil {
		t.Fatalf("logs -f ended with %v after its context", err)
	}
	for i := range 10 {
		fmt.Fprintf(ring, "line %d\n", i)
	}
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	go func() {
		done <- runLogs(ctx2, &out, io.Discard, data, logsFlags{follow: true, n: 1, every: 10 * time.Millisecond})
	}()
	testenv.Eventually(t, "line 9", func() bool { return strings.Contains(out.String(), "line 9") })
	for i := range 20 { // far faster than a look every 10 ms: most go unkept
		fmt.Fprintf(ring, "more %d\n", i)
	}
	testenv.Eventually(t, "the count of lines not kept", func() bool { return strings.Contains(out.String(), "lines not kept)") })
	if got := out.String(); !strings.Contains(got, "(17 lines not kept)") && !strings.Contains(got, "more 19") {
		t.Errorf("logs -f:\n%s", got)
	}
	cancel2()
	<-done
}

// logs -f with no gateway running on the data folder waits for the next,
// saying so, rather than failing; without -f, or with --pid, it fails.
func TestLogsFollowWaitsForTheFirst(t *testing.T) {
	data := t.TempDir()
	if err := runLogs(context.Background(), io.Discard, io.Discard, data, logsFlags{}); err == nil || !strings.Contains(err.Error(), "no gateway runs on the data folder") {
		t.Errorf("logs with no gateway: %v", err)
	}
	if err := runLogs(context.Background(), io.Discard, io.Discard, data, logsFlags{follow: true, pid: 7}); err == nil {
		t.Error("logs -f --pid 7 with no gateway did not fail")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out testenv.LogBuffer
	done := make(chan error, 1)
	go func() {
		done <- runLogs(ctx, &out, io.Discard, data, logsFlags{follow: true, every: 10 * time.Millisecond})
	}()
	testenv.Eventually(t, "the wait said", func() bool {
		return strings.Contains(out.String(), "(no gateway runs on the data folder now: waiting for the next; Ctrl-C ends)")
	})
	ring := logGateway(t, data, 10)
	fmt.Fprintln(ring, "hello from the first")
	testenv.Eventually(t, "the first gateway's line", func() bool { return strings.Contains(out.String(), "hello from the first") })
	if got := out.String(); !strings.Contains(got, "(pid 7 (stdio, no client yet) started)") || strings.Count(got, "waiting for the next") != 1 {
		t.Errorf("logs -f:\n%s", got)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("logs -f ended with %v after its context", err)
	}
}

// TestLogsLevelOlderGateway: a gateway of before 2026-12-07 answers
// /loglevel without started; logs --level then says what a restart gives
// without naming a level (it said "until `toolgate logs --level debug` or
// a restart", as if a restart went back to debug).
func TestLogsLevelOlderGateway(t *testing.T) {
	data := t.TempDir()
	ring := logring.New(0)
	level := new(slog.LevelVar)
	level.Set(slog.LevelDebug)
	proc := &process{info: gateway.ProcessInfo{PID: 7, Transport: "stdio"}, level: level}
	older := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		was := levelName(level.Level())
		level.Set(slog.LevelInfo)
		json.NewEncoder(w).Encode(map[string]string{"level": "info", "was": was}) // no started
	})
	s := local.Serve(data, map[string]http.Handler{
		"GET /status":    gateway.StatusHandler(statusSource{}, &gateway.StatusOptions{Process: proc.report}),
		"GET /logs":      ring.Handler(),
		"POST /loglevel": older,
	}, nil)
	defer s.Close()
	var notes testenv.LogBuffer
	if err := runLogs(context.Background(), io.Discard, &notes, data, logsFlags{n: 1, level: "info"}); err != nil {
		t.Fatal(err)
	}
	if want := "log level debug → info, until `toolgate logs --level debug` or a restart (which gives the level it was started at: its --log-level or $TOOLGATE_LOG_LEVEL, else info)\n"; !strings.HasSuffix(notes.String(), want) {
		t.Errorf("logs --level info against an older gateway: %q, want it to end %q", notes.String(), want)
	}
}

// logs --level changes a running gateway's log level (POST /loglevel on
// its status socket): lines of the new level reach its log at once, the
// status report says the level, and -f puts the level it found back when
// it ends, unless someone changed it again meanwhile.
func TestLogsLevel(t *testing.T) {
	data := t.TempDir()
	ring := logring.New(0)
	level := new(slog.LevelVar)
	log := slog.New(slog.NewTextHandler(ring, &slog.HandlerOptions{Level: level}))
	proc := &process{info: gateway.ProcessInfo{PID: 7, Transport: "stdio"}, level: level}
	h := logLevelHandler(level, log)
	s := local.Serve(data, map[string]http.Handler{
		"GET /status":   gateway.StatusHandler(statusSource{}, &gateway.StatusOptions{Process: proc.report}),
		"GET /logs":     ring.Handler(),
		"GET /loglevel": h, "POST /loglevel": h,
	}, nil)
	defer s.Close()

	// Set, without -f: it stays; the status line says it.
	var out, notes testenv.LogBuffer
	if err := runLogs(context.Background(), &out, &notes, data, logsFlags{n: 5, level: "debug"}); err != nil {
		t.Fatal(err)
	}
	if level.Level() != slog.LevelDebug || !strings.Contains(notes.String(), "log level info → debug, until `toolgate logs --level info` or a restart (which gives info, the level it was started at)") ||
		!strings.Contains(out.String(), `msg="log level changed" from=info to=debug`) {
		t.Fatalf("logs --level debug: level %v\nnotes: %s\nout: %s", level.Level(), notes.String(), out.String())
	}
	log.Debug("a debug line")
	var st bytes.Buffer
	if err := runStatus(context.Background(), &st, statusFlags{dataDir: func(*config.File) string { return data }, timeout: 2 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(st.String(), "pid 7 (stdio, no client yet, log level debug)") {
		t.Errorf("status with the level set:\n%s", st.String())
	}

	// Set back: what a restart gives is said as what it is, the level
	// the gateway was started at; it read as if a restart went back to
	// debug ("log level debug → info, until `toolgate logs --level debug`
	// or a restart").
	var back testenv.LogBuffer
	if err := runLogs(context.Background(), io.Discard, &back, data, logsFlags{n: 1, level: "info"}); err != nil {
		t.Fatal(err)
	}
	if want := "log level debug → info, the level it was started at (as after a restart); `toolgate logs --level debug` sets it back"; level.Level() != slog.LevelInfo || !strings.Contains(back.String(), want) {
		t.Errorf("logs --level info after debug: level %v\nnotes: %s\nwant %q", level.Level(), back.String(), want)
	}

	// -f --level warn: put back to debug when it ends.
	level.Set(slog.LevelInfo)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var notes2 testenv.LogBuffer
	go func() {
		done <- runLogs(ctx, &out, &notes2, data, logsFlags{follow: true, level: "warn", every: 10 * time.Millisecond})
	}()
	testenv.Eventually(t, "the level set", func() bool { return level.Level() == slog.LevelWarn })
	log.Info("not at warn")
	log.Warn("at warn")
	testenv.Eventually(t, "the warn line", func() bool { return strings.Contains(out.String(), "at warn") })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if level.Level() != slog.LevelInfo || strings.Contains(out.String(), "not at warn") || !strings.Contains(notes2.String(), "log level info again") {
		t.Errorf("logs -f --level warn, ended: level %v (want info back)\nnotes: %s\nout: %s", level.Level(), notes2.String(), out.String())
	}

	// Changed again while following: left as it is.
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	var notes3 testenv.LogBuffer
	go func() {
		done <- runLogs(ctx, &out, &notes3, data, logsFlags{follow: true, level: "debug", every: 10 * time.Millisecond})
	}()
	testenv.Eventually(t, "the level set", func() bool { return level.Level() == slog.LevelDebug })
	if _, err := setLogLevel(context.Background(), s.Path, "error", ""); err != nil {
		t.Fatal(err)
	}
	cancel()
	<-done
	if level.Level() != slog.LevelError || !strings.Contains(notes3.String(), "log level left as it is (changed since this set it to debug)") {
		t.Errorf("changed while following: level %v (want error kept)\nnotes: %s", level.Level(), notes3.String())
	}
	if _, err := setLogLevel(context.Background(), s.Path, "loud", ""); err == nil || !strings.Contains(err.Error(), "want debug, info, warn or error") {
		t.Errorf("POST /loglevel loud: %v", err)
	}
}

// A data folder whose gateways cannot be listed is said so, not taken for
// one where none runs.
func TestStatusSocketsUnlisted(t *testing.T) {
	data := t.TempDir()
	if err := os.WriteFile(dirs.Sockets(data), nil, 0o600); err != nil { // a file where the folder goes
		t.Fatal(err)
	}
	f := statusFlags{dataDir: func(*config.File) string { return data }, timeout: time.Second, fallback: freeAddr(t)}
	var out bytes.Buffer
	err := runStatus(context.Background(), &out, f)
	if err == nil || !strings.Contains(err.Error(), "the gateways on the data folder "+data+" cannot be listed") {
		t.Errorf("status: %v", err)
	}
	if err := runLogs(context.Background(), &out, io.Discard, data, logsFlags{}); err == nil || !strings.Contains(err.Error(), "cannot be listed") {
		t.Errorf("logs: %v", err)
	}
}

// status --config FILE (or $TOOLGATE_CONFIG) of a config without an HTTP
// address whose data folder has no gateway asks the default address; a
// gateway answering there for another config (`make run`'s, say) is not
// FILE's: status says so, as connect does, rather than print that
// gateway's status as if it were FILE's.
func TestStatusDefaultAddressOtherConfig(t *testing.T) {
	data := t.TempDir()
	cfg := filepath.Join(t.TempDir(), "toolgate.json")
	if err := os.WriteFile(cfg, []byte(`{"mcpServers": {"one": {"command": "true"}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	other := "/srv/other/toolgate.json"
	f := statusFlags{config: cfg, dataDir: func(*config.File) string { return data }, timeout: 2 * time.Second, fallback: fakeGatewayServing(t, other, http.StatusOK)}
	var out bytes.Buffer
	err := runStatus(context.Background(), &out, f)
	if err == nil || !strings.Contains(err.Error(), "serves another config ("+other+"), not "+cfg) ||
		!strings.Contains(err.Error(), "no gateway runs on the data folder "+data) || out.Len() > 0 {
		t.Errorf("status --config of another config's default gateway: %v\n%s", err, out.String())
	}
	// Serving this config, it is this config's.
	f.fallback = fakeGatewayServing(t, cfg, http.StatusOK)
	out.Reset()
	if err := runStatus(context.Background(), &out, f); err != nil || !strings.Contains(out.String(), "pid 4242") {
		t.Errorf("status --config of its own default gateway: %v\n%s", err, out.String())
	}
}

// TestStatusDefaultAddressOtherDataFolder: status --data-dir DIR with no
// gateway on DIR (one SIGKILLed leaves its socket, which is passed over)
// asks the default address; a gateway answering there on another data
// folder is not DIR's: status says so (exit 1) rather than print that
// gateway's backends all up, exit 0, as if DIR's ran. The data folder not
// named (the default one: a gateway in a container, whose folder is its
// own path) and the gateway on DIR itself print as before.
func TestStatusDefaultAddressOtherDataFolder(t *testing.T) {
	data := t.TempDir()
	serving := func(dataDir string) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			json.NewEncoder(w).Encode(gateway.StatusReport{Process: &gateway.ProcessInfo{PID: 4242, Transport: "http"},
				Storage: &storage.Report{DataDir: dataDir, Writable: true}})
		}))
		t.Cleanup(srv.Close)
		return srv.Listener.Addr().String()
	}
	other := "/srv/other/toolgate"
	f := statusFlags{dataDir: func(*config.File) string { return data }, timeout: 2 * time.Second, fallback: serving(other), named: true}
	var out bytes.Buffer
	err := runStatus(context.Background(), &out, f)
	if err == nil || !strings.Contains(err.Error(), "the gateway at "+f.fallback+" runs on another data folder ("+other+"), not "+data) ||
		!strings.Contains(err.Error(), "no gateway runs on the data folder "+data) || out.Len() > 0 {
		t.Errorf("status --data-dir of another folder's default gateway: %v\n%s", err, out.String())
	}
	// Not named: the gateway at the default address is the one asked for.
	f.named = false
	out.Reset()
	if err := runStatus(context.Background(), &out, f); err != nil || !strings.Contains(out.String(), "pid 4242") {
		t.Errorf("status of the default data folder's default gateway: %v\n%s", err, out.String())
	}
	// On the folder named (through a symlink too): it is its gateway.
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(data, link); err != nil {
		t.Fatal(err)
	}
	for _, served := range []string{data, link} {
		f = statusFlags{dataDir: func(*config.File) string { return data }, timeout: 2 * time.Second, fallback: serving(served), named: true}
		out.Reset()
		if err := runStatus(context.Background(), &out, f); err != nil || !strings.Contains(out.String(), "pid 4242") {
			t.Errorf("status --data-dir of its own default gateway (%s): %v\n%s", served, err, out.String())
		}
	}
}

// TestStatusDefaultAddressDataFolderHidden: a gateway at the default
// address asked with an API key that is not admin does not say its data
// folder (storage.dataDir left out, persona110): status --data-dir DIR, no
// gateway on DIR, printed that gateway's status, exit 0, as DIR's (the
// check of its folder passed on the empty name). It says instead that it
// cannot tell, with the two ways to ask (exit 1).
func TestStatusDefaultAddressDataFolderHidden(t *testing.T) {
	data := t.TempDir()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		json.NewEncoder(w).Encode(gateway.StatusReport{Process: &gateway.ProcessInfo{PID: 4242, Transport: "http"},
			Storage: &storage.Report{Writable: true}})
	}))
	t.Cleanup(srv.Close)
	addr := srv.Listener.Addr().String()
	f := statusFlags{dataDir: func(*config.File) string { return data }, timeout: 2 * time.Second, fallback: addr, named: true}
	var out bytes.Buffer
	err := runStatus(context.Background(), &out, f)
	if err == nil || !strings.Contains(err.Error(), "the gateway at "+addr+" does not say its data folder to this API key") ||
		!strings.Contains(err.Error(), "no gateway runs on the data folder "+data) || !strings.Contains(err.Error(), "--addr "+addr) || out.Len() > 0 {
		t.Errorf("status --data-dir, the default gateway's folder hidden from the key: %v\n%s", err, out.String())
	}
	// Not named: the gateway at the default address is the one asked for.
	f.named = false
	out.Reset()
	if err := runStatus(context.Background(), &out, f); err != nil || !strings.Contains(out.String(), "pid 4242") {
		t.Errorf("status of the default data folder's default gateway: %v\n%s", err, out.String())
	}
}

// TestStatusDefaultAddressConfigHidden: the same with --config FILE: a
// gateway at the default address asked with an API key that is not admin
// does not say the configs it serves (process.config left out), and status
// -c FILE, no gateway on FILE's data folder, printed that gateway's status
// as FILE's, exit 0, whatever config it served (the check passed on the
// empty list). It says instead that it cannot tell (exit 1).
func TestStatusDefaultAddressConfigHidden(t *testing.T) {
	data := t.TempDir()
	cfg := filepath.Join(t.TempDir(), "toolgate.json")
	if err := os.WriteFile(cfg, []byte(`{"mcpServers": {"one": {"command": "true"}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		json.NewEncoder(w).Encode(gateway.StatusReport{Process: &gateway.ProcessInfo{PID: 4242, Transport: "http"}})
	}))
	t.Cleanup(srv.Close)
	addr := srv.Listener.Addr().String()
	f := statusFlags{config: cfg, dataDir: func(*config.File) string { return data }, timeout: 2 * time.Second, fallback: addr}
	var out bytes.Buffer
	t.Setenv(envKey, "tg_notadmin")
	err := runStatus(context.Background(), &out, f)
	if err == nil || !strings.Contains(err.Error(), "the gateway at "+addr+" does not say the configs it serves to this API key") ||
		!strings.Contains(err.Error(), "no gateway runs on the data folder "+data) || !strings.Contains(err.Error(), "--addr "+addr) || out.Len() > 0 {
		t.Errorf("status --config, the default gateway's config hidden from the key: %v\n%s", err, out.String())
	}
	// Asked without a key, a gateway that names no config was started
	// without one: not a key's view, and not FILE's gateway either.
	t.Setenv(envKey, "")
	err = runStatus(context.Background(), &out, f)
	if err == nil || !strings.Contains(err.Error(), "the gateway at "+addr+" serves no config file, not "+cfg) || strings.Contains(err.Error(), "API key") || out.Len() > 0 {
		t.Errorf("status --config, the default gateway started without a config file: %v\n%s", err, out.String())
	}
}

// TestHealthDefaultAddressOtherConfig: `toolgate health --config FILE` of
// a config without toolgate.http.addr, no gateway on the data folder
// serving it, asks the default address; a gateway there that serves
// another config (a developer's `make run`) is not FILE's: it said ok.
func TestHealthDefaultAddressOtherConfig(t *testing.T) {
	t.Setenv(envKey, "")
	data := t.TempDir()
	cfg := filepath.Join(t.TempDir(), "toolgate.json")
	if err := os.WriteFile(cfg, []byte(`{"mcpServers": {"one": {"command": "true"}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	f := healthFlags{config: cfg, dataDir: func(*config.File) string { return data }, timeout: 2 * time.Second}
	other := "/srv/other/toolgate.json"
	f.fallback = fakeGatewayServing(t, other, http.StatusOK)
	var out bytes.Buffer
	err := runHealth(context.Background(), &out, f)
	if err == nil || !strings.Contains(err.Error(), "the gateway at "+f.fallback+" serves another config ("+other+"), not "+cfg) ||
		!strings.Contains(err.Error(), "no gateway runs on the data folder "+data) || strings.Contains(err.Error(), "\n") || out.Len() > 0 {
		t.Errorf("health --config of another config's default gateway: %v\n%s", err, out.String())
	}
	// Serving this config, or not saying (it wants a key): ok.
	for _, fallback := range []string{fakeGatewayServing(t, cfg, http.StatusOK), fakeGatewayServing(t, other, http.StatusUnauthorized)} {
		f.fallback = fallback
		out.Reset()
		if err := runHealth(context.Background(), &out, f); err != nil || out.String() != "ok (http://"+fallback+"/healthz)\n" {
			t.Errorf("health --config of a default gateway that is its own or does not say: %v\n%s", err, out.String())
		}
	}
}

// TestHealthReadyDefaultAddressOtherConfig: health --ready --config FILE
// (a container's HEALTHCHECK) checks, as health does, that the gateway at
// the default address serves FILE: it asked that gateway's /readyz/status,
// which is no status, took it for one that does not say, and answered
// ready for another config's gateway.
func TestHealthReadyDefaultAddressOtherConfig(t *testing.T) {
	t.Setenv(envKey, "")
	data := t.TempDir()
	cfg := filepath.Join(t.TempDir(), "toolgate.json")
	if err := os.WriteFile(cfg, []byte(`{"mcpServers": {"one": {"command": "true"}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	other := "/srv/other/toolgate.json"
	f := healthFlags{config: cfg, ready: true, dataDir: func(*config.File) string { return data }, timeout: 2 * time.Second, fallback: fakeGatewayServing(t, other, http.StatusOK)}
	var out bytes.Buffer
	err := runHealth(context.Background(), &out, f)
	if err == nil || !strings.Contains(err.Error(), "the gateway at "+f.fallback+" serves another config ("+other+"), not "+cfg) || out.Len() > 0 {
		t.Errorf("health --ready --config of another config's default gateway: %v\n%s", err, out.String())
	}
	// Not ready yet: that it is another config's is what the operator
	// needs, not its "not ready" (which said nothing of the config).
	f.fallback = fakeGatewayReady(t, other, http.StatusOK, false)
	out.Reset()
	if err := runHealth(context.Background(), &out, f); err == nil || !strings.Contains(err.Error(), "serves another config ("+other+"), not "+cfg) || out.Len() > 0 {
		t.Errorf("health --ready --config of another config's default gateway, not ready: %v\n%s", err, out.String())
	}
	f.fallback = fakeGatewayServing(t, cfg, http.StatusOK)
	out.Reset()
	if err := runHealth(context.Background(), &out, f); err != nil || out.String() != "ready (http://"+f.fallback+"/readyz)\n" {
		t.Errorf("health --ready --config of its own default gateway: %v\n%s", err, out.String())
	}
}

// TestHealthReadyDefaultAddressStarting: `toolgate health --ready --config
// FILE` that fell back to the default address, where a gateway is still
// starting (its front answers every route but MCP's 503 "not ready:
// starting", /status too, so it cannot say which config it serves), says
// that it cannot tell whose that gateway is and that none runs on FILE's
// data folder. It printed that gateway's "not ready: starting" alone,
// which read as FILE's gateway starting when another config's was.
func TestHealthReadyDefaultAddressStarting(t *testing.T) {
	t.Setenv(envKey, "")
	data := t.TempDir()
	cfg := filepath.Join(t.TempDir(), "toolgate.json")
	if err := os.WriteFile(cfg, []byte(`{"mcpServers": {"one": {"command": "true"}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	srv := httptest.NewServer(gateway.NewStarting(func() string { return "starting its servers to build the first tool index" }, stop))
	t.Cleanup(srv.Close)
	host := srv.Listener.Addr().String()
	f := healthFlags{config: cfg, ready: true, dataDir: func(*config.File) string { return data }, timeout: 2 * time.Second, fallback: host}
	var out bytes.Buffer
	err := runHealth(context.Background(), &out, f)
	want := "that gateway cannot say yet which config it serves; no gateway runs on the data folder " + data + ", so it may be another config's: `toolgate status --addr " + host + "`"
	if err == nil || !strings.HasPrefix(err.Error(), gateway.StartingPrefix) || !strings.Contains(err.Error(), want) || out.Len() > 0 {
		t.Errorf("health --ready --config of a default gateway still starting: %v\nwant it to say %q", err, want)
	}
}

// TestHealthConfigNoneAnswers: `toolgate health --config FILE` when no
// gateway runs on the data folder and none listens at the default address
// says both, and the command that starts FILE's gateway there: it said
// `start one (toolgate serve --config FILE …)`, FILE as a placeholder.
func TestHealthConfigNoneAnswers(t *testing.T) {
	t.Setenv(envKey, "")
	data := t.TempDir()
	cfg := filepath.Join(t.TempDir(), "toolgate.json")
	if err := os.WriteFile(cfg, []byte(`{"mcpServers": {"one": {"command": "true"}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	free := freeAddr(t)
	f := healthFlags{config: cfg, dataDir: func(*config.File) string { return data }, timeout: 2 * time.Second, fallback: free}
	var out bytes.Buffer
	err := runHealth(context.Background(), &out, f)
	want := "no gateway runs on the data folder " + data + " either: start one (toolgate serve --config " + cfg + " --http " + free + ")"
	if err == nil || !strings.Contains(err.Error(), "nothing listens at "+free) || !strings.HasSuffix(err.Error(), want) || out.Len() > 0 {
		t.Errorf("health --config with no gateway anywhere: %v\nwant it to end %q", err, want)
	}
}

// fakeGatewayServing is the address of a gateway's stand-in whose GET
// /status answers statusCode with a report of pid 4242 serving the config
// file serving, and GET /healthz ok.
func fakeGatewayServing(t *testing.T, serving string, statusCode int) string {
	return fakeGatewayReady(t, serving, statusCode, true)
}

// fakeGatewayReady is fakeGatewayServing whose /readyz says not ready
// (503) unless ready.
func fakeGatewayReady(t *testing.T, serving string, statusCode int, ready bool) string {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "ok") })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !ready {
			http.Error(w, "not ready: starting (the index is being built)", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprint(w, "ready")
	})
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(statusCode)
		json.NewEncoder(w).Encode(gateway.StatusReport{Process: &gateway.ProcessInfo{PID: 4242, Transport: "http", Config: []string{serving}}})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

// A data folder that does not exist: status and logs say that no gateway
// has started on it yet and how to start one (a newcomer's case), then,
// for one it was removed under, how to find them; not that none runs there.
func TestStatusDataFolderMissing(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	f := statusFlags{dataDir: func(*config.File) string { return data }, timeout: time.Second, fallback: freeAddr(t)}
	var out bytes.Buffer
	err := runStatus(context.Background(), &out, f)
	logsErr := runLogs(context.Background(), &out, io.Discard, data, logsFlags{})
	for i, err := range []error{err, logsErr} {
		if err == nil || !strings.Contains(err.Error(), "the data folder "+data+" does not exist: no gateway has started on it yet (`toolgate serve --config FILE --data-dir "+data+"` starts one") ||
			!strings.Contains(err.Error(), "pgrep") || !strings.Contains(err.Error(), "mkdir -p "+data) || strings.Contains(err.Error(), "either") {
			t.Errorf("%s: %v", []string{"status", "logs"}[i], err)
		}
	}
}

// TestStatusConfigWithKeysAsksSocket: on the gateway's own machine,
// `toolgate status --config FILE` of a gateway with API keys and a
// toolgate.http.addr answers from the status socket of the gateway on the
// data folder serving FILE (its user's only: no key), not those serving
// other configs; it asked the HTTP front and ended with 401 and "put one
// in $TOOLGATE_KEY", where `toolgate status` alone answered.
func TestStatusConfigWithKeysAsksSocket(t *testing.T) {
	t.Setenv(envKey, "")
	data := t.TempDir()
	createKey(t, data, "--name", "ops", "--admin")
	cfg := fakeConfig(t, map[string]string{"fake": backendtest.ModeNormal}, nil)
	addr := freeAddr(t)
	withSettings(t, cfg, map[string]any{"http": map[string]any{"addr": addr}})
	serve := toolgateCmd(t, data, "serve", "--config", cfg, "--mode", "bm25")
	serve.Stderr = testLog(t, "toolgate: ")
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = serve.Process.Signal(os.Interrupt); _ = serve.Wait() })
	waitHealthy(t, "http://"+addr+"/healthz", 2*time.Minute)
	other, _ := startGateway(t, data, fakeConfig(t, map[string]string{"other": backendtest.ModeNormal}, nil))

	out, stderr, err := runToolgate(t, data, "status", "--config", cfg, "--json")
	if err != nil {
		t.Fatalf("status --config %s: %v, want exit status 0\n%s%s", cfg, err, out, stderr)
	}
	reps := decodeReports(t, out)
	if len(reps) != 1 || reps[0].Process == nil || reps[0].Process.Addr != addr {
		t.Errorf("status --config: %d reports %+v, want the one of the gateway at %s (not %s's)", len(reps), reps, addr, other)
	}
}

// TestStatusConfigOtherGatewayOnDataFolder: with --config FILE, a gateway on
// the data folder that serves another config is not FILE's. Every config
// without a dataDir shares the default data folder, so one client's gateway
// there was printed as FILE's, exit 0 (status -c FILE, FILE naming no
// address), or was the gateway at FILE's toolgate.http.addr (a config copied
// with its address: printed as FILE's with an admin key, a 401 "put one in
// $TOOLGATE_KEY" without), and health -c FILE said "no gateway runs on the
// data folder … either" beside it. Each now says that no gateway there
// serves FILE, and what the one there serves; FILE's own is found as before.
func TestStatusConfigOtherGatewayOnDataFolder(t *testing.T) {
	t.Setenv(envKey, "")
	data := t.TempDir()
	admin := createKey(t, data, "--name", "ops", "--admin")
	cfgA := fakeConfig(t, map[string]string{"a": backendtest.ModeNormal}, nil)
	addr, _ := startGateway(t, data, cfgA)
	cfgB := fakeConfig(t, map[string]string{"b": backendtest.ModeNormal}, nil)
	closed := freeAddr(t) // nothing listens there: the default address
	dataDir := func(*config.File) string { return data }
	var out bytes.Buffer

	err := runStatus(context.Background(), &out, statusFlags{config: cfgB, dataDir: dataDir, timeout: 5 * time.Second, fallback: closed})
	if err == nil || !strings.Contains(err.Error(), "no gateway on the data folder "+data+" serves "+cfgB) ||
		!strings.Contains(err.Error(), "serves "+cfgA) || out.Len() > 0 {
		t.Errorf("status --config B, A's gateway alone on the data folder: %v\n%s", err, out.String())
	}
	err = runHealth(context.Background(), &out, healthFlags{config: cfgB, dataDir: dataDir, timeout: 5 * time.Second, fallback: closed})
	if err == nil || !strings.Contains(err.Error(), "no gateway on the data folder "+data+" serves "+cfgB) ||
		strings.Contains(err.Error(), "no gateway runs on the data folder") || out.Len() > 0 {
		t.Errorf("health --config B, A's gateway alone on the data folder: %v\n%s", err, out.String())
	}
	// B written with A's address: that gateway is A's, with a key or without.
	withSettings(t, cfgB, map[string]any{"http": map[string]any{"addr": addr}})
	for _, key := range []string{"", admin} {
		t.Setenv(envKey, key)
		err = runStatus(context.Background(), &out, statusFlags{config: cfgB, dataDir: dataDir, timeout: 5 * time.Second})
		if err == nil || !strings.Contains(err.Error(), "the gateway at "+addr+", pid ") ||
			!strings.Contains(err.Error(), "serves another config ("+cfgA+"), not "+cfgB) || out.Len() > 0 {
			t.Errorf("status --config B (key %t), A's gateway at B's address: %v\n%s", key != "", err, out.String())
		}
		err = runHealth(context.Background(), &out, healthFlags{config: cfgB, dataDir: dataDir, timeout: 5 * time.Second})
		if err == nil || !strings.Contains(err.Error(), "serves another config ("+cfgA+"), not "+cfgB) || strings.Contains(err.Error(), "\n") || out.Len() > 0 {
			t.Errorf("health --config B (key %t), A's gateway at B's address: %v\n%s", key != "", err, out.String())
		}
	}
	// A's own gateway is A's.
	t.Setenv(envKey, "")
	if err := runStatus(context.Background(), &out, statusFlags{config: cfgA, dataDir: dataDir, timeout: 5 * time.Second, fallback: closed}); err != nil ||
		!strings.Contains(out.String(), "config: "+cfgA) {
		t.Errorf("status --config A: %v\n%s", err, out.String())
	}
	out.Reset()
	if err := runHealth(context.Background(), &out, healthFlags{config: cfgA, dataDir: dataDir, timeout: 5 * time.Second, fallback: closed}); err != nil ||
		out.String() != "ok (http://"+addr+"/healthz)\n" {
		t.Errorf("health --config A: %v\n%s", err, out.String())
	}
}

// TestStatusConfigGatewayNotAnswering: with --config FILE, a gateway on
// the data folder that does not answer its socket may be FILE's: what status
// says of the data folder says that which config it serves is not known,
// not that it serves another.
func TestStatusConfigGatewayNotAnswering(t *testing.T) {
	t.Setenv(envKey, "")
	data := t.TempDir()
	stuckSocket(t, data, "4242-x.sock")
	cfg := fakeConfig(t, map[string]string{"b": backendtest.ModeNormal}, nil)
	var out bytes.Buffer
	err := runStatus(context.Background(), &out, statusFlags{config: cfg, dataDir: func(*config.File) string { return data }, timeout: 500 * time.Millisecond, fallback: freeAddr(t)})
	if err == nil || !strings.Contains(err.Error(), "no gateway on the data folder "+data+" serves "+cfg) ||
		!strings.Contains(err.Error(), "4242-x.sock does not answer, so which config it serves is not known") || out.Len() > 0 {
		t.Errorf("status --config, a gateway on the data folder that does not answer: %v\n%s", err, out.String())
	}
}

// TestConfigThroughSymlink: a config named through a symlink (a dotfiles
// folder linked into ~/.config, a release folder's `current` link) is the
// file its gateway serves: status, health and connect took the gateway
// serving the file by its own path for another config's ("serves another
// config (…/real/toolgate.json), not …/link.json"), exit 1.
func TestConfigThroughSymlink(t *testing.T) {
	t.Setenv(envKey, "")
	dir := t.TempDir()
	real := filepath.Join(dir, "real.json")
	if err := os.WriteFile(real, []byte(`{"mcpServers": {"one": {"command": "true"}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.json")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	dataDir := func(*config.File) string { return data }
	addr := fakeGatewayServing(t, real, http.StatusOK)
	var out bytes.Buffer
	if err := runStatus(context.Background(), &out, statusFlags{config: link, dataDir: dataDir, timeout: 2 * time.Second, fallback: addr}); err != nil || !strings.Contains(out.String(), "pid 4242") {
		t.Errorf("status --config LINK of the gateway serving its file: %v\n%s", err, out.String())
	}
	out.Reset()
	if err := runHealth(context.Background(), &out, healthFlags{config: link, dataDir: dataDir, timeout: 2 * time.Second, fallback: addr}); err != nil || out.String() != "ok (http://"+addr+"/healthz)\n" {
		t.Errorf("health --config LINK of the gateway serving its file: %v\n%s", err, out.String())
	}
	if _, _, err := bridgeURL(context.Background(), &globals{dataDir: data}, connectFlags{config: link, fallback: addr}); err != nil {
		t.Errorf("connect --config LINK of the gateway serving its file: %v", err)
	}
}

// listenSocket listens on data's status socket name.
func listenSocket(t *testing.T, data, name string) net.Listener {
	t.Helper()
	if err := os.MkdirAll(dirs.Sockets(data), 0o700); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", filepath.Join(dirs.Sockets(data), name))
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// stuckSocket is a status socket named name on data's run/ that takes
// connections and answers none: a gateway stopped (SIGSTOP) or stuck.
func stuckSocket(t *testing.T, data, name string) {
	t.Helper()
	ln := listenSocket(t, data, name)
	var mu sync.Mutex
	var held []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	})
	go func() { // takes connections, answers none
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
}

// socketGateway is a gateway's stand-in on data's status socket name,
// whose GET /status reports p and no backend.
func socketGateway(t *testing.T, data, name string, p gateway.ProcessInfo) {
	t.Helper()
	ln := listenSocket(t, data, name)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		json.NewEncoder(w).Encode(gateway.StatusReport{Process: &p})
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
}

// TestHealthConfigServedOnStdio: health -c FILE whose gateway on the data
// folder serves FILE on stdio (an MCP client's, with no HTTP front to ask)
// said that no gateway there served FILE, and then named that gateway as
// serving it. It now says that it serves FILE on stdio only, and what
// reports it.
func TestHealthConfigServedOnStdio(t *testing.T) {
	t.Setenv(envKey, "")
	data := t.TempDir()
	cfg := filepath.Join(t.TempDir(), "toolgate.json")
	if err := os.WriteFile(cfg, []byte(`{"mcpServers": {"one": {"command": "true"}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	socketGateway(t, data, "4242-x.sock", gateway.ProcessInfo{PID: 4242, Transport: "stdio", Config: []string{cfg}})
	free := freeAddr(t)
	var out bytes.Buffer
	err := runHealth(context.Background(), &out, healthFlags{config: cfg, dataDir: func(*config.File) string { return data }, timeout: 2 * time.Second, fallback: free})
	want := "no gateway on the data folder " + data + " serves " + cfg + " over HTTP (pid 4242 (stdio, no client yet) serves it on stdio, with no HTTP front to ask: `toolgate status --config " + cfg + "` reports it, from its status socket): start one (toolgate serve --config " + cfg + " --http " + free + ")"
	if err == nil || !strings.HasSuffix(err.Error(), want) || out.Len() > 0 {
		t.Errorf("health --config FILE served on stdio alone: %v\nwant it to end %q", err, want)
	}
}

// TestStatusConfigAddrBesideStuckGateway: status -c FILE (FILE with a
// toolgate.http.addr) asks FILE's gateway on its status socket; another
// gateway on the data folder that does not answer its own took the whole
// --timeout, so FILE's was not asked, nor its address, and status said
// `no gateway answered at ADDR: context deadline exceeded`, start one,
// exit 1, of a gateway that was up.
func TestStatusConfigAddrBesideStuckGateway(t *testing.T) {
	t.Setenv(envKey, "")
	data := t.TempDir()
	cfg := filepath.Join(t.TempDir(), "toolgate.json")
	addr := freeAddr(t)
	if err := os.WriteFile(cfg, []byte(`{"mcpServers": {"one": {"command": "true"}}, "toolgate": {"http": {"addr": "`+addr+`"}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	stuckSocket(t, data, "1-x.sock") // asked first
	socketGateway(t, data, "4242-y.sock", gateway.ProcessInfo{PID: 4242, Transport: "http", Addr: addr, Config: []string{cfg}})
	var out bytes.Buffer
	err := runStatus(context.Background(), &out, statusFlags{config: cfg, dataDir: func(*config.File) string { return data }, timeout: 500 * time.Millisecond})
	if err != nil || !strings.Contains(out.String(), "pid 4242 (http "+addr+")") {
		t.Errorf("status --config FILE beside a gateway that does not answer: %v\n%s", err, out.String())
	}
}

// TestStatusEnvConfigSaysOthers: with $TOOLGATE_CONFIG exported (for the
// commands that edit the file), a plain `toolgate status` shows only the
// gateways serving that file: the others on the data folder (an MCP
// client's stdio gateway of another config) were left out without a word,
// exit 0. A note on stderr now names them and how to see every one; and
// when none serves the file, the error says where the file came from.
func TestStatusEnvConfigSaysOthers(t *testing.T) {
	t.Setenv(envKey, "")
	data := t.TempDir()
	dir := t.TempDir()
	mine, theirs := filepath.Join(dir, "mine.json"), filepath.Join(dir, "theirs.json")
	for _, c := range []string{mine, theirs} {
		if err := os.WriteFile(c, []byte(`{"mcpServers": {"one": {"command": "true"}}}`), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	socketGateway(t, data, "4242-x.sock", gateway.ProcessInfo{PID: 4242, Transport: "stdio", Config: []string{mine}})
	socketGateway(t, data, "4343-x.sock", gateway.ProcessInfo{PID: 4343, Transport: "stdio", Config: []string{theirs}})
	dataDir := func(*config.File) string { return data }
	var out, errw bytes.Buffer
	err := runStatus(context.Background(), &out, statusFlags{config: mine, configFromEnv: true, stderr: &errw, dataDir: dataDir, timeout: 2 * time.Second})
	want := "note: status shows the gateways on the data folder " + data + " that serve $TOOLGATE_CONFIG (" + mine + "); 1 other runs there: pid 4343 (stdio, no client yet) serves " + theirs + ". `toolgate status --config ''` shows every one\n"
	if err != nil || !strings.Contains(out.String(), "pid 4242") || strings.Contains(out.String(), "pid 4343") || errw.String() != want {
		t.Errorf("status with $TOOLGATE_CONFIG: %v\n%s\nstderr %q\nwant %q", err, out.String(), errw.String(), want)
	}
	// --config given: what was asked, no note.
	out.Reset()
	errw.Reset()
	if err := runStatus(context.Background(), &out, statusFlags{config: mine, stderr: &errw, dataDir: dataDir, timeout: 2 * time.Second}); err != nil || errw.Len() > 0 {
		t.Errorf("status --config: %v, stderr %q", err, errw.String())
	}
	// None serves $TOOLGATE_CONFIG: the error says so.
	other := filepath.Join(dir, "other.json")
	if err := os.WriteFile(other, []byte(`{"mcpServers": {"one": {"command": "true"}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	err = runStatus(context.Background(), &out, statusFlags{config: other, configFromEnv: true, stderr: &errw, dataDir: dataDir, timeout: 2 * time.Second, fallback: freeAddr(t)})
	if err == nil || !strings.Contains(err.Error(), "serves "+theirs+"); "+other+" is $TOOLGATE_CONFIG: `toolgate status --config ''` asks every gateway on the data folder") {
		t.Errorf("status with $TOOLGATE_CONFIG that none serves: %v", err)
	}
}

// TestStatusConfigStartOneNamesFile: status -c FILE with no gateway
// anywhere said to start one with `toolgate serve --config FILE --http
// ADDR`, FILE written as such, and so did health -c FILE of a FILE with an
// address (it named the file of one without).
func TestStatusConfigStartOneNamesFile(t *testing.T) {
	t.Setenv(envKey, "")
	data := t.TempDir()
	cfg := filepath.Join(t.TempDir(), "my team.json") // quoted in the command
	closed := freeAddr(t)
	if err := os.WriteFile(cfg, []byte(`{"mcpServers": {"one": {"command": "true"}}, "toolgate": {"http": {"addr": "`+closed+`"}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err := runStatus(context.Background(), &out, statusFlags{config: cfg, dataDir: func(*config.File) string { return data }, timeout: 2 * time.Second})
	if want := "(start one with `toolgate serve --config " + shellword.Join(cfg) + " --http " + closed + "`, or point --addr at the one running)"; err == nil || !strings.HasSuffix(err.Error(), want) {
		t.Errorf("status --config FILE, none running: %v\nwant it to end %q", err, want)
	}
	err = runHealth(context.Background(), &out, healthFlags{config: cfg, dataDir: func(*config.File) string { return data }, timeout: 2 * time.Second})
	if want := ": start one (toolgate serve --config " + shellword.Join(cfg) + " --http " + closed + ")"; err == nil || !strings.HasSuffix(err.Error(), want) {
		t.Errorf("health --config FILE, none running: %v\nwant it to end %q", err, want)
	}
}

// TestStatusConfigLocalhostOtherGateway: FILE's toolgate.http.addr written
// localhost:PORT while another config's gateway on the data folder holds
// 127.0.0.1:PORT (a config copied with its address, then edited): status
// and health compared the two as text, took that gateway for FILE's and
// printed its status as FILE's (ok), exit 0. The host is resolved now.
func TestStatusConfigLocalhostOtherGateway(t *testing.T) {
	t.Setenv(envKey, "")
	data := t.TempDir()
	dir := t.TempDir()
	other, cfg := filepath.Join(dir, "other.json"), filepath.Join(dir, "team.json")
	addr := freeAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	for file, a := range map[string]string{other: addr, cfg: "localhost:" + port} {
		if err := os.WriteFile(file, []byte(`{"mcpServers": {"one": {"command": "true"}}, "toolgate": {"http": {"addr": "`+a+`"}}}`), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	socketGateway(t, data, "4242-x.sock", gateway.ProcessInfo{PID: 4242, Transport: "http", Addr: addr, Config: []string{other}})
	dataDir := func(*config.File) string { return data }
	want := "the gateway at localhost:" + port + ", pid 4242, serves another config (" + other + "), not " + cfg
	var out bytes.Buffer
	if err := runStatus(context.Background(), &out, statusFlags{config: cfg, dataDir: dataDir, timeout: 2 * time.Second}); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("status --config FILE (localhost), another config's gateway at 127.0.0.1: %v\nwant %q", err, want)
	}
	if err := runHealth(context.Background(), &out, healthFlags{config: cfg, dataDir: dataDir, timeout: 2 * time.Second}); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("health --config FILE (localhost), another config's gateway at 127.0.0.1: %v\nwant %q", err, want)
	}
}

// TestConnectConfigServedOnStdio: connect -c FILE whose only gateway on the
// data folder serves FILE on stdio (an MCP client's, which connect cannot
// relay to) said `no gateway on the data folder … serves FILE (none runs
// there)` once nothing answered at the default address; it now names that
// gateway, and why it is no use to connect.
func TestConnectConfigServedOnStdio(t *testing.T) {
	t.Setenv(envKey, "")
	data := t.TempDir()
	cfg := filepath.Join(t.TempDir(), "my toolgate.json") // quoted in the command
	if err := os.WriteFile(cfg, []byte(`{"mcpServers": {"one": {"command": "true"}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	socketGateway(t, data, "4242-x.sock", gateway.ProcessInfo{PID: 4242, Transport: "stdio", Config: []string{cfg}})
	nowhere := freeAddr(t)
	_, front, err := bridgeURL(context.Background(), &globals{dataDir: data, logger: slog.New(slog.DiscardHandler)}, connectFlags{config: cfg, fallback: nowhere})
	want := "serves " + cfg + " over HTTP (pid 4242 (stdio, no client yet) serves it on stdio, which connect cannot relay to)"
	if err != nil || front.addr != nowhere || !strings.Contains(front.down, want) || strings.Contains(front.down, "none runs there") ||
		!strings.Contains(front.down, "(toolgate serve --config "+shellword.Join(cfg)+" --http ADDR)") {
		t.Errorf("connect --config FILE served on stdio alone: %q at %s, %v\nwant %q", front.down, front.addr, err, want)
	}
}
