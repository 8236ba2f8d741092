package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/internal/storage"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/search"
	"github.com/toolgate/toolgate/search/learn"
)

// serveHolder opens a learned-pairs store (held) and serves it on a unix
// socket as the gateway that holds it does (its /learn handler, with tools
// as its catalog); gw is that gateway as a finder returns it. The server
// stops at the test's end; the store is the test's to close.
func serveHolder(t *testing.T, tools []catalog.Tool) (dir string, held *learn.Store, gw *localGateway, srv *http.Server) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "learn")
	held, err := learn.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	holder := &lazyLearning{open: func() (*learn.Store, error) { return held, nil }, busy: func(error) {}, opened: func() {}, retryEvery: time.Hour}
	holder.tryOpen(true)
	sock := filepath.Join(t.TempDir(), "holder.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv = &http.Server{Handler: holder.handler(dir, func() []catalog.Tool { return tools }, func(context.Context) error { return nil })}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	gw = &localGateway{sock: sock, rep: gateway.StatusReport{Process: &gateway.ProcessInfo{PID: 4242, Transport: "stdio"}}}
	return dir, held, gw, srv
}

// TestLearningThroughHolder: a gateway that cannot open the learned pairs
// because another holds them ranks with the holder's pairs and records
// through it, reporting no fault; when the holder stops (its socket goes,
// the store is released) a pair it could not take is recorded in the
// store, which this gateway then holds.
func TestLearningThroughHolder(t *testing.T) {
	tools := []catalog.Tool{{Server: "fs", Name: "read_file", Description: "read a file"}, {Server: "mem", Name: "read_graph", Description: "read the graph"}}
	dir, held, gw, srv := serveHolder(t, tools)

	var faults atomic.Int32
	l := &lazyLearning{retryEvery: time.Hour, opened: func() {},
		open: func() (*learn.Store, error) { return learn.Open(dir, nil) },
		busy: func(error) { faults.Add(1) }}
	l.remote = newRemoteLearning(func(context.Context) (*localGateway, error) { return gw, nil }, l.recordGone, nil)
	defer l.Close()
	l.indexed(tools) // the catalog served; the store is busy: learns through the holder
	if faults.Load() != 0 || l.store.Load() != nil {
		t.Fatalf("a gateway beside the holder: %d faults, store opened %v; want none, learning through the holder", faults.Load(), l.store.Load() != nil)
	}
	gen := l.Generation()

	// A pair it records goes to the holder; its ranking gets it back.
	l.Record("open my notes", tools[0])
	testenv.Eventually(t, "the pair in the holder's store", func() bool { n, _ := held.Stats(); return n == 1 })
	testenv.Eventually(t, "the holder's pairs back in the ranking", func() bool {
		return l.Generation() != gen && slices.Equal(l.Pairs(), []search.UsagePair{{Query: "open my notes", Tool: "fs__read_file", Weight: 1}})
	})

	// A look while they are unchanged keeps them (the holder leaves them
	// out of its answer).
	l.remote.mu.Lock()
	l.remote.fetched = time.Time{}
	l.remote.mu.Unlock()
	gen = l.Generation() // starts the look
	testenv.Eventually(t, "a look at unchanged pairs", func() bool {
		l.remote.mu.Lock()
		defer l.remote.mu.Unlock()
		return !l.remote.fetched.IsZero() && !l.remote.fetching
	})
	if len(l.Pairs()) != 1 || l.Generation() != gen {
		t.Errorf("after a look at unchanged pairs: %v (generation %d, was %d)", l.Pairs(), l.Generation(), gen)
	}

	// The holder stops: a pair sent then is recorded in the store, which
	// this gateway holds from then on.
	srv.Close()
	if err := held.Close(); err != nil {
		t.Fatal(err)
	}
	l.remote.record("show the graph", tools[1].ID())
	testenv.Eventually(t, "the store opened by the gateway that learned through the holder", func() bool { return l.store.Load() != nil })
	testenv.Eventually(t, "the pair the holder could not take, in the store", func() bool { n, _ := l.store.Load().Stats(); return n == 2 })
	if faults.Load() != 0 {
		t.Errorf("%d faults reported, want none", faults.Load())
	}
}

// A change whose ranking takes longer than learnRefreshWait to rebuild (a
// large log to embed) is answered once the wait is over, saying so; the
// searches finish the ranking.
func TestLearnAnswersBeforeALongRefresh(t *testing.T) {
	defer func(d time.Duration) { learnRefreshWait = d }(learnRefreshWait)
	learnRefreshWait = 50 * time.Millisecond
	slow := func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }
	srv := holdingGateway(t, slow)
	req := learnRequest{Pairs: []learnedOne{{Query: "open my notes", Tool: "fs__read_file"}}, Source: "log.jsonl"}
	ans := postLearn(t, srv.URL, req)
	if ans.Refreshed || ans.Recorded != 1 || ans.Pairs != 1 {
		t.Errorf("answer %+v, want the pair recorded and the ranking not rebuilt yet", ans)
	}
	var out bytes.Buffer
	printLearn(&out, req, ans, "pid 4242 (stdio)")
	if want := "(through pid 4242 (stdio), which holds the learned pairs: its searches rank with the change once it is embedded, within moments)\nrecorded 1 pair from log.jsonl"; !strings.HasPrefix(out.String(), want) {
		t.Errorf("printed %q, want it to start with %q", out.String(), want)
	}
}

// Gateways started together: the holder's socket is not up when the
// others look at start, so they look again for a while before the store is
// a fault; and a store no gateway answers for is one, reported once.
func TestLookingForTheHolder(t *testing.T) {
	defer func(w, r time.Duration) { holderWait, holderRetry = w, r }(holderWait, holderRetry)
	holderRetry = 10 * time.Millisecond
	dir, held, gw, _ := serveHolder(t, nil)
	defer held.Close()

	start := func(t *testing.T, up func() bool) (*lazyLearning, *atomic.Int32) {
		var faults atomic.Int32
		l := &lazyLearning{retryEvery: time.Hour, opened: func() {},
			open: func() (*learn.Store, error) { return learn.Open(dir, nil) },
			busy: func(error) { faults.Add(1) }}
		l.remote = newRemoteLearning(func(context.Context) (*localGateway, error) {
			if !up() {
				return nil, errors.New("no gateway holds it yet")
			}
			return gw, nil
		}, l.recordGone, nil)
		t.Cleanup(func() { l.Close() })
		l.tryOpen(true)
		return l, &faults
	}

	t.Run("holder up late", func(t *testing.T) {
		holderWait = time.Minute
		var asked atomic.Int32
		l, faults := start(t, func() bool { return asked.Add(1) > 3 })
		testenv.Eventually(t, "learning through the holder", func() bool { return l.remote.working() })
		if faults.Load() != 0 {
			t.Errorf("%d faults while the holder came up, want none", faults.Load())
		}
	})
	t.Run("no holder", func(t *testing.T) {
		holderWait = 50 * time.Millisecond
		l, faults := start(t, func() bool { return false })
		testenv.Eventually(t, "the store reported a fault", func() bool { return faults.Load() == 1 })
		l.mu.Lock()
		looking, failing := l.looking, l.failing
		l.mu.Unlock()
		if looking || !failing || l.remote.working() {
			t.Errorf("after the look: looking %v, failing %v, working %v; want a fault and no look running", looking, failing, l.remote.working())
		}
	})
}

// A reset that forgets nothing (a server without pairs, a misspelt name)
// changes nothing: the holder rebuilds no ranking, and learn does not say
// that its ranking uses a change.
func TestLearnResetOfNothingChangesNothing(t *testing.T) {
	var refreshed atomic.Int32
	srv := holdingGateway(t, func(context.Context) error { refreshed.Add(1); return nil })
	req := learnRequest{Reset: true, Server: "github"}
	ans := postLearn(t, srv.URL, req)
	if ans.Forgot != 0 || refreshed.Load() != 0 {
		t.Errorf("forgot %d, ranking rebuilt %d times; want 0 and 0", ans.Forgot, refreshed.Load())
	}
	var out bytes.Buffer
	printLearn(&out, req, ans, "pid 4242 (stdio)")
	if want := "(from pid 4242 (stdio), which holds the learned pairs)\nforgot 0 learned pairs of server github's tools\n"; !strings.HasPrefix(out.String(), want) {
		t.Errorf("printed %q, want it to start with %q", out.String(), want)
	}
}

// postLearn sends req to the learn handler at url and returns its answer.
func postLearn(t *testing.T, url string, req learnRequest) learnAnswer {
	t.Helper()
	b, _ := json.Marshal(req)
	resp, err := http.Post(url+"/learn", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var ans learnAnswer
	if err := json.NewDecoder(resp.Body).Decode(&ans); err != nil || resp.StatusCode != 200 {
		t.Fatalf("POST /learn: %d %v", resp.StatusCode, err)
	}
	return ans
}

// holdingGateway serves the learn handler of a gateway holding a new store,
// whose learned ranking refresh rebuilds.
func holdingGateway(t *testing.T, refresh func(context.Context) error) *httptest.Server {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "learn")
	store, err := learn.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	l := &lazyLearning{open: func() (*learn.Store, error) { return store, nil }, busy: func(error) {}, opened: func() {}, retryEvery: time.Hour}
	t.Cleanup(func() { l.Close() })
	srv := httptest.NewServer(l.handler(dir, func() []catalog.Tool { return nil }, refresh))
	t.Cleanup(srv.Close)
	return srv
}

// twoGateways is the learned pairs of two gateways on one data folder, as
// serve opens them (the store, Reopen once its folder was removed, learning
// through the other): a holds the store, b learns through a. Each serves
// its /learn handler on a socket outside the data folder; up says whether
// a's answers (its socket went with the folder: b then opens the store
// itself).
type twoGateways struct {
	data, dir string
	a, b      *lazyLearning
	aUp       atomic.Bool
}

func newTwoGateways(t *testing.T, tools []catalog.Tool) *twoGateways {
	t.Helper()
	tg := &twoGateways{data: filepath.Join(t.TempDir(), "data")}
	tg.dir = filepath.Join(tg.data, "learn")
	health := storage.New(tg.data, nil)
	if err := health.Prepare(); err != nil {
		t.Fatal(err)
	}
	gws := map[string]*localGateway{}
	gateway := func(name string, pid int, peer func() (*localGateway, error)) *lazyLearning {
		w := health.Writer("learned pairs "+name, "pairs are not recorded")
		l := &lazyLearning{retryEvery: time.Hour, opened: w.OK, busy: w.Fail,
			open:   func() (*learn.Store, error) { return learn.Open(tg.dir, &learn.Options{Storage: w}) },
			reopen: func(s *learn.Store) (*learn.Store, error) { return s.Reopen(&learn.Options{Storage: w}) }}
		l.remote = newRemoteLearning(func(context.Context) (*localGateway, error) { return peer() }, l.recordGone, nil)
		sock := filepath.Join(shortTempDir(t), name+".sock")
		ln, err := net.Listen("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: l.handler(tg.dir, func() []catalog.Tool { return tools }, func(context.Context) error { return nil })}
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Close() })
		gws[name] = &localGateway{sock: sock, rep: gateway.StatusReport{Process: &gateway.ProcessInfo{PID: pid, Transport: "stdio"}}}
		return l
	}
	tg.a = gateway("a", 4242, func() (*localGateway, error) { return gws["b"], nil })
	tg.b = gateway("b", 4343, func() (*localGateway, error) {
		if !tg.aUp.Load() {
			return nil, errors.New("no socket")
		}
		return gws["a"], nil
	})
	tg.aUp.Store(true)
	t.Cleanup(func() { tg.a.Close(); tg.b.Close() })
	tg.a.indexed(tools)
	tg.b.indexed(tools)
	if tg.a.store.Load() == nil || tg.b.store.Load() != nil || !tg.b.remote.working() {
		t.Fatal("want a holding the store and b learning through a")
	}
	return tg
}

// TestLearnedPairsHandedOverAfterDataFolderRemoved: two gateways on one data
// folder (the second learns through the one that holds the store), the
// folder removed and made again, and the second one's next record first: it
// opens a new store there. The holder's pairs, read from its removed
// store's open files, go to that store — at the holder's next record, or at
// its stop, or, once the other stopped, into the store it released — and
// every pair is there after both stopped, in any order. The holder used to
// keep them in its removed store, find the new one busy, and lose them all
// at its stop (exit status 4).
func TestLearnedPairsHandedOverAfterDataFolderRemoved(t *testing.T) {
	defer func(r time.Duration) { holderRetry = r }(holderRetry)
	holderRetry = 10 * time.Millisecond
	tools := []catalog.Tool{
		{Server: "fs", Name: "read_file", Description: "read a file"},
		{Server: "mem", Name: "read_graph", Description: "read the graph"},
		{Server: "mem", Name: "create_entities", Description: "create entities in the graph"},
		{Server: "fs", Name: "write_file", Description: "write a file"},
	}
	start := func(t *testing.T) *twoGateways {
		tg := newTwoGateways(t, tools)
		tg.b.Record("open my notes", tools[0])
		tg.a.Record("show the graph", tools[1])
		testenv.Eventually(t, "both pairs in a's store", func() bool { n, _ := tg.a.store.Load().Stats(); return n == 2 })
		if err := os.RemoveAll(tg.data); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(tg.data, 0o755); err != nil {
			t.Fatal(err)
		}
		// a's socket went with the folder: b's next record opens a new
		// store, before a looked.
		tg.aUp.Store(false)
		tg.b.remote.mu.Lock()
		tg.b.remote.holder = nil
		tg.b.remote.mu.Unlock()
		tg.b.Record("remember alice", tools[2])
		if tg.b.store.Load() == nil {
			t.Fatal("b did not open the new store")
		}
		return tg
	}
	stored := func(t *testing.T, tg *twoGateways) []string {
		t.Helper()
		s, err := learn.Open(tg.dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		var got []string
		for _, p := range s.Pairs() {
			got = append(got, p.Tool+" | "+p.Query)
		}
		slices.Sort(got)
		return got
	}
	want := []string{"fs__read_file | open my notes", "mem__create_entities | remember alice", "mem__read_graph | show the graph"}
	for _, tc := range []struct {
		name   string
		then   func(t *testing.T, tg *twoGateways) // before the stops
		bFirst bool                                // b stops before a
		want   []string
	}{
		{name: "holder records next", then: func(t *testing.T, tg *twoGateways) {
			tg.a.Record("save my draft", tools[3])
			if tg.a.store.Load() != nil || !strings.HasPrefix(tg.a.status().Holder, "pid 4343 (stdio") {
				t.Fatalf("a after its record: status %+v, want it learning through b", tg.a.status())
			}
			testenv.Eventually(t, "every pair in b's store", func() bool { n, _ := tg.b.store.Load().Stats(); return n == 4 })
		}, want: []string{"fs__read_file | open my notes", "fs__write_file | save my draft", "mem__create_entities | remember alice", "mem__read_graph | show the graph"}},
		{name: "holder idle", then: func(t *testing.T, tg *twoGateways) {
			tg.a.watch(time.Millisecond)
			testenv.Eventually(t, "a's pairs handed to b without a record or search", func() bool {
				n, _ := tg.b.store.Load().Stats()
				return tg.a.store.Load() == nil && n == 3
			})
		}, want: want},
		{name: "holder stops first", want: want},
		{name: "other stops first", bFirst: true, want: want},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tg := start(t)
			if tc.then != nil {
				tc.then(t, tg)
			}
			stops := []*lazyLearning{tg.a, tg.b}
			if tc.bFirst {
				slices.Reverse(stops)
			}
			for _, l := range stops {
				if err := l.Close(); err != nil {
					t.Errorf("stop: %v", err)
				}
			}
			if got := stored(t, tg); !slices.Equal(got, tc.want) {
				t.Errorf("pairs after both stopped: %v, want %v", got, tc.want)
			}
		})
	}
}

// A gateway that opened the new store but takes no hand-over (a toolgate
// older than this one answers a look, merged absent): the removed store
// stays this gateway's, ranking with its pairs, rather than being dropped
// as if they went over.
func TestHandOverRefusedKeepsTheStore(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	dir := filepath.Join(data, "learn")
	s, err := learn.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Record("open my notes", catalog.Tool{Server: "fs", Name: "read_file", Description: "read a file"})
	sock := filepath.Join(t.TempDir(), "old.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte(`{"forgot":0,"recorded":0,"pairs":0,"tools":0,"dir":"x","generation":1}`))
	})}
	go srv.Serve(ln)
	defer srv.Close()
	old := &localGateway{sock: sock, rep: gateway.StatusReport{Process: &gateway.ProcessInfo{PID: 4343, Transport: "stdio"}}}
	l := &lazyLearning{retryEvery: time.Hour, opened: func() {}, busy: func(error) {}}
	l.remote = newRemoteLearning(func(context.Context) (*localGateway, error) { return old, nil }, l.recordGone, nil)
	defer l.remote.Close()
	l.store.Store(s)
	if l.handOver(s) {
		t.Fatal("handed over to a gateway that took none of the pairs")
	}
	if l.store.Load() != s || len(l.Pairs()) != 1 {
		t.Errorf("after a refused hand-over: store kept %v, pairs %v; want the store and its pair", l.store.Load() == s, l.Pairs())
	}
	s.Close()
}
