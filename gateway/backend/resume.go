package backend

import (
	"time"
)

// A machine that sleeps (a laptop's lid closed, a VM suspended) stops Go's
// monotonic clock (CLOCK_MONOTONIC on Linux, mach_absolute_time on macOS),
// which every timer runs on, while the wall clock is set right at the
// resume. The connections to remote servers are most often dead then (the
// Wi-Fi joined again with another address, the NAT forgot them), yet each
// timer counted on where it stopped: a restart waited out the rest of a
// delay taken before the sleep, and a dead session stayed "up" until its
// next ping (up to keepAlive later) got no answer. The pool looks at both
// clocks every sleepCheck; when the wall clock ran sleepSlack longer than
// the monotonic one, the machine slept (or its clock was set), and every
// remote server is looked at now: pinged when up, connected to when down.
var (
	sleepCheck = 5 * time.Second
	sleepSlack = 3 * time.Second
)

// clockReading is the wall clock and the monotonic clock at one moment.
type clockReading struct {
	wall time.Time     // without its monotonic reading
	mono time.Duration // since an origin of the process
}

// readClocks reads both clocks, mono counted from origin (a time.Now()
// that carries its monotonic reading).
func readClocks(origin time.Time) clockReading {
	now := time.Now()
	return clockReading{wall: now.Round(0), mono: now.Sub(origin)}
}

// slept is how much longer the wall clock ran than the monotonic one from
// a to b: the time the machine slept in between (or a step of the clock).
func slept(a, b clockReading) time.Duration {
	return b.wall.Sub(a.wall) - (b.mono - a.mono)
}

// watchSleep tells the backends (woke) when the machine woke from a sleep,
// until the pool closes.
func (p *Pool) watchSleep() {
	defer p.wg.Done()
	origin := time.Now()
	last := readClocks(origin)
	t := time.NewTicker(sleepCheck)
	defer t.Stop()
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-t.C:
		}
		now := readClocks(origin)
		if d := slept(last, now); d > sleepSlack || d < -sleepSlack {
			p.log.Info("the machine slept, or its clock was set: looking at every remote server now", keySlept, d.Round(time.Second))
			p.wake()
		}
		last = now
	}
}

// woken returns a channel closed at the next wake.
func (p *Pool) woken() <-chan struct{} {
	p.wakeMu.Lock()
	defer p.wakeMu.Unlock()
	return p.wakeCh
}

// wake tells every backend waiting on woken that the machine woke up.
func (p *Pool) wake() {
	p.wakeMu.Lock()
	defer p.wakeMu.Unlock()
	close(p.wakeCh)
	p.wakeCh = make(chan struct{})
}
