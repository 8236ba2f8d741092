package backend

import (
	"time"

	"github.com/toolgate/toolgate/internal/sleepwatch"
)

// watchSleep tells the backends (woke) when the machine woke from a sleep
// (sleepwatch), until the pool closes: every remote server is looked at
// now, pinged when up, connected to when down, rather than when its timers
// (which stood still in the sleep) say.
func (p *Pool) watchSleep() {
	defer p.wg.Done()
	sleepwatch.Watch(p.ctx, func(d time.Duration) {
		p.log.Info("the machine slept, or its clock was set: looking at every remote server now", keySlept, d.Round(time.Second))
		p.wake()
	})
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
