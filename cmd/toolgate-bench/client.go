package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/index/indextest"
	"github.com/toolgate/toolgate/internal/perf"
)

// clientSearches is how many search_tools calls each served gateway
// answers (issue 18: "peak RSS over 200 searches").
const clientSearches = 200

// client measures the five figures of issue 18 the way a client lives them,
// on one catalog of --client-tools synthetic tools served by four (or, for
// more than 10,000 tools, more) stdio backends of this binary, with
// bin/toolgate as real processes and a go-sdk client over stdio:
//
//  1. cold indexing: `toolgate index --config` on an empty data folder
//     (every tool embedded), wall clock from spawn to exit;
//  2. search_tools end to end: p50 / p99 of 200 calls over stdio;
//  3. warm start: spawn of `toolgate serve` to the first search_tools
//     answer (the handshake included);
//  4. peak RSS: the serve process's VmHWM after those 200 searches;
//  5. the execute hop: execute_tool of a backend's no-op tool through the
//     gateway, alternating with the same call made directly on a session
//     to the same backend command; the difference of the p50s.
//
// Serve is started --repeats times on the index the first step built;
// each run gives rows 2–4, the last also row 5.
func (b *bench) client(ctx context.Context, _ []int) error {
	n := b.f.clientTools
	shards := max(4, shardsFor(n))
	cfg, err := b.benchConfig("client", n, shards)
	if err != nil {
		return err
	}
	dataDir := filepath.Join(b.work, "client-data")
	if err := os.RemoveAll(dataDir); err != nil {
		return err
	}
	backends := fmt.Sprintf("%d tools on %d stdio backends", n, shards)

	// 1. Cold indexing.
	args := append([]string{"index", "--config", cfg, "--data-dir", dataDir, "--json", "--log-level", "warn"}, b.embedArgs()...)
	cmd := exec.CommandContext(ctx, b.toolgate, args...)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	t0 := time.Now()
	out, err := cmd.Output()
	cold := time.Since(t0)
	if err != nil {
		return fmt.Errorf("toolgate index: %w; its log:\n%s", err, stderr.String())
	}
	var res struct {
		Tools    int     `json:"tools"`
		Embedded int     `json:"embedded"`    // tools
		Texts    int     `json:"cacheMisses"` // texts the model embedded (three views a tool)
		Seconds  float64 `json:"seconds"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		return fmt.Errorf("toolgate index --json printed %q: %w", out, err)
	}
	if res.Tools < n {
		return fmt.Errorf("toolgate index indexed %d tools, want %d: %s", res.Tools, n, out)
	}
	b.add("client", fmt.Sprintf("cold indexing: `toolgate index --config`, %d tools, empty data folder", n), fmt.Sprintf("%.1f s", cold.Seconds()),
		fmt.Sprintf("spawn to exit (%.1f s building the index); %d tools embedded (%d texts); %s; load %s", res.Seconds, res.Embedded, res.Texts, backends, loadNow()))

	// 2–5. Serve, warm.
	var starts, p50s, p99s, earlyP50s, earlyP99s []time.Duration
	var hwms []int64
	var hop row
	for r := range b.f.repeats {
		first, qs := runQueries(n, r)
		run, err := b.startServe(ctx, cfg, dataDir, first)
		if err != nil {
			return err
		}
		starts = append(starts, run.firstAnswer)
		// The first 200 searches come while the backends connect (serve
		// starts them once the model is loaded); the next 200 once they are
		// all up.
		early, err := run.searches(ctx, qs[:clientSearches])
		if err == nil {
			err = run.backendsUp(ctx, shards)
		}
		var lat []time.Duration
		if err == nil {
			lat, err = run.searches(ctx, qs[clientSearches:])
		}
		if err == nil {
			err = run.reindexed()
		}
		if err != nil {
			run.close()
			return err
		}
		p50s, p99s = append(p50s, perf.Percentile(lat, 50)), append(p99s, perf.Percentile(lat, 99))
		earlyP50s, earlyP99s = append(earlyP50s, perf.Percentile(early, 50)), append(earlyP99s, perf.Percentile(early, 99))
		hwms = append(hwms, vmHWM(run.pid))
		if r == b.f.repeats-1 {
			if hop, err = b.executeHop(ctx, run.cs, n, shards); err != nil {
				err = fmt.Errorf("%w; the gateway's log:\n%s", err, lastLines(run.log.String(), 40))
			}
		}
		run.close()
		if err != nil {
			return err
		}
	}
	runs := fmt.Sprintf("%d runs", len(starts))
	b.add("client", "search_tools end to end over stdio, p50 / p99", fmt.Sprintf("%s / %s", fmtMS(slices.Max(p50s)), fmtMS(slices.Max(p99s))),
		fmt.Sprintf("worst of %s (p50s %s; p99s %s); %d distinct queries a run, each embedded, once the %d backends are up; load %s", runs, listMS(p50s), listMS(p99s), clientSearches, shards, loadNow()))
	b.add("client", "… the 200 searches right after the first answer, as the backends connect", fmt.Sprintf("%s / %s", fmtMS(slices.Max(earlyP50s)), fmtMS(slices.Max(earlyP99s))),
		fmt.Sprintf("worst of %s (p50s %s; p99s %s)", runs, listMS(earlyP50s), listMS(earlyP99s)))
	b.add("client", "warm start: spawn of `toolgate serve` → first search_tools answer", fmtSec(slices.Max(starts)),
		fmt.Sprintf("worst of %s (%s); the MCP handshake included; %s", runs, listSec(starts), backends))
	b.add("client", fmt.Sprintf("peak RSS (VmHWM) of serve over %d searches", 2*clientSearches), fmt.Sprintf("%.0f MiB", float64(slices.Max(hwms))/1024),
		fmt.Sprintf("worst of %s (%s MiB), read after both sets of searches; backends not counted", runs, listMiB(hwms)))
	b.add(hop.section, hop.name, hop.value, hop.note)
	return nil
}

// serveRun is a `toolgate serve` process with a client session over its
// stdio.
type serveRun struct {
	cs          *mcp.ClientSession
	pid         int
	firstAnswer time.Duration // spawn → first search_tools answer
	close       func()
	log         *syncBuffer // serve's stderr
}

// backendsUp waits until serve has logged n backends up (a minute at most).
func (r *serveRun) backendsUp(ctx context.Context, n int) error {
	deadline := time.Now().Add(time.Minute)
	for strings.Count(r.log.String(), `msg="backend up"`) < n {
		if time.Now().After(deadline) {
			return fmt.Errorf("serve's %d backends were not all up within a minute; its log:\n%s", n, r.log.String())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

// reindexed says whether serve built an index after its warm start (its
// backends listed a catalog other than the one indexed ahead), which the
// figures of a warm serve must not include.
func (r *serveRun) reindexed() error {
	if log := r.log.String(); strings.Contains(log, `msg="index ready`) {
		return fmt.Errorf("serve re-indexed after its warm start (the index built ahead does not match what its backends list); its log:\n%s", log)
	}
	return nil
}

// runQueries are the queries of serve run r over the synthetic catalog of
// n tools: the first one and 400 more, none asked in another run (serve's
// embedding cache keeps query vectors, and each search must embed its
// query as a new client's would).
func runQueries(n, r int) (string, []indextest.Query) {
	qs := indextest.Queries(indextest.Catalog(n, indextest.Seed), 2*clientSearches+1, indextest.Seed+1+uint64(r))
	return fmt.Sprintf("%s (run %d)", qs[0].Text, r+1), qs[1:]
}

// searches times search_tools calls of qs, one after another.
func (r *serveRun) searches(ctx context.Context, qs []indextest.Query) ([]time.Duration, error) {
	lat := make([]time.Duration, 0, len(qs))
	for _, q := range qs {
		t := time.Now()
		if err := callSearch(ctx, r.cs, q.Text); err != nil {
			return nil, err
		}
		lat = append(lat, time.Since(t))
	}
	return lat, nil
}

// startServe spawns serve on a warm data folder, connects over stdio and
// waits for the answer to its first search_tools call (query first), which
// must be a hybrid one on the index found up to date.
func (b *bench) startServe(ctx context.Context, cfg, dataDir, first string) (*serveRun, error) {
	args := append([]string{"serve", "--config", cfg, "--data-dir", dataDir, "--log-level", "info"}, b.embedArgs()...)
	cmd := exec.Command(b.toolgate, args...)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "toolgate-bench", Version: "0"}, nil)
	t0 := time.Now()
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		return nil, fmt.Errorf("start gateway: %w; its log:\n%s", err, stderr.String())
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: gateway.SearchToolName, Arguments: map[string]any{"query": first}})
	d := time.Since(t0)
	if err == nil && res.IsError {
		err = fmt.Errorf("%s: %s", gateway.SearchToolName, resultText(res))
	}
	if err != nil {
		cs.Close()
		return nil, err
	}
	// The first answer counts only if it is a hybrid one (the model loaded).
	var answer struct {
		Mode string `json:"mode"`
	}
	if b, err := json.Marshal(res.StructuredContent); err != nil || json.Unmarshal(b, &answer) != nil || answer.Mode != "hybrid" {
		cs.Close()
		return nil, fmt.Errorf("serve's first search_tools answer is not a hybrid one (mode %q); its log:\n%s", answer.Mode, stderr.String())
	}
	warm := func(log string) bool {
		return strings.Contains(log, "warm=true") || strings.Contains(log, `state="up to date"`)
	}
	for i := 0; i < 100 && !warm(stderr.String()); i++ {
		time.Sleep(20 * time.Millisecond) // the log is copied by a goroutine
	}
	if log := stderr.String(); !warm(log) || strings.Contains(log, "BM25-only") {
		cs.Close()
		return nil, fmt.Errorf("gateway did not warm start with the embedder; its log:\n%s", log)
	}
	return &serveRun{cs: cs, pid: cmd.Process.Pid, firstAnswer: d, close: func() { cs.Close() }, log: &stderr}, nil
}

// executeHop times execute_tool of shard 0's no-op tool through the gateway
// session gw, alternating with the same call made directly on a session to
// the same backend command; its row is the difference of the p50s.
func (b *bench) executeHop(ctx context.Context, gw *mcp.ClientSession, n, shards int) (row, error) {
	cmd := exec.Command(b.self, "backend", "--tools", strconv.Itoa(n), "--shard", "0", "--shards", strconv.Itoa(shards))
	cmd.Stderr = io.Discard
	client := mcp.NewClient(&mcp.Implementation{Name: "toolgate-bench", Version: "0"}, nil)
	direct, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		return row{}, fmt.Errorf("direct backend: %w", err)
	}
	defer direct.Close()
	lat, err := perf.Alternate(50, b.f.calls,
		toolCall(ctx, direct, &mcp.CallToolParams{Name: "noop", Arguments: map[string]any{}}),
		toolCall(ctx, gw, &mcp.CallToolParams{Name: gateway.ExecuteToolName, Arguments: map[string]any{"name": "syn00__noop", "arguments": map[string]any{}}}))
	if err != nil {
		return row{}, fmt.Errorf("direct calls alternating with execute_tool calls: %w", err)
	}
	d, g := perf.Percentile(lat[0], 50), perf.Percentile(lat[1], 50)
	return row{"client", "execute_tool added over a direct stdio call, p50", "+" + fmtMS(g-d),
		fmt.Sprintf("%s through the gateway vs %s direct (%.2f×), alternating, %d calls each; load %s", fmtMS(g), fmtMS(d), float64(g)/float64(d), b.f.calls, loadNow())}, nil
}

func fmtSec(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

func listMS(ds []time.Duration) string {
	return list(ds, func(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d)/1e6) })
}
func listSec(ds []time.Duration) string {
	return list(ds, func(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) })
}
func listMiB(kib []int64) string {
	return list(kib, func(k int64) string { return strconv.FormatInt(k/1024, 10) })
}

func list[T any](xs []T, f func(T) string) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = f(x)
	}
	return strings.Join(s, " / ")
}

// loadNow is the 1-minute load average now.
func loadNow() string {
	b, _ := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); len(f) > 0 {
		return f[0]
	}
	return "?"
}

// lastLines is the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
