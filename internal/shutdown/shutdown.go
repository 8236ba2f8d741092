// Package shutdown owns how a toolgate process stops: on SIGINT, SIGTERM or
// SIGHUP (the terminal it runs in closed; `serve` keeps SIGHUP for its
// reload: KeepHangup), or when a command ends for another reason (a stdio
// client that closed stdin, an error).
//
// The first signal cancels the command's context and starts the budget
// (Budget): the command stops what it runs within it — `serve` stops its
// HTTP front, the runtime loop, the backends, then the stores — each
// through Close, which waits no longer than the budget allows. A second
// signal ends the process at once, and so does the budget running out;
// one within DefaultEcho of the first is the same signal sent twice
// (`timeout`, a wrapper that passes the terminal's Ctrl-C on), not a
// second.
// The exit status says how the stop went:
//
//	0    clean: everything stopped, every store flushed and closed
//	4    not clean (ExitUnclean): a store could not be flushed or closed,
//	     or the budget ran out; the log names what, once
//	129  a second SIGHUP ended the process at once (ExitSignal + 1)
//	130  a second SIGINT ended the process at once (ExitSignal + 2)
//	143  a second SIGTERM ended the process at once (ExitSignal + 15)
//
// (1 and 2 stay an error and a usage error of the command.)
package shutdown

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Budget is how long a stop may take, from the first signal (or the end of
// the command's work) to the exit.
const Budget = 10 * time.Second

// margin is kept from the budget for Close: its caller still logs and
// returns before the budget's own exit. A Close that starts with less than
// that left still waits minWait (the budget's exit may come first).
const (
	margin  = 500 * time.Millisecond
	minWait = 100 * time.Millisecond
)

// DefaultEcho is how soon after the first signal a second one is taken as
// the same stop sent twice rather than an impatient second: `timeout`
// sends its signal to the command and then to its process group, the
// command included, microseconds apart; a wrapper that passes the
// terminal's Ctrl-C on to a command of its process group sends it within
// milliseconds of the terminal's own. A person's second Ctrl-C comes later
// than this, and still exits at once.
const DefaultEcho = 100 * time.Millisecond

// Exit statuses of a stop (0 is a clean one).
const (
	ExitUnclean = 4
	ExitSignal  = 128
)

// Options configure Start. Nil means defaults.
type Options struct {
	Logger *slog.Logger  // nil = discard (SetLogger sets one later)
	Budget time.Duration // default Budget
	// Echo: a second signal this soon after the first is the same stop
	// (default DefaultEcho; negative: none is).
	Echo time.Duration
	// Signals delivers the stop signals (default: SIGINT, SIGTERM and
	// SIGHUP of this process); tests send their own.
	Signals chan os.Signal
	// Exit ends the process (default os.Exit); tests record the status.
	Exit func(code int)
}

// Controller is one process's stop. Its methods are safe for concurrent
// use, and on a nil *Controller they do the work without a budget.
type Controller struct {
	o      Options
	log    atomic.Pointer[slog.Logger]
	quiet  atomic.Bool // Quiet: the first signal is not announced
	hupOwn atomic.Bool // KeepHangup: SIGHUP is the command's, not a stop
	cancel context.CancelFunc
	sigs   chan os.Signal
	quit   chan struct{}
	done   chan struct{}

	mu       sync.Mutex
	begun    bool
	deadline time.Time // monotonic
	watchdog *time.Timer
	stages   []string // being stopped now
	unclean  []string // what did not stop cleanly
	exited   bool
}

// Start watches for stop signals and returns the context a command runs
// under: it is cancelled by the first signal. Call Stop once the command
// has returned.
func Start(parent context.Context, opts *Options) (context.Context, *Controller) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Budget <= 0 {
		o.Budget = Budget
	}
	if o.Echo == 0 {
		o.Echo = DefaultEcho
	}
	if o.Exit == nil {
		o.Exit = os.Exit
	}
	c := &Controller{o: o, sigs: o.Signals, quit: make(chan struct{}), done: make(chan struct{})}
	c.SetLogger(o.Logger)
	if c.sigs == nil {
		c.sigs = make(chan os.Signal, 2)
		signal.Notify(c.sigs, os.Interrupt, syscall.SIGTERM)
		// SIGHUP too: its default action killed a command whose terminal
		// closed (exit 129) without a word, an index build or a fetch
		// half done, its stores unclosed. It stops it as Ctrl-C does.
		// Not when it is ignored (nohup): Notify would undo that, and the
		// build nohup was to keep going would stop.
		if !signal.Ignored(syscall.SIGHUP) {
			signal.Notify(c.sigs, syscall.SIGHUP)
		}
	}
	ctx, cancel := context.WithCancel(parent)
	c.cancel = cancel
	go c.watch()
	return ctx, c
}

// SetLogger sets where the stop logs (main knows the log level only once
// the flags are parsed).
func (c *Controller) SetLogger(l *slog.Logger) {
	if c == nil {
		return
	}
	if l == nil {
		l = slog.New(slog.DiscardHandler)
	}
	c.log.Store(l)
}

func (c *Controller) logger() *slog.Logger { return c.log.Load() }

// Quiet makes the first signal end the command without a word at the info
// level: a follower (`toolgate logs -f`, `audit tail -f`) has nothing to
// stop, and its "stopping: SIGTERM" in the terminal, beside the gateway's
// own lines it prints, read as the gateway stopping. It is logged at debug.
func (c *Controller) Quiet() {
	if c != nil {
		c.quiet.Store(true)
	}
}

// KeepHangup leaves SIGHUP to the command, which handles it itself
// (`serve` reloads its config on it): the stop no longer takes it for a
// signal to stop. Call it before the command registers its own; while the
// controller runs, SIGHUP stays caught, so one during serve's stop is not
// the default action's kill either.
func (c *Controller) KeepHangup() {
	if c != nil {
		c.hupOwn.Store(true)
	}
}

// watch turns the first signal into a cancelled context and a started
// budget, and the second into an exit.
func (c *Controller) watch() {
	defer close(c.done)
	first := true
	var firstAt time.Time
	for {
		select {
		case <-c.quit:
			return
		case sig := <-c.sigs:
			if sig == syscall.SIGHUP && c.hupOwn.Load() {
				continue
			}
			if first {
				first, firstAt = false, time.Now()
				level := slog.LevelInfo
				if c.quiet.Load() {
					level = slog.LevelDebug
				}
				c.logger().Log(context.Background(), level, "stopping: "+sigName(sig)+"; a second signal exits at once", "budget", c.o.Budget)
				c.Begin()
				c.cancel()
				continue
			}
			if after := time.Since(firstAt); after < c.o.Echo {
				level := slog.LevelInfo
				if c.quiet.Load() {
					level = slog.LevelDebug
				}
				c.logger().Log(context.Background(), level, fmt.Sprintf("%s again %s after the first: taken as the same stop (timeout(1), or a wrapper that passes the terminal's signal on, sends it twice); a signal after %s exits at once",
					sigName(sig), after.Round(time.Microsecond), c.o.Echo))
				continue
			}
			c.logger().Warn("second " + sigName(sig) + ": exiting now, without finishing the stop")
			c.exit(ExitSignal + sigNumber(sig))
		}
	}
}

// Begin starts the budget, if the first signal has not: from now on the
// process exits within it. A command that stops for another reason than a
// signal calls it before it stops what it runs.
func (c *Controller) Begin() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.begun {
		return
	}
	c.begun = true
	c.deadline = time.Now().Add(c.o.Budget)
	c.watchdog = time.AfterFunc(c.o.Budget, c.expired)
}

// expired ends a stop that overran the budget.
func (c *Controller) expired() {
	c.mu.Lock()
	stages := slices.Clone(c.stages)
	c.mu.Unlock()
	c.logger().Error(fmt.Sprintf("the stop did not finish within %s: exiting with %s still stopping (not flushed or closed)", c.o.Budget, orNothing(stages)))
	c.exit(ExitUnclean)
}

func orNothing(s []string) string {
	if len(s) == 0 {
		return "nothing named"
	}
	return strings.Join(s, ", ")
}

func (c *Controller) exit(code int) {
	c.mu.Lock()
	if c.exited {
		c.mu.Unlock()
		return
	}
	c.exited = true
	c.mu.Unlock()
	c.o.Exit(code)
}

// Close stops one thing named name by calling closeFn, and waits for it no
// longer than the budget allows (starting the budget if nothing has). An
// error, or closeFn not returning in time, is logged once and makes the
// stop unclean; closeFn is then left running until the process exits.
func (c *Controller) Close(name string, closeFn func() error) {
	if c == nil {
		_ = closeFn()
		return
	}
	c.Begin()
	c.mu.Lock()
	c.stages = append(c.stages, name)
	wait := time.Until(c.deadline) - margin
	c.mu.Unlock()
	done := make(chan error, 1)
	go func() { done <- closeFn() }()
	timer := time.NewTimer(max(wait, minWait))
	defer timer.Stop()
	var err error
	select {
	case err = <-done:
	case <-timer.C:
		err = fmt.Errorf("did not stop within the %s budget; left running until exit", c.o.Budget)
	}
	c.mu.Lock()
	if i := slices.Index(c.stages, name); i >= 0 {
		c.stages = slices.Delete(c.stages, i, i+1)
	}
	c.mu.Unlock()
	if err != nil {
		c.Unclean(name, err)
	}
}

// Unclean records that name could not be stopped cleanly (a store not
// flushed, say) and logs it once.
func (c *Controller) Unclean(name string, err error) {
	if c == nil {
		return
	}
	c.logger().Warn("stop: "+name+" not stopped cleanly", "err", err)
	c.mu.Lock()
	c.unclean = append(c.unclean, name)
	c.mu.Unlock()
}

// Stop ends the watch for signals and the budget (the command has
// returned) and returns the exit status of the stop: 0, or ExitUnclean.
func (c *Controller) Stop() int {
	if c == nil {
		return 0
	}
	close(c.quit)
	<-c.done
	if c.o.Signals == nil {
		signal.Stop(c.sigs)
	}
	c.cancel()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.watchdog != nil {
		c.watchdog.Stop()
	}
	if len(c.unclean) > 0 {
		c.logger().Warn("stopped, not cleanly: " + strings.Join(c.unclean, ", ") + " (exit status 4)")
		return ExitUnclean
	}
	return 0
}

// Stopped is the error of a command that ended with err because a signal
// cancelled ctx before it finished what it does (what: "the index was
// built"), and after says what is left and what to do; err as it is
// otherwise. The error its work returned for the cancel ("build index: embed
// tools 1-199 of 199: context canceled") read as a fault to look into.
// `index`, `models fetch` and `eval` say a stop so; it exits 1 (the
// command did not do its work), as `serve`'s exits 0 (serving ends so).
func Stopped(ctx context.Context, err error, what, after string) error {
	if err == nil || ctx.Err() == nil {
		return err
	}
	return fmt.Errorf("stopped before %s: %s", what, after)
}

func sigName(s os.Signal) string {
	switch s {
	case os.Interrupt:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGHUP:
		return "SIGHUP"
	}
	return s.String()
}

func sigNumber(s os.Signal) int {
	if n, ok := s.(syscall.Signal); ok {
		return int(n)
	}
	return 0
}
