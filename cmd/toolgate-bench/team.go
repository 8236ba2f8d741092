package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/index/indextest"
	"github.com/toolgate/toolgate/internal/perf"
)

// teamPerClient is the fewest searches each client makes at a level.
const teamPerClient = 4

// team runs `toolgate serve --http` as a team's shared gateway: one API
// key a client, 1, 4, 16 and 64 clients (--team-clients) searching at once, each over its
// own streamable HTTP session, every query new (so each is embedded: the
// ONNX Runtime session is asked concurrently). A fresh serve on the same
// warm data folder for each level, so that its peak RSS (VmHWM, read once
// the level's searches are answered) is that level's. On the bundled
// config (--config) and on --team-tools synthetic tools served by stdio
// backends.
func (b *bench) team(ctx context.Context, _ []int) error {
	teamClients := b.teamClients
	type catalogRun struct {
		name, cfg string
		servers   int
	}
	var runs []catalogRun
	if b.f.config != "" {
		cfg, n, err := b.teamBundledConfig()
		if err != nil {
			return err
		}
		runs = append(runs, catalogRun{"bundled config", cfg, n})
	}
	shards := max(4, shardsFor(b.f.teamTools))
	cfg, err := b.benchConfigWith("team", b.f.teamTools, shards, teamSettings())
	if err != nil {
		return err
	}
	runs = append(runs, catalogRun{fmt.Sprintf("%d synthetic tools", b.f.teamTools), cfg, shards})
	// Queries: the synthetic catalog's, distinct over every level and
	// catalog (the data folder's embedding cache keeps query vectors).
	total := 0
	for _, c := range teamClients {
		total += max(b.f.queries, teamPerClient*c) + c
	}
	qs := indextest.Queries(indextest.Catalog(max(b.f.teamTools, 1000), indextest.Seed), total*len(runs), indextest.Seed+7)
	for k, r := range runs {
		dataDir := filepath.Join(b.work, fmt.Sprintf("team-data-%d", k))
		if err := os.RemoveAll(dataDir); err != nil {
			return err
		}
		args := append([]string{"index", "--config", r.cfg, "--data-dir", dataDir, "--log-level", "warn"}, b.embedArgs()...)
		if out, err := exec.CommandContext(ctx, b.toolgate, args...).CombinedOutput(); err != nil {
			return fmt.Errorf("toolgate index --config %s: %w: %s", r.cfg, err, out)
		}
		keys, err := b.teamKeys(dataDir, slices.Max(teamClients))
		if err != nil {
			return err
		}
		admin, err := b.soakKey(dataDir) // reads GET /metrics
		if err != nil {
			return err
		}
		for _, c := range teamClients {
			n := max(b.f.queries, teamPerClient*c)
			level := qs[:n+c]
			qs = qs[n+c:]
			if err := b.teamLevel(ctx, r.name, r.cfg, dataDir, r.servers, admin, keys[:c], level); err != nil {
				return err
			}
		}
	}
	return nil
}

// teamSettings lifts the per-key rate limit: one client searching alone
// makes over the default 50 requests a second.
func teamSettings() map[string]any {
	return map[string]any{"limits": map[string]any{"requestsPerSecond": 100000, "burst": 100000}}
}

// teamBundledConfig writes a copy of --config with teamSettings, its
// servers' working folders made absolute (they are the config's folder's),
// and returns it and its number of servers.
func (b *bench) teamBundledConfig() (string, int, error) {
	data, err := os.ReadFile(b.f.config)
	if err != nil {
		return "", 0, fmt.Errorf("--config: %w", err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(data, &cfg); err != nil {
		return "", 0, fmt.Errorf("--config %s: %w", b.f.config, err)
	}
	dir, err := filepath.Abs(filepath.Dir(b.f.config))
	if err != nil {
		return "", 0, err
	}
	servers, _ := cfg["mcpServers"].(map[string]any)
	for _, s := range servers {
		s, ok := s.(map[string]any)
		if !ok {
			continue
		}
		cwd, _ := s["cwd"].(string)
		if cwd == "" {
			cwd = "."
		}
		if !filepath.IsAbs(cwd) && !strings.HasPrefix(cwd, "$") {
			s["cwd"] = filepath.Join(dir, cwd)
		}
		if env, ok := s["env"].(map[string]any); ok {
			for k, v := range env {
				if v, ok := v.(string); ok {
					env[k] = strings.ReplaceAll(v, "${TOOLGATE_CONFIG_DIR}", b.work)
				}
			}
		}
	}
	settings, _ := cfg["toolgate"].(map[string]any)
	if settings == nil {
		settings = map[string]any{}
	}
	for k, v := range teamSettings() {
		settings[k] = v
	}
	cfg["toolgate"] = settings
	out, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return "", 0, err
	}
	p := filepath.Join(b.work, "team-bundled.json")
	return p, len(servers), os.WriteFile(p, out, 0o644)
}

// teamKeys creates n API keys on dataDir, one a client.
func (b *bench) teamKeys(dataDir string, n int) ([]string, error) {
	keys := make([]string, n)
	for i := range n {
		out, err := exec.Command(b.toolgate, "keys", "create", "--name", fmt.Sprintf("agent%02d", i), "--data-dir", dataDir).CombinedOutput()
		if err != nil {
			return nil, fmt.Errorf("toolgate keys create: %w: %s", err, out)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		keys[i] = strings.TrimSpace(lines[len(lines)-1])
	}
	return keys, nil
}

// teamLevel starts serve --http on the warm dataDir, waits for its servers,
// connects one client a key, warms each up with one search (qs[:clients]),
// then times the rest of qs made by the clients at once; it adds the row.
func (b *bench) teamLevel(ctx context.Context, name, cfg, dataDir string, servers int, admin string, keys []string, qs []indextest.Query) error {
	addr, err := benchAddr()
	if err != nil {
		return err
	}
	base := "http://" + addr
	args := append([]string{"serve", "--config", cfg, "--data-dir", dataDir, "--http", addr, "--log-level", "warn"}, b.embedArgs()...)
	srv := &soakServe{cmd: exec.Command(b.toolgate, args...), stderr: &syncBuffer{}}
	srv.cmd.Stderr = srv
	if err := srv.cmd.Start(); err != nil {
		return err
	}
	defer func() { _ = srv.stop() }()
	fail := func(err error) error {
		return fmt.Errorf("%s: %w; serve's log:\n%s", name, err, lastLines(srv.stderr.String(), 30))
	}
	hc := &http.Client{Transport: soakClient{key: admin}}
	if err := soakBackendsUp(ctx, hc, base, servers); err != nil {
		return fail(err)
	}
	c := len(keys)
	client := mcp.NewClient(&mcp.Implementation{Name: "toolgate-bench", Version: "0"}, nil)
	sessions := make([]*mcp.ClientSession, c)
	for i, key := range keys {
		t := &mcp.StreamableClientTransport{Endpoint: base + "/mcp", HTTPClient: &http.Client{Transport: soakClient{key: key}}}
		cs, err := client.Connect(ctx, t, nil)
		if err != nil {
			return fail(fmt.Errorf("client %d: %w", i, err))
		}
		defer cs.Close()
		sessions[i] = cs
	}
	// One search each, one after another: the first search loads what a
	// gateway loads once (the model, the key's view of the catalog).
	for i, cs := range sessions {
		if err := callSearch(ctx, cs, qs[i].Text); err != nil {
			return fail(err)
		}
	}
	qs = qs[c:]
	pid := srv.cmd.Process.Pid
	before := loadNow()
	// The most threads serve had while the clients searched: sampled, as a
	// burst of OS threads (cgo calls blocked in ONNX Runtime) ends with it.
	var threads int64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			threads = max(threads, procStatus(pid, "Threads:"))
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	})
	t0 := time.Now()
	lat, err := perf.Concurrent(len(qs), c, func(w, i int) error { return callSearch(ctx, sessions[w], qs[i].Text) })
	took := time.Since(t0)
	close(done)
	wg.Wait()
	if err != nil {
		return fail(err)
	}
	hwm := procStatus(pid, "VmHWM:")
	after, _, err := soakRead(hc, base, dataDir)
	if err != nil {
		return fail(err)
	}
	heap := slices.IndexFunc(soakReadings, func(r soakReading) bool { return r.metric == "go_memstats_heap_inuse_bytes" })
	b.add("team", fmt.Sprintf("%s, %d HTTP client(s) at once: search p50 / p99; serve's VmHWM", name, c),
		fmt.Sprintf("%s; %.0f MiB", p50p99(lat, fmtMS), float64(hwm)/1024),
		fmt.Sprintf("%d distinct queries, one API key a client; %.0f searches/s; serve's threads ≤ %d, Go heap in use after %.0f MiB; load %s before, %s after",
			len(qs), float64(len(qs))/took.Seconds(), threads, after[heap]/(1<<20), before, loadNow()))
	return nil
}

// procStatus reads a number (kB for memory) of /proc/PID/status's line
// named field ("VmHWM:", "Threads:"); 0 if it cannot.
func procStatus(pid int, field string) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for l := range strings.SplitSeq(string(data), "\n") {
		if rest, ok := strings.CutPrefix(l, field); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				return n
			}
		}
	}
	return 0
}
