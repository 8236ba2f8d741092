package backend

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/gateway/backend/backendtest"
	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/internal/tracemeta"
)

func TestMain(m *testing.M) {
	if IsReaper() { // before IsChild: a reaper's environment is its backend's
		if os.Getenv(envReaperUnsettled) != "" {
			unsettle()
		}
		ReaperMain()
	}
	if backendtest.IsChild() {
		backendtest.Main()
		return
	}
	os.Exit(m.Run())
}

// testOptions are fast, deterministic defaults for tests: no restarts.
// The discover probe waits as long as a gateway's does: a server of protocol
// 2026-07-28 (go-sdk's) handles server/discover and the probe's ping
// concurrently, and on a loaded machine its discover answer came more than
// 300 ms after the ping's; the probe then fell back to initialize, which
// the server refused as a duplicate ("duplicate "initialize" received"),
// and the backend was down. A test of a legacy server that wants its
// fallback sooner sets a shorter one.
func testOptions(l *testenv.LogBuffer) *Options {
	o := &Options{
		ConnectTimeout: 30 * time.Second,
		CallTimeout:    30 * time.Second,
		ProbeTimeout:   DefaultProbeTimeout,
		StopGrace:      time.Second,
		KillAfter:      2 * time.Second,
		RestartDelays:  []time.Duration{},
	}
	if l != nil {
		o.Logger = l.Logger()
	}
	return o
}

func named(s config.Server, name string) config.Server {
	s.Name = name
	return s
}

// startPool starts a pool and closes it when the test ends.
func startPool(t *testing.T, servers []config.Server, o *Options) *Pool {
	t.Helper()
	p := New(servers, o)
	t.Cleanup(func() { p.Close() })
	p.Start(context.Background())
	return p
}

func statusOf(t *testing.T, p *Pool, name string) Status {
	t.Helper()
	for _, s := range p.Status() {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no status for %q", name)
	return Status{}
}

// inFlight is the number of calls under way on name (Status.InFlight).
func inFlight(t *testing.T, p *Pool, name string) int {
	t.Helper()
	return statusOf(t, p, name).InFlight
}

// staysDown reports whether name's supervisor gave up restarting it.
func staysDown(p *Pool, name string) func() bool {
	return func() bool {
		b := p.roster.Load().byName[name]
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.staysDown
	}
}

// hangs asks a backend in mode "hang" how many hang calls it holds and how
// many were cancelled (backendtest.HangCount).
func hangs(t *testing.T, p *Pool, name string) string {
	t.Helper()
	res, err := p.CallTool(context.Background(), name, "hangs", nil)
	if err != nil {
		t.Fatalf("hangs on %s: %v", name, err)
	}
	return textOf(t, res)
}

func textOf(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func TestStartMixed(t *testing.T) {
	l := &testenv.LogBuffer{}
	cwd := t.TempDir()
	servers := []config.Server{
		named(backendtest.Command(t, "normal"), "alpha"),
		named(backendtest.Command(t, "crash-at-start"), "broken"),
		named(backendtest.Command(t, "garbage-stdout"), "chatty"),
		{Name: "missing", Type: "stdio", Command: "toolgate-no-such-command-xyz"},
		{Name: "missingpath", Type: "stdio", Command: "./toolgate-no-such/server", Cwd: cwd},
		// A whole command line in "command", as a shell would take it.
		{Name: "cmdline", Type: "stdio", Command: "sh ./serve.sh --port 3", Args: []string{"x"}},
		// Variables of their entries unset: never started (sh would run).
		{Name: "unset", Type: "stdio", Command: "sh", Unset: []config.UnsetVar{{Name: "GH_TOKEN", Field: "env.GITHUB_TOKEN"}}},
		{Name: "unsetremote", Type: "http", Unset: []config.UnsetVar{{Name: "API_URL", Field: "url"}}},
		named(backendtest.Command(t, "ignore-discover"), "legacy"),
		named(backendtest.Command(t, "normal"), "omega"),
		{Name: "off", Command: "whatever", Disabled: true},
	}
	p := startPool(t, servers, testOptions(l))

	got := map[string]State{}
	for _, s := range p.Status() {
		got[s.Name] = s.State
	}
	want := map[string]State{"alpha": StateUp, "broken": StateDown, "chatty": StateUp, "missing": StateDown, "missingpath": StateDown, "cmdline": StateDown, "unset": StateDown, "unsetremote": StateDown, "legacy": StateUp, "omega": StateUp}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("states (-want +got):\n%s\nlogs:\n%s", diff, l)
	}
	for _, tc := range []struct {
		name string
		want []string
	}{
		{"broken", []string{`backend "broken"`, "exit status 3", "last stderr lines", "cannot open /nonexistent/db.sqlite", "check command"}},
		{"missing", []string{`backend "missing"`, "toolgate-no-such-command-xyz", "not found", "check command/PATH"}},
		// A path: the folder it is read from, not PATH.
		{"missingpath", []string{`command "` + filepath.Join(cwd, "toolgate-no-such/server") + `" not found (a relative path is read from the server's cwd ` + cwd + `): check command`}},
		{"cmdline", []string{`backend "cmdline": command "sh ./serve.sh --port 3" is not found, and reads as a whole command line: "command" names the program alone and "args" the rest: "command": "sh", "args": ["./serve.sh","--port","3","x"]`}},
		{"unset", []string{`backend "unset": variable ${GH_TOKEN} (env.GITHUB_TOKEN) is not set in toolgate's environment: set it where toolgate starts`}},
		{"unsetremote", []string{`backend "unsetremote": variable ${API_URL} (url) is not set`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := statusOf(t, p, tc.name)
			for _, w := range tc.want {
				if !strings.Contains(st.Err, w) {
					t.Errorf("error %q does not contain %q", st.Err, w)
				}
			}
		})
	}
	tools := p.Tools()
	for _, name := range []string{"alpha", "legacy", "omega"} {
		var names []string
		for _, tl := range tools[name] {
			names = append(names, tl.Name)
		}
		slices.Sort(names)
		if diff := cmp.Diff([]string{"add", "echo", "sleep"}, names); diff != "" {
			t.Errorf("%s tools (-want +got):\n%s", name, diff)
		}
	}
	if _, ok := tools["broken"]; ok {
		t.Errorf("tools of a server that never connected: %v", tools["broken"])
	}
	if got := statusOf(t, p, "legacy").Protocol; got != LegacyProtocolVersion {
		t.Errorf("legacy protocol = %q, want %q", got, LegacyProtocolVersion)
	}
	if !strings.Contains(l.String(), "ignored non-JSON line on backend stdout") {
		t.Errorf("garbage on stdout was not logged:\n%s", l)
	}
	// The garbage-printing backend still answers.
	res, err := p.CallTool(context.Background(), "chatty", "echo", map[string]any{"text": "hi"})
	if err != nil || textOf(t, res) != "hi" {
		t.Fatalf("echo on chatty = %v, %v", res, err)
	}
}

func TestIgnoreDiscoverConnects(t *testing.T) {
	// With the probe bounded, a server that drops server/discover connects
	// well inside the connect timeout (which would otherwise expire).
	o := testOptions(nil)
	o.ConnectTimeout = 10 * time.Second
	o.ProbeTimeout = 200 * time.Millisecond
	p := startPool(t, []config.Server{backendtest.Command(t, "ignore-discover")}, o)
	st := statusOf(t, p, "fake")
	if st.State != StateUp {
		t.Fatalf("state %s: %s", st.State, st.Err)
	}
	res, err := p.CallTool(context.Background(), "fake", "echo", map[string]any{"text": "legacy"})
	if err != nil || textOf(t, res) != "legacy" {
		t.Fatalf("echo = %v, %v", res, err)
	}
}

func TestSlowStartKeepsModernProtocol(t *testing.T) {
	// A modern server slower to start than the probe timeout is not taken for
	// a legacy one: the probe's clock starts when it answers the ping. Nor is
	// one that has not read the probe at the ceiling (half the connect
	// timeout): it is still starting, not ignoring it (a Python SDK server
	// importing for 20 s on a loaded machine was taken for a legacy one and
	// never came up). A legacy one still falls back, once it reads, after
	// the probe timeout. The probe timeout is also what the modern server
	// has to answer server/discover once it reads: 50 ms was too short on a
	// loaded machine (the discover answer came later than that after the
	// ping's, and the fallback's initialize was refused as a duplicate).
	// The servers serve from a moment delay after the pool starts
	// (EnvStartAt), not delay after their own process start: a slow start
	// of the process overlaps the wait instead of adding to it.
	const probe = time.Second
	for _, c := range []struct {
		name           string
		connect, delay time.Duration
	}{
		{"slower than the probe timeout", 30 * time.Second, 2 * probe},
		// The delay past the ceiling (6 s), and the connect timeout past
		// the delay and the probe timeout by 4.5 s. With 8 s and a delay
		// of 4.5 s counted from the process start, a loaded full run of
		// the race build ran out of connect time (no stderr line from
		// either server within the 8 s: their processes were slow to start).
		{"slower than the ceiling", 12 * time.Second, 6500 * time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel() // each waits for its delay: at once, not one after the other
			o := testOptions(nil)
			o.ConnectTimeout = c.connect
			o.ProbeTimeout = probe
			delay := backendtest.EnvStartAt + "=" + time.Now().Add(c.delay).Format(time.RFC3339Nano)
			servers := []config.Server{
				named(backendtest.Command(t, "normal", delay), "slow"),
				named(backendtest.Command(t, "ignore-discover", delay), "slowlegacy"),
			}
			p := startPool(t, servers, o)
			for name, want := range map[string]string{"slow": "2026-07-28", "slowlegacy": LegacyProtocolVersion} {
				st := statusOf(t, p, name)
				if st.State != StateUp || st.Protocol != want {
					t.Errorf("%s: state %s protocol %q (want up, %q): %s", name, st.State, st.Protocol, want, st.Err)
				}
			}
		})
	}
}

func TestLateDiscoverAnswerIsWaitedForNextStart(t *testing.T) {
	// A server whose stdin is read at once by something in front of it
	// (`docker run -i`; here cat) gives the probe no sign of starting: at
	// the ceiling it falls back to initialize. The discover answer that
	// comes after says the server is modern: the next start waits for it.
	// The server refuses the initialize after its discover answer (go-sdk
	// and the Python SDK mean to; strict-discover makes the fake do it
	// every time): the first start fails (the same connect starts it again,
	// patient, connectProbed, but the 5.5 s this one takes to start outlast
	// the connect timeout), the supervisor's restart comes up, and so does
	// a restart on request.
	l := &testenv.LogBuffer{}
	o := testOptions(l)
	// The first start answers discover only once the fallback's initialize
	// comes (late-discover), whenever the probe gives up: its answer is
	// late by the fallback itself, not by a delay that a slow start of the
	// process could outrun or overrun. Every start serves 5.5 s after its
	// process started (counted from the fork: a slow exec overlaps it),
	// past the probe's ceiling (5 s): a start that did not wait for the
	// discover answer would fall back again. The connect timeout (10 s)
	// leaves 4.5 s for the handshake once it serves. With a delay of 5 s
	// counted from the server's main and a connect timeout of 8 s, the
	// race build at load 10 took 2 to 7 s to reach main: the first start's
	// late answer came after its connect timeout, and every restart ran
	// out of it (3 runs in 3 failed).
	o.ConnectTimeout = 10 * time.Second // ceiling 5s
	o.ProbeTimeout = 50 * time.Millisecond
	// Restarts to spare: under load a start can still run out of the
	// connect timeout, and the start after it is then the one refused.
	o.RestartDelays = []time.Duration{10 * time.Millisecond, 10 * time.Millisecond, 10 * time.Millisecond}
	srv := named(backendtest.Command(t, backendtest.ModeStrictDiscover, backendtest.EnvStartDelay+"=5500ms",
		backendtest.EnvFirstMark+"="+filepath.Join(t.TempDir(), "started"), backendtest.EnvFirstModes+"="+backendtest.ModeLateDiscover), "docker")
	srv.Args = append([]string{"-c", `cat | exec "$0" "$@"`, srv.Command}, srv.Args...)
	srv.Command = "sh"
	p := startPool(t, []config.Server{srv}, o)
	up := func(after string) {
		t.Helper()
		if !testenv.Poll(testenv.Timeout, func() bool {
			st := statusOf(t, p, "docker")
			return st.State == StateUp && st.Protocol == "2026-07-28"
		}) {
			st := statusOf(t, p, "docker")
			t.Fatalf("%s: state %s protocol %q (want up, 2026-07-28): %s\n%s", after, st.State, st.Protocol, st.Err, l)
		}
	}
	late := func() {
		t.Helper()
		if n := strings.Count(l.String(), "backend answered server/discover after the fallback"); n != 1 {
			t.Errorf("the late discover answer logged %d times, want once (no start after it fell back):\n%s", n, l)
		}
	}
	up("after the supervisor's restart")
	late()
	if !strings.Contains(l.String(), ": initialize after server/discover, refused") {
		t.Errorf("the first start's initialize was not refused:\n%s", l)
	}
	if err := p.Restart("docker"); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the restart on request under way", func() bool { return statusOf(t, p, "docker").State != StateUp })
	up("after a restart on request")
	late()
}

// A modern server that answers the probe's ping at once but
// server/discover only after the probe timeout (it lists its tools for it)
// is taken for a legacy one, and refuses the initialize the fallback sends:
// go-sdk's server as a duplicate (slow-discover), a stricter one as a
// method of the old protocol (strict-discover). The same connect starts it
// again and waits for its discover answer: it comes up, on the new
// protocol, with no restart. It stayed down (here, with no restarts; with
// them, every restart fell back and failed the same way).
func TestSlowDiscoverAnswerConnects(t *testing.T) {
	o := testOptions(nil)
	o.ProbeTimeout = 100 * time.Millisecond
	delay := backendtest.EnvDiscoverDelay + "=1s"
	p := startPool(t, []config.Server{
		named(backendtest.Command(t, backendtest.ModeSlowDiscover, delay), "slow"),
		named(backendtest.Command(t, backendtest.ModeSlowDiscover+","+backendtest.ModeStrictDiscover, delay), "strict"),
	}, o)
	for _, name := range []string{"slow", "strict"} {
		st := statusOf(t, p, name)
		if st.State != StateUp || st.Protocol != "2026-07-28" || st.Restarts != 0 {
			t.Errorf("%s: state %s, protocol %q, %d restarts (want up, 2026-07-28, none): %s", name, st.State, st.Protocol, st.Restarts, st.Err)
		}
		if res, err := p.CallTool(context.Background(), name, "echo", map[string]any{"text": "late"}); err != nil || textOf(t, res) != "late" {
			t.Errorf("%s: echo = %v, %v", name, res, err)
		}
	}
}

// A legacy stdio server that stops at a first message other than
// initialize (rmcp 0.8.5's: the server/discover probe does not
// parse, it writes "Error: connection closed: initialized request" and
// exits 1, answering nothing) comes up on the legacy protocol: it was down,
// every restart probing and failing the same way. Restarted, it is sent
// initialize first and comes up again.
func TestExitOnDiscoverConnects(t *testing.T) {
	var logs testenv.LogBuffer
	p := startPool(t, []config.Server{named(backendtest.Command(t, backendtest.ModeExitOnDiscover), "old")}, testOptions(&logs))
	st := statusOf(t, p, "old")
	if st.State != StateUp || st.Protocol != LegacyProtocolVersion {
		t.Fatalf("state %s, protocol %q (want up, %s): %s", st.State, st.Protocol, LegacyProtocolVersion, st.Err)
	}
	if res, err := p.CallTool(context.Background(), "old", "echo", map[string]any{"text": "old"}); err != nil || textOf(t, res) != "old" {
		t.Errorf("echo = %v, %v", res, err)
	}
	if err := p.Restart("old"); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "up again after the restart", func() bool {
		st := statusOf(t, p, "old")
		return st.State == StateUp && st.Restarts > 0
	})
	if st := statusOf(t, p, "old"); st.Protocol != LegacyProtocolVersion {
		t.Errorf("after the restart: protocol %q, want %s", st.Protocol, LegacyProtocolVersion)
	}
	if n := strings.Count(logs.String(), msgEndedOnDiscover); n != 1 {
		t.Errorf("%q logged %d times, want once (the restart sends initialize first):\n%s", msgEndedOnDiscover, n, logs.String())
	}
}

// The same over the remote transports, with servers that take
// server/discover at once and answer it 1 s late: each comes up, with no
// restart, and answers a call. A streamable HTTP server that speaks
// 2026-07-28 alone refused the legacy initialize of the fallback
// ("Unsupported protocol version") and stayed down, every restart failing
// the same way; the same connect now tries once more and waits for its
// discover answer. One that speaks both comes up on the legacy protocol,
// as does go-sdk's SSE server, which offers no 2026-07-28.
func TestSlowDiscoverRemoteConnects(t *testing.T) {
	t.Setenv(backendtest.EnvDiscoverDelay, "1s") // read by the in-process servers
	o := testOptions(nil)
	o.ProbeTimeout = 100 * time.Millisecond
	for _, tc := range []struct {
		name, transport, modes, protocol string
	}{
		{"new-only", config.TypeHTTP, "stateless,slow-discover,new-protocol-only", "2026-07-28"},
		{"both", config.TypeHTTP, "stateless,slow-discover", LegacyProtocolVersion},
		{"sse", config.TypeSSE, "slow-discover", LegacyProtocolVersion},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := startPool(t, []config.Server{backendtest.NewHTTPServer(t, tc.transport, tc.modes).Config("slow", nil)}, o)
			st := statusOf(t, p, "slow")
			if st.State != StateUp || st.Protocol != tc.protocol || st.Restarts != 0 {
				t.Fatalf("state %s, protocol %q, %d restarts (want up, %s, none): %s", st.State, st.Protocol, st.Restarts, tc.protocol, st.Err)
			}
			if res, err := p.CallTool(context.Background(), "slow", "echo", map[string]any{"text": "late"}); err != nil || textOf(t, res) != "late" {
				t.Errorf("echo = %v, %v", res, err)
			}
		})
	}
}

func TestCallTools(t *testing.T) {
	p := startPool(t, []config.Server{backendtest.Command(t, "normal")}, testOptions(nil))
	ctx := context.Background()
	t.Run("echo", func(t *testing.T) {
		res, err := p.CallTool(ctx, "fake", "echo", map[string]any{"text": "hello"})
		if err != nil {
			t.Fatal(err)
		}
		if got := textOf(t, res); got != "hello" {
			t.Errorf("echo = %q", got)
		}
	})
	t.Run("add", func(t *testing.T) {
		res, err := p.CallTool(ctx, "fake", "add", map[string]any{"a": 2, "b": 40})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(map[string]any{"sum": 42.0}, res.StructuredContent); diff != "" {
			t.Errorf("add (-want +got):\n%s", diff)
		}
	})
	t.Run("tool error is a result", func(t *testing.T) {
		res, err := p.CallTool(ctx, "fake", "add", map[string]any{"a": "x"})
		if err != nil {
			t.Fatalf("got error %v, want an isError result", err)
		}
		if !res.IsError {
			t.Errorf("IsError = false for invalid arguments: %v", textOf(t, res))
		}
	})
	t.Run("pool not started", func(t *testing.T) {
		q := New([]config.Server{backendtest.Command(t, "normal")}, nil)
		defer q.Close()
		_, err := q.CallTool(ctx, "fake", "echo", nil)
		var ue *UnavailableError
		if !errors.As(err, &ue) {
			t.Fatalf("err = %v, want UnavailableError", err)
		}
	})
	t.Run("unknown server", func(t *testing.T) {
		_, err := p.CallTool(ctx, "nope", "echo", nil)
		var ue *UnavailableError
		if !errors.As(err, &ue) || !errors.Is(err, ErrUnknownServer) {
			t.Fatalf("err = %v, want UnavailableError wrapping ErrUnknownServer", err)
		}
	})
}

func TestEnvAllowlist(t *testing.T) {
	t.Setenv("TOOLGATE_TEST_SECRET", "s3cr3t-value-123")
	t.Setenv("LC_TOOLGATE_TEST", "kept")
	srv := backendtest.Command(t, "print-env", "OWN_VAR=own-value")
	p := startPool(t, []config.Server{srv}, testOptions(nil))
	res, err := p.CallTool(context.Background(), "fake", "env", nil)
	if err != nil {
		t.Fatal(err)
	}
	env := strings.Split(textOf(t, res), "\n")
	has := func(kv string) bool { return slices.Contains(env, kv) }
	if slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "TOOLGATE_TEST_SECRET=") }) {
		t.Errorf("the gateway's secret reached the child: %v", env)
	}
	for _, kv := range []string{"OWN_VAR=own-value", "LC_TOOLGATE_TEST=kept", "PATH=" + os.Getenv("PATH")} {
		if !has(kv) {
			t.Errorf("child env lacks %q: %v", kv, env)
		}
	}
}

func TestCallTimeout(t *testing.T) {
	srv := backendtest.Command(t, "hang")
	srv.CallTimeout = config.Duration{Duration: 300 * time.Millisecond}
	p := startPool(t, []config.Server{srv}, testOptions(nil))
	_, err := p.CallTool(context.Background(), "fake", "hang", nil)
	if !errors.Is(err, ErrCallTimeout) {
		t.Fatalf("err = %v, want ErrCallTimeout", err)
	}
	// Its status says so: a server that stopped answering (SIGSTOP, a
	// hang) looked up with no error.
	if st := statusOf(t, p, "fake"); st.State != StateUp || !strings.Contains(st.LastErr, `call "hang" on "fake": no answer within 300ms`) {
		t.Errorf("status after a timeout: %s, last error %q", st.State, st.LastErr)
	}
	// The backend was told (notifications/cancelled) and keeps serving.
	testenv.Eventually(t, "the backend cancelled the hang", func() bool { return hangs(t, p, "fake") == backendtest.HangCount(0, 1) })
	if res, err := p.CallTool(context.Background(), "fake", "echo", map[string]any{"text": "still here"}); err != nil || textOf(t, res) != "still here" {
		t.Fatalf("echo after timeout = %v, %v", res, err)
	}
}

func TestCrashMidCall(t *testing.T) {
	p := startPool(t, []config.Server{backendtest.Command(t, "crash-mid-call")}, testOptions(nil))
	_, err := p.CallTool(context.Background(), "fake", "crash", nil)
	var ue *UnavailableError
	if !errors.As(err, &ue) || ue.Server != "fake" {
		t.Fatalf("err = %v, want UnavailableError for fake", err)
	}
	if !strings.Contains(err.Error(), "exit status 2") {
		t.Errorf("err %q does not say how the process ended", err)
	}
	testenv.Eventually(t, "backend marked down", func() bool { return statusOf(t, p, "fake").State == StateDown })
	st := statusOf(t, p, "fake")
	if !strings.Contains(st.Err, "crash: exiting mid-call") {
		t.Errorf("status error %q lacks the last stderr line", st.Err)
	}
	if _, err := p.CallTool(context.Background(), "fake", "echo", nil); !errors.As(err, &ue) {
		t.Errorf("call on a down backend: err = %v, want UnavailableError", err)
	}
	if len(p.Tools()["fake"]) == 0 {
		t.Errorf("tools of a down backend were dropped")
	}
}

func TestRestartAfterCrash(t *testing.T) {
	o := testOptions(nil)
	o.RestartDelays = []time.Duration{50 * time.Millisecond}
	p := startPool(t, []config.Server{backendtest.Command(t, "crash-mid-call")}, o)
	pid := statusOf(t, p, "fake").PID
	_, err := p.CallTool(context.Background(), "fake", "crash", nil)
	if err == nil {
		t.Fatal("crash returned no error")
	}
	testenv.Eventually(t, "backend restarted", func() bool {
		st := statusOf(t, p, "fake")
		return st.State == StateUp && st.Restarts == 1 && st.PID != pid
	})
	if res, err := p.CallTool(context.Background(), "fake", "echo", map[string]any{"text": "back"}); err != nil || textOf(t, res) != "back" {
		t.Fatalf("echo after restart = %v, %v", res, err)
	}
	if st := statusOf(t, p, "fake"); st.Err != "" || !strings.Contains(st.LastErr, "exit status 2") {
		t.Errorf("after restart: Err %q, LastErr %q", st.Err, st.LastErr)
	}
	// The second crash exhausts the one restart: the backend stays down.
	_, _ = p.CallTool(context.Background(), "fake", "crash", nil)
	testenv.Eventually(t, "backend down for good", func() bool { return statusOf(t, p, "fake").State == StateDown })
}

func TestToolsChange(t *testing.T) {
	changes := make(chan []string, 10)
	o := testOptions(nil)
	o.OnToolsChanged = func(server string, tools []*mcp.Tool) {
		var names []string
		for _, tl := range tools {
			names = append(names, tl.Name)
		}
		slices.Sort(names)
		changes <- names
	}
	p := startPool(t, []config.Server{backendtest.Command(t, "tools-change")}, o)
	first := <-changes
	if diff := cmp.Diff([]string{"add", "add_tool", "echo", "sleep"}, first); diff != "" {
		t.Fatalf("first list (-want +got):\n%s", diff)
	}
	if _, err := p.CallTool(context.Background(), "fake", "add_tool", map[string]any{"name": "dynamic"}); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-changes:
		if diff := cmp.Diff([]string{"add", "add_tool", "dynamic", "echo", "sleep"}, got); diff != "" {
			t.Fatalf("list after change (-want +got):\n%s", diff)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("OnToolsChanged not called after list_changed")
	}
	if n := len(p.Tools()["fake"]); n != 5 {
		t.Errorf("Tools() has %d tools, want 5", n)
	}
}

func TestGrandchildKilledOnClose(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "grandchild.pid")
	srv := backendtest.Command(t, "spawn-grandchild", backendtest.EnvPIDFile+"="+pidFile)
	p := New([]config.Server{srv}, testOptions(nil))
	p.Start(context.Background())
	if st := statusOf(t, p, "fake"); st.State != StateUp {
		p.Close()
		t.Fatalf("state %s: %s", st.State, st.Err)
	}
	var gpid int
	testenv.Eventually(t, "grandchild pid file", func() bool {
		b, err := os.ReadFile(pidFile)
		if err != nil {
			return false
		}
		gpid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	})
	pid := statusOf(t, p, "fake").PID
	if !procAlive(gpid) {
		t.Fatalf("grandchild %d not running before Close", gpid)
	}
	p.Close()
	if procAlive(pid) {
		t.Errorf("backend %d alive after Close", pid)
	}
	testenv.Eventually(t, "grandchild gone", func() bool { return !procAlive(gpid) })
}

func TestStubbornBackendKilled(t *testing.T) {
	o := testOptions(nil)
	o.StopGrace = 100 * time.Millisecond
	o.KillAfter = 300 * time.Millisecond
	p := New([]config.Server{backendtest.Command(t, "stubborn")}, o)
	p.Start(context.Background())
	pid := statusOf(t, p, "fake").PID
	if pid == 0 {
		p.Close()
		t.Fatalf("no pid: %+v", statusOf(t, p, "fake"))
	}
	p.Close()
	if procAlive(pid) {
		t.Errorf("stubborn backend %d survived Close", pid)
	}
}

func TestHugeOutput(t *testing.T) {
	l := &testenv.LogBuffer{}
	o := testOptions(l)
	o.MaxMessageBytes = 1 << 20
	servers := []config.Server{
		named(backendtest.Command(t, "huge-output", backendtest.EnvHugeBytes+"=500000"), "fits"),
		named(backendtest.Command(t, "huge-output", backendtest.EnvHugeBytes+"=3000000"), "toobig"),
	}
	p := startPool(t, servers, o)
	res, err := p.CallTool(context.Background(), "fits", "huge", nil)
	if err != nil || len(textOf(t, res)) != 500000 {
		t.Fatalf("huge within the cap: err %v", err)
	}
	_, err = p.CallTool(context.Background(), "toobig", "huge", nil)
	if err == nil || !strings.Contains(err.Error(), "message size cap") {
		t.Fatalf("huge beyond the cap: err = %v, want a size cap error", err)
	}
	// The backend keeps serving.
	if res, err := p.CallTool(context.Background(), "toobig", "echo", map[string]any{"text": "ok"}); err != nil || textOf(t, res) != "ok" {
		t.Fatalf("echo after oversized response = %v, %v", res, err)
	}
}

func TestRemote(t *testing.T) {
	for _, transport := range []string{config.TypeHTTP, config.TypeSSE} {
		t.Run(transport, func(t *testing.T) {
			hs := backendtest.NewHTTPServer(t, transport, "tools-change")
			changes := make(chan int, 10)
			o := testOptions(nil)
			o.OnToolsChanged = func(_ string, tools []*mcp.Tool) { changes <- len(tools) }
			srv := hs.Config("remote", map[string]string{"Authorization": "Bearer test-token-123", "X-Toolgate-Test": "yes"})
			p := startPool(t, []config.Server{srv}, o)
			if st := statusOf(t, p, "remote"); st.State != StateUp {
				t.Fatalf("state %s: %s", st.State, st.Err)
			}
			res, err := p.CallTool(context.Background(), "remote", "echo", map[string]any{"text": "over " + transport})
			if err != nil || textOf(t, res) != "over "+transport {
				t.Fatalf("echo = %v, %v", res, err)
			}
			hdrs := hs.Headers()
			if len(hdrs) == 0 {
				t.Fatal("server saw no requests")
			}
			for i, h := range hdrs {
				if h.Get("Authorization") != "Bearer test-token-123" || h.Get("X-Toolgate-Test") != "yes" {
					t.Errorf("request %d lacks the configured headers: %v", i, h)
				}
			}
			if n := <-changes; n != 4 {
				t.Errorf("first tool list has %d tools, want 4", n)
			}
			if _, err := p.CallTool(context.Background(), "remote", "add_tool", map[string]any{"name": "later"}); err != nil {
				t.Fatal(err)
			}
			select {
			case n := <-changes:
				if n != 5 {
					t.Errorf("after list_changed: %d tools, want 5", n)
				}
			case <-time.After(20 * time.Second):
				t.Error("no OnToolsChanged after list_changed")
			}
		})
	}
}

func TestRemoteHugeOutput(t *testing.T) {
	t.Setenv(backendtest.EnvHugeBytes, "3000000") // read by the in-process server
	for _, transport := range []string{config.TypeHTTP, config.TypeSSE} {
		t.Run(transport, func(t *testing.T) {
			hs := backendtest.NewHTTPServer(t, transport, "huge-output")
			o := testOptions(nil)
			o.MaxMessageBytes = 1 << 20
			o.RestartDelays = []time.Duration{50 * time.Millisecond}
			p := startPool(t, []config.Server{hs.Config("remote", nil)}, o)
			_, err := p.CallTool(context.Background(), "remote", "huge", nil)
			if err == nil {
				t.Fatal("huge beyond the cap: no error")
			}
			t.Logf("huge beyond the cap: %v", err)
			var ue *UnavailableError
			if !errors.As(err, &ue) {
				t.Errorf("err = %v, want UnavailableError", err)
			}
			if transport == config.TypeHTTP && !strings.Contains(err.Error(), "message size cap") {
				t.Errorf("err = %v, want it to name the size cap", err)
			}
			// go-sdk drops the connection with the oversized event (legacy
			// SSE only says EOF); the supervisor reconnects.
			testenv.Eventually(t, "serving again", func() bool {
				res, err := p.CallTool(context.Background(), "remote", "echo", map[string]any{"text": "ok"})
				return err == nil && textOf(t, res) == "ok"
			})
		})
	}
}

func TestRemoteJSONBodyCap(t *testing.T) {
	t.Setenv(backendtest.EnvHugeBytes, "3000000")
	hs := backendtest.NewHTTPServer(t, config.TypeHTTP, "huge-output,json-response")
	o := testOptions(nil)
	o.MaxMessageBytes = 1 << 20
	p := startPool(t, []config.Server{hs.Config("remote", nil)}, o)
	if res, err := p.CallTool(context.Background(), "remote", "echo", map[string]any{"text": "small"}); err != nil || textOf(t, res) != "small" {
		t.Fatalf("echo = %v, %v", res, err)
	}
	_, err := p.CallTool(context.Background(), "remote", "huge", nil)
	if err == nil || !strings.Contains(err.Error(), "message size cap") {
		t.Fatalf("huge JSON body: err = %v, want a size cap error", err)
	}
}

func TestSSESurvivesConnectTimeout(t *testing.T) {
	// Legacy SSE streams die with the context given to Connect; the pool's
	// connect timeout must not end the session.
	// The connect must finish within the timeout: under CI's load with
	// -race it took up to 0.7 s (300 ms failed 7 runs in 160).
	const timeout = 3 * time.Second
	hs := backendtest.NewHTTPServer(t, config.TypeSSE, "normal")
	srv := hs.Config("remote", nil)
	srv.ConnectTimeout = config.Duration{Duration: timeout}
	start := time.Now()
	p := startPool(t, []config.Server{srv}, testOptions(nil))
	if st := statusOf(t, p, "remote"); st.State != StateUp {
		t.Fatalf("not up after Start: %+v", st)
	}
	// Time passing beyond the connect timeout is what is tested here (not
	// a wait for something to happen).
	time.Sleep(time.Until(start.Add(timeout + 500*time.Millisecond)))
	if res, err := p.CallTool(context.Background(), "remote", "echo", map[string]any{"text": "later"}); err != nil || textOf(t, res) != "later" {
		t.Fatalf("echo after the connect timeout passed = %v, %v (%+v)", res, err, statusOf(t, p, "remote"))
	}
}

// TestHTTPFallsBackToSSE: an entry of type "http" (the type an import or
// a URL alone gives) whose URL is an older HTTP+SSE server's stream is
// connected with that transport, as the protocol advises a client to do
// when the streamable POST is refused: it was down with "the url does not
// take POST". The fallback is said in the log and in the status's
// transport, and a restart falls back again (trying streamable HTTP
// first: TestDualServerBackOnStreamable), said at info level once.
func TestHTTPFallsBackToSSE(t *testing.T) {
	hs := backendtest.NewHTTPServer(t, config.TypeSSE, "normal")
	srv := hs.Config("legacy", nil)
	srv.Type = config.TypeHTTP
	logs := &testenv.LogBuffer{}
	p := startPool(t, []config.Server{srv}, testOptions(logs))
	if st := statusOf(t, p, "legacy"); st.State != StateUp || st.Transport != config.TypeSSE {
		t.Fatalf("status = %+v, want up over sse", st)
	}
	if res, err := p.CallTool(context.Background(), "legacy", "echo", map[string]any{"text": "old"}); err != nil || textOf(t, res) != "old" {
		t.Fatalf("echo = %v, %v", res, err)
	}
	if !strings.Contains(logs.String(), "the server speaks the older HTTP+SSE transport") {
		t.Errorf("the fallback is not logged:\n%s", logs)
	}
	if err := p.Restart("legacy"); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "up again after the restart", func() bool {
		st := statusOf(t, p, "legacy")
		return st.State == StateUp && st.Restarts > 0
	})
	if st := statusOf(t, p, "legacy"); st.Transport != config.TypeSSE {
		t.Errorf("after the restart: %+v", st)
	}
	if n := strings.Count(logs.String(), "level=INFO msg=\"the server speaks the older HTTP+SSE transport"); n != 1 {
		t.Errorf("the fallback logged at info %d times, want once (the restart's is no news):\n%s", n, logs)
	}
}

// TestDualServerBackOnStreamable: a server that speaks streamable HTTP and
// the older HTTP+SSE transport at one URL, and refused the streamable POST
// at first (a route not ready while it started, a proxy's 404 during a
// deploy), came up over SSE and stayed there, its restarts and reconnects
// too, until the gateway restarted. Each connect now tries streamable HTTP
// first, so a restart, and a reconnect after the server restarted, are
// back on it.
func TestDualServerBackOnStreamable(t *testing.T) {
	srv := backendtest.NewServer(backendtest.ParseModes(backendtest.ModeNormal))
	get := func(*http.Request) *mcp.Server { return srv }
	legacy := mcp.NewSSEHandler(get, nil)
	var streamable atomic.Pointer[mcp.StreamableHTTPHandler]
	fresh := func() { streamable.Store(mcp.NewStreamableHTTPHandler(get, nil)) }
	fresh()
	var ready atomic.Bool
	var posts atomic.Int32 // the streamable POSTs served
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodGet && r.Header.Get("Mcp-Session-Id") == "" || r.URL.Query().Get("sessionid") != "":
			legacy.ServeHTTP(w, r)
		case !ready.Load():
			http.Error(w, "404 page not found", http.StatusNotFound)
		default:
			if r.Method == http.MethodPost {
				posts.Add(1)
			}
			streamable.Load().ServeHTTP(w, r)
		}
	}))
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
	})
	o := testOptions(nil)
	o.RestartDelays = []time.Duration{10 * time.Millisecond}
	p := startPool(t, []config.Server{{Name: "dual", Type: config.TypeHTTP, URL: hs.URL + "/mcp"}}, o)
	if st := statusOf(t, p, "dual"); st.State != StateUp || st.Transport != config.TypeSSE {
		t.Fatalf("status = %+v, want up over sse (the streamable POST refused)", st)
	}
	ready.Store(true)
	echo := func(want string) {
		t.Helper()
		if res, err := p.CallTool(context.Background(), "dual", "echo", map[string]any{"text": want}); err != nil || textOf(t, res) != want {
			t.Fatalf("echo = %v, %v", res, err)
		}
	}
	if err := p.Restart("dual"); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "up over streamable HTTP after the restart", func() bool {
		st := statusOf(t, p, "dual")
		return st.State == StateUp && st.Restarts > 0 && st.Transport == config.TypeHTTP
	})
	before := posts.Load()
	echo("restarted")
	if posts.Load() == before {
		t.Fatal("the call did not go over streamable HTTP")
	}
	// Over SSE again, then the server restarts (its sessions and
	// connections gone): the reconnect is on streamable HTTP.
	ready.Store(false)
	if err := p.Restart("dual"); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "over sse again", func() bool {
		st := statusOf(t, p, "dual")
		return st.State == StateUp && st.Restarts > 1 && st.Transport == config.TypeSSE
	})
	ready.Store(true)
	fresh()
	hs.CloseClientConnections()
	testenv.Eventually(t, "reconnected over streamable HTTP", func() bool {
		st := statusOf(t, p, "dual")
		return st.State == StateUp && st.Transport == config.TypeHTTP
	})
	before = posts.Load()
	echo("reconnected")
	if posts.Load() == before {
		t.Fatal("the call did not go over streamable HTTP")
	}
}

func TestToolListLimits(t *testing.T) {
	o := testOptions(nil)
	o.MaxTools = 100
	servers := []config.Server{
		named(backendtest.Command(t, "many-tools", backendtest.EnvManyTools+"=50"), "fifty"),
		named(backendtest.Command(t, "many-tools", backendtest.EnvManyTools+"=150"), "absurd"),
	}
	p := startPool(t, servers, o)
	if st := statusOf(t, p, "fifty"); st.State != StateUp || st.Tools != 53 {
		t.Errorf("fifty: %+v", st)
	}
	for _, tl := range p.Tools()["fifty"] {
		if len(tl.Description) > maxDescription {
			t.Fatalf("description of %d bytes kept", len(tl.Description))
		}
	}
	if st := statusOf(t, p, "absurd"); st.State != StateDown || !strings.Contains(st.Err, "more than 100 tools") {
		t.Errorf("absurd: %+v", st)
	}
}

func TestRemoteDown(t *testing.T) {
	srv := config.Server{Name: "gone", Type: config.TypeHTTP, URL: "http://127.0.0.1:1/mcp"}
	p := startPool(t, []config.Server{srv}, testOptions(nil))
	st := statusOf(t, p, "gone")
	if st.State != StateDown || !strings.Contains(st.Err, `backend "gone"`) || !strings.Contains(st.Err, "nothing listens at 127.0.0.1:1 (connection refused)") {
		t.Fatalf("status = %+v", st)
	}
}

// TestRemoteOutageOutlastsDelays: a remote server that does not answer for
// longer than the restart delays is tried again at the last delay until it
// does, over both transports: an outage, or a server started after the
// gateway, used to leave it down until toolgate restarted. The tries past
// the delays are logged once, then at debug level; for a server that keeps
// refusing the connect (a 403 until an administrator lets the gateway in)
// the line says it refuses (it said "still does not answer").
func TestRemoteOutageOutlastsDelays(t *testing.T) {
	for _, tc := range []struct {
		name, transport string
		status          int
		log             string
	}{
		{config.TypeHTTP, config.TypeHTTP, http.StatusServiceUnavailable, "remote server still does not answer"},
		{config.TypeSSE, config.TypeSSE, http.StatusServiceUnavailable, "remote server still does not answer"},
		{"refused", config.TypeHTTP, http.StatusForbidden, "remote server still refuses the connection"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var down atomic.Bool
			down.Store(true)
			srv := behindFront(t, backendtest.NewHTTPServer(t, tc.transport, "normal"), func(proxy *httputil.ReverseProxy) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if down.Load() {
						http.Error(w, "upstream is down", tc.status)
						return
					}
					proxy.ServeHTTP(w, r)
				})
			})
			logs := &testenv.LogBuffer{}
			o := testOptions(logs)
			o.RestartDelays = []time.Duration{time.Millisecond, 2 * time.Millisecond}
			p := startPool(t, []config.Server{srv}, o)
			testenv.Eventually(t, "tries past the delays", func() bool { return statusOf(t, p, "remote").Restarts >= 5 })
			if st := statusOf(t, p, "remote"); st.State == StateUp || staysDown(p, "remote")() {
				t.Fatalf("during the outage: %+v (stays down: %v)", st, staysDown(p, "remote")())
			}
			down.Store(false)
			testenv.Eventually(t, "the server up once it answers", func() bool { return statusOf(t, p, "remote").State == StateUp })
			if res, err := p.CallTool(context.Background(), "remote", "echo", map[string]any{"text": "back"}); err != nil || textOf(t, res) != "back" {
				t.Fatalf("echo after the outage = %v, %v", res, err)
			}
			got := logs.String()
			if n := strings.Count(got, tc.log); n != 1 || strings.Count(got, "remote server still") != 1 {
				t.Errorf("the log says %q %d times, want once (and no other such line):\n%s", tc.log, n, got)
			}
			if n := strings.Count(got, `level=WARN msg="backend down"`); n > len(o.RestartDelays)+1 {
				t.Errorf("%d warnings for %d delays: the tries past them are not quiet:\n%s", n, len(o.RestartDelays), got)
			}
		})
	}
}

// peekedCall is what a test's front reads of a POSTed message: its id,
// method and "text" argument.
type peekedCall struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		Arguments struct {
			Text string `json:"text"`
		} `json:"arguments"`
	} `json:"params"`
}

// peekCall reads r's message (a POST's; nothing of another method) and
// puts its body back for the proxy.
func peekCall(r *http.Request) peekedCall {
	var c peekedCall
	if r.Method == http.MethodPost {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		_ = json.Unmarshal(body, &c)
	}
	return c
}

// behindFront serves real through a reverse proxy (event streams passed
// on as they come) in a front of its own, which front makes of the proxy,
// and returns real's config entry, named "remote", at the front's URL.
func behindFront(t *testing.T, real *backendtest.HTTPServer, front func(*httputil.ReverseProxy) http.Handler) config.Server {
	t.Helper()
	target, err := url.Parse(real.URL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.FlushInterval = -1
	hs := httptest.NewServer(front(proxy))
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
	})
	srv := real.Config("remote", nil)
	srv.URL = hs.URL + strings.TrimPrefix(real.Endpoint, real.URL)
	return srv
}

func TestNoLeaksAfterClose(t *testing.T) {
	before := runtime.NumGoroutine()
	hs := backendtest.NewHTTPServer(t, config.TypeHTTP, "normal")
	ss := backendtest.NewHTTPServer(t, config.TypeSSE, "normal")
	servers := []config.Server{
		named(backendtest.Command(t, "normal"), "a"),
		named(backendtest.Command(t, "hang"), "b"),
		named(backendtest.Command(t, "crash-at-start"), "c"),
		hs.Config("h", nil),
		ss.Config("s", nil),
	}
	p := New(servers, testOptions(nil))
	p.Start(context.Background())
	var pids []int
	for _, s := range p.Status() {
		if s.PID != 0 {
			pids = append(pids, s.PID)
		}
	}
	if len(pids) != 2 {
		t.Fatalf("pids %v, want 2 running backends: %+v", pids, p.Status())
	}
	// A call in flight during Close fails as unavailable.
	errc := make(chan error, 1)
	go func() {
		_, err := p.CallTool(context.Background(), "b", "hang", nil)
		errc <- err
	}()
	testenv.Eventually(t, "the hang call in flight", func() bool { return inFlight(t, p, "b") == 1 })
	for _, name := range []string{"h", "s"} {
		if _, err := p.CallTool(context.Background(), name, "echo", map[string]any{"text": "x"}); err != nil {
			t.Fatalf("echo on %s: %v", name, err)
		}
	}
	p.Close()
	var ue *UnavailableError
	if err := <-errc; !errors.As(err, &ue) {
		t.Errorf("in-flight call during Close: err = %v, want UnavailableError", err)
	}
	for _, pid := range pids {
		if procAlive(pid) {
			t.Errorf("process %d alive after Close", pid)
		}
	}
	// The servers' own goroutines end with them.
	for _, s := range []*backendtest.HTTPServer{hs, ss} {
		s.CloseClientConnections()
		s.Close()
	}
	if !testenv.Poll(testenv.Timeout, func() bool { return runtime.NumGoroutine() <= before }) {
		var b strings.Builder
		pprof.Lookup("goroutine").WriteTo(&b, 1)
		t.Fatalf("%d goroutines after Close, %d before:\n%s", runtime.NumGoroutine(), before, b.String())
	}
}

func BenchmarkCallEcho(b *testing.B) {
	p := New([]config.Server{backendtest.Command(b, "normal")}, testOptions(nil))
	p.Start(context.Background())
	defer p.Close()
	args := map[string]any{"text": "x"}
	b.ResetTimer()
	for b.Loop() {
		if _, err := p.CallTool(context.Background(), "fake", "echo", args); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStartClose measures one start/stop cycle of a stdio backend:
// process start, handshake, tool listing, and the stop sequence. The legacy
// variant shows the cost of the discover probe (one ping plus ProbeTimeout).
func BenchmarkStartClose(b *testing.B) {
	for _, mode := range []string{"normal", "ignore-discover"} {
		b.Run(mode, func(b *testing.B) {
			o := testOptions(nil)
			o.ProbeTimeout = 100 * time.Millisecond
			srv := backendtest.Command(b, mode)
			for b.Loop() {
				p := New([]config.Server{srv}, o)
				p.Start(context.Background())
				if st := p.Status()[0]; st.State != StateUp {
					b.Fatalf("state %s: %s", st.State, st.Err)
				}
				p.Close()
			}
		})
	}
}

// TestCallCarriesTraceContext: the W3C trace context of the call's context
// reaches the backend in the call's _meta; without one, no _meta is sent.
func TestCallCarriesTraceContext(t *testing.T) {
	p := startPool(t, []config.Server{named(backendtest.Command(t, "meta"), "m")}, testOptions(nil))
	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	ctx := tracemeta.Extract(context.Background(), map[string]any{tracemeta.TraceParent: parent})
	res, err := p.CallTool(ctx, "m", "meta", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := textOf(t, res); !strings.Contains(got, `"traceparent":"`+parent+`"`) {
		t.Errorf("backend saw _meta %s, want traceparent %s", got, parent)
	}
	res, err = p.CallTool(context.Background(), "m", "meta", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := textOf(t, res); strings.Contains(got, "traceparent") {
		t.Errorf("backend saw _meta %s without a trace context, want no traceparent", got)
	}
}

// heldStart is a pool of one "normal" backend, "fake", started with
// StartAsync and held connecting (Options.StartAfter) until release is
// closed.
func heldStart(t *testing.T) (*Pool, chan struct{}) {
	t.Helper()
	release := make(chan struct{})
	waiting := make(chan struct{})
	o := testOptions(nil)
	o.StartAfter = func(ctx context.Context) {
		close(waiting)
		select {
		case <-release:
		case <-ctx.Done():
		}
	}
	p := New([]config.Server{backendtest.Command(t, "normal")}, o)
	t.Cleanup(func() { p.Close() })
	p.StartAsync(context.Background())
	<-waiting
	return p, release
}

// StartAsync with Options.StartAfter: no backend starts until it returns;
// a call that needs a backend ends its wait at once.
func TestStartAfter(t *testing.T) {
	t.Run("released", func(t *testing.T) {
		p, release := heldStart(t)
		if st := statusOf(t, p, "fake"); st.State != StateConnecting || st.PID != 0 {
			t.Fatalf("while StartAfter waits: %+v, want connecting with no process", st)
		}
		// Search results say so under the server's tools, and that a call
		// waits for it (the subtest below: it does).
		if got, want := p.Unavailable("fake", false), `server "fake" is still connecting (a call of its tools waits for it)`; got != want {
			t.Errorf("Unavailable while connecting: %q, want %q", got, want)
		}
		close(release)
		testenv.Eventually(t, "the backend up", func() bool { return statusOf(t, p, "fake").State == StateUp })
	})
	// Lists, for execute_tool's name the catalog lacks, waits as a call
	// does: a listing of the connection, not of the run before.
	t.Run("Lists waits for the connection", func(t *testing.T) {
		p, release := heldStart(t)
		ended, cancel := context.WithCancel(context.Background())
		cancel()
		if p.Lists(ended, "fake", "echo") {
			t.Error("Lists with its context ended while the server connects: true, want false")
		}
		listed := make(chan [2]bool, 1)
		go func() {
			listed <- [2]bool{p.Lists(context.Background(), "fake", "echo"), p.Lists(context.Background(), "fake", "no_such")}
		}()
		close(release)
		if got := <-listed; got != [2]bool{true, false} {
			t.Errorf("Lists(echo), Lists(no_such) across the connection: %v, want [true false]", got)
		}
		if p.Lists(context.Background(), "other", "echo") {
			t.Error("Lists of a server the pool does not run: true")
		}
	})
	t.Run("a call does not wait", func(t *testing.T) {
		waitEnded := make(chan error, 1)
		o := testOptions(nil)
		o.StartAfter = func(ctx context.Context) { // never released: only a call ends it
			<-ctx.Done()
			waitEnded <- ctx.Err()
		}
		p := New([]config.Server{backendtest.Command(t, "normal")}, o)
		t.Cleanup(func() { p.Close() })
		p.StartAsync(context.Background())
		res, err := p.CallTool(context.Background(), "fake", "echo", map[string]any{"text": "early"})
		if err != nil || res.IsError {
			t.Fatalf("call while the start is held: %v %+v", err, res)
		}
		if err := <-waitEnded; !errors.Is(err, context.Canceled) {
			t.Errorf("StartAfter's context: %v", err)
		}
	})
}

// TestConnectTimeoutNamedWhenTheProcessExitsAfterIt: a server that reads
// its stdin without ever answering (a script interpreter given no script,
// `python3`, reads the handshake as its program) exits when the connect
// timeout closes its stdin. The error must name the timeout, the cause,
// not the exit ("exited with status 0 … context canceled"), its effect.
func TestConnectTimeoutNamedWhenTheProcessExitsAfterIt(t *testing.T) {
	o := testOptions(nil)
	o.ConnectTimeout = 500 * time.Millisecond
	p := startPool(t, []config.Server{{Name: "silent", Type: config.TypeStdio, Command: "sh", Args: []string{"-c", "cat >/dev/null"}}}, o)
	st := statusOf(t, p, "silent")
	if st.State != StateDown || !strings.Contains(st.Err, "within the connect timeout (500ms)") || strings.Contains(st.Err, "exited") {
		t.Errorf("state %s, error %q; want down, naming the connect timeout and not the exit it caused", st.State, st.Err)
	}
	// A server only slow to start (a first npx run downloads its package)
	// is told how to wait longer.
	if !strings.Contains(st.Err, `or raise the entry's "connectTimeout" if it is only slow to start`) {
		t.Errorf("error %q does not say how to wait longer", st.Err)
	}
}

// silentPool starts a pool of one stdio backend, "silent", whose process
// runs and never answers the handshake, and returns it once that process
// runs, with the cancel of Start's context and a channel closed when Start
// returns (cancelled at the test's end).
func silentPool(t *testing.T, o *Options) (*Pool, context.CancelFunc, <-chan struct{}) {
	t.Helper()
	o.ConnectTimeout = time.Minute
	mark := filepath.Join(t.TempDir(), "started")
	silent := config.Server{Name: "silent", Type: config.TypeStdio, Command: "sh", Args: []string{"-c", `: >"$0"; cat >/dev/null`, mark}}
	p := New([]config.Server{silent}, o)
	t.Cleanup(func() { p.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	started := make(chan struct{})
	go func() { p.Start(ctx); close(started) }()
	testenv.Eventually(t, "the backend's process running", func() bool { _, err := os.Stat(mark); return err == nil })
	return p, cancel, started
}

// TestCallWhileStopConnecting: a call that waits for a backend still
// connecting when the gateway stops (the start's context cancelled, as a
// SIGTERM does to serve before its pool closes) is told the gateway is
// stopping, not "it is down: … connect aborted: context canceled".
func TestCallWhileStopConnecting(t *testing.T) {
	p, cancel, _ := silentPool(t, testOptions(nil))
	callErr := make(chan error, 1)
	go func() {
		_, err := p.CallTool(context.Background(), "silent", "anything", nil)
		callErr <- err
	}()
	cancel()
	err := <-callErr
	var un *UnavailableError
	if !errors.As(err, &un) || !strings.Contains(err.Error(), "the gateway is stopping") || strings.Contains(err.Error(), "connect aborted") {
		t.Errorf("the call: %v\nwant it unavailable: the gateway is stopping", err)
	}
}

// TestStopWhileConnectingIsQuiet: a stop while a backend is still
// connecting (the start's context cancelled, then the pool closed, as a
// SIGTERM or a closed stdin does to serve) cancels its connect; that is
// not the backend's fault, so nothing is logged above debug and its error
// says the connect was aborted, not "check command, args and env" (the
// process, a script interpreter reading its stdin, exits when the stop
// closes its stdin).
func TestStopWhileConnectingIsQuiet(t *testing.T) {
	for _, how := range []string{"start cancelled", "pool closed"} {
		t.Run(how, func(t *testing.T) {
			var logs testenv.LogBuffer
			p, cancel, started := silentPool(t, testOptions(&logs))
			if how == "start cancelled" {
				cancel()
				<-started
			} else {
				p.Close()
				<-started
			}
			st := statusOf(t, p, "silent")
			p.Close()
			if st.State != StateDown || !strings.Contains(st.Err, "connect aborted") || strings.Contains(st.Err, "check") {
				t.Errorf("state %s, error %q; want down, the connect aborted", st.State, st.Err)
			}
			for _, line := range strings.Split(logs.String(), "\n") {
				if strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") || strings.Contains(line, "backend down") {
					t.Errorf("logged on a stop while connecting: %s", line)
				}
			}
		})
	}
}

// A URL answered with a web page instead of MCP (a web app that answers
// every path with its page, a proxy's sign-in page) is said so, with the
// page's title, over both transports: go-sdk's error named only the
// content type under layers of its calls ("connection closed: calling
// "initialize": client is closing: sending "server/discover": unsupported
// content type "text/html"", or for SSE "missing endpoint: malformed
// event").
func TestRemoteAnswersAWebPage(t *testing.T) {
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, "<!doctype html>\n<html><head><meta charset=utf-8>\n<TITLE>\n  Sign in &amp; continue\n</TITLE></head><body>Please sign in</body></html>")
	}))
	t.Cleanup(page.Close)
	for _, tc := range []struct{ transport, path, method string }{{config.TypeHTTP, "/mcp", "POST"}, {config.TypeSSE, "/sse", "GET"}} {
		t.Run(tc.transport, func(t *testing.T) {
			srv := config.Server{Name: "web", Type: tc.transport, URL: page.URL + tc.path}
			p := startPool(t, []config.Server{srv}, testOptions(&testenv.LogBuffer{}))
			testenv.Eventually(t, "the server down", func() bool { return statusOf(t, p, "web").LastErr != "" })
			want := fmt.Sprintf(`backend "web" at %s: the server answered a %s with 200 OK and an HTML page ("Sign in & continue"), not MCP: check that url is the server's MCP endpoint`, srv.URL, tc.method)
			if got := statusOf(t, p, "web").LastErr; !strings.HasPrefix(got, want) {
				t.Errorf("error:\n%s\nwant it to start:\n%s", got, want)
			}
		})
	}
}

// A command that is not an MCP server on stdio is told by what it wrote on
// stdout, which is not JSON-RPC (and was only logged): its usage text, or,
// for a server of HTTP started as a command, the address it serves, with
// how to configure it instead.
func TestStdoutNoiseSaid(t *testing.T) {
	o := testOptions(&testenv.LogBuffer{})
	o.ConnectTimeout = 500 * time.Millisecond
	o.RestartDelays = []time.Duration{}
	p := startPool(t, []config.Server{
		{Name: "usage", Type: config.TypeStdio, Command: "sh", Args: []string{"-c", "echo 'Usage: server [--port N]'; echo '  --port N  the port'"}},
		{Name: "web", Type: config.TypeStdio, Command: "sh", Args: []string{"-c", "echo 'Server running at http://127.0.0.1:3000/mcp.'; exec sleep 30"}},
	}, o)
	for name, want := range map[string]string{
		"usage": `backend "usage": sh exited with status 0 during start-up: check command, args and env; on stdout, not JSON-RPC: "Usage: server [--port N]", "--port N  the port" (no stderr output)`,
		"web":   `backend "web": no complete MCP handshake and tool list within the connect timeout (500ms): "sh" seems to serve HTTP at http://127.0.0.1:3000/mcp, not MCP on stdout: start it yourself and give that address as the entry's "url" in place of "command"; on stdout, not JSON-RPC: "Server running at http://127.0.0.1:3000/mcp."`,
	} {
		testenv.Eventually(t, name+" down", func() bool { return statusOf(t, p, name).LastErr != "" })
		if got := statusOf(t, p, name).LastErr; !strings.HasPrefix(got, want) {
			t.Errorf("%s:\n%s\nwant it to start:\n%s", name, got, want)
		}
	}
}

// pythonServer is a stdio server in Python that answers initialize with
// initialize and every other request with rest (Python expressions of a
// dict, m the request), written in dir as name.py.
func pythonServer(t *testing.T, dir, name, initialize, rest string) config.Server {
	t.Helper()
	body := `import sys, json
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m:
        continue
    if m.get("method") == "initialize":
        out = ` + initialize + `
    else:
        out = ` + rest + `
    out.update({"jsonrpc": "2.0", "id": m["id"]})
    print(json.dumps(out), flush=True)
`
	path := filepath.Join(dir, name+".py")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return config.Server{Name: name, Type: config.TypeStdio, Command: "python3", Args: []string{path}}
}

// A handshake that fails for a reason the server gives is said by that
// reason, not by the exit that follows once go-sdk closes the server's
// stdin ("exited with status 0 during start-up: check command, args and
// env"); a server that offers no tools (its capabilities name none, and it
// does not know tools/list) is up with none, not down and restarted.
func TestHandshakeFailuresSaid(t *testing.T) {
	dir := t.TempDir()
	script := func(name, initialize, rest string) config.Server { return pythonServer(t, dir, name, initialize, rest) }
	result := func(version, caps string) string {
		return `{"result": {"protocolVersion": "` + version + `", "capabilities": ` + caps + `, "serverInfo": {"name": "x", "version": "1"}}}`
	}
	notFound := `{"error": {"code": -32601, "message": "Method not found"}}`
	o := testOptions(&testenv.LogBuffer{})
	o.RestartDelays = []time.Duration{}
	p := startPool(t, []config.Server{
		script("refuses", `{"error": {"code": -32602, "message": "Unsupported protocol version: %s (supported: 2024-11-05)" % m["params"]["protocolVersion"]}}`, notFound),
		script("ancient", result("1999-01-01", "{}"), notFound),
		script("prompts", result("2025-06-18", `{"prompts": {}}`), notFound),
		script("broken", result("2025-06-18", `{"tools": {}}`), notFound),
	}, o)
	for name, want := range map[string]string{
		"refuses": `backend "refuses": MCP handshake failed: calling "initialize": Unsupported protocol version: `,
		"ancient": `backend "ancient": MCP handshake failed: `,
		"broken":  `backend "broken": MCP handshake failed: list tools: calling "tools/list": Method not found`,
	} {
		testenv.Eventually(t, name+" down", func() bool { return statusOf(t, p, name).LastErr != "" })
		got := statusOf(t, p, name).LastErr
		if !strings.HasPrefix(got, want) || strings.Contains(got, "exited") || name == "ancient" && !strings.Contains(got, "1999-01-01") {
			t.Errorf("%s:\n%s\nwant it to start:\n%s", name, got, want)
		}
	}
	testenv.Eventually(t, "prompts up", func() bool { return statusOf(t, p, "prompts").State == StateUp })
	if st := statusOf(t, p, "prompts"); st.Tools != 0 || st.LastErr != "" {
		t.Errorf("a server without tools: %+v, want up with none", st)
	}
}

// A remote server that answers the handshake with an error status is said
// so, with what its body says and what to check for that status: go-sdk
// said the status text alone, under its calls ("calling "initialize":
// sending "initialize": Not Found: check url, type (http) and headers").
// So is an address where nothing listens.
func TestRemoteRefusalsSaid(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/gone/mcp", "/gone/sse":
			http.Error(w, "404 page not found", http.StatusNotFound)
		case "/sse-only":
			http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
		case "/token":
			w.WriteHeader(http.StatusUnauthorized)
		case "/ip":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprint(w, `{"error":{"code":"denied","message":"IP 127.0.0.1 is not allowed"}}`)
		case "/proxy":
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusBadGateway)
			fmt.Fprint(w, "<html><head><title>upstream down</title></head></html>")
		case "/empty":
			w.Header().Set("Content-Type", "application/json")
		case "/trunc":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"jsonrpc":"2.0","id"`)
		case "/rpc":
			var req struct {
				ID json.RawMessage `json:"id"`
			}
			_ = json.NewDecoder(r.Body).Decode(&req)
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32602,"message":"Unsupported protocol version (supported: 2024-11-05)"}}`, req.ID)
		}
	}))
	t.Cleanup(srv.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	for _, tc := range []struct{ name, typ, url, want string }{
		{"gone", config.TypeHTTP, srv.URL + "/gone/mcp", `the server answered a POST with 404 Not Found ("404 page not found"): check the url's path: a server's MCP endpoint often ends in /mcp`},
		{"gonesse", config.TypeSSE, srv.URL + "/gone/sse", `the server answered a GET with 404 Not Found ("404 page not found"): check the url's path`},
		{"sseonly", config.TypeHTTP, srv.URL + "/sse-only", `the server answered a POST with 405 Method Not Allowed: the url does not take POST: a server of the older SSE transport needs "type": "sse"`},
		{"token", config.TypeHTTP, srv.URL + "/token", "the server answered a POST with 401 Unauthorized: the server wants credentials: set them in the entry's \"headers\" (\"Authorization\": \"Bearer ${TOKEN}\"); `toolgate auth login token` logs in where the server offers OAuth"},
		{"ip", config.TypeHTTP, srv.URL + "/ip", `the server answered a POST with 403 Forbidden ("IP 127.0.0.1 is not allowed"): the server refused these credentials or this client`},
		{"proxy", config.TypeHTTP, srv.URL + "/proxy", `the server answered a POST with 502 Bad Gateway ("upstream down"): the server, or a proxy before it, failed: its own log says why`},
		// A JSON answer that is not JSON: empty, or cut short (go-sdk said
		// "failed to decode response: unmarshaling jsonrpc message: EOF").
		{"empty", config.TypeHTTP, srv.URL + "/empty", `the server answered a POST with 200 OK and an empty application/json body, not MCP: check that url is the server's MCP endpoint`},
		{"trunc", config.TypeHTTP, srv.URL + "/trunc", `the server answered a POST with 200 OK and an application/json body that is not JSON (21 bytes, cut short or malformed: "{\"jsonrpc\":\"2.0\",\"id\""), not MCP: the server, or a proxy before it, broke off or garbled its answer: its own log says why`},
		{"nobody", config.TypeHTTP, "http://" + closed + "/mcp", "nothing listens at " + closed + " (connection refused): check that the server is running, and the url's host and port"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := config.Server{Name: tc.name, Type: tc.typ, URL: tc.url}
			p := startPool(t, []config.Server{s}, testOptions(&testenv.LogBuffer{}))
			testenv.Eventually(t, "the server down", func() bool { return statusOf(t, p, tc.name).LastErr != "" })
			want := fmt.Sprintf("backend %q at %s: %s", tc.name, tc.url, tc.want)
			if got := statusOf(t, p, tc.name).LastErr; !strings.HasPrefix(got, want) || strings.Contains(got, "calling") {
				t.Errorf("error:\n%s\nwant it to start:\n%s", got, want)
			}
		})
	}
	// A JSON-RPC error in answer to "initialize": the server's own reason,
	// not a hint to check the entry (it was "check url, type (http) and
	// headers").
	rpc := config.Server{Name: "rpc", Type: config.TypeHTTP, URL: srv.URL + "/rpc"}
	p := startPool(t, []config.Server{rpc}, testOptions(&testenv.LogBuffer{}))
	testenv.Eventually(t, "the server down", func() bool { return statusOf(t, p, "rpc").LastErr != "" })
	want := fmt.Sprintf(`backend "rpc" at %s: MCP handshake failed: calling "initialize": Unsupported protocol version (supported: 2024-11-05)`, rpc.URL)
	if got := statusOf(t, p, "rpc").LastErr; got != want {
		t.Errorf("error:\n%s\nwant:\n%s", got, want)
	}
	// A host name that does not resolve, as the resolver reports it (no
	// lookup here: a test machine may have no resolver to ask), with no
	// proxy set (TestUnresolvedHostAndTheProxy).
	t.Setenv("HTTPS_PROXY", "")
	t.Setenv("https_proxy", "")
	err = fmt.Errorf("sending: %w", &net.OpError{Op: "dial", Err: &net.DNSError{Name: "mcp.example.invalid", Err: "no such host", IsNotFound: true}})
	why := unreachable(err, "https://mcp.example.invalid/mcp")
	if why == nil || why.Error() != `the host name "mcp.example.invalid" does not resolve (no such host): check the url's host`+noProxyNote {
		t.Errorf("unreachable(%v) = %v", err, why)
	}
	if got, want := ErrForKey(why), `the host name (`+HiddenFromKey+`) does not resolve (no such host): check the url's host`+noProxyNote; got != want {
		t.Errorf("a key that is not admin reads:\n%s\nwant:\n%s", got, want)
	}
	if why := unreachable(errors.New("EOF"), "https://mcp.example.invalid/mcp"); why != nil {
		t.Errorf("unreachable(EOF) = %v", why)
	}
}

func TestHTMLTitle(t *testing.T) {
	for page, want := range map[string]string{
		"<html><title>A &lt;b&gt;</title>":                "A <b>",
		"<title lang=en>\n one\n two </title>":            "one two",
		"<html><body>no title</body></html>":              "",
		"<title>never closed":                             "",
		"<title":                                          "",
		"<title>" + strings.Repeat("x", 200) + "</title>": strings.Repeat("x", 79) + "…",
		"\xff\xfeİİ<TITLE>Ünïcode</TITLE>":                "Ünïcode", // offsets kept past bytes lower case would change
	} {
		if got := htmlTitle([]byte(page)); got != want {
			t.Errorf("htmlTitle(%.40q) = %q, want %q", page, got, want)
		}
	}
}

// A tools/call answer go-sdk cannot read (its "content" an object, not a
// list; a content block of a type go-sdk does not know; an image whose
// "data" is not base64, as a data: URL) fails that call with what is wrong
// in JSON's words, not Go's ("cannot unmarshal … into Go struct field
// struct { mcp.res; Content []*mcp.wireContent … }"); the server stays up
// for the next call. The last two read "server unavailable: connection
// lost during the call", with the warning that the call may have run, as
// if the server had gone.
func TestCallAnswerNotAResult(t *testing.T) {
	const good = `"content":[{"type":"text","text":"mangle"}]`
	for _, tc := range []struct{ name, bad, why string }{
		{"content an object", `"content":{"type":"text","text":"mangle"}`, `"content" must be a list of objects, not a JSON object`},
		{"unknown content type", `"content":[{"type":"hologram","text":"mangle"}]`, `a content block of type "hologram", which toolgate's MCP library does not know`},
		{"data not base64", `"content":[{"type":"image","mimeType":"image/png","data":"data:image/png;base64,iVBORw0KGgo="}]`,
			`binary data in it, the "data" of an image or audio block or the "blob" of a resource, is not base64: illegal base64 data at input byte 4`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := behindFront(t, backendtest.NewHTTPServer(t, config.TypeHTTP, backendtest.ModeJSONResponse), func(proxy *httputil.ReverseProxy) http.Handler {
				proxy.ModifyResponse = func(resp *http.Response) error {
					if !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
						return nil // an event stream (the GET one) never ends
					}
					body, err := io.ReadAll(resp.Body)
					if err != nil {
						return err
					}
					body = bytes.ReplaceAll(body, []byte(good), []byte(tc.bad))
					resp.Body, resp.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
					resp.Header.Set("Content-Length", fmt.Sprint(len(body)))
					return nil
				}
				return proxy
			})
			p := startPool(t, []config.Server{srv}, testOptions(&testenv.LogBuffer{}))
			testenv.Eventually(t, "the server up", func() bool { return statusOf(t, p, "remote").State == StateUp })
			_, err := p.CallTool(context.Background(), "remote", "echo", map[string]any{"text": "mangle"})
			want := `call "echo" on "remote": its answer could not be read as a tools/call result (` + tc.why + `; check the server's version)`
			if err == nil || !strings.HasPrefix(err.Error(), want) {
				t.Fatalf("error:\n%v\nwant it to start:\n%s", err, want)
			}
			if res, err := p.CallTool(context.Background(), "remote", "echo", map[string]any{"text": "fine"}); err != nil || textOf(t, res) != "fine" {
				t.Errorf("the next call: %v, %v", res, err)
			}
		})
	}
}

// What is not an answer in place of a call's answer, mid-session, is said
// for what it is. A page (a proxy's sign-in page once its session
// expired) read "connection lost during the call: … unsupported content
// type "text/html""; an error status, a server failing for a while (503,
// which go-sdk keeps the connection through) or a token revoked (401),
// read "connection lost during the call: rejected by transport: sending
// "tools/call": Service Unavailable", and is said with what the body says
// and what to check. An API key that is not admin reads the gateway's own
// words of it (ErrForKey): what went wrong, the fix, the warning that a
// call with no answer may have run; what the server said (its body, the
// EOF) reads HiddenFromKey. It read HiddenFromKey alone.
func TestRemotePageMidSession(t *testing.T) {
	for _, tc := range []struct {
		name, ctype, body string
		code              int // 0: the connection is closed, with no answer
		want              string
		key               string // what a key that is not admin reads of the cause
		authenticate      string // the answer's WWW-Authenticate header, if any
	}{
		{"page", "text/html", "<html><title>Session expired - sign in</title></html>", http.StatusOK,
			`the server answered a POST with 200 OK and an HTML page ("Session expired - sign in"), not MCP: a proxy or sign-in page answers in its place`,
			"the server answered (" + HiddenFromKey + "), not MCP: a proxy or sign-in page answers in its place (check url and what stands between toolgate and the server)", ""},
		{"maintenance", "text/plain", "down for maintenance until 10:00", http.StatusServiceUnavailable,
			`the server answered a POST with 503 Service Unavailable ("down for maintenance until 10:00"): the server, or a proxy before it, failed: its own log says why`,
			"the server answered a POST with 503 Service Unavailable (" + HiddenFromKey + "): the server, or a proxy before it, failed: its own log says why", ""},
		{"revoked", "application/json", `{"error":"invalid_token","error_description":"The access token was revoked"}`, http.StatusUnauthorized,
			`the server answered a POST with 401 Unauthorized ("The access token was revoked"): the server wants credentials`,
			"the server answered a POST with 401 Unauthorized (" + HiddenFromKey + `): the server wants credentials: set them in the entry's "headers" ("Authorization": "Bearer ${TOKEN}"); ` + "`toolgate auth login remote` logs in where the server offers OAuth", ""},
		// The fix quotes the scopes the server's WWW-Authenticate header
		// asks for: hidden from a key, as its body is, the fix kept.
		{"scope", "text/plain", "token lacks scope", http.StatusForbidden,
			`the server answered a POST with 403 Forbidden ("token lacks scope"): the server wants the scopes "files:write admin", and the requests carry no token: set one with them in the entry's "headers"`,
			"the server answered a POST with 403 Forbidden (" + HiddenFromKey + "): the server wants the scopes (" + HiddenFromKey + `), and the requests carry no token: set one with them in the entry's "headers" ("Authorization": "Bearer ${TOKEN}"), or, where the server offers OAuth, list them in the entry's "oauth": {"scopes": [...]} and run ` + "`toolgate auth login remote`",
			`Bearer error="insufficient_scope", scope="files:write admin"`},
		{"closed", "", "", 0,
			"the connection closed before the server answered (EOF): " + ErrMayHaveRun.Error(),
			"the connection closed before the server answered (" + HiddenFromKey + "): " + ErrMayHaveRun.Error(), ""},
		// A JSON-RPC error in the body is the server's own answer.
		{"rpc", "application/json", `{"jsonrpc":"2.0","id":2,"error":{"code":-32602,"message":"echo wants text"}}`, http.StatusBadRequest,
			"echo wants text", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var refuse atomic.Bool
			srv := behindFront(t, backendtest.NewHTTPServer(t, config.TypeHTTP, backendtest.ModeNormal), func(proxy *httputil.ReverseProxy) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					switch {
					case !refuse.Load() || r.Method != http.MethodPost:
						proxy.ServeHTTP(w, r)
					case tc.code == 0:
						if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
							c.Close()
						}
					default:
						w.Header().Set("Content-Type", tc.ctype)
						if tc.authenticate != "" {
							w.Header().Set("WWW-Authenticate", tc.authenticate)
						}
						w.WriteHeader(tc.code)
						fmt.Fprint(w, tc.body)
					}
				})
			})
			p := startPool(t, []config.Server{srv}, testOptions(&testenv.LogBuffer{}))
			testenv.Eventually(t, "the server up", func() bool { return statusOf(t, p, "remote").State == StateUp })
			refuse.Store(true)
			_, err := p.CallTool(context.Background(), "remote", "echo", map[string]any{"text": "x"})
			if tc.name == "rpc" {
				if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "unavailable") {
					t.Errorf("error:\n%v\nwant the server's own error %q", err, tc.want)
				}
				return
			}
			// A 403 asking for scopes refuses the one call: the session
			// stays (scopeRefusalAnswer), the server is not unavailable.
			prefix := `backend "remote" is unavailable: `
			var cause error
			var un *UnavailableError
			var refused *RefusedError
			if tc.authenticate != "" {
				prefix = `backend "remote" refused the call: `
				if !errors.As(err, &refused) || errors.As(err, &un) {
					t.Fatalf("error: %v, want it refused, not unavailable", err)
				}
				cause = refused.Err
			} else {
				if !errors.As(err, &un) {
					t.Fatalf("error: %v, want it unavailable", err)
				}
				cause = un.Err
			}
			if want := prefix + tc.want; err == nil || !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), "rejected by transport") {
				t.Errorf("error:\n%v\nwant it to start:\n%s", err, want)
			}
			if got := ErrForKey(cause); got != tc.key {
				t.Errorf("what a key reads:\n%s\nwant:\n%s", got, tc.key)
			}
			if got, want := ErrForKey(err), prefix+tc.key; got != want {
				t.Errorf("what a key reads of the error:\n%s\nwant:\n%s", got, want)
			}
			if errors.Is(err, ErrMayHaveRun) != (tc.code == 0) {
				t.Errorf("errors.Is(err, ErrMayHaveRun) = %v, want %v", !(tc.code == 0), tc.code == 0)
			}
		})
	}
}

// A streamable HTTP server whose standalone stream (the GET go-sdk keeps
// open for the server's own messages) is answered with an error status
// when go-sdk opens it again is down with that answer and its fix, as a
// refused POST is: it read "connection lost: rejected by transport:
// standalone SSE stream: Internal Server Error", which said neither who
// failed nor what to do (the TypeScript SDK's example OAuth server,
// restarted, answers so to a token it forgot).
func TestStandaloneStreamRefusalSaid(t *testing.T) {
	var broken atomic.Bool
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return backendtest.NewServer(backendtest.ParseModes("normal")) }, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if broken.Load() {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprint(w, `{"error":"server_error","error_description":"token introspection failed"}`)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	p := startPool(t, []config.Server{{Name: "remote", Type: config.TypeHTTP, URL: srv.URL + "/mcp"}}, testOptions(nil))
	if st := statusOf(t, p, "remote"); st.State != StateUp {
		t.Fatalf("remote: %+v", st)
	}
	broken.Store(true)
	srv.CloseClientConnections()
	var st Status
	testenv.Eventually(t, "remote down", func() bool {
		st = statusOf(t, p, "remote")
		return st.State == StateDown
	})
	want := `the server answered a GET with 500 Internal Server Error ("token introspection failed"): the server, or a proxy before it, failed: its own log says why`
	if !strings.Contains(st.Err, want) {
		t.Errorf("status error %q, want %q", st.Err, want)
	}
}

// A tools/list answer over the message size cap (tool definitions of
// megabytes: input schemas with enums of 100,000 values) leaves the
// server down with words that say so and the fix; it read "the backend's
// response … exceeds toolgate's message size cap …; ask for less output",
// as if a tool call had asked too much.
func TestToolListOverCap(t *testing.T) {
	t.Setenv(backendtest.EnvManyTools, "100") // 20 kB each: 2 MB, read by the in-process server too
	const want = "list tools: the server's tools/list answer is over toolgate's message size cap of 1048576 bytes: its tool definitions are too large for one message (an input schema of megabytes, most likely): have the server list its tools in pages (tools/list takes a cursor) or with smaller schemas"
	stdio := named(backendtest.Command(t, "many-tools", backendtest.EnvManyTools+"=100"), "local")
	// An answer as an event stream (go-sdk's words for an event over the
	// cap, which overCap reads: this fails the day they change) and as a
	// JSON body. (Over the older SSE transport go-sdk's client drops the
	// stream's error: the call reads EOF.)
	hs := backendtest.NewHTTPServer(t, config.TypeHTTP, "many-tools")
	hj := backendtest.NewHTTPServer(t, config.TypeHTTP, "many-tools,"+backendtest.ModeJSONResponse)
	o := testOptions(nil)
	o.MaxMessageBytes = 1 << 20
	p := startPool(t, []config.Server{stdio, hs.Config("remote", nil), hj.Config("json", nil)}, o)
	for _, name := range []string{"local", "remote", "json"} {
		testenv.Eventually(t, name+" down", func() bool { return statusOf(t, p, name).Err != "" })
		if st := statusOf(t, p, name); !strings.Contains(st.Err, want) || strings.Contains(st.Err, "ask for less output") {
			t.Errorf("%s: state %s, error %q; want it to say %q", name, st.State, st.Err, want)
		}
	}
}

// Tools listed without a name are left out, as before, and the log says
// how many, once a listing: a server's author whose tool went missing had
// no word of why.
func TestNamelessToolsWarned(t *testing.T) {
	l := &testenv.LogBuffer{}
	p := startPool(t, []config.Server{named(backendtest.Command(t, "nameless"), "fake")}, testOptions(l))
	testenv.Eventually(t, "up", func() bool { return statusOf(t, p, "fake").State == StateUp })
	if st := statusOf(t, p, "fake"); st.Tools == 0 {
		t.Errorf("the server's other tools: %+v, want them listed", st)
	}
	const want = `msg="the server lists 2 tools without a name: they are left out (a tool needs a name to be called; tell the server's authors)"`
	if strings.Count(l.String(), want) != 1 {
		t.Errorf("log: want once\n%s\ngot\n%s", want, l.String())
	}
}

// A tools/list answer nested deeper than the JSON-RPC reader takes (a
// tool's input schema of 600 nested objects) leaves the server down with
// words that name the tool definitions and the fix; it read "JSON-RPC
// message nested deeper than 1000", with nothing of where or what to do.
func TestToolListTooDeep(t *testing.T) {
	p := startPool(t, []config.Server{named(backendtest.Command(t, "deep-schema"), "local")}, testOptions(nil))
	testenv.Eventually(t, "down", func() bool { return statusOf(t, p, "local").Err != "" })
	const want = "list tools: the server's tools/list answer is nested deeper than the 1000 levels of JSON toolgate reads: a tool's input schema, most likely (objects inside objects): have the server list it flatter (a $ref to a $defs entry for a model used again)"
	if st := statusOf(t, p, "local"); !strings.Contains(st.Err, want) {
		t.Errorf("state %s, error %q; want it to say %q", st.State, st.Err, want)
	}
}

// TestScopeRefusalIsThatCallsAlone: a 403 insufficient_scope refuses the
// one call it answered (scopeRefusalAnswer) and the session stays, so
// other calls go on meanwhile. One of those that fails in its own way (a
// JSON-RPC error of the server's, here) says its own error: it read the
// other call's refusal, "refused the call: … wants the scopes …", as the
// refusal was the last one the session had.
func TestScopeRefusalIsThatCallsAlone(t *testing.T) {
	arrived, refusedSent := make(chan struct{}), make(chan struct{})
	srv := behindFront(t, backendtest.NewHTTPServer(t, config.TypeHTTP, backendtest.ModeNormal), func(proxy *httputil.ReverseProxy) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			c := peekCall(r)
			switch {
			case c.Method != "tools/call":
				proxy.ServeHTTP(w, r)
			case c.Params.Arguments.Text == "refuse":
				w.Header().Set("WWW-Authenticate", `Bearer error="insufficient_scope", scope="admin"`)
				w.WriteHeader(http.StatusForbidden)
				fmt.Fprint(w, `{"error":"insufficient_scope"}`)
			case c.Params.Arguments.Text == "wait":
				close(arrived)
				<-refusedSent
				w.Header().Set("Content-Type", "application/json")
				fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32602,"message":"echo wants another text"}}`, c.ID)
			default:
				proxy.ServeHTTP(w, r)
			}
		})
	})
	p := startPool(t, []config.Server{srv}, testOptions(&testenv.LogBuffer{}))
	testenv.Eventually(t, "the server up", func() bool { return statusOf(t, p, "remote").State == StateUp })
	waited := make(chan error, 1)
	go func() {
		_, err := p.CallTool(context.Background(), "remote", "echo", map[string]any{"text": "wait"})
		waited <- err
	}()
	<-arrived
	_, err := p.CallTool(context.Background(), "remote", "echo", map[string]any{"text": "refuse"})
	var refused *RefusedError
	if !errors.As(err, &refused) {
		t.Errorf("the refused call: %v, want a RefusedError", err)
	}
	close(refusedSent)
	err = <-waited
	if errors.As(err, &refused) || err == nil || !strings.Contains(err.Error(), "echo wants another text") {
		t.Errorf("the other call: %v\nwant its own error, echo wants another text", err)
	}
}

// TestScopeRefusalsAtOnce: calls refused 403 insufficient_scope at the
// same time each fail as refused, with the scope their own 403 asked for.
// The refusal was kept once for the session: a call whose 403 was
// followed by another's before it read it found that one, not its own,
// and failed as the server's JSON-RPC error (no login command, and
// counted as the server's own answer).
func TestScopeRefusalsAtOnce(t *testing.T) {
	const n = 16
	var arrived atomic.Int32
	all := make(chan struct{})
	srv := behindFront(t, backendtest.NewHTTPServer(t, config.TypeHTTP, backendtest.ModeNormal), func(proxy *httputil.ReverseProxy) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			c := peekCall(r)
			if c.Method != "tools/call" {
				proxy.ServeHTTP(w, r)
				return
			}
			if arrived.Add(1) == n {
				close(all)
			}
			<-all // every 403 at once
			w.Header().Set("WWW-Authenticate", `Bearer error="insufficient_scope", scope="`+c.Params.Arguments.Text+`"`)
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprint(w, `{"error":"insufficient_scope"}`)
		})
	})
	p := startPool(t, []config.Server{srv}, testOptions(&testenv.LogBuffer{}))
	testenv.Eventually(t, "the server up", func() bool { return statusOf(t, p, "remote").State == StateUp })
	errs := make(chan error, n)
	for i := range n {
		go func() {
			_, err := p.CallTool(context.Background(), "remote", "echo", map[string]any{"text": fmt.Sprintf("scope%d", i)})
			if err == nil {
				err = errors.New("no error")
			}
			var refused *RefusedError
			if want := fmt.Sprintf(`"scope%d"`, i); !errors.As(err, &refused) || !strings.Contains(err.Error(), want) {
				err = fmt.Errorf("call %d: %w\nwant a RefusedError naming %s", i, err, want)
			} else {
				err = nil
			}
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

// TestScopeRefusalOverSSE: a server of the older HTTP+SSE transport that
// refuses one call 403 insufficient_scope (its POST) refuses that call
// alone (scopeConn): the call reads a RefusedError with the scopes, the
// backend stays up on the same session, and a call in flight meanwhile,
// whose answer comes on the stream after the refusal, gets it. go-sdk's
// SSE connection failed the write ("failed to write: 403 Forbidden") and
// ended the session: the backend went down, the call in flight failed
// with it, and the refused call read "is unavailable … retry later".
func TestScopeRefusalOverSSE(t *testing.T) {
	for _, tc := range []struct {
		name, typ string
		rpc       bool // the 403's body is a JSON-RPC error, which go-sdk's SSE client never reads
	}{
		{name: "sse", typ: config.TypeSSE},
		{name: "http", typ: config.TypeHTTP}, // an entry that falls back to SSE (trySSE)
		{name: "rpc body", typ: config.TypeSSE, rpc: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			arrived, refusedSent := make(chan struct{}), make(chan struct{})
			srv := behindFront(t, backendtest.NewHTTPServer(t, config.TypeSSE, backendtest.ModeNormal), func(proxy *httputil.ReverseProxy) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					c := peekCall(r)
					switch {
					case c.Method == "tools/call" && c.Params.Arguments.Text == "refuse":
						w.Header().Set("WWW-Authenticate", `Bearer error="insufficient_scope", scope="admin"`)
						w.Header().Set("Content-Type", "application/json")
						w.WriteHeader(http.StatusForbidden)
						if tc.rpc {
							fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32001,"message":"echo needs admin"}}`, c.ID)
						} else {
							fmt.Fprint(w, `{"error":"insufficient_scope","error_description":"echo needs admin"}`)
						}
						return
					case c.Method == "tools/call" && c.Params.Arguments.Text == "wait":
						close(arrived)
						<-refusedSent
					}
					proxy.ServeHTTP(w, r)
				})
			})
			release := sync.OnceFunc(func() { close(refusedSent) })
			t.Cleanup(release) // a test that fails lets the front go before it closes
			o := testOptions(&testenv.LogBuffer{})
			o.RestartDelays = []time.Duration{time.Hour} // a session that ends stays ended
			srv.Type = tc.typ
			p := startPool(t, []config.Server{srv}, o)
			testenv.Eventually(t, "the server up", func() bool { return statusOf(t, p, "remote").State == StateUp })
			up := statusOf(t, p, "remote")
			if up.Transport != config.TypeSSE {
				t.Fatalf("connected over %s, want sse", up.Transport)
			}
			type answer struct {
				res *mcp.CallToolResult
				err error
			}
			waited := make(chan answer, 1)
			go func() {
				res, err := p.CallTool(context.Background(), "remote", "echo", map[string]any{"text": "wait"})
				waited <- answer{res, err}
			}()
			<-arrived
			const want = `the server answered a POST to ` // the SSE session's own endpoint
			const fix = `with 403 Forbidden ("echo needs admin"): the server wants the scopes "admin", and the requests carry no token`
			for i := range 2 {
				_, err := p.CallTool(context.Background(), "remote", "echo", map[string]any{"text": "refuse"})
				var refused *RefusedError
				if !errors.As(err, &refused) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), fix) {
					t.Fatalf("refused call %d: %v\nwant a RefusedError that says %q … %q", i+1, err, want, fix)
				}
				if st := statusOf(t, p, "remote"); st.State != StateUp || st.Restarts != 0 || !st.Since.Equal(up.Since) || st.Err != "" {
					t.Fatalf("after refused call %d: %s (restarts %d, since %v, was %v): %s; want up on its first session", i+1, st.State, st.Restarts, st.Since, up.Since, st.Err)
				}
			}
			release()
			if a := <-waited; a.err != nil || textOf(t, a.res) != "wait" {
				t.Errorf("the call in flight meanwhile: %v, %v; want its own answer, wait", a.res, a.err)
			}
			if res, err := p.CallTool(context.Background(), "remote", "echo", map[string]any{"text": "after"}); err != nil || textOf(t, res) != "after" {
				t.Errorf("a call after the refusals: %v, %v; want after", res, err)
			}
			if st := statusOf(t, p, "remote"); st.State != StateUp || st.Restarts != 0 || !st.Since.Equal(up.Since) {
				t.Errorf("at the end: %s (restarts %d, since %v, was %v): %s; want up on its first session", st.State, st.Restarts, st.Since, up.Since, st.Err)
			}
		})
	}
}
