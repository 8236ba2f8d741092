package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/gateway/backend"
	"github.com/toolgate/toolgate/gateway/backend/backendtest"
	"github.com/toolgate/toolgate/gateway/console"
	"github.com/toolgate/toolgate/internal/dirs"
	"github.com/toolgate/toolgate/internal/testenv"
)

// TestBM25ModeLoadsModelWhenAsked: serve in bm25 mode (toolgate.search.mode,
// serve --mode) loads the embedding model only once something reads
// vectors. A warm start's backends connect without it, and a search of the
// console's playground in hybrid over the bm25 index (no vectors) answers
// BM25 without it. A reload to hybrid loads it and builds the vectors. A
// warm start in bm25 mode on that index (it has vectors) loads it again
// only for a playground search in hybrid, which answers hybrid. serve
// loaded it at every start, for about 150 MiB of RSS, and a warm start's
// backends waited for that load.
//
// The model's load is read in the log ("embedder loaded"), once a state
// says it would have happened: a warm start's backends connected only
// once it had. Nor does bm25 mode load the ONNX Runtime library or open
// the embedding cache until then, read in the process's own state: the
// library among its mappings (/proc/PID/maps), the cache's files among its
// descriptors (/proc/PID/fd). Both were loaded and opened at every start
// (some 18 MiB of VmHWM, 8 descriptors).
func TestBM25ModeLoadsModelWhenAsked(t *testing.T) {
	fake := backendtest.Command(t, backendtest.ModeNormal)
	writeMode := func(path, mode string) {
		b, err := json.Marshal(map[string]any{
			"mcpServers": map[string]any{"fake": map[string]any{"command": fake.Command, "args": fake.Args, "env": fake.Env}},
			"toolgate":   map[string]any{"search": map[string]any{"mode": mode}},
		})
		if err != nil {
			t.Fatal(err)
		}
		writeRaw(t, path, b, true)
	}
	cfg := writeConfig(t, "{}")
	writeMode(cfg, "bm25")
	data := t.TempDir()
	get := func(addr, route string, v any) {
		t.Helper()
		r, err := http.Get("http://" + addr + route)
		if err != nil {
			t.Fatalf("GET %s: %v", route, err)
		}
		defer r.Body.Close()
		if err := json.NewDecoder(r.Body).Decode(v); err != nil {
			t.Fatalf("GET %s: %v", route, err)
		}
	}
	playground := func(addr, q, mode string) console.SearchAnswer {
		t.Helper()
		var a console.SearchAnswer
		get(addr, "/ui/api/search?q="+url.QueryEscape(q)+"&mode="+mode, &a)
		return a
	}
	resolved, err := filepath.EvalSymlinks(data) // as /proc/PID/fd names it
	if err != nil {
		t.Fatal(err)
	}
	cacheDir := dirs.EmbeddingCache(resolved)
	// opened says whether the gateway has the ONNX Runtime library mapped
	// and the embedding cache's files open, each.
	opened := func(pid int) (runtime, cache bool) {
		t.Helper()
		maps, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
		if err != nil {
			t.Fatal(err)
		}
		fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		if err != nil {
			t.Fatal(err)
		}
		for _, fd := range fds {
			if target, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); err == nil && strings.HasPrefix(target, cacheDir+"/") {
				cache = true
			}
		}
		return strings.Contains(string(maps), "libonnxruntime"), cache
	}
	unopened := func(pid int, when string) {
		t.Helper()
		if runtime, cache := opened(pid); runtime || cache {
			t.Errorf("%s: ONNX Runtime loaded %v, embedding cache open %v; want neither", when, runtime, cache)
		}
	}
	// serve starts a gateway, waits for its index and its backend, and
	// returns its address, its log, its pid and how to stop it.
	serve := func() (string, *testenv.LogBuffer, int, func()) {
		t.Helper()
		addr := freeAddr(t)
		cmd := toolgateCmd(t, data, "serve", "--config", cfg, "--http", addr)
		logs := &testenv.LogBuffer{}
		cmd.Stderr = io.MultiWriter(logs, testLog(t, "toolgate: "))
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		stop := func() { _ = cmd.Process.Signal(os.Interrupt); _ = cmd.Wait() }
		t.Cleanup(stop)
		waitHealthy(t, "http://"+addr+"/healthz", 3*time.Minute)
		indexServedHTTP(t, addr)
		testenv.Eventually(t, "the backend up", func() bool {
			var rep gateway.StatusReport
			get(addr, "/status", &rep)
			return len(rep.Backends) == 1 && rep.Backends[0].State == backend.StateUp
		})
		return addr, logs, cmd.Process.Pid, stop
	}
	const loaded = `msg="embedder loaded"`

	_, _, pid, stop := serve() // cold: the index without vectors
	unopened(pid, "a cold start in bm25 mode")
	stop()
	addr, logs, pid, stop := serve() // warm
	unopened(pid, "a warm start in bm25 mode")
	if !strings.Contains(logs.String(), "warm start") {
		t.Fatalf("the second start was not a warm one:\n%s", logs)
	}
	if strings.Contains(logs.String(), loaded) {
		t.Errorf("a warm start in bm25 mode loaded the embedding model:\n%s", logs)
	}
	if a := playground(addr, "echo the given text", "hybrid"); a.Mode != "bm25" || len(a.Tools) == 0 || a.Tools[0].Name != "fake__echo" {
		t.Errorf("a hybrid playground search over the bm25 index: mode %q, tools %+v; want bm25 and fake__echo first", a.Mode, a.Tools)
	}
	if strings.Contains(logs.String(), loaded) {
		t.Errorf("a hybrid search over an index without vectors loaded the embedding model:\n%s", logs)
	}
	unopened(pid, "a hybrid search over an index without vectors")

	writeMode(cfg, "hybrid") // a reload: the model loads, the vectors are built
	testenv.Eventually(t, "search ranking hybrid after the reload", func() bool {
		var rep gateway.StatusReport
		get(addr, "/status", &rep)
		return rep.Search != nil && rep.Search.Mode == "hybrid" && !rep.Search.BM25Only
	})
	if !strings.Contains(logs.String(), loaded) {
		t.Errorf("hybrid after the reload, and the log does not say the model loaded:\n%s", logs)
	}
	if runtime, cache := opened(pid); !runtime || !cache {
		t.Errorf("hybrid after the reload: ONNX Runtime loaded %v, embedding cache open %v; want both", runtime, cache)
	}
	writeMode(cfg, "bm25")
	stop()

	addr, logs, pid, stop = serve() // warm, on an index with vectors
	defer stop()
	unopened(pid, "a warm start in bm25 mode on an index with vectors")
	if strings.Contains(logs.String(), loaded) {
		t.Errorf("a warm start in bm25 mode on an index with vectors loaded the embedding model:\n%s", logs)
	}
	// A query never embedded before: its vector is in no cache.
	if a := playground(addr, "echo back what I typed just now", "hybrid"); a.Mode != "hybrid" || len(a.Tools) == 0 || a.Tools[0].Name != "fake__echo" {
		t.Errorf("a hybrid playground search over an index with vectors: mode %q, tools %+v; want hybrid and fake__echo first", a.Mode, a.Tools)
	}
	if !strings.Contains(logs.String(), loaded) {
		t.Errorf("a hybrid search answered hybrid, and the log does not say the model loaded:\n%s", logs)
	}
	if runtime, cache := opened(pid); !runtime || !cache {
		t.Errorf("a hybrid search answered hybrid: ONNX Runtime loaded %v, embedding cache open %v; want both", runtime, cache)
	}
}
