// Package sleepwatch tells when the machine woke from a sleep.
//
// A machine that sleeps (a laptop's lid closed, a VM suspended) stops Go's
// monotonic clock (CLOCK_MONOTONIC on Linux, mach_absolute_time on macOS),
// which every timer runs on, while the wall clock is set right at the
// resume. The connections made before are most often dead then (the Wi-Fi
// joined again with another address, the NAT forgot them), yet each timer
// counted on where it stopped. Watch looks at both clocks every Check;
// when the wall clock ran Slack longer than the monotonic one, the machine
// slept (or its clock was set).
package sleepwatch

import (
	"context"
	"time"
)

// Check is how often Watch reads the clocks; Slack how much the two may
// differ without it being a sleep.
var (
	Check = 5 * time.Second
	Slack = 3 * time.Second
)

// Reading is the wall clock and the monotonic clock at one moment.
type Reading struct {
	Wall time.Time     // without its monotonic reading
	Mono time.Duration // since an origin of the process
}

// Read reads both clocks, Mono counted from origin (a time.Now() that
// carries its monotonic reading).
func Read(origin time.Time) Reading {
	now := time.Now()
	return Reading{Wall: now.Round(0), Mono: now.Sub(origin)}
}

// Slept is how much longer the wall clock ran than the monotonic one from
// a to b: the time the machine slept in between (or a step of the clock).
func Slept(a, b Reading) time.Duration {
	return b.Wall.Sub(a.Wall) - (b.Mono - a.Mono)
}

// Watch calls woke with how long the machine slept (negative: its clock
// was set back) each time it woke, until ctx is done.
func Watch(ctx context.Context, woke func(slept time.Duration)) {
	origin := time.Now()
	last := Read(origin)
	t := time.NewTicker(Check)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := Read(origin)
		if d := Slept(last, now); d > Slack || d < -Slack {
			woke(d)
		}
		last = now
	}
}
