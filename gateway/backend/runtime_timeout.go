package backend

import (
	"context"
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

// withRunningTimeout is context.WithTimeoutCause(ctx, d, cause) where d is
// time the process ran: a pause of the process does not count.
func withRunningTimeout(ctx context.Context, d time.Duration, cause error) (context.Context, context.CancelFunc) {
	cctx, cancel := context.WithCancelCause(ctx)
	go func() {
		for left := d; left > 0; {
			step := min(left, runningStep)
			start := time.Now()
			t := time.NewTimer(step)
			select {
			case <-cctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			took := time.Since(start)
			if took > step+pauseSlack {
				took = step // stopped meanwhile
			}
			left -= took
		}
		cancel(cause)
	}()
	return cctx, func() { cancel(context.Canceled) }
}
