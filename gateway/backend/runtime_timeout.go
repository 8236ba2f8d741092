package backend

import (
	"context"
	"sync"
	"time"
)

// A stopped process (SIGSTOP, a frozen container, a debugger) sees Go's
// monotonic clock run on, so at SIGCONT every timer that would have fired
// meanwhile fires at once. For a call in flight that meant a timeout at the
// resume whatever the server did: a server frozen with the gateway had had
// a few seconds of its call timeout, and one that was not had answered and
// its answer, waiting in the pipe, was thrown away (a tool that wrote
// something reported as timed out). A call's timeout therefore counts the
// time the gateway ran, measured in steps of at most runningStep: a step
// that took pauseSlack longer than asked was a pause, and counts as the
// step asked.
var (
	runningStep = time.Second
	pauseSlack  = 2 * time.Second
)

// cancelAfterRunning calls cancel(cause) once the process has run for d
// (a pause of the process does not count), unless ctx (the context cancel
// belongs to) has ended first or stop is called. It runs no goroutine of
// its own until a step's timer fires (after runningStep at the earliest):
// a call that ends sooner, nearly every one, costs a timer and nothing
// more.
func cancelAfterRunning(ctx context.Context, cancel context.CancelCauseFunc, d time.Duration, cause error) (stop func()) {
	rt := &runningTimer{ctx: ctx, cancel: cancel, cause: cause, left: d}
	rt.mu.Lock()
	rt.arm()
	rt.mu.Unlock()
	return rt.stop
}

// runningTimer counts down the time the process runs, one step at a time.
type runningTimer struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	cause  error

	mu      sync.Mutex
	left    time.Duration // still to run after the step under way
	step    time.Duration // the step under way
	start   time.Time     // when it began
	t       *time.Timer
	stopped bool
}

// arm starts the next step; rt.mu is held.
func (rt *runningTimer) arm() {
	rt.step = min(rt.left, runningStep)
	rt.left -= rt.step
	rt.start = time.Now()
	if rt.t == nil {
		rt.t = time.AfterFunc(rt.step, rt.fire)
	} else {
		rt.t.Reset(rt.step)
	}
}

// fire ends a step: a step that took pauseSlack longer than asked was a
// pause and counts as the step asked; one that took longer otherwise
// counts as what it took.
func (rt *runningTimer) fire() {
	rt.mu.Lock()
	if rt.stopped || rt.ctx.Err() != nil {
		rt.mu.Unlock()
		return
	}
	if took := time.Since(rt.start); took <= rt.step+pauseSlack {
		rt.left -= took - rt.step
	}
	if rt.left > 0 {
		rt.arm()
		rt.mu.Unlock()
		return
	}
	rt.stopped = true
	rt.mu.Unlock()
	rt.cancel(rt.cause)
}

func (rt *runningTimer) stop() {
	rt.mu.Lock()
	rt.stopped = true
	rt.t.Stop()
	rt.mu.Unlock()
}
