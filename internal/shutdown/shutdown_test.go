package shutdown

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testenv"
)

// fixture starts a controller on fake signals whose Exit is recorded.
type fixture struct {
	c     *Controller
	ctx   context.Context
	sigs  chan os.Signal
	exits chan int
	logs  *testenv.LogBuffer
}

func start(t *testing.T, budget time.Duration) *fixture {
	t.Helper()
	return startEcho(t, budget, 0)
}

// startEcho starts a fixture whose echo window is echo (0: the default,
// negative: none). Its signals are unbuffered: a send returns once the
// controller took it, so a second send returns once it handled the first.
func startEcho(t *testing.T, budget, echo time.Duration) *fixture {
	t.Helper()
	f := &fixture{sigs: make(chan os.Signal), exits: make(chan int, 4), logs: &testenv.LogBuffer{}}
	f.ctx, f.c = Start(context.Background(), &Options{Logger: f.logs.Logger(), Budget: budget, Echo: echo, Signals: f.sigs, Exit: func(code int) { f.exits <- code }})
	return f
}

func (f *fixture) exit(t *testing.T) int {
	t.Helper()
	select {
	case code := <-f.exits:
		return code
	case <-time.After(testenv.Timeout):
		t.Fatal("the process was never ended")
		return -1
	}
}

func TestFirstSignalCancelsAndStopIsClean(t *testing.T) {
	f := start(t, time.Minute)
	f.sigs <- syscall.SIGTERM
	<-f.ctx.Done()
	closed := false
	f.c.Close("backends", func() error { closed = true; return nil })
	if !closed {
		t.Fatal("Close did not call the closer")
	}
	if code := f.c.Stop(); code != 0 {
		t.Fatalf("Stop = %d, want 0 (clean)", code)
	}
	if len(f.exits) != 0 {
		t.Fatal("a clean stop ended the process itself")
	}
	if !strings.Contains(f.logs.String(), "stopping: SIGTERM; a second signal exits at once") {
		t.Errorf("log:\n%s", f.logs)
	}
}

// A store whose Close never returns (Badger retrying a flush forever) is
// left running at the budget's end; the stop says so and is unclean.
func TestCloseThatHangsIsAbandoned(t *testing.T) {
	f := start(t, 700*time.Millisecond)
	f.sigs <- os.Interrupt
	<-f.ctx.Done()
	block := make(chan struct{})
	defer close(block)
	f.c.Close("embedding cache", func() error { <-block; return nil })
	f.c.Close("logins", func() error { return errors.New("disk on fire") })
	if code := f.c.Stop(); code != ExitUnclean {
		t.Fatalf("Stop = %d, want %d", code, ExitUnclean)
	}
	log := f.logs.String()
	for _, want := range []string{"stop: embedding cache not stopped cleanly", "did not stop within the 700ms budget", "stop: logins not stopped cleanly", "disk on fire", "stopped, not cleanly: embedding cache, logins (exit status 4)"} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
}

func TestSecondSignalExitsAtOnce(t *testing.T) {
	for sig, want := range map[os.Signal]int{os.Interrupt: 130, syscall.SIGTERM: 143} {
		f := startEcho(t, time.Hour, -1) // every second signal comes after the echo window
		f.sigs <- sig
		<-f.ctx.Done()
		f.sigs <- sig
		if code := f.exit(t); code != want {
			t.Errorf("second %v: exit %d, want %d", sig, code, want)
		}
		if !strings.Contains(f.logs.String(), "exiting now") {
			t.Errorf("log:\n%s", f.logs)
		}
		f.c.Stop()
	}
}

// TestEchoedSignalIsTheSameStop: a second signal that comes within the
// echo window of the first is the same stop, not an impatient second one.
// `timeout` sends its SIGTERM to the command and then to its process group,
// the command again; a wrapper script that passes the terminal's Ctrl-C on
// sends it to a command that got it from the terminal already. The second
// ended the process at once (exit 143, "exiting now, without finishing the
// stop"), its stores not closed, though one signal was meant.
func TestEchoedSignalIsTheSameStop(t *testing.T) {
	f := startEcho(t, time.Hour, time.Hour) // every second signal is within the window
	f.sigs <- syscall.SIGTERM
	<-f.ctx.Done()
	f.sigs <- syscall.SIGTERM // timeout's second
	f.sigs <- os.Interrupt    // sent once the echo is handled (unbuffered)
	f.c.Close("embedding cache", func() error { return nil })
	if code := f.c.Stop(); code != 0 {
		t.Fatalf("Stop = %d, want 0 (clean)", code)
	}
	if len(f.exits) != 0 {
		t.Fatalf("an echoed signal ended the process (exit %d)", <-f.exits)
	}
	if log := f.logs.String(); strings.Contains(log, "exiting now") || !strings.Contains(log, "taken as the same stop") {
		t.Errorf("log:\n%s", log)
	}
	if DefaultEcho <= 0 || DefaultEcho > 250*time.Millisecond {
		t.Errorf("DefaultEcho = %v: an impatient second Ctrl-C must still exit at once", DefaultEcho)
	}
}

// A stop that overruns the budget (something that is not a Close hangs)
// ends the process with ExitUnclean, naming what was still stopping.
func TestBudgetEndsTheProcess(t *testing.T) {
	f := start(t, 300*time.Millisecond)
	f.sigs <- syscall.SIGTERM
	<-f.ctx.Done()
	f.c.mu.Lock()
	f.c.stages = append(f.c.stages, "backends")
	f.c.mu.Unlock()
	if code := f.exit(t); code != ExitUnclean {
		t.Fatalf("exit %d, want %d", code, ExitUnclean)
	}
	if !strings.Contains(f.logs.String(), "exiting with backends still stopping") {
		t.Errorf("log:\n%s", f.logs)
	}
	f.c.Stop()
}

// Without a signal, the first Close starts the budget (a stdio client that
// closed stdin ends serve the same way).
func TestCloseWithoutSignalStartsBudget(t *testing.T) {
	f := start(t, 300*time.Millisecond)
	f.c.Close("backends", func() error { return nil })
	if f.ctx.Err() != nil {
		t.Error("Close cancelled the command's context")
	}
	if code := f.exit(t); code != ExitUnclean {
		t.Fatalf("a command that never returned after Close: exit %d, want %d", code, ExitUnclean)
	}
	f.c.Stop()
}

func TestNilController(t *testing.T) {
	var c *Controller
	called := false
	c.Close("x", func() error { called = true; return nil })
	c.Begin()
	c.Unclean("x", errors.New("y"))
	c.SetLogger(nil)
	if !called || c.Stop() != 0 {
		t.Error("a nil controller does not just close")
	}
}

// A quiet command (a follower) stops at the first signal as any other,
// cleanly, but announces it only at the debug level: at info its stderr
// gets no "stopping" line.
func TestQuietStopNotAnnounced(t *testing.T) {
	var logs testenv.LogBuffer
	sigs := make(chan os.Signal, 2)
	ctx, c := Start(context.Background(), &Options{
		Logger:  slog.New(slog.NewTextHandler(&logs, nil)), // info, as a command's default
		Budget:  time.Minute,
		Signals: sigs,
		Exit:    func(code int) { t.Errorf("the process was ended (%d)", code) },
	})
	c.Quiet()
	sigs <- syscall.SIGTERM
	<-ctx.Done()
	if code := c.Stop(); code != 0 {
		t.Fatalf("Stop = %d, want 0 (clean)", code)
	}
	if log := logs.String(); log != "" {
		t.Errorf("a quiet stop logged at info:\n%s", log)
	}
}

// Stopped says a stop in place of the error the cancel made, and only
// when ctx was cancelled.
func TestStopped(t *testing.T) {
	failed := errors.New("build index: embed tools 1-199 of 199: context canceled")
	ctx, cancel := context.WithCancel(context.Background())
	if err := Stopped(ctx, failed, "the index was built", "run it again"); err != failed {
		t.Errorf("before the cancel: %v, want the error as it was", err)
	}
	if err := Stopped(ctx, nil, "the index was built", "run it again"); err != nil {
		t.Errorf("no error: %v", err)
	}
	cancel()
	if err := Stopped(ctx, failed, "the index was built", "run it again"); err == nil || err.Error() != "stopped before the index was built: run it again" {
		t.Errorf("after the cancel: %v", err)
	}
}

// SIGHUP (a closed terminal) stops a command as SIGINT does, unless the
// command keeps it (serve reloads on it): then it is no stop at all.
func TestHangup(t *testing.T) {
	f := start(t, time.Minute)
	f.sigs <- syscall.SIGHUP
	<-f.ctx.Done()
	if code := f.c.Stop(); code != 0 {
		t.Fatalf("Stop = %d, want 0 (clean)", code)
	}
	if !strings.Contains(f.logs.String(), "stopping: SIGHUP; a second signal exits at once") {
		t.Errorf("log:\n%s", f.logs)
	}

	f = start(t, time.Minute)
	f.c.KeepHangup()
	f.sigs <- syscall.SIGHUP
	f.sigs <- syscall.SIGTERM // handled after the SIGHUP: the first stop signal
	<-f.ctx.Done()
	if code := f.c.Stop(); code != 0 || len(f.exits) != 0 {
		t.Fatalf("Stop = %d, exits %d; want 0 and none (SIGTERM is the first stop signal)", code, len(f.exits))
	}
	if log := f.logs.String(); strings.Contains(log, "SIGHUP") || !strings.Contains(log, "stopping: SIGTERM") {
		t.Errorf("a kept SIGHUP was taken for a stop:\n%s", log)
	}
}
