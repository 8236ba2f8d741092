package backend

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
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
)

// notified records OnToolsChanged calls by server.
type notified struct {
	mu sync.Mutex
	n  map[string]int
}

func (r *notified) record(server string, _ []*mcp.Tool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == nil {
		r.n = map[string]int{}
	}
	r.n[server]++
}

func (r *notified) count(server string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n[server]
}

func upWithPID(p *Pool, name string) (int, bool) {
	for _, s := range p.Status() {
		if s.Name == name && s.State == StateUp && s.PID != 0 {
			return s.PID, true
		}
	}
	return 0, false
}

func pidOf(t *testing.T, p *Pool, name string) int {
	t.Helper()
	var pid int
	testenv.Eventually(t, name+" up", func() bool {
		var ok bool
		pid, ok = upWithPID(p, name)
		return ok
	})
	return pid
}

func TestReconfigure(t *testing.T) {
	l := &testenv.LogBuffer{}
	o := testOptions(l)
	var seen notified
	o.OnToolsChanged = seen.record
	srv := backendtest.Command(t, "normal")
	p := startPool(t, []config.Server{named(srv, "keep"), named(srv, "change"), named(srv, "drop")}, o)
	keepPID, changePID, dropPID := pidOf(t, p, "keep"), pidOf(t, p, "change"), pidOf(t, p, "drop")

	changed := named(backendtest.Command(t, "normal", "RELOAD_MARK=2"), "change")
	d := p.Reconfigure(context.Background(), []config.Server{named(srv, "add"), changed, named(srv, "keep")})
	want := Diff{Added: []string{"add"}, Removed: []string{"drop"}, Changed: []string{"change"}, Unchanged: []string{"keep"}, Fields: map[string][]string{"change": {"env"}}}
	if diff := cmp.Diff(want, d); diff != "" {
		t.Fatalf("Diff (-want +got):\n%s", diff)
	}
	if got := p.Servers(); !slices.Equal(got, []string{"add", "change", "keep"}) {
		t.Errorf("Servers() = %v right after Reconfigure", got)
	}
	for _, s := range p.Status() {
		if s.Name == "drop" {
			t.Errorf("removed server still in Status: %+v", s)
		}
	}
	if _, ok := p.Tools()["drop"]; ok {
		t.Error("removed server still in Tools()")
	}

	addPID := pidOf(t, p, "add")
	newPID := pidOf(t, p, "change")
	if newPID == changePID {
		t.Errorf("changed server kept its process %d", newPID)
	}
	if pid, _ := upWithPID(p, "keep"); pid != keepPID {
		t.Errorf("unchanged server: pid %d, want %d (untouched)", pid, keepPID)
	}
	testenv.Eventually(t, "removed and replaced processes gone", func() bool { return !procAlive(dropPID) && !procAlive(changePID) })
	testenv.Eventually(t, "tools of added and changed servers notified", func() bool { return seen.count("add") == 1 && seen.count("change") == 2 })
	if n := seen.count("keep"); n != 1 {
		t.Errorf("unchanged server notified %d times, want once (at start)", n)
	}

	// The changed one runs with its new entry; the added one serves.
	for _, name := range []string{"add", "change", "keep"} {
		res, err := p.CallTool(context.Background(), name, "echo", map[string]any{"text": name})
		if err != nil || textOf(t, res) != name {
			t.Errorf("echo on %s: %v %v", name, res, err)
		}
	}
	_, err := p.CallTool(context.Background(), "drop", "echo", map[string]any{"text": "x"})
	var ue *UnavailableError
	if !errors.As(err, &ue) || !errors.Is(err, ErrUnknownServer) || !strings.Contains(err.Error(), `"drop" was removed from the config`) {
		t.Errorf("call on removed server: %v, want ErrUnknownServer saying it was removed", err)
	}
	if got := p.Unavailable("drop", false); !strings.Contains(got, "removed from the config") {
		t.Errorf("Unavailable(drop) = %q", got)
	}

	// Adding it back makes it a server again.
	d = p.Reconfigure(context.Background(), []config.Server{named(srv, "add"), changed, named(srv, "keep"), named(srv, "drop")})
	if !slices.Equal(d.Added, []string{"drop"}) || len(d.Unchanged) != 3 {
		t.Errorf("re-adding: %+v", d)
	}
	dropPID = pidOf(t, p, "drop")

	p.Close()
	for _, pid := range []int{keepPID, newPID, addPID, dropPID} {
		if procAlive(pid) {
			t.Errorf("process %d alive after Close", pid)
		}
	}
	if z := childrenOf(os.Getpid()); len(z) > 0 {
		t.Errorf("children left after Close: %v", z)
	}
}

func TestReconfigureCallInFlight(t *testing.T) {
	srv := backendtest.Command(t, "hang")
	p := startPool(t, []config.Server{named(srv, "gone"), named(srv, "moved"), named(srv, "stay")}, testOptions(nil))
	errc := map[string]chan error{}
	for _, name := range []string{"gone", "moved"} {
		errc[name] = make(chan error, 1)
		go func() {
			_, err := p.CallTool(context.Background(), name, "hang", nil)
			errc[name] <- err
		}()
		// The backend holds it: the pool counts a call in flight before
		// its request is written, and a call the reload's close comes
		// before is rightly one that did not run ("call again" alone).
		testenv.Eventually(t, "call held by "+name, func() bool { return hangs(t, p, name) == backendtest.HangCount(1, 0) })
	}
	oldPID := pidOf(t, p, "moved")
	p.Reconfigure(context.Background(), []config.Server{named(backendtest.Command(t, "hang", "RELOAD_MARK=1"), "moved"), named(srv, "stay")})

	for name, want := range map[string]string{
		"gone":  "it was removed from the config during the call",
		"moved": "its config entry changed and it is restarting with the new one during the call: " + ErrMayHaveRun.Error() + "; call again",
	} {
		err := <-errc[name]
		var ue *UnavailableError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), want) || !errors.Is(err, ErrMayHaveRun) {
			t.Errorf("in-flight call on %s: %v, want UnavailableError with %q and ErrMayHaveRun", name, err, want)
		}
	}
	// A new call on the changed server reaches its new backend.
	res, err := p.CallTool(context.Background(), "moved", "echo", map[string]any{"text": "again"})
	if err != nil || textOf(t, res) != "again" {
		t.Fatalf("echo on the changed server: %v %v", res, err)
	}
	if pid := pidOf(t, p, "moved"); pid == oldPID {
		t.Errorf("changed server still on pid %d", pid)
	}
}

// TestReconfigureConcurrent runs calls, Status, Tools, Servers and
// Unavailable while the set of servers changes (run with -race): calls on
// the server that never changes all succeed.
func TestReconfigureConcurrent(t *testing.T) {
	srv := backendtest.Command(t, "normal")
	stable := named(srv, "stable")
	p := startPool(t, []config.Server{stable}, testOptions(nil))
	stablePID := pidOf(t, p, "stable")

	var stop atomic.Bool
	var wg sync.WaitGroup
	var calls, otherCalls atomic.Int64
	for i := range 4 {
		wg.Go(func() {
			for n := 0; !stop.Load(); n++ {
				text := fmt.Sprint(i, "-", n)
				res, err := p.CallTool(context.Background(), "stable", "echo", map[string]any{"text": text})
				if err != nil || textOf(t, res) != text {
					t.Errorf("echo on stable during reconfigure: %v %v", res, err)
					return
				}
				calls.Add(1)
				// Calls on the server that comes and goes either work or
				// say why not.
				if _, err := p.CallTool(context.Background(), "flip", "echo", map[string]any{"text": text}); err != nil {
					var ue *UnavailableError
					if !errors.As(err, &ue) {
						t.Errorf("call on flip: %v, want success or UnavailableError", err)
					}
				} else {
					otherCalls.Add(1)
				}
			}
		})
	}
	wg.Go(func() {
		for !stop.Load() {
			for _, s := range p.Status() {
				_ = p.Unavailable(s.Name, false)
			}
			_ = p.Tools()
			_ = p.Servers()
		}
	})
	for i := range 6 {
		servers := []config.Server{stable}
		if i%2 == 0 {
			servers = append(servers, named(backendtest.Command(t, "normal", fmt.Sprint("RELOAD_MARK=", i)), "flip"))
			p.Reconfigure(context.Background(), servers)
			pidOf(t, p, "flip")
		} else {
			p.Reconfigure(context.Background(), servers)
		}
	}
	testenv.Eventually(t, "some calls done", func() bool { return calls.Load() > 20 })
	stop.Store(true)
	wg.Wait()
	if pid, _ := upWithPID(p, "stable"); pid != stablePID {
		t.Errorf("stable server: pid %d, want %d", pid, stablePID)
	}
	t.Logf("%d calls on stable, %d successful calls on flip", calls.Load(), otherCalls.Load())
	p.Close()
	if z := childrenOf(os.Getpid()); len(z) > 0 {
		t.Errorf("children left after Close: %v", z)
	}
}

func TestReconfigureTimeoutsInPlace(t *testing.T) {
	srv := named(backendtest.Command(t, "normal"), "s")
	p := startPool(t, []config.Server{srv}, testOptions(nil))
	pid := pidOf(t, p, "s")
	srv.CallTimeout = config.Duration{Duration: 200 * time.Millisecond}
	srv.ConnectTimeout = config.Duration{Duration: 10 * time.Second}
	d := p.Reconfigure(context.Background(), []config.Server{srv})
	if diff := cmp.Diff(Diff{Updated: []string{"s"}, Fields: map[string][]string{"s": {"connectTimeout", "callTimeout"}}}, d); diff != "" {
		t.Fatalf("Diff (-want +got):\n%s", diff)
	}
	_, err := p.CallTool(context.Background(), "s", "sleep", map[string]any{"ms": 5000})
	if !errors.Is(err, ErrCallTimeout) || !strings.Contains(err.Error(), "200ms") {
		t.Errorf("call after lowering callTimeout: %v, want a timeout of 200ms", err)
	}
	if got, _ := upWithPID(p, "s"); got != pid {
		t.Errorf("pid %d after a timeout change, want %d (not restarted)", got, pid)
	}
}

func TestReconfigureBeforeStart(t *testing.T) {
	srv := backendtest.Command(t, "normal")
	p := New([]config.Server{named(srv, "old")}, testOptions(nil))
	t.Cleanup(func() { p.Close() })
	d := p.Reconfigure(context.Background(), []config.Server{named(srv, "new"), {Name: "off", Command: "x", Disabled: true}})
	if diff := cmp.Diff(Diff{Added: []string{"new"}, Removed: []string{"old"}}, d); diff != "" {
		t.Fatalf("Diff (-want +got):\n%s", diff)
	}
	p.Start(context.Background())
	got := map[string]State{}
	for _, s := range p.Status() {
		got[s.Name] = s.State
	}
	if diff := cmp.Diff(map[string]State{"new": StateUp}, got); diff != "" {
		t.Errorf("states after Start (-want +got):\n%s", diff)
	}
	p.Close()
	if d := p.Reconfigure(context.Background(), []config.Server{named(srv, "late")}); !d.Empty() || len(d.Unchanged) != 0 {
		t.Errorf("Reconfigure after Close: %+v, want nothing done", d)
	}
}

func TestReconfigureLazyAdded(t *testing.T) {
	srv := backendtest.Command(t, "normal")
	p := startPool(t, []config.Server{named(srv, "eager")}, lazyOptions(0))
	p.Reconfigure(context.Background(), []config.Server{named(srv, "eager"), named(srv, "lazy")})
	if st := statusOf(t, p, "lazy"); st.State != StateIdle || st.PID != 0 {
		t.Fatalf("added lazy server: %+v, want idle with no process", st)
	}
	res, err := p.CallTool(context.Background(), "lazy", "echo", map[string]any{"text": "wake"})
	if err != nil || textOf(t, res) != "wake" {
		t.Fatalf("first call on the added lazy server: %v %v", res, err)
	}
	pid := pidOf(t, p, "lazy")
	p.Reconfigure(context.Background(), []config.Server{named(srv, "eager")})
	testenv.Eventually(t, "removed lazy backend stopped", func() bool { return !procAlive(pid) })
}

// TestCloseWaitsForRemovedBackend removes a backend that ignores stdin EOF
// and SIGTERM, then closes the pool at once: the stop runs in the
// background, and Close returns only when it is done (SIGKILL included).
func TestCloseWaitsForRemovedBackend(t *testing.T) {
	p := New([]config.Server{named(backendtest.Command(t, "stubborn"), "stubborn")}, testOptions(nil))
	p.Start(context.Background())
	pid := pidOf(t, p, "stubborn")
	if d := p.Reconfigure(context.Background(), nil); !slices.Equal(d.Removed, []string{"stubborn"}) {
		t.Fatalf("Diff %+v", d)
	}
	if !procAlive(pid) {
		t.Fatal("the stubborn backend died at once; the test needs it to outlive Reconfigure")
	}
	p.Close()
	if procAlive(pid) {
		t.Errorf("removed backend %d alive after Close", pid)
	}
	if z := childrenOf(os.Getpid()); len(z) > 0 {
		t.Errorf("children left after Close: %v", z)
	}
}

// TestRestart restarts one backend on request: a new process, the restart
// counted, the other backend untouched, calls served again, and a name not
// in the pool refused.
func TestRestart(t *testing.T) {
	o := testOptions(nil)
	var seen notified
	o.OnToolsChanged = seen.record
	srv := backendtest.Command(t, "normal")
	p := startPool(t, []config.Server{named(srv, "a"), named(srv, "b")}, o)
	aPID, bPID := pidOf(t, p, "a"), pidOf(t, p, "b")

	if err := p.Restart("a"); err != nil {
		t.Fatalf("Restart(a): %v", err)
	}
	// A call right after the restart waits for the new connection.
	res, err := p.CallTool(context.Background(), "a", "echo", map[string]any{"text": "again"})
	if err != nil || textOf(t, res) != "again" {
		t.Fatalf("echo on a after its restart: %v %v", res, err)
	}
	newPID := pidOf(t, p, "a")
	if newPID == aPID {
		t.Errorf("restarted backend kept its process %d", newPID)
	}
	if st := statusOf(t, p, "a"); st.Restarts != 1 || st.Tools == 0 {
		t.Errorf("status after restart: %+v, want restarts 1 and its tools", st)
	}
	if pid, _ := upWithPID(p, "b"); pid != bPID || statusOf(t, p, "b").Restarts != 0 {
		t.Errorf("the other backend: pid %d (was %d), restarts %d: want it untouched", pid, bPID, statusOf(t, p, "b").Restarts)
	}
	testenv.Eventually(t, "the old process gone", func() bool { return !procAlive(aPID) })
	testenv.Eventually(t, "the new connection's tools notified", func() bool { return seen.count("a") == 2 })

	err = p.Restart("nope")
	var ue *UnavailableError
	if !errors.As(err, &ue) || !errors.Is(err, ErrUnknownServer) {
		t.Errorf("Restart(nope) = %v, want ErrUnknownServer", err)
	}
}
