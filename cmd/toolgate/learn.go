package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/gateway/local"
	"github.com/toolgate/toolgate/index"
	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/internal/datafile"
	"github.com/toolgate/toolgate/internal/oneline"
	"github.com/toolgate/toolgate/internal/plural"
	"github.com/toolgate/toolgate/internal/shellword"
	"github.com/toolgate/toolgate/internal/storage"
	"github.com/toolgate/toolgate/search"
	"github.com/toolgate/toolgate/search/learn"
)

func init() { register(newLearnCmd) }

type learnFlags struct {
	queries string
	reset   bool
	server  string
	configs []string
}

func newLearnCmd(g *globals) *cobra.Command {
	f := &learnFlags{}
	cmd := &cobra.Command{
		Use:   "learn [--config FILE] [--queries FILE.jsonl | --reset [--server S]]",
		Short: "Seed, show or forget what search learned from use",
		Long: `toolgate serve records a (query, tool) pair whenever a session runs a tool
that one of its recent search_tools answers returned, and ranks with these
pairs (toolgate.learn.enabled, default true). They live in the data folder
(learn/). See the README section "What toolgate learns from use".

Without flags, learn prints how many pairs and tools it holds.
--queries FILE.jsonl records every (query, relevant tool) of a file in the
eval format (../shared/bench), as if each query had led to its tools.
--reset forgets every pair, or with --server S only those of S's tools:
the ranking is then exactly the zero-shot one.

With --config (or $TOOLGATE_CONFIG) the config's dataDir applies, as serve
reads it: the pairs are those of that config's gateway, and --reset
--server S refuses a server the config does not have (unless pairs of it
were learned: those of a server removed from the config are forgotten).

While a gateway (toolgate serve) holds the store, learn asks it to do the
work through its status socket in the data folder, and its ranking uses the
change at once.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return readerMayLeave(g, "learn", func() error { return runLearn(cmd.Context(), g, f, cmd.OutOrStdout(), cmd.ErrOrStderr()) })
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.queries, "queries", "", "record the (query, relevant tool) pairs of this file (eval format)")
	fl.BoolVar(&f.reset, "reset", false, "forget the learned pairs (all, or --server's)")
	fl.StringVar(&f.server, "server", "", "with --reset: forget only this server's tools' pairs")
	configsFlag(cmd, &f.configs)
	return cmd
}

// learnDir is where the learned pairs live in the data folder.
func learnDir(g *globals) string { return learnDirIn(g.DataDir()) }

// learnDirIn is the learned pairs' folder in the data folder dataDir.
func learnDirIn(dataDir string) string { return filepath.Join(dataDir, "learn") }

// openLearning returns the learned pairs serve ranks with and records to,
// or nil when toolgate.learn turns learning off. A store that cannot be
// opened at start (the data folder cannot take writes, another toolgate
// holds it) is opened later, once it can be (lazyLearning): a start on a
// bad folder does not turn learning off for the whole run, nor leave GET
// /status failing after the folder recovered.
func (g *globals) openLearning(cfg *config.File, health *storage.Health) *lazyLearning {
	if !cfg.Toolgate.Learn.LearnEnabled() {
		return nil
	}
	dir := learnDir(g)
	w := health.Writer("learned pairs", "pairs are not recorded")
	// What Badger logs while it fails to open a store again (a damaged
	// one: a line a try, up to a try every 10 s) was said at the first try.
	retrying := &atomic.Bool{}
	storeLog := g.logger
	if storeLog != nil {
		storeLog = slog.New(mutedHandler{storeLog.Handler(), retrying})
	}
	l := &lazyLearning{log: g.logger, retryEvery: learnRetryEvery, retrying: retrying,
		open: func() (*learn.Store, error) {
			// A gateway started beside one that holds the pairs, on a
			// folder full or read-only, learns through it as on a healthy
			// folder (it ranked without them).
			if err := heldThroughGateway(context.Background(), g, health); err != nil {
				return nil, err
			}
			return learn.Open(dir, &learn.Options{Logger: storeLog, Storage: w})
		},
		reopen: func(s *learn.Store) (*learn.Store, error) {
			return s.Reopen(&learn.Options{Logger: storeLog, Storage: w})
		},
		busy: func(err error) {
			w.Fail(busyError(health.Dir(), dir, "the learned pairs", "this one opens them once the other has stopped", err))
		},
		broken: func(err error) {
			// The folder takes writes (else the store reported that
			// itself): the store is damaged. GET /status says so, where
			// learning used to be off for the run with a healthy status.
			if health.Check() == nil {
				w.Fail(damagedError(health.Dir(), dir, err))
			}
		},
		opened: w.OK,
	}
	l.remote = newRemoteLearning(func(ctx context.Context) (*localGateway, error) {
		return learnHolder(ctx, g, learn.ErrBusy)
	}, l.recordGone, g.logger)
	l.tryOpen(true)
	l.watch(learnRetryEvery)
	return l
}

// learnRetryEvery is how often searches look again for a learned-pairs
// store that could not be opened (a record or a new catalog always does).
const learnRetryEvery = 10 * time.Second

// lazyLearning is serve's learned-pairs store, which may not be open yet:
// until it opens, searches rank without pairs and nothing is recorded. It
// tries to open at each record, at each new catalog, and from searches at
// most every retryEvery; once open it is the store.
type lazyLearning struct {
	log  *slog.Logger
	open func() (*learn.Store, error)
	// reopen moves an open store whose folder was removed to a new one
	// (learn.Store.Reopen); nil: the store stays as it is.
	reopen     func(*learn.Store) (*learn.Store, error)
	busy       func(error) // reports another process holding the store
	broken     func(error) // reports a store that cannot be opened for another reason
	opened     func()      // reports a store opened (the folder took it)
	retryEvery time.Duration
	retrying   *atomic.Bool // set while a try after a failed one runs (nil: never)

	store atomic.Pointer[learn.Store]
	// lastLook is when searches last looked whether the open store's
	// folder was removed (a record always looks); monotonic: kept as wall
	// nanoseconds, a clock set back an hour stopped the looks for an hour.
	lastLook atomic.Pointer[time.Time]
	// remote, when set, reads and records the pairs through the gateway
	// that holds the store while this one cannot open it (nil: none).
	remote *remoteLearning
	// onHold, when set, is called whenever this gateway opens a store
	// (holding).
	onHold atomic.Pointer[func()]
	// gens maps the pairs' source and its generation onto Generation's
	// own count, which changes whenever either does.
	gens genCounter

	mu      sync.Mutex
	failing bool           // the last attempt failed (logged once per fault)
	lastTry time.Time      // monotonic; zero before the first try
	tools   []catalog.Tool // the latest catalog, synced with on open
	closed  bool
	looking bool // lookForHolder runs
	lookWG  sync.WaitGroup
	// handOverErr is the last reason a hand-over failed, logged ("" none).
	handOverErr string
	// unwatch stops watch (nil: none runs); watchWG waits for it.
	unwatch chan struct{}
	watchWG sync.WaitGroup
}

var (
	_ search.Usage    = (*lazyLearning)(nil)
	_ gateway.Learner = (*lazyLearning)(nil)
)

// tryOpen returns the store, opening it if need be; force skips the
// throttle. Nil while it cannot be opened.
func (l *lazyLearning) tryOpen(force bool) *learn.Store {
	if s := l.store.Load(); s != nil {
		return l.renewed(s, force)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if s := l.store.Load(); s != nil || l.closed {
		return s
	}
	if !force && !l.lastTry.IsZero() && time.Since(l.lastTry) < l.retryEvery {
		return nil
	}
	first := l.lastTry.IsZero()
	l.lastTry = time.Now()
	if l.retrying != nil {
		l.retrying.Store(l.failing)
	}
	s, err := l.open()
	if l.retrying != nil {
		l.retrying.Store(false)
	}
	if err != nil {
		busy := errors.Is(err, learn.ErrBusy)
		if busy && l.remote != nil {
			if !l.remote.working() && !(first && l.engageAtStart()) {
				// The holder may be starting too (clients started
				// together): looked for a while before it is a fault.
				l.lookForHolder(err)
			}
			return nil
		}
		if busy {
			l.busy(err)
		} else if l.broken != nil {
			l.broken(err)
		}
		l.off(err)
		return nil
	}
	if l.remote != nil {
		l.remote.drop()
	}
	if l.failing && l.log != nil {
		l.log.Info("learned pairs opened: learning from use is on again")
	}
	l.failing = false
	l.opened()
	if l.tools != nil {
		l.sync(s, l.tools)
	}
	l.store.Store(s)
	l.holding()
	return s
}

// renewed returns s, the open store, or the store that replaces it once
// its folder was removed (the data folder removed while serving, and made
// again): a new store in the folder, holding what s held. Until the data
// folder takes writes s stays, ranking with what it holds and recording
// nothing (the store reports why). force skips the throttle (searches look
// at most every retryEvery).
func (l *lazyLearning) renewed(s *learn.Store, force bool) *learn.Store {
	if l.reopen == nil {
		return s
	}
	now := time.Now()
	if last := l.lastLook.Load(); !force && last != nil && now.Sub(*last) < l.retryEvery {
		return s
	}
	l.lastLook.Store(&now)
	if !s.Replaced() {
		return s
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if cur := l.store.Load(); cur != s || l.closed {
		return cur
	}
	n, _ := l.move(s)
	return n
}

// move moves s, the open store whose folder was removed, to the new store
// in the folder made again: a store it opens there (Reopen), or, when
// another process opened one first, the gateway that holds it (handOver:
// two gateways on the data folder, and the other one's next search or
// record after the folder came back was first). It returns the store to
// use: the new one, nil once handed over (this gateway learns through the
// other from then on), or s while neither can be done (busy: another
// process holds the new store). l.mu is held.
func (l *lazyLearning) move(s *learn.Store) (_ *learn.Store, busy bool) {
	n, err := l.reopen(s)
	if err != nil {
		switch {
		case errors.Is(err, learn.ErrBusy):
			if l.handOver(s) {
				return nil, false
			}
			l.busy(err)
			return s, true
		case l.broken != nil:
			l.broken(err)
		}
		return s, false
	}
	if l.log != nil {
		l.log.Info("learned pairs: their folder was removed while serving; a new store there holds what was learned", "pairs", len(n.Pairs()))
	}
	l.opened()
	if l.tools != nil {
		l.sync(n, l.tools)
	}
	l.store.Store(n)
	l.holding()
	return n, false
}

// handOver gives everything s, the store whose folder was removed, holds
// to the gateway that holds the new store in the folder made again, and
// learns through that gateway from then on. The pairs were stranded in s:
// ranked with here but recorded nowhere, and lost at this gateway's stop.
// False when no gateway there takes them now (one still making its status
// socket again, or a command that holds the store): s stays, and is
// handed over at a later look or at the stop. l.mu is held.
func (l *lazyLearning) handOver(s *learn.Store) bool {
	if l.remote == nil {
		return false
	}
	held, err := s.Export()
	if err != nil {
		l.handOverFailed("learned pairs: their folder was removed while serving, and what the store held cannot be read to hand it over", "", err)
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), remoteTimeout)
	defer cancel()
	holder, err := l.remote.find(ctx)
	if err != nil {
		return false // no gateway holds the new store (yet): said by busy
	}
	ans, err := askLearn(ctx, holder, learnRequest{Merge: &held}, false)
	if err == nil && ans.Merged != len(held.Pairs) {
		err = fmt.Errorf("it took %d of the %d pairs (a toolgate older than this one takes none)", ans.Merged, len(held.Pairs))
	}
	if err != nil {
		l.handOverFailed("learned pairs: their folder was removed while serving, and the gateway that opened a new store there did not take what this one held; tried again every "+l.retryEvery.String()+" and at the stop", holder.name(), err)
		return false
	}
	l.handOverErr = ""
	s.Abandon()
	l.store.Store(nil)
	l.failing = false
	l.opened()
	if l.log != nil {
		l.log.Info("learned pairs: their folder was removed while serving, and another gateway opened a new store there: handed it every pair this one held, and learning through it from now on",
			"holder", holder.name(), "pairs", len(held.Pairs), "holds", ans.Pairs)
	}
	_ = l.remote.engage(ctx) // else the next look finds it
	return true
}

// handOverFailed logs why a hand-over failed, once per reason (it is tried
// again every retryEvery). l.mu is held.
func (l *lazyLearning) handOverFailed(msg, holder string, err error) {
	if l.log == nil || err.Error() == l.handOverErr {
		return
	}
	l.handOverErr = err.Error()
	l.log.Warn(msg, "holder", holder, "err", err)
}

// holding says this gateway holds a store in the data folder now (a hook
// serve sets: its status socket is made again at once, for another
// gateway to find the store's holder).
func (l *lazyLearning) holding() {
	if f := l.onHold.Load(); f != nil {
		(*f)()
	}
}

func (l *lazyLearning) sync(s *learn.Store, tools []catalog.Tool) {
	if _, err := s.Sync(tools); err != nil && l.log != nil {
		l.log.Warn("learned pairs not checked against the catalog", "err", err)
	}
}

// Generation changes whenever the pairs do (search.Usage): the store's,
// those of the gateway that holds it, or none.
func (l *lazyLearning) Generation() uint64 {
	if s := l.tryOpen(false); s != nil {
		return l.gens.of("store", s.Generation())
	}
	if l.remote != nil {
		if holder, gen, ok := l.remote.generation(); ok {
			return l.gens.of("holder "+holder, gen)
		}
	}
	return l.gens.of("none", 0)
}

// Pairs is the store's, or those of the gateway that holds it
// (search.Usage); none while neither can be read.
func (l *lazyLearning) Pairs() []search.UsagePair {
	if s := l.store.Load(); s != nil {
		return s.Pairs()
	}
	if l.remote != nil {
		return l.remote.Pairs()
	}
	return nil
}

// Record is the store's (gateway.Learner), or goes to the gateway that
// holds it.
func (l *lazyLearning) Record(query string, tool catalog.Tool) {
	if l.remote != nil && l.store.Load() == nil && l.remote.working() {
		// The store is looked at again at most every retryEvery: the
		// holder may have stopped.
		if s := l.tryOpen(false); s != nil {
			s.Record(query, tool)
			return
		}
		l.remote.record(query, tool.ID())
		return
	}
	if s := l.tryOpen(true); s != nil {
		s.Record(query, tool)
		return
	}
	if l.remote != nil && l.remote.working() {
		l.remote.record(query, tool.ID()) // the store was handed over just now
	}
}

// status says what this gateway learns with, for GET /status.
func (l *lazyLearning) status() *gateway.LearningStatus {
	if s := l.store.Load(); s != nil {
		n, tools := s.Stats()
		return &gateway.LearningStatus{Holder: gateway.ThisGateway, Pairs: n, Tools: tools}
	}
	if l.remote != nil {
		if holder, n, tools, ok := l.remote.status(); ok {
			return &gateway.LearningStatus{Holder: holder, Pairs: n, Tools: tools}
		}
	}
	return &gateway.LearningStatus{Error: "the learned pairs cannot be read now: ranking without them, recording nothing (storage says why)"}
}

// recordGone records a pair the gateway that held the store could not
// take (it stopped, and released the store) in the store itself, with its
// tool's definition from the catalog served.
func (l *lazyLearning) recordGone(p learnedOne) {
	s := l.tryOpen(true)
	if s == nil {
		return // said by tryOpen
	}
	l.mu.Lock()
	defs := map[string]catalog.Tool{}
	for _, t := range l.tools {
		if t.ID() == p.Tool {
			defs[t.ID()] = t
		}
	}
	l.mu.Unlock()
	if err := s.Add([]learn.Pair{{Query: p.Query, Tool: p.Tool}}, defs); err != nil && l.log != nil {
		l.log.Warn("learned pair not recorded", "tool", p.Tool, "err", err)
	}
}

// engageAtStart, at the first try only, asks for the gateway that holds
// the store at once: a gateway started beside it learns through it from
// its first search. l.mu is held.
func (l *lazyLearning) engageAtStart() bool {
	ctx, cancel := context.WithTimeout(context.Background(), remoteTimeout)
	defer cancel()
	return l.remote.engage(ctx) == nil
}

// holderWait is how long a gateway looks for the one that holds the
// learned pairs before it reports them as a fault; holderRetry how often
// it asks meanwhile.
var (
	holderWait  = 5 * time.Second
	holderRetry = 250 * time.Millisecond
)

// lookForHolder looks, in the background, for the gateway that holds the
// store (one look at a time), for up to holderWait: gateways started
// together find each other's sockets only once they are up. Once one
// answers, this gateway learns through it (and a fault it reported is
// cleared); if none does, busy, the store's refusal, is reported. l.mu is
// held.
func (l *lazyLearning) lookForHolder(busy error) {
	if l.remote == nil || l.looking || l.closed {
		return
	}
	l.looking = true
	l.lookWG.Add(1)
	go func() {
		defer l.lookWG.Done()
		deadline := time.Now().Add(holderWait)
		for {
			ctx, cancel := context.WithTimeout(context.Background(), holderRetry*4)
			err := l.remote.engage(ctx)
			cancel()
			l.mu.Lock()
			switch {
			case err == nil || l.store.Load() != nil || l.closed:
				l.looking = false
				ok := err == nil && l.store.Load() == nil
				if ok {
					l.failing = false
				}
				l.mu.Unlock()
				if ok {
					l.opened()
				}
				return
			case time.Now().After(deadline):
				l.looking = false
				l.off(busy)
				l.mu.Unlock()
				l.busy(busy)
				return
			}
			l.mu.Unlock()
			time.Sleep(holderRetry)
		}
	}()
}

// off says once per fault that learning is off, and why. l.mu is held.
func (l *lazyLearning) off(err error) {
	if !l.failing && l.log != nil {
		l.log.Warn("learning from use is off until the learned pairs can be opened: searches rank without them and pairs are not recorded", "err", err)
	}
	l.failing = true
}

// genCounter counts the changes of a (source, generation) pair.
type genCounter struct {
	mu  sync.Mutex
	src string
	gen uint64
	n   uint64
}

// of returns the count, one more than before when src or gen changed.
func (c *genCounter) of(src string, gen uint64) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == 0 || src != c.src || gen != c.gen {
		c.src, c.gen = src, gen
		c.n++
	}
	return c.n
}

// indexed checks the pairs against each new catalog (learn.Store.Sync: a
// tool whose text changed materially loses its pairs).
func (l *lazyLearning) indexed(tools []catalog.Tool) {
	l.mu.Lock()
	l.tools = tools
	l.mu.Unlock()
	if s := l.store.Load(); s != nil {
		l.sync(s, tools)
		return
	}
	l.tryOpen(true) // syncs with tools when it opens
}

// watch looks every `every` whether the open store's folder was removed,
// and moves it to the folder made again (renewed) without waiting for a
// search or record: an idle gateway's pairs were only in its removed store
// until then (lost if it was killed), and a second gateway on the data
// folder that opened the new store ranked without them. Close stops it.
func (l *lazyLearning) watch(every time.Duration) {
	if l.reopen == nil {
		return
	}
	stop := make(chan struct{})
	l.mu.Lock()
	l.unwatch = stop
	l.mu.Unlock()
	l.watchWG.Add(1)
	go func() {
		defer l.watchWG.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			if s := l.store.Load(); s != nil && s.Replaced() {
				l.renewed(s, true)
			}
		}
	}()
}

// Close closes the store if it was opened; nothing opens it afterwards. A
// store whose folder was removed goes to the new store in the folder made
// again first (settle).
func (l *lazyLearning) Close() error {
	l.mu.Lock()
	stop := l.unwatch
	l.unwatch = nil
	l.mu.Unlock()
	if stop != nil {
		close(stop)
		l.watchWG.Wait()
	}
	l.settle()
	if l.remote != nil {
		l.remote.Close() // sends the pairs still queued first
	}
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	l.lookWG.Wait()
	if s := l.store.Load(); s != nil {
		return s.Close()
	}
	return nil
}

// settle, at the stop, moves an open store whose folder was removed to the
// new store in the folder made again (move), trying for up to holderWait
// while another process holds that one: a gateway that opened it and is
// still making its status socket again, or that is stopping too (then
// this one opens it once it is released). Left as it was, what the store
// held went with this process: a second gateway on the data folder that
// opened the new store first kept only its own pairs. A data folder not
// made again keeps nothing (nowhere to write; said by Close).
func (l *lazyLearning) settle() {
	s := l.store.Load()
	if s == nil || l.reopen == nil || !s.Replaced() {
		return
	}
	deadline := time.Now().Add(holderWait)
	for {
		l.mu.Lock()
		if l.store.Load() != s || l.closed {
			l.mu.Unlock()
			return
		}
		n, busy := l.move(s)
		l.mu.Unlock()
		if n != s || !busy || time.Now().After(deadline) {
			return
		}
		time.Sleep(holderRetry)
	}
}

// busyError is a store of the data folder that another process holds
// (Badger's directory lock): which process, and the fix.
// after says what this process does once the other has stopped.
func busyError(dataDir, storeDir, what, after string, err error) error {
	pid := ""
	if p := lockPID(storeDir); p != "" {
		pid = " (pid " + p + ")"
	}
	return &storage.FolderError{Dir: dataDir, Err: err,
		Problem: fmt.Sprintf("is in use by another toolgate%s, which holds %s", pid, what),
		Fix:     fmt.Sprintf("stop the other toolgate%s, or give this gateway its own data folder (--data-dir); %s", pid, after)}
}

// mutedHandler drops records while muted is set.
type mutedHandler struct {
	slog.Handler
	muted *atomic.Bool
}

func (h mutedHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return !h.muted.Load() && h.Handler.Enabled(ctx, l)
}

func (h mutedHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return mutedHandler{h.Handler.WithAttrs(as), h.muted}
}

func (h mutedHandler) WithGroup(name string) slog.Handler {
	return mutedHandler{h.Handler.WithGroup(name), h.muted}
}

// damagedError is a learned-pairs store in storeDir that cannot be opened
// though its data folder takes writes (Badger's files cut short or
// damaged), with the fix. A store that cannot be opened because the
// process was refused memory for its maps (ulimit -v, a memory limit) or
// descriptors is not damaged: moving it aside would only lose what was
// learned, so the fix is the limit (the gateway opens it once it can); nor
// is one whose files this user may not open (Denied): the fix gives them
// back.
func damagedError(dataDir, storeDir string, err error) error {
	if e := storage.Shortage(err); e != 0 {
		want := map[syscall.Errno]string{syscall.ENOMEM: "memory", syscall.EFBIG: "a larger file-size limit"}[e]
		if want == "" {
			want = "file descriptors"
		}
		return &storage.FolderError{Dir: dataDir, Err: err,
			Problem: fmt.Sprintf("holds learned pairs that cannot be opened for want of %s (%v)", want, err),
			Fix:     storage.Fix(dataDir, e)}
	}
	if storage.Denied(err) {
		return storage.StoreDenied(storeDir, err)
	}
	if ne, ok := datafile.AsNewer(err); ok {
		// A rollback: the pairs are the newer toolgate's to read again.
		return &storage.FolderError{Dir: dataDir, Err: err,
			Problem: fmt.Sprintf("holds learned pairs that this toolgate cannot read: %v", ne),
			Fix:     ne.Fix()}
	}
	return &storage.FolderError{Dir: dataDir, Err: err,
		Problem: fmt.Sprintf("holds learned pairs that cannot be opened (damaged? %v)", err),
		Fix: fmt.Sprintf("move the store aside (%s): learning starts afresh, a running gateway's within seconds (what was learned stays in the copy); "+
			"or stop toolgate and restore %s from a backup", shellword.Join("mv", storeDir, storeDir+".bad"), storeDir)}
}

// openLearnStore opens the learned pairs for a command (learn, search).
// Its writes ask the data folder's health first, as serve's do: a folder
// that turns read-only or full during a long `learn --queries` refuses the
// next write, instead of Badger failing a memtable (whose next read then
// panicked, and whose Close retried the flush for good: the command hung)
// or writing into a memory map on a full disk (SIGBUS); and Close leaves
// such a store unclosed.
// A data folder that does not exist yet is made first, as a command's
// start does (storage.Health.Prepare): the store made it before it asked
// the folder's health, and `learn --data-dir NEW` read "does not exist
// (removed while toolgate runs …)".
//
// A folder that cannot take writes (full, read-only) refuses the store
// before its lock is looked at; when a running gateway holds it since
// before the fault, the error is learn.ErrBusy (with the fault's words), so
// that the command goes through that gateway as it would on a healthy
// folder: a look at the pairs, `toolgate search` and `toolgate backup` work
// on a full disk, where they failed (backup left the pairs out).
func openLearnStore(ctx context.Context, g *globals, log *slog.Logger) (*learn.Store, error) {
	h := g.health()
	_ = h.Prepare() // a folder it cannot make is the store's error, with the fix
	if err := heldThroughGateway(ctx, g, h); err != nil {
		return nil, err
	}
	return learn.Open(learnDir(g), &learn.Options{Logger: log, Storage: h.Writer("learned pairs", "pairs are not recorded")})
}

// heldThroughGateway is learn.ErrBusy, with the fault's words, when the
// data folder cannot take writes (so the store would be refused before its
// lock is looked at) and a running gateway holds the learned pairs since
// before the fault; nil otherwise, for the store to be opened (and say
// what is wrong).
func heldThroughGateway(ctx context.Context, g *globals, h *storage.Health) error {
	err := h.Check()
	if err == nil || lockPID(learnDir(g)) == strconv.Itoa(os.Getpid()) {
		return nil // the lock of an earlier run of this PID (a container's 1) is no holder
	}
	if _, herr := learnHolder(ctx, g, err); herr != nil {
		return nil
	}
	return fmt.Errorf("%w (%w)", learn.ErrBusy, err)
}

// learnedServers says which servers have learned pairs (after a reset of
// one that had none: a misspelt name forgets nothing).
func learnedServers(store *learn.Store) string {
	var servers []string
	for _, p := range store.Pairs() {
		if srv, _, err := catalog.SplitID(p.Tool); err == nil && !slices.Contains(servers, srv) {
			servers = append(servers, srv)
		}
	}
	if len(servers) == 0 {
		return "no server has learned pairs"
	}
	slices.Sort(servers)
	return "servers with learned pairs: " + strings.Join(servers, ", ")
}

// learnRequest is what `toolgate learn` asks of the store: nothing (show
// it), a reset (of every tool or of Server's), or Pairs to record (from
// Source). A gateway that holds the store takes it on its status socket
// (POST /learn; GET /learn shows).
type learnRequest struct {
	Reset  bool         `json:"reset,omitempty"`
	Server string       `json:"server,omitempty"`
	Pairs  []learnedOne `json:"pairs,omitempty"`
	Source string       `json:"source,omitempty"`
	// Record says Pairs are what another gateway on the data folder
	// recorded (it learns through this one): no log line, and the
	// ranking catches up off the search path as after its own records.
	Record bool `json:"record,omitempty"`
	// Since, on a look that asks for the pairs, is the generation the
	// asker holds: the answer leaves them out while it is current.
	Since uint64 `json:"-"`
	// Merge is everything the store of another gateway on the data folder
	// held when its folder was removed (that gateway hands it over: see
	// lazyLearning.handOver); the answer's Merged counts what was taken.
	Merge *learn.Held `json:"merge,omitempty"`
}

// learnedOne is one (query, tool) pair on the wire.
type learnedOne struct {
	Query string `json:"query"`
	Tool  string `json:"tool"` // server__tool
}

// learnAnswer is what the store did and holds after.
type learnAnswer struct {
	Forgot   int    `json:"forgot"`
	Recorded int    `json:"recorded"`
	Merged   int    `json:"merged,omitempty"`
	Pairs    int    `json:"pairs"` // held after
	Tools    int    `json:"tools"`
	Dir      string `json:"dir"`
	// Generation changes whenever the pairs do (a gateway learning
	// through this one fetches them again then).
	Generation uint64 `json:"generation"`
	// Refreshed says the holder's ranking uses a change already (else its
	// searches finish rebuilding it within moments).
	Refreshed bool `json:"refreshed,omitempty"`
	// Servers, after a reset of a server that had no pairs, says which
	// have some (a misspelt name forgets nothing).
	Servers string `json:"servers,omitempty"`
	// UsagePairs are the pairs held and their weights, when asked for
	// (GET /learn?pairs=1: `toolgate search` ranks with them), unless
	// Unchanged: they are still those of generation since=N.
	UsagePairs []learnedWeighed `json:"usagePairs,omitempty"`
	Unchanged  bool             `json:"unchanged,omitempty"`
}

// learnedWeighed is a learned pair and its weight on the wire.
type learnedWeighed struct {
	Query  string  `json:"query"`
	Tool   string  `json:"tool"`
	Weight float64 `json:"weight"`
}

// applyLearn does req on store; defs give each tool's definition to keep
// beside its new pairs.
func applyLearn(store *learn.Store, dir string, req learnRequest, defs map[string]catalog.Tool) (learnAnswer, error) {
	ans := learnAnswer{Dir: dir}
	switch {
	case req.Reset:
		n, err := store.Reset(req.Server)
		if err != nil {
			return ans, err
		}
		ans.Forgot = n
		if n == 0 && req.Server != "" {
			ans.Servers = learnedServers(store)
		}
	case len(req.Pairs) > 0:
		pairs := make([]learn.Pair, len(req.Pairs))
		for i, p := range req.Pairs {
			pairs[i] = learn.Pair{Query: p.Query, Tool: p.Tool}
		}
		if err := store.Add(pairs, defs); err != nil {
			return ans, err
		}
		ans.Recorded = len(pairs)
	case req.Merge != nil:
		n, err := store.Merge(*req.Merge)
		if err != nil {
			return ans, err
		}
		ans.Merged = n
	}
	ans.Pairs, ans.Tools = store.Stats()
	ans.Generation = store.Generation()
	return ans, nil
}

// changedPairs says whether req changed the learned pairs (ans is its
// answer): a reset that forgot none (a server with no pairs, a misspelt
// name) did not.
func changedPairs(req learnRequest, ans learnAnswer) bool {
	return len(req.Pairs) > 0 || req.Reset && ans.Forgot > 0
}

// printLearn says what learn did; via names the gateway that did it for
// this command (its store was locked), or is empty.
func printLearn(w io.Writer, req learnRequest, ans learnAnswer, via string) {
	switch {
	case via == "":
	case !changedPairs(req, ans): // a reset that forgot nothing: no change to rank with
		fmt.Fprintf(w, "(from %s, which holds the learned pairs)\n", via)
	case ans.Refreshed:
		fmt.Fprintf(w, "(through %s, which holds the learned pairs: its ranking uses the change at once)\n", via)
	default:
		fmt.Fprintf(w, "(through %s, which holds the learned pairs: its searches rank with the change once it is embedded, within moments)\n", via)
	}
	switch {
	case req.Reset:
		what := "every tool"
		if req.Server != "" {
			what = fmt.Sprintf("server %s's tools", req.Server)
		}
		fmt.Fprintf(w, "forgot %d learned pairs of %s\n", ans.Forgot, what)
		if ans.Servers != "" {
			fmt.Fprintln(w, ans.Servers)
		}
	case len(req.Pairs) > 0:
		fmt.Fprintf(w, "recorded %s from %s; the store holds %s for %s\n", plural.Of(ans.Recorded, "pair"), req.Source, plural.Of(ans.Pairs, "pair"), plural.Of(ans.Tools, "tool"))
	default:
		fmt.Fprintf(w, "%s for %s in %s\n", plural.Of(ans.Pairs, "learned pair"), plural.Of(ans.Tools, "tool"), ans.Dir)
	}
}

func runLearn(ctx context.Context, g *globals, f *learnFlags, out, errw io.Writer) error {
	switch {
	case f.reset && f.queries != "":
		return usageError{errors.New("learn: give either --queries or --reset, not both")}
	case f.server != "" && !f.reset:
		return usageError{errors.New("learn: --server goes with --reset (forget one server's pairs)")}
	}
	// The config's data folder, as serve reads it (readConfigs).
	var cfg *config.File
	if len(f.configs) > 0 {
		var err error
		if cfg, _, err = g.readConfigs(f.configs); err != nil {
			return err
		}
	}
	log := g.logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	req := learnRequest{Reset: f.reset, Server: f.server, Source: f.queries}
	var qs []search.BenchQuery
	if f.queries != "" {
		var err error
		qs, err = search.LoadQueries(f.queries)
		if err != nil {
			// the flag's wrong value, as eval says of it
			return wrongBenchFile("--queries", f.queries, "queries", "a tools file is for index --tools or eval --tools", err)
		}
		for _, q := range qs {
			for _, id := range q.Relevant {
				req.Pairs = append(req.Pairs, learnedOne{Query: q.Query, Tool: id})
			}
		}
	}
	// The index tells the names apart only when some are given: a look at
	// the pairs, or a reset of them all, need not open it.
	var known map[string]catalog.Tool
	var unread error // an index there that does not open
	if len(req.Pairs) > 0 || req.Server != "" {
		known, unread = indexedTools(g, log, cfg)
	}
	if len(req.Pairs) > 0 {
		if err := bareNames(qs, known); err != nil {
			return usageError{err}
		}
		warnUnknownTools(errw, known, unread, req.Pairs, g.DataDir())
	}
	if req.Server != "" && (known != nil || cfg != nil) {
		// As the management tools read a server's name: "Memory" is memory.
		names := indexedServers(known)
		if cfg != nil {
			names = append(names, configServers(cfg)...)
		}
		var err error
		if req.Server, err = serverMeant(req.Server, names); err != nil {
			return err
		}
	}
	store, err := openLearnStore(ctx, g, log)
	if errors.Is(err, learn.ErrBusy) {
		// A running gateway holds the store: it does the work.
		ans, err := learnThroughGateway(ctx, g, req, out, err)
		if herr := g.health().Check(); err != nil && herr != nil {
			// A change it could not write (the data folder full, read-only).
			return fmt.Errorf("%w\nfix: %s", err, storage.Fix(g.DataDir(), herr))
		}
		if err != nil {
			return err
		}
		return checkReset(ans, req, known, cfg)
	}
	if err != nil {
		// Badger opens a store by writing its LOCK file, and its error
		// keeps only the words of the file system's (no space left on
		// device, read-only file system): the data folder's check names
		// the fault and its fix.
		herr := g.health().Check()
		var fe *storage.FolderError
		switch {
		case herr == nil:
			herr = damagedError(g.DataDir(), learnDir(g), err)
		case !errors.As(err, &fe): // the store's check said it already
			err = fmt.Errorf("%w: %w", err, herr)
		}
		return fmt.Errorf("%w\nfix: %s", err, storage.Fix(g.DataDir(), herr))
	}
	defer store.Close()
	// The index of the data folder, when there is one, gives each tool's
	// definition to keep beside its pairs.
	defs := known
	if defs == nil {
		defs = map[string]catalog.Tool{}
	}
	ans, err := applyLearn(store, learnDir(g), req, defs)
	if err != nil {
		return err
	}
	printLearn(out, req, ans, "")
	return checkReset(ans, req, known, cfg)
}

// indexedTools are the tools of the data folder's index, by ID (nil when
// there is no index to read, with the error of one that does not open:
// an older toolgate's after an upgrade, a damaged one): with cfg, the one
// its gateway starts from (openIndexFor: another config's may be the
// current one).
func indexedTools(g *globals, log *slog.Logger, cfg *config.File) (map[string]catalog.Tool, error) {
	ix, err := openIndexFor(g, log, cfg)
	if errors.Is(err, index.ErrNoIndex) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer ix.Close()
	out := make(map[string]catalog.Tool, len(ix.Tools()))
	for _, t := range ix.Tools() {
		out[t.ID()] = t
	}
	return out, nil
}

// indexedServers are the servers of known's tools (indexedTools), sorted.
func indexedServers(known map[string]catalog.Tool) []string {
	var servers []string
	for _, t := range known {
		if !slices.Contains(servers, t.Server) {
			servers = append(servers, t.Server)
		}
	}
	slices.Sort(servers)
	return servers
}

// warnUnknownTools says which tools of pairs the index (known; nil: none
// to read, unread: why when there is one) does not have, each with the ID
// it likely meant: a misspelt ID is recorded and ranks nothing.
func warnUnknownTools(w io.Writer, known map[string]catalog.Tool, unread error, pairs []learnedOne, dataDir string) {
	if known == nil {
		notChecked(w, "the tool names", dataDir, unread)
		return
	}
	var unknown []string
	for _, p := range pairs {
		if _, ok := known[p.Tool]; !ok && !slices.Contains(unknown, p.Tool) {
			unknown = append(unknown, p.Tool)
		}
	}
	if len(unknown) == 0 {
		return
	}
	slices.Sort(unknown)
	more := ""
	if len(unknown) > 10 {
		unknown, more = unknown[:10], fmt.Sprintf(" and %d more", len(unknown)-10)
	}
	tools := sortedTools(known)
	for i, id := range unknown {
		if m := search.Meant(id, tools); m != "" {
			unknown[i] += " (" + m + ")"
		}
	}
	fmt.Fprintf(w, "warning: the index has no tool named %s%s: their pairs are recorded, and rank nothing until such a tool is indexed (a misspelt name never will)\n", strings.Join(unknown, ", "), more)
}

// bareNames refuses the relevant IDs of qs that are no server__tool ID
// (a tool's bare name), by file and line, with the IDs of the index's
// tools (known; nil: none to read) of that name: the store refused them
// once the file was read, after the warning that their pairs were
// recorded, exit status 1 (`record learned pairs: tool name "read_file"
// is not namespaced`), and nothing of the file was.
func bareNames(qs []search.BenchQuery, known map[string]catalog.Tool) error {
	var errs []error
	tools := sortedTools(known)
	for _, q := range qs {
		for _, id := range q.Relevant {
			if _, _, err := catalog.SplitID(id); err == nil {
				continue
			}
			fix := "write it server__tool, as search_tools names tools"
			if m := search.Meant(id, tools); m != "" {
				fix = m
			}
			errs = append(errs, fmt.Errorf("%s:%d: relevant %q is not a tool ID: %s", q.File, q.Line, id, fix))
		}
		if len(errs) >= 10 {
			errs = append(errs, errors.New("(more not shown)"))
			break
		}
	}
	return errors.Join(errs...)
}

// sortedTools are the tools of known (indexedTools), by ID.
func sortedTools(known map[string]catalog.Tool) []catalog.Tool {
	tools := slices.Collect(maps.Values(known))
	slices.SortFunc(tools, func(a, b catalog.Tool) int { return strings.Compare(a.ID(), b.ID()) })
	return tools
}

// notChecked says that what (names of tools, globs over them) was not
// checked against the index: the data folder has none, or one that does
// not open (unread): an older toolgate's, which it said was none.
func notChecked(w io.Writer, what, dataDir string, unread error) {
	if unread != nil {
		fmt.Fprintf(w, "note: %s were not checked: %v\n", what, unread)
		return
	}
	fmt.Fprintf(w, "note: %s were not checked: the data folder %s has no index yet (toolgate index or serve builds one)\n", what, dataDir)
}

// checkReset makes a reset of a server that forgot nothing, and that the
// config (cfg, when given) or else the index does not have either, a usage
// error: a misspelt --server. The config's servers are those of its
// gateway, indexed or not yet.
func checkReset(ans learnAnswer, req learnRequest, known map[string]catalog.Tool, cfg *config.File) error {
	if !req.Reset || req.Server == "" || ans.Forgot > 0 {
		return nil
	}
	if cfg != nil {
		servers := configServers(cfg)
		if slices.Contains(servers, req.Server) {
			return nil
		}
		return usageError{fmt.Errorf("--server %q: there is no server of that name in the config (servers: %s), and no pair of it was learned; leave --server out to forget every server's pairs",
			req.Server, strings.Join(servers, ", "))}
	}
	if known == nil {
		return nil
	}
	servers := indexedServers(known)
	if slices.Contains(servers, req.Server) {
		return nil
	}
	return usageError{fmt.Errorf("learn --reset --server %s: the index has no server of that name (servers: %s), and no pair of it was learned", req.Server, strings.Join(servers, ", "))}
}

// learnThroughGateway sends req to the gateway on the data folder that
// holds the learned pairs and prints its answer; busy is the store's
// refusal (see learnHolder), and returns it.
func learnThroughGateway(ctx context.Context, g *globals, req learnRequest, out io.Writer, busy error) (learnAnswer, error) {
	holder, err := learnHolder(ctx, g, busy)
	if err != nil {
		return learnAnswer{}, err
	}
	ans, err := askLearn(ctx, holder, req, false)
	if err != nil {
		return ans, err
	}
	printLearn(out, req, ans, holder.name())
	return ans, nil
}

// learnHolder finds the gateway on the data folder that holds the learned
// pairs (the PID in the store's lock) among those with a status socket.
// busy is the store's refusal, returned with a fix when no gateway there
// holds it (another command does, or a gateway from before this route).
func learnHolder(ctx context.Context, g *globals, busy error) (*localGateway, error) {
	pid := lockPID(learnDir(g))
	if n, err := strconv.Atoi(pid); err == nil {
		for _, sock := range local.SocketsOf(g.DataDir(), n) {
			if gw, gone := askLocal(ctx, sock, 5*time.Second); !gone && gw.err == nil && gw.rep.Process != nil && gw.rep.Process.PID == n {
				return &gw, nil
			}
		}
	}
	who, cmd := "another toolgate process", ""
	if pid != "" {
		who += " (pid " + pid + ")"
	}
	if n, err := strconv.Atoi(pid); err == nil {
		if line := processCommandLine(n); line != "" {
			// An older gateway's names its --http address.
			cmd = "\n(pid " + pid + ": " + line + ")"
		}
	}
	return nil, fmt.Errorf("%w\nfix: %s holds it and is not a gateway that takes requests on its status socket (a toolgate index, eval or learn, or a gateway older than this command): let it end, or stop it, and run this again%s", busy, who, cmd)
}

// askLearn sends req to the gateway holder through its status socket
// (GET /learn for a look, with the pairs themselves when pairs is set;
// POST /learn for a change).
func askLearn(ctx context.Context, holder *localGateway, req learnRequest, pairs bool) (learnAnswer, error) {
	var ans learnAnswer
	method, u, body := http.MethodGet, local.LearnURL, io.Reader(nil)
	if req.Reset || len(req.Pairs) > 0 || req.Merge != nil {
		b, err := json.Marshal(req)
		if err != nil {
			return ans, err
		}
		method, body = http.MethodPost, bytes.NewReader(b)
	} else if pairs {
		u += "?pairs=1"
		if req.Since != 0 {
			u += "&since=" + strconv.FormatUint(req.Since, 10)
		}
	}
	resp, err := askHolder(ctx, holder, method, u, body, time.Minute)
	if err != nil {
		return ans, err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&ans); err != nil {
		return ans, fmt.Errorf("%s answered: %w", holder.name(), err)
	}
	return ans, nil
}

// askHolder sends a request to the gateway holder, which holds the learned
// pairs, on its status socket, and returns its answer of status 200 (the
// caller closes its body), else an error that says what it answered.
func askHolder(ctx context.Context, holder *localGateway, method, u string, body io.Reader, timeout time.Duration) (*http.Response, error) {
	hreq, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, err
	}
	resp, err := local.Client(holder.sock, timeout).Do(hreq)
	if err != nil {
		return nil, fmt.Errorf("ask %s, which holds the learned pairs: %w", holder.name(), unwrapURLError(err))
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return nil, fmt.Errorf("%s, which holds the learned pairs, answered %s: %s", holder.name(), resp.Status, oneLineBody(b))
	}
	return resp, nil
}

// heldPairs are learned pairs a gateway sent (search.Usage), for
// `toolgate search` to rank as that gateway does.
type heldPairs []search.UsagePair

func (heldPairs) Generation() uint64          { return 1 }
func (p heldPairs) Pairs() []search.UsagePair { return p }

// learnedUsage is what `toolgate search` ranks with: the learned pairs of
// the data folder, from the store or, while a gateway holds it, from that
// gateway; nil and why when neither can give them.
func learnedUsage(ctx context.Context, g *globals) (search.Usage, func(), error) {
	store, err := openLearnStore(ctx, g, nil)
	if err == nil {
		return store, func() { store.Close() }, nil
	}
	if !errors.Is(err, learn.ErrBusy) {
		return nil, nil, err
	}
	holder, err := learnHolder(ctx, g, err)
	if err != nil {
		return nil, nil, err
	}
	ans, err := askLearn(ctx, holder, learnRequest{}, true)
	if err != nil {
		return nil, nil, err
	}
	pairs := make(heldPairs, len(ans.UsagePairs))
	for i, p := range ans.UsagePairs {
		pairs[i] = search.UsagePair{Query: p.Query, Tool: p.Tool, Weight: p.Weight}
	}
	return pairs, func() {}, nil
}

// lockPID is the PID in a Badger store's LOCK file, or "".
func lockPID(storeDir string) string {
	b, err := os.ReadFile(filepath.Join(storeDir, "LOCK"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// learnRefreshWait is how long a change asked by `toolgate learn` waits
// for the ranking to use it before the answer goes.
var learnRefreshWait = 10 * time.Second

// handler serves GET and POST /learn on the status socket: what
// `toolgate learn` asks of the learned pairs while this gateway holds
// them. New pairs keep the definitions of the catalog served; refresh
// makes the ranking use a change before the answer goes.
func (l *lazyLearning) handler(dir string, tools func() []catalog.Tool, refresh func(context.Context) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req learnRequest
		if r.Method == http.MethodPost {
			if err := json.NewDecoder(io.LimitReader(r.Body, 64<<20)).Decode(&req); err != nil {
				http.Error(w, "a learn request in JSON: "+err.Error(), http.StatusBadRequest)
				return
			}
		}
		store := l.tryOpen(true)
		if store == nil {
			http.Error(w, "this gateway cannot open the learned pairs now (GET /status, storage, says why)", http.StatusServiceUnavailable)
			return
		}
		if r.Method == http.MethodGet && r.URL.Query().Get("backup") == "1" {
			// `toolgate backup`: the store as Badger's backup stream, and
			// whether all of it went in a trailer (the status is sent
			// before the stream).
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Header().Set("Trailer", backupTrailer)
			if err := store.Backup(w); err != nil {
				w.Header().Set(backupTrailer, "failed: "+oneline.Cut(err.Error(), 300))
				return
			}
			w.Header().Set(backupTrailer, "ok")
			return
		}
		defs := map[string]catalog.Tool{}
		if len(req.Pairs) > 0 {
			for _, t := range tools() {
				defs[t.ID()] = t
			}
		}
		ans, err := applyLearn(store, dir, req, defs)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		if q := r.URL.Query(); r.Method == http.MethodGet && q.Get("pairs") == "1" {
			if since := q.Get("since"); since != "" && since == strconv.FormatUint(ans.Generation, 10) {
				ans.Unchanged = true
			} else {
				for _, p := range store.Pairs() {
					ans.UsagePairs = append(ans.UsagePairs, learnedWeighed{Query: p.Query, Tool: p.Tool, Weight: p.Weight})
				}
			}
		}
		if req.Merge != nil && l.log != nil {
			l.log.Info("learned pairs: took those another gateway on the data folder held when their folder was removed", "pairs", ans.Merged, "holds", ans.Pairs)
		}
		if changedPairs(req, ans) && !req.Record {
			// A large log takes long to embed: the answer waits a while,
			// then the searches finish the ranking off their path.
			ctx, cancel := context.WithTimeout(r.Context(), learnRefreshWait)
			err := refresh(ctx)
			cancel()
			ans.Refreshed = err == nil
			if err != nil && l.log != nil {
				l.log.Info("learned ranking not updated within "+learnRefreshWait.String()+"; the next searches finish it", "err", err)
			}
			if l.log != nil {
				l.log.Info("learned pairs changed by toolgate learn", "forgot", ans.Forgot, "server", req.Server,
					"recorded", ans.Recorded, "from", req.Source, "pairs", ans.Pairs, "tools", ans.Tools)
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(ans)
	})
}
