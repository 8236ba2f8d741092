package bridge

import (
	"context"
	"time"
)

// WakeWith makes the bridges started from now on report their wakes to
// wakes, where a test wakes them (the clocks of a test run do not sleep),
// until t ends.
func WakeWith(cleanup func(func()), wakes chan<- func(time.Duration)) {
	w := func(ctx context.Context, woke func(time.Duration)) {
		select {
		case wakes <- woke:
		case <-ctx.Done():
		}
	}
	old := watchSleep.Swap(&w)
	cleanup(func() { watchSleep.Store(old) })
}
