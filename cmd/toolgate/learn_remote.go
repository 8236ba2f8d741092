package main

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/toolgate/toolgate/gateway/local"
	"github.com/toolgate/toolgate/search"
)

// remoteLearning is the learned pairs of the gateway that holds the store
// (another process on the data folder: Badger lets one open it), read and
// recorded through that gateway's status socket. Each MCP client starts
// its own gateway on stdio, so two on one data folder is common; the
// second used to rank without the pairs and record nothing.
type remoteLearning struct {
	// find returns the gateway that holds the store, or why there is none.
	find func(context.Context) (*localGateway, error)
	log  *slog.Logger
	// every is how often the pairs are fetched again at most (searches ask
	// for them; a fetch runs in the background).
	every time.Duration

	records chan learnedOne // to send, by one goroutine
	stop    chan struct{}
	wg      sync.WaitGroup
	// gone takes a pair whose holder stopped answering (it stopped, and
	// released the store): the gateway records it in the store itself.
	gone func(learnedOne)

	mu       sync.Mutex
	holder   *localGateway // nil until found, and after it stopped answering
	pairs    []search.UsagePair
	gen      uint64    // the holder's generation of the pairs fetched
	fetched  time.Time // monotonic; zero: fetch at the next look
	fetching bool
	closed   bool
}

// remoteFetchEvery is how often a gateway learning through another fetches
// the learned pairs again at most; remoteTimeout bounds each request.
const (
	remoteFetchEvery = 2 * time.Second
	remoteTimeout    = 5 * time.Second
)

func newRemoteLearning(find func(context.Context) (*localGateway, error), gone func(learnedOne), log *slog.Logger) *remoteLearning {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &remoteLearning{find: find, gone: gone, log: log, every: remoteFetchEvery,
		records: make(chan learnedOne, 64), stop: make(chan struct{})}
	r.wg.Add(1)
	go r.send()
	return r
}

// engage finds the holder and fetches its pairs now; it says why it could
// not (then the store's refusal stands).
func (r *remoteLearning) engage(ctx context.Context) error {
	h, err := r.find(ctx)
	if err != nil {
		return err
	}
	ans, err := askLearn(ctx, h, learnRequest{}, true)
	if err != nil {
		return err
	}
	r.mu.Lock()
	was := r.holder
	r.holder = h
	r.take(ans)
	r.mu.Unlock()
	if was == nil || was.sock != h.sock {
		r.log.Info("learning from use through the gateway that holds the learned pairs: ranking with its pairs and recording through it",
			"holder", h.name(), "pairs", ans.Pairs, "tools", ans.Tools)
	}
	return nil
}

// take keeps ans's pairs (those held, when ans says they have not changed
// since the generation asked about); r.mu is held.
func (r *remoteLearning) take(ans learnAnswer) {
	r.fetched = time.Now()
	if ans.Unchanged {
		return
	}
	r.pairs = make([]search.UsagePair, len(ans.UsagePairs))
	for i, p := range ans.UsagePairs {
		r.pairs[i] = search.UsagePair{Query: p.Query, Tool: p.Tool, Weight: p.Weight}
	}
	r.gen = ans.Generation
}

// working says whether a holder answers; it starts a fetch in the
// background when the pairs are older than every.
func (r *remoteLearning) working() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.holder == nil || r.closed {
		return false
	}
	if !r.fetching && time.Since(r.fetched) >= r.every {
		r.fetching = true
		r.wg.Add(1)
		go r.refetch(r.holder, r.gen)
	}
	return true
}

// refetch fetches the pairs from h, unless they are still those of
// generation since; a holder that does not answer is dropped (the store
// is tried again, and another holder looked for).
func (r *remoteLearning) refetch(h *localGateway, since uint64) {
	defer r.wg.Done()
	ctx, cancel := context.WithTimeout(context.Background(), remoteTimeout)
	defer cancel()
	ans, err := askLearn(ctx, h, learnRequest{Since: since}, true)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fetching = false
	if r.holder != h {
		return
	}
	if err != nil {
		r.holder = nil
		r.log.Warn("the gateway that held the learned pairs does not answer: looking for the store again", "holder", h.name(), "err", err)
		return
	}
	r.take(ans)
}

// generation is the holder's generation of the pairs held, and which
// holder (its socket: a holder that restarted counts again from 1); ok is
// false while no holder answers.
func (r *remoteLearning) generation() (holder string, gen uint64, ok bool) {
	if !r.working() {
		return "", 0, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.holder == nil {
		return "", 0, false
	}
	return r.holder.sock, r.gen, true
}

// Pairs are the pairs last fetched from the holder; none while no holder
// answers.
func (r *remoteLearning) Pairs() []search.UsagePair {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.holder == nil {
		return nil
	}
	return r.pairs
}

// record queues a pair for the holder; one that does not fit is dropped
// (a holder that does not take them in time).
func (r *remoteLearning) record(query, tool string) {
	select {
	case r.records <- learnedOne{Query: query, Tool: tool}:
	default:
		r.log.Debug("learned pair not recorded: the gateway that holds the store takes them too slowly", "tool", tool)
	}
}

// send sends the queued pairs to the holder, one request each, and asks
// for the pairs again after each. At Close it sends those still queued,
// for at most remoteTimeout in all.
func (r *remoteLearning) send() {
	defer r.wg.Done()
	for {
		select {
		case <-r.stop:
			deadline := time.Now().Add(remoteTimeout)
			for time.Now().Before(deadline) {
				select {
				case p := <-r.records:
					r.sendOne(p, deadline)
				default:
					return
				}
			}
			return
		case p := <-r.records:
			r.sendOne(p, time.Now().Add(remoteTimeout))
		}
	}
}

// sendOne records p through the holder by deadline. A holder that is gone
// (it stopped, releasing the store) is dropped and p goes to gone.
func (r *remoteLearning) sendOne(p learnedOne, deadline time.Time) {
	r.mu.Lock()
	h := r.holder
	r.mu.Unlock()
	if h == nil {
		r.gone(p)
		return
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	_, err := askLearn(ctx, h, learnRequest{Pairs: []learnedOne{p}, Record: true}, false)
	cancel()
	gone := local.Gone(err)
	r.mu.Lock()
	if err == nil {
		r.fetched = time.Time{} // fetch the pairs with this one at the next look
	} else if gone && r.holder == h {
		r.holder = nil
	}
	r.mu.Unlock()
	switch {
	case gone:
		r.gone(p)
	case err != nil:
		r.log.Warn("learned pair not recorded through the gateway that holds the store", "holder", h.name(), "tool", p.Tool, "err", err)
	}
}

// status is the holder's name and the pairs last fetched from it; ok is
// false while no holder answers.
func (r *remoteLearning) status() (holder string, pairs, tools int, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.holder == nil {
		return "", 0, 0, false
	}
	seen := map[string]bool{}
	for _, p := range r.pairs {
		seen[p.Tool] = true
	}
	return r.holder.name(), len(r.pairs), len(seen), true
}

// drop forgets the holder: this gateway opened the store itself.
func (r *remoteLearning) drop() {
	r.mu.Lock()
	r.holder, r.pairs = nil, nil
	r.mu.Unlock()
}

// Close stops sending and fetching.
func (r *remoteLearning) Close() {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	r.closed = true
	r.mu.Unlock()
	close(r.stop)
	r.wg.Wait()
}
