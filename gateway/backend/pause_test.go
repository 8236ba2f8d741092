//go:build linux

package backend

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/toolgate/toolgate/gateway/backend/backendtest"
	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/internal/testenv"
)

// pauseSelf stops this process (SIGSTOP: as a frozen container, a paused
// VM or `kill -STOP` does) for d, then returns; a child sends the SIGCONT.
// Every test of the package is paused with it: the package runs none in
// parallel.
func pauseSelf(t *testing.T, d time.Duration) {
	t.Helper()
	waker := exec.Command("sh", "-c", fmt.Sprintf("sleep %.3f; kill -CONT %d", d.Seconds(), os.Getpid()))
	if err := waker.Start(); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if err := waker.Wait(); err != nil {
		t.Fatalf("the child that continues the test: %v", err)
	}
}

// TestCallTimeoutNotSpentWhilePaused: a call in flight when the gateway is
// stopped (SIGSTOP, a frozen container) for longer than its call timeout is
// not timed out at the resume: the timeout counts the time the gateway ran.
// It used to time out at once at SIGCONT, so a server frozen along with the
// gateway got only what ran of the timeout before the pause, and the answer
// of one that was not frozen, waiting in the pipe, was thrown away.
func TestCallTimeoutNotSpentWhilePaused(t *testing.T) {
	defer func(s time.Duration) { pauseSlack = s }(pauseSlack)
	pauseSlack = 500 * time.Millisecond
	o := testOptions(nil)
	o.CallTimeout = 2 * time.Second
	p := startPool(t, []config.Server{named(backendtest.Command(t, backendtest.ModeHang), "fake")}, o)
	testenv.Eventually(t, "the server up", func() bool { return statusOf(t, p, "fake").State == StateUp })

	errc := make(chan error, 1)
	go func() {
		_, err := p.CallTool(context.Background(), "fake", "hang", nil)
		errc <- err
	}()
	testenv.Eventually(t, "the call in flight", func() bool { return statusOf(t, p, "fake").InFlight == 1 })
	pauseSelf(t, 2500*time.Millisecond) // longer than the call timeout
	resumed := time.Now()
	err := <-errc
	after := time.Since(resumed)
	if !errors.Is(err, ErrCallTimeout) {
		t.Fatalf("the call: %v, want its timeout (the server never answers)", err)
	}
	// About 1 s of the 2 s had run at the pause (the step under way counts whole).
	if after < 500*time.Millisecond {
		t.Errorf("the call timed out %s after the resume: the pause counted against its timeout", after.Round(time.Millisecond))
	}
}
