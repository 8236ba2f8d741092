package backend

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestCancelAfterRunningSteps: a timeout longer than one step is counted
// over several steps and ends with its cause once the whole has run (not
// after the first step); one whose context ends first, or that is
// stopped, cancels nothing.
func TestCancelAfterRunningSteps(t *testing.T) {
	defer func(s time.Duration) { runningStep = s }(runningStep)
	runningStep = 2 * time.Millisecond
	cause := errors.New("the whole ran")

	const d = 30 * time.Millisecond
	ctx, cancel := context.WithCancelCause(context.Background())
	start := time.Now()
	stop := cancelAfterRunning(ctx, cancel, d, cause)
	defer stop()
	<-ctx.Done()
	if took := time.Since(start); took < d {
		t.Errorf("cancelled after %s, before the %s timeout (15 steps) ran", took, d)
	}
	if !errors.Is(context.Cause(ctx), cause) {
		t.Errorf("cause %v, want %v", context.Cause(ctx), cause)
	}

	// Stopped, or its context cancelled otherwise: the cause stays the
	// caller's.
	for _, end := range []string{"stop", "cancel"} {
		ctx, cancel := context.WithCancelCause(context.Background())
		rt := &runningTimer{ctx: ctx, cancel: cancel, cause: cause, left: runningStep}
		rt.mu.Lock()
		rt.arm()
		rt.start = rt.start.Add(-runningStep) // its one step has run
		rt.mu.Unlock()
		if end == "stop" {
			rt.stop()
		} else {
			cancel(context.Canceled)
		}
		rt.fire() // the step's timer, had it fired meanwhile
		if end == "stop" && ctx.Err() != nil {
			t.Errorf("%s: a stopped timeout cancelled (%v)", end, context.Cause(ctx))
		}
		if end == "cancel" && !errors.Is(context.Cause(ctx), context.Canceled) {
			t.Errorf("%s: cause %v, want the caller's", end, context.Cause(ctx))
		}
		rt.stop()
	}
}
