package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/index/indextest"
	"github.com/toolgate/toolgate/search/learn"
)

// soakReading is one thing a leak would grow: a gauge of the gateway's own
// GET /metrics (the Go and process collectors), or a figure of its data
// folder or GET /status.
type soakReading struct {
	name   string
	unit   float64 // divide the value by this
	format string
	metric string                                      // from GET /metrics, else
	read   func(dataDir string, st soakStatus) float64 // from the data folder or GET /status
}

// soakStatus is what the soak reads of GET /status.
type soakStatus struct {
	Learning struct {
		Pairs int `json:"pairs"`
		Tools int `json:"tools"`
	} `json:"learning"`
	Security struct {
		Audit struct {
			Written int64 `json:"written"`
			Dropped int64 `json:"dropped"`
		} `json:"audit"`
	} `json:"security"`
	Backends []struct {
		State string `json:"state"`
	} `json:"backends"`
}

// The audit log's rotation in the soak: small files, so that a run rotates
// it many times and its folder shows the bound ((soakAuditFiles+1) files
// of at most soakAuditBytes).
const (
	soakAuditBytes = 256 << 10
	soakAuditFiles = 3
)

var soakReadings = []soakReading{
	{name: "goroutines", unit: 1, format: "%.0f", metric: "go_goroutines"},
	{name: "open file descriptors", unit: 1, format: "%.0f", metric: "process_open_fds"},
	{name: "heap in use", unit: 1 << 20, format: "%.1f MiB", metric: "go_memstats_heap_inuse_bytes"},
	{name: "resident memory", unit: 1 << 20, format: "%.0f MiB", metric: "process_resident_memory_bytes"},
	{name: "CPU time", unit: 1, format: "%.1f s", metric: "process_cpu_seconds_total"},
	{name: "learned pairs", unit: 1, format: "%.0f", read: func(_ string, st soakStatus) float64 { return float64(st.Learning.Pairs) }},
	{name: "learn/ on disk", unit: 1 << 10, format: "%.0f KiB", read: diskUse("learn")},
	{name: "learn/ Badger files (.sst .vlog .mem)", unit: 1, format: "%.0f", read: badgerFiles("learn")},
	{name: "cache/ on disk", unit: 1 << 10, format: "%.0f KiB", read: diskUse("cache")},
	{name: "cache/ Badger files (.sst .vlog .mem)", unit: 1, format: "%.0f", read: badgerFiles("cache/embeddings")},
	{name: "index/ on disk", unit: 1 << 10, format: "%.0f KiB", read: diskUse("index")},
	{name: "audit/ on disk", unit: 1 << 10, format: "%.0f KiB", read: diskUse("audit")},
}

// diskUse reads the blocks the files under the data folder's dir take
// (du's figure: Badger's memtables and value logs are sparse, their
// apparent size far beyond what they hold).
func diskUse(dir string) func(string, soakStatus) float64 {
	return func(dataDir string, _ soakStatus) float64 {
		var n int64
		_ = filepath.WalkDir(filepath.Join(dataDir, dir), func(_ string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			if fi, err := d.Info(); err == nil {
				if st, ok := fi.Sys().(*syscall.Stat_t); ok {
					n += st.Blocks * 512
				}
			}
			return nil
		})
		return float64(n)
	}
}

// badgerFiles counts the tables, value logs and memtables of the Badger
// store in the data folder's dir.
func badgerFiles(dir string) func(string, soakStatus) float64 {
	return func(dataDir string, _ soakStatus) float64 {
		n := 0
		for _, ext := range []string{"sst", "vlog", "mem"} {
			m, _ := filepath.Glob(filepath.Join(dataDir, dir, "*."+ext))
			n += len(m)
		}
		return float64(n)
	}
}

// soakWarmup is how many sessions run before the baseline is read: the
// first searches fill the caches and pools a gateway keeps.
const soakWarmup = 50

// soakClient is an HTTP client of the soak's gateway: it sends the API key
// and, when set, the session's own Mcp-Session-Id (the stateless HTTP
// front issues none; a client that sends one teaches the gateway, as
// `toolgate connect` does).
type soakClient struct {
	key, session string
}

func (c soakClient) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+c.key)
	if c.session != "" && r.Header.Get("Mcp-Session-Id") == "" {
		r.Header.Set("Mcp-Session-Id", c.session)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// soakServe is one `toolgate serve --http` of the soak.
type soakServe struct {
	cmd    *exec.Cmd
	stderr *syncBuffer
	bytes  atomic.Int64 // written to stderr
}

func (s *soakServe) Write(p []byte) (int, error) {
	s.bytes.Add(int64(len(p)))
	return s.stderr.Write(p)
}

func (s *soakServe) stop() error {
	_ = s.cmd.Process.Signal(os.Interrupt)
	return s.cmd.Wait()
}

// soak runs `toolgate serve --http` the way a shared gateway lives for days
// and reads what a leak would grow. --soak-sessions client sessions come
// one after another, each a new streamable HTTP session of its own
// Mcp-Session-Id, with an admin API key, that searches, runs the tool the
// search ranked first (its required arguments filled in, as an agent
// would) and closes, so the gateway audits every call and learns a pair;
// every tenth also restarts one backend and disables and enables it
// through the management tools (a reload's work). The audit log rotates at
// soakAuditBytes, keeping soakAuditFiles. The gateway's goroutines, open
// descriptors, heap in use and resident memory, its learned pairs and its
// data folder's stores on disk are read after a warm-up, at each fifth of
// the run, and once the last session has gone: a leak shows as growth with
// the sessions, not as one step. Then the gateway is restarted on the same
// data folder, which must come back with every pair, and serve more
// sessions.
func (b *bench) soak(ctx context.Context, _ []int) error {
	const n, shards = 200, 2
	cfg, err := b.benchConfigWith("soak", n, shards, map[string]any{
		"audit": map[string]any{"maxFileBytes": soakAuditBytes, "maxFiles": soakAuditFiles},
		// One key makes every session's requests, back to back: over the
		// default 50 a second it would be refused (429).
		"limits": map[string]any{"requestsPerSecond": 10000, "burst": 10000},
	})
	if err != nil {
		return err
	}
	dataDir := filepath.Join(b.work, "soak-data")
	key, err := b.soakKey(dataDir)
	if err != nil {
		return err
	}
	hc := &http.Client{Transport: soakClient{key: key}}
	addr, err := benchAddr()
	if err != nil {
		return err
	}
	base := "http://" + addr
	// The default log level: what an operator's journal gets per call.
	args := append([]string{"serve", "--config", cfg, "--data-dir", dataDir, "--http", addr}, b.embedArgs()...)
	start := func() (*soakServe, error) {
		s := &soakServe{cmd: exec.Command(b.toolgate, args...), stderr: &syncBuffer{}}
		s.cmd.Stderr = s
		if err := s.cmd.Start(); err != nil {
			return nil, err
		}
		if err := soakBackendsUp(ctx, hc, base, shards); err != nil {
			_ = s.stop()
			return nil, fmt.Errorf("%w; its log:\n%s", err, s.stderr.String())
		}
		return s, nil
	}
	srv, err := start()
	if err != nil {
		return err
	}
	defer func() { _ = srv.stop() }()

	qs := indextest.Queries(indextest.Catalog(n, indextest.Seed), 2*soakWarmup+b.f.soakSessions, indextest.Seed)
	client := mcp.NewClient(&mcp.Implementation{Name: "toolgate-bench", Version: "0"}, nil)
	restarts := 0
	session := func(i int) error {
		t := &mcp.StreamableClientTransport{Endpoint: base + "/mcp",
			HTTPClient: &http.Client{Transport: soakClient{key: key, session: fmt.Sprintf("soak-%d", i)}}}
		cs, err := client.Connect(ctx, t, nil)
		if err != nil {
			return fmt.Errorf("session %d: %w", i, err)
		}
		defer cs.Close()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: gateway.SearchToolName, Arguments: map[string]any{"query": qs[i].Text}})
		if err == nil && res.IsError {
			err = fmt.Errorf("%s", resultText(res))
		}
		if err != nil {
			return fmt.Errorf("session %d: search: %w", i, err)
		}
		name, arguments, err := soakFirst(res)
		if err != nil {
			return fmt.Errorf("session %d: %w", i, err)
		}
		params := []*mcp.CallToolParams{
			{Name: gateway.ExecuteToolName, Arguments: map[string]any{"name": name, "arguments": arguments}},
		}
		if i >= soakWarmup && i%10 == 0 {
			restarts++
			for _, tool := range []string{"restart_server", "disable_server", "enable_server"} {
				params = append(params, &mcp.CallToolParams{Name: gateway.ExecuteToolName,
					Arguments: map[string]any{"name": "toolgate__" + tool, "arguments": map[string]any{"name": "syn01"}}})
			}
		}
		for _, p := range params {
			if err := toolCall(ctx, cs, p)(); err != nil {
				return fmt.Errorf("session %d: %w", i, err)
			}
		}
		if len(params) > 1 {
			// The next session's first tool may be the restarted
			// backend's.
			return soakBackendsUp(ctx, hc, base, shards)
		}
		return nil
	}
	// logged[1] is what serve logs in the sessions that restart, disable
	// and enable a backend, logged[0] in the others (after the warm-up).
	var logged, counted [2]int64
	run := func(from, to int) error {
		for i := from; i < to; i++ {
			at := srv.bytes.Load()
			if err := session(i); err != nil {
				return fmt.Errorf("%w; its log:\n%s", err, srv.stderr.String())
			}
			if i >= soakWarmup {
				k := 0
				if i%10 == 0 {
					k = 1
				}
				logged[k] += srv.bytes.Load() - at
				counted[k]++
			}
		}
		return nil
	}
	read := func() ([]float64, soakStatus, error) { return soakRead(hc, base, dataDir) }

	if err := run(0, soakWarmup); err != nil {
		return err
	}
	before, _, err := read()
	if err != nil {
		return err
	}
	var fifths [][]float64
	for i := range b.f.soakSessions {
		if err := run(soakWarmup+i, soakWarmup+i+1); err != nil {
			return err
		}
		if (i+1)%max(1, b.f.soakSessions/5) == 0 && len(fifths) < 5 {
			r, _, err := read()
			if err != nil {
				return err
			}
			fifths = append(fifths, r)
		}
	}
	// The last sessions' goroutines end as their connections close: wait
	// (5 s at most) for the count to come back before the last reading.
	after, st, err := read()
	for deadline := time.Now().Add(5 * time.Second); err == nil && after[0] > before[0] && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		after, st, err = read()
	}
	if err != nil {
		return err
	}
	for k, r := range soakReadings {
		show := func(v float64) string { return fmt.Sprintf(r.format, v/r.unit) }
		var at []string
		for _, f := range fifths {
			at = append(at, strings.Fields(show(f[k]))[0])
		}
		note := "at each fifth: " + strings.Join(at, " / ")
		if k == 0 {
			note += fmt.Sprintf("; streamable HTTP sessions of a search and a call of its first tool each, %d of them also restarting a backend and disabling and enabling it; load %s", restarts, loadNow())
		}
		b.add("soak", fmt.Sprintf("%s of serve, after %d warm-up sessions → after %d more", r.name, soakWarmup, b.f.soakSessions),
			show(before[k])+" → "+show(after[k]), note)
	}
	// serve's CPU per session in each fifth: the learned model is rebuilt
	// as pairs come (spaced: see search.waitRebuild), at a cost that grows
	// with the pairs (up to their cap).
	cpu := slices.IndexFunc(soakReadings, func(r soakReading) bool { return r.metric == "process_cpu_seconds_total" })
	var perSession []string
	prev := before[cpu]
	for _, f := range fifths {
		perSession = append(perSession, fmt.Sprintf("%.0f", (f[cpu]-prev)*1000/float64(max(1, b.f.soakSessions/5))))
		prev = f[cpu]
	}
	b.add("soak", "serve's CPU per session, in each fifth", strings.Join(perSession, " / ")+" ms", "")
	auditFiles, _ := filepath.Glob(filepath.Join(dataDir, "audit", "audit.jsonl*"))
	b.add("soak", "audit records written / lost; audit files", fmt.Sprintf("%d / %d; %d", st.Security.Audit.Written, st.Security.Audit.Dropped, len(auditFiles)),
		fmt.Sprintf("rotated at %d KiB, keeping %d", soakAuditBytes>>10, soakAuditFiles))
	b.add("soak", "serve's log on stderr at the default level, per session: a search and a call / also restarting, disabling and enabling a backend",
		fmt.Sprintf("%.0f / %.0f bytes", float64(logged[0])/float64(max(1, counted[0])), float64(logged[1])/float64(max(1, counted[1]))), "")

	// A restart on the same data folder: every pair comes back, and the
	// gateway serves on (its warm index, cache and audit log).
	pairs := st.Learning.Pairs
	if err := srv.stop(); err != nil {
		return fmt.Errorf("serve did not stop cleanly: %w; its log:\n%s", err, srv.stderr.String())
	}
	perTool, err := maxQueriesPerTool(filepath.Join(dataDir, "learn"))
	if err != nil {
		return err
	}
	if srv, err = start(); err != nil {
		return err
	}
	_, st, err = read()
	if err != nil {
		return err
	}
	again := st.Learning.Pairs
	if err := run(soakWarmup+b.f.soakSessions, 2*soakWarmup+b.f.soakSessions); err != nil {
		return err
	}
	_, st, err = read()
	if err != nil {
		return err
	}
	b.add("soak", "learned pairs before a restart → after it → after 50 more sessions", fmt.Sprintf("%d → %d → %d", pairs, again, st.Learning.Pairs),
		fmt.Sprintf("at most %d queries for one tool (cap %d)", perTool, learn.MaxQueriesPerTool))
	if again != pairs {
		return fmt.Errorf("serve restarted with %d learned pairs, %d before", again, pairs)
	}
	return nil
}

// soakKey creates an admin API key in dataDir (the management tools need
// one) and returns its secret: the last line `keys create` prints.
func (b *bench) soakKey(dataDir string) (string, error) {
	out, err := exec.Command(b.toolgate, "keys", "create", "--name", "soak", "--admin", "--data-dir", dataDir).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("toolgate keys create: %w: %s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return strings.TrimSpace(lines[len(lines)-1]), nil
}

// soakFirst returns the tool a search_tools answer ranked first, and the
// arguments an agent would give it: its required properties, each a value
// of its type.
func soakFirst(res *mcp.CallToolResult) (string, map[string]any, error) {
	var found struct {
		Tools []struct {
			Name        string `json:"name"`
			InputSchema struct {
				Properties map[string]struct {
					Type string `json:"type"`
				} `json:"properties"`
				Required []string `json:"required"`
			} `json:"inputSchema"`
		} `json:"tools"`
	}
	b, err := json.Marshal(res.StructuredContent)
	if err == nil {
		err = json.Unmarshal(b, &found)
	}
	if err != nil || len(found.Tools) == 0 {
		return "", nil, fmt.Errorf("search found no tool (%v): %s", err, resultText(res))
	}
	t := found.Tools[0]
	args := map[string]any{}
	for _, p := range t.InputSchema.Required {
		switch t.InputSchema.Properties[p].Type {
		case "integer", "number":
			args[p] = 1
		case "boolean":
			args[p] = true
		case "array":
			args[p] = []any{}
		case "object":
			args[p] = map[string]any{}
		default:
			args[p] = "soak"
		}
	}
	return t.Name, args, nil
}

// maxQueriesPerTool opens the learned pairs (the gateway stopped) and
// returns the most queries one tool keeps.
func maxQueriesPerTool(dir string) (int, error) {
	s, err := learn.Open(dir, nil)
	if err != nil {
		return 0, err
	}
	defer s.Close()
	per := map[string]int{}
	for _, p := range s.Pairs() {
		per[p.Tool]++
	}
	most := 0
	for _, n := range per {
		most = max(most, n)
	}
	return most, nil
}

// soakBackendsUp waits (a minute at most) until GET /status shows n
// backends up.
func soakBackendsUp(ctx context.Context, hc *http.Client, base string, n int) error {
	deadline := time.Now().Add(time.Minute)
	for {
		st, err := soakGetStatus(hc, base)
		up := 0
		for _, b := range st.Backends {
			if b.State == "up" {
				up++
			}
		}
		if err == nil && up >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("serve's %d backends were not all up within a minute (%d up, last error %v)", n, up, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func soakGetStatus(hc *http.Client, base string) (soakStatus, error) {
	var st soakStatus
	resp, err := hc.Get(base + "/status")
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return st, fmt.Errorf("GET /status: %s: %s", resp.Status, b)
	}
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

// soakRead reads soakReadings, in order: the gateway's GET /metrics and
// GET /status, and its data folder.
func soakRead(hc *http.Client, base, dataDir string) ([]float64, soakStatus, error) {
	st, err := soakGetStatus(hc, base)
	if err != nil {
		return nil, st, err
	}
	resp, err := hc.Get(base + "/metrics")
	if err != nil {
		return nil, st, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return nil, st, fmt.Errorf("GET /metrics: %s: %s", resp.Status, b)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, st, fmt.Errorf("GET /metrics: %w", err)
	}
	out := make([]float64, len(soakReadings))
	for k, r := range soakReadings {
		if r.metric == "" {
			out[k] = r.read(dataDir, st)
			continue
		}
		f := families[r.metric]
		if f == nil || len(f.GetMetric()) != 1 {
			names := make([]string, 0, len(families))
			for name := range families {
				names = append(names, name)
			}
			slices.Sort(names)
			return nil, st, fmt.Errorf("GET /metrics has no %s (it has %s)", r.metric, strings.Join(names, ", "))
		}
		m := f.GetMetric()[0]
		switch {
		case m.GetGauge() != nil:
			out[k] = m.GetGauge().GetValue()
		case m.GetCounter() != nil:
			out[k] = m.GetCounter().GetValue()
		case m.GetUntyped() != nil:
			out[k] = m.GetUntyped().GetValue()
		}
	}
	return out, st, nil
}
