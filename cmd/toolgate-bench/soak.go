package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/index/indextest"
)

// soakReadings are what a leak would grow, read from the gateway's own
// GET /metrics (the Go and process collectors).
var soakReadings = []struct {
	metric, name string
	unit         float64 // divide the metric by this
	format       string
}{
	{"go_goroutines", "goroutines", 1, "%.0f"},
	{"process_open_fds", "open file descriptors", 1, "%.0f"},
	{"go_memstats_heap_inuse_bytes", "heap in use", 1 << 20, "%.1f MiB"},
	{"process_resident_memory_bytes", "resident memory", 1 << 20, "%.0f MiB"},
}

// soakWarmup is how many sessions run before the baseline is read: the
// first searches fill the caches and pools a gateway keeps.
const soakWarmup = 50

// soak runs `toolgate serve --http` the way a shared gateway lives for days
// and reads what a leak would grow. --soak-sessions client sessions come
// one after another, each a new streamable HTTP session that searches,
// runs a backend tool and closes; every tenth also restarts one backend and
// disables and enables it through the management tools (a reload's work).
// The gateway's goroutines, open descriptors, heap in use and resident
// memory are read after a warm-up, at each fifth of the run, and once the
// last session has gone: a leak shows as growth with the sessions, not as
// one step.
func (b *bench) soak(ctx context.Context, _ []int) error {
	const n, shards = 200, 2
	cfg, err := b.benchConfig("soak", n, shards)
	if err != nil {
		return err
	}
	dataDir := filepath.Join(b.work, "soak-data")
	addr, err := benchAddr()
	if err != nil {
		return err
	}
	base := "http://" + addr
	args := append([]string{"serve", "--config", cfg, "--data-dir", dataDir, "--http", addr, "--log-level", "warn"}, b.embedArgs()...)
	cmd := exec.Command(b.toolgate, args...)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() { _ = cmd.Process.Signal(os.Interrupt); _ = cmd.Wait() }()
	if err := soakBackendsUp(ctx, base, shards); err != nil {
		return fmt.Errorf("%w; its log:\n%s", err, stderr.String())
	}

	qs := indextest.Queries(indextest.Catalog(n, indextest.Seed), soakWarmup+b.f.soakSessions, indextest.Seed)
	client := mcp.NewClient(&mcp.Implementation{Name: "toolgate-bench", Version: "0"}, nil)
	restarts := 0
	session := func(i int) error {
		cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: base + "/mcp"}, nil)
		if err != nil {
			return fmt.Errorf("session %d: %w", i, err)
		}
		defer cs.Close()
		calls := []*mcp.CallToolParams{
			{Name: gateway.SearchToolName, Arguments: map[string]any{"query": qs[i].Text}},
			{Name: gateway.ExecuteToolName, Arguments: map[string]any{"name": "syn00__noop", "arguments": map[string]any{}}},
		}
		if i >= soakWarmup && i%10 == 0 {
			restarts++
			for _, tool := range []string{"restart_server", "disable_server", "enable_server"} {
				calls = append(calls, &mcp.CallToolParams{Name: gateway.ExecuteToolName,
					Arguments: map[string]any{"name": "toolgate__" + tool, "arguments": map[string]any{"name": "syn01"}}})
			}
		}
		for _, p := range calls {
			if err := toolCall(ctx, cs, p)(); err != nil {
				return fmt.Errorf("session %d: %w", i, err)
			}
		}
		return nil
	}
	for i := range soakWarmup {
		if err := session(i); err != nil {
			return err
		}
	}
	before, err := soakRead(base)
	if err != nil {
		return err
	}
	var fifths [][]float64
	for i := range b.f.soakSessions {
		if err := session(soakWarmup + i); err != nil {
			return fmt.Errorf("%w; its log:\n%s", err, stderr.String())
		}
		if (i+1)%max(1, b.f.soakSessions/5) == 0 && len(fifths) < 5 {
			r, err := soakRead(base)
			if err != nil {
				return err
			}
			fifths = append(fifths, r)
		}
	}
	// The last sessions' goroutines end as their connections close: wait
	// (5 s at most) for the count to come back before the last reading.
	after, err := soakRead(base)
	for deadline := time.Now().Add(5 * time.Second); err == nil && after[0] > before[0] && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		after, err = soakRead(base)
	}
	if err != nil {
		return err
	}
	for k, r := range soakReadings {
		show := func(v float64) string { return fmt.Sprintf(r.format, v/r.unit) }
		var at []string
		for _, f := range fifths {
			at = append(at, strings.TrimSuffix(show(f[k]), " MiB"))
		}
		note := "at each fifth: " + strings.Join(at, " / ")
		if k == 0 {
			note += fmt.Sprintf("; streamable HTTP sessions of a search and a call each, %d of them also restarting a backend and disabling and enabling it; load %s", restarts, loadNow())
		}
		b.add("soak", fmt.Sprintf("%s of serve, after %d warm-up sessions → after %d more", r.name, soakWarmup, b.f.soakSessions),
			show(before[k])+" → "+show(after[k]), note)
	}
	return nil
}

// soakBackendsUp waits (a minute at most) until GET /status shows n
// backends up.
func soakBackendsUp(ctx context.Context, base string, n int) error {
	deadline := time.Now().Add(time.Minute)
	for {
		var st struct {
			Backends []struct {
				State string `json:"state"`
			} `json:"backends"`
		}
		resp, err := http.Get(base + "/status")
		if err == nil {
			err = json.NewDecoder(resp.Body).Decode(&st)
			resp.Body.Close()
		}
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

// soakRead reads soakReadings from the gateway's GET /metrics, in order.
func soakRead(base string) ([]float64, error) {
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return nil, fmt.Errorf("GET /metrics: %s: %s", resp.Status, b)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("GET /metrics: %w", err)
	}
	out := make([]float64, len(soakReadings))
	for k, r := range soakReadings {
		f := families[r.metric]
		if f == nil || len(f.GetMetric()) != 1 {
			names := make([]string, 0, len(families))
			for name := range families {
				names = append(names, name)
			}
			slices.Sort(names)
			return nil, fmt.Errorf("GET /metrics has no %s (it has %s)", r.metric, strings.Join(names, ", "))
		}
		m := f.GetMetric()[0]
		switch {
		case m.GetGauge() != nil:
			out[k] = m.GetGauge().GetValue()
		case m.GetUntyped() != nil:
			out[k] = m.GetUntyped().GetValue()
		}
	}
	return out, nil
}
