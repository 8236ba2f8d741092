package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/gateway/audit"
	"github.com/toolgate/toolgate/gateway/backend"
	"github.com/toolgate/toolgate/gateway/backend/backendtest"
	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/index"
	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/internal/linerpc"
	"github.com/toolgate/toolgate/internal/perf"
	"github.com/toolgate/toolgate/internal/storage"
	"github.com/toolgate/toolgate/search"
)

// BenchmarkExecuteTool splits what one sequential execute_tool call costs.
// Every case calls the fake backend's "echo" tool (a real input schema, so
// argument validation runs) with the same arguments:
//
//   - floor: a direct call (client → backend process over stdio), a call
//     through a relay process and a call through the gateway process
//     (this test binary re-executed as a stdio gateway, like `toolgate
//     serve`), taking turns (perf.Alternate, the one way toolgate measures
//     execute_tool's overhead; toolgate-bench reports the same figure for
//     bin/toolgate). The relay copies JSON-RPC lines to and from the
//     backend without decoding them, so what it adds (relay-added-p50-µs)
//     is what any stdio gateway pays for the extra hops;
//     gateway-added-p50-µs is the gateway's overhead over a direct call and
//     gateway-over-relay-p50-µs what decoding, validating and re-encoding
//     cost beyond the relay;
//   - gateway-process: calls through the gateway process alone, reporting
//     that process's own CPU time, bytes allocated and GC cycles per call
//     (gw-cpu-µs/op, gw-B/op, gw-gc/op); gateway-process-audited with an
//     audit log, as serve keeps one;
//     TOOLGATE_BENCH_GATEWAY_PROFILE=FILE makes the gateway write its CPU
//     profile there, TOOLGATE_BENCH_GATEWAY_MEMPROFILE=FILE its allocations
//     (sampled every 4 KiB) when it exits, TOOLGATE_BENCH_GATEWAY_GOGC sets
//     its GC percent;
//   - gateway-pipes: the same gateway in this process, the client talking to
//     it over OS pipes (the gateway's end is its stdio transport, the
//     client's go-sdk's), for
//     -cpuprofile/-memprofile (they then show client and gateway together);
//   - handler: the execute_tool handler alone over a Caller that answers at
//     once: toolgate's own work per call (decode, lookup, validation),
//     without go-sdk or a backend.
//
// For example:
//
//	go test ./gateway -run '^$' -bench ExecuteTool -benchtime 3000x -count 5
//	TOOLGATE_BENCH_GATEWAY_PROFILE=/tmp/gw.prof go test ./gateway -run '^$' -bench ExecuteTool/gateway-process -benchtime 5000x -o /tmp/gateway.test
//	go tool pprof -top -cum /tmp/gateway.test /tmp/gw.prof
func BenchmarkExecuteTool(b *testing.B) {
	ctx := context.Background()
	srv := benchBackend()
	args := map[string]any{"text": "ok"}
	execParams := &mcp.CallToolParams{Name: ExecuteToolName, Arguments: map[string]any{"name": "fake__echo", "arguments": args}}
	// loop warms up, calls before (if set), then times the calls.
	loop := func(b *testing.B, cs *mcp.ClientSession, params *mcp.CallToolParams, before func()) {
		warm := caller(cs, params)
		for range 50 {
			if err := warm(); err != nil {
				b.Fatal(err)
			}
		}
		if before != nil {
			before()
		}
		b.ReportAllocs()
		for b.Loop() {
			if res, err := cs.CallTool(ctx, params); err != nil || res.IsError {
				b.Fatal(err, res)
			}
		}
	}

	for _, audited := range []bool{false, true} {
		name := "gateway-process"
		if audited {
			name += "-audited"
		}
		b.Run(name, func(b *testing.B) {
			gp := startGatewayProcess(b, audited)
			loop(b, gp.cs, execParams, func() { gp.mark(b) })
			b.StopTimer()
			gp.report(b, b.N)
		})
	}

	// floor alternates three ways of making the same call: directly, through
	// a relay (this test binary re-executed, see benchRelayMain) that starts
	// the backend and copies JSON-RPC lines both ways without decoding them,
	// and through the gateway process. What the relay adds to a direct call
	// is what any stdio gateway pays for the two extra pipe hops and process
	// wake-ups; the gateway's time beyond the relay's is decoding,
	// validating, dispatching and re-encoding a call.
	directParams := &mcp.CallToolParams{Name: "echo", Arguments: args}
	b.Run("floor", func(b *testing.B) {
		calls := []func() error{
			caller(connectDirect(b, srv), directParams),
			caller(startRelayProcess(b), directParams),
			caller(startGatewayProcess(b, false).cs, execParams),
		}
		b.ResetTimer()
		lat, err := perf.Alternate(50, b.N, calls...)
		b.StopTimer()
		if err != nil {
			b.Fatal(err)
		}
		direct, relay, gw := perf.Percentile(lat[0], 50), perf.Percentile(lat[1], 50), perf.Percentile(lat[2], 50)
		b.ReportMetric(float64(direct.Microseconds()), "direct-p50-µs")
		b.ReportMetric(float64((relay - direct).Microseconds()), "relay-added-p50-µs")
		b.ReportMetric(float64((gw - direct).Microseconds()), "gateway-added-p50-µs")
		b.ReportMetric(float64((gw - relay).Microseconds()), "gateway-over-relay-p50-µs")
	})

	b.Run("gateway-pipes", func(b *testing.B) {
		g, stop := benchGateway(srv, nil)
		b.Cleanup(stop)
		loop(b, connectPipes(b, g), execParams, nil)
	})

	// handler is the gateway's own work on a call, without go-sdk or a
	// backend; handler-audited adds the audit record (arguments hashed,
	// result measured, the record queued for the log's writer).
	for _, audited := range []bool{false, true} {
		name := "handler"
		if audited {
			name = "handler-audited"
		}
		b.Run(name, func(b *testing.B) {
			tool := catalog.Tool{Server: "fake", Name: "echo",
				InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"],"additionalProperties":false}`)}
			fs := &fakeSearcher{tools: []catalog.Tool{tool}}
			// As a go-sdk backend answers: its serverInfo in _meta, which
			// execute_tool drops, in a map made for 64 keys as go-sdk's
			// decoder (segmentio/encoding) makes every one.
			backendMeta := make(mcp.Meta, 64)
			backendMeta[mcp.MetaKeyServerInfo] = map[string]any{"name": "fake", "version": "0"}
			answer := &mcp.CallToolResult{Meta: backendMeta, Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}
			var opts *Options
			if audited {
				log := audit.Open(filepath.Join(b.TempDir(), "audit.jsonl"), nil)
				b.Cleanup(func() { log.Close() })
				opts = &Options{Audit: log}
			}
			g := New(fs, &fakeCaller{call: func(string, string, map[string]any) (*mcp.CallToolResult, error) { return answer, nil }}, opts)
			h := g.audited(ExecuteToolName, g.handleExecute)
			// The _meta a go-sdk client of protocol 2026-07-28 sends, as
			// go-sdk hands it to the handler (decoded JSON).
			meta := mcp.Meta{
				mcp.MetaKeyProtocolVersion:    backend.StatelessProtocolVersion,
				mcp.MetaKeyClientInfo:         map[string]any{"name": "bench", "version": "0"},
				mcp.MetaKeyClientCapabilities: map[string]any{},
			}
			req := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: ExecuteToolName, Meta: meta,
				Arguments: json.RawMessage(`{"name":"fake__echo","arguments":{"text":"ok"}}`)}}
			b.ReportAllocs()
			for b.Loop() {
				if res, err := h(ctx, req); err != nil || res.IsError {
					b.Fatal(err, text(res))
				}
			}
		})
	}
}

// envBenchGateway makes the test binary a stdio gateway over benchBackend
// (see init); its value is unused except as a marker.
const envBenchGateway = "TOOLGATE_BENCH_GATEWAY"

// envBenchGatewayAudit makes the bench gateway keep an audit log in the
// file it names, as serve always does (with serve's check of the data
// folder before each write).
const envBenchGatewayAudit = "TOOLGATE_BENCH_GATEWAY_AUDIT"

// benchStatsTool is an extra tool of the bench gateway only: it answers
// with the gateway process's runtime.MemStats, so the benchmark can charge
// allocations and GC cycles to the calls it timed.
const benchStatsTool = "bench_memstats"

func init() {
	// Before TestMain: the gateway and relay children are neither a fake
	// backend nor a reaper (their backends are, and do not inherit these
	// variables).
	if backendtest.IsChild() || backend.IsReaper() {
		return
	}
	switch {
	case os.Getenv(envBenchRelay) != "":
		os.Exit(benchRelayMain())
	case os.Getenv(envBenchGateway) != "":
		os.Exit(benchGatewayMain())
	}
}

func benchGatewayMain() int {
	if v := os.Getenv("TOOLGATE_BENCH_GATEWAY_GOGC"); v != "" {
		if pct, err := strconv.Atoi(v); err == nil {
			debug.SetGCPercent(pct)
		}
	}
	if p := os.Getenv("TOOLGATE_BENCH_GATEWAY_PROFILE"); p != "" {
		f, err := os.Create(p)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench gateway:", err)
			return 1
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "bench gateway:", err)
			return 1
		}
		defer pprof.StopCPUProfile()
	}
	if p := os.Getenv("TOOLGATE_BENCH_GATEWAY_MEMPROFILE"); p != "" {
		runtime.MemProfileRate = 4096
		defer func() {
			f, err := os.Create(p)
			if err == nil {
				err = pprof.Lookup("allocs").WriteTo(f, 0)
				f.Close()
			}
			if err != nil {
				fmt.Fprintln(os.Stderr, "bench gateway:", err)
			}
		}()
	}
	var opts *Options
	if p := os.Getenv(envBenchGatewayAudit); p != "" {
		// serve's: the data folder's health is checked before each write.
		health := storage.New(filepath.Dir(p), nil)
		log := audit.Open(p, &audit.Options{Storage: health.Writer("audit log", "records are counted as lost")})
		defer log.Close()
		opts = &Options{Audit: log}
	}
	g, stop := benchGateway(benchBackend(), opts)
	defer stop()
	g.server.AddTool(&mcp.Tool{Name: benchStatsTool, InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			data, _ := json.Marshal(benchStats{TotalAlloc: ms.TotalAlloc, NumGC: ms.NumGC})
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(data)}}}, nil
		})
	if err := g.ServeStdio(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "bench gateway:", err)
		return 1
	}
	return 0
}

// envBenchRelay makes the test binary a line relay in front of
// benchBackend (see init and benchRelayMain).
const envBenchRelay = "TOOLGATE_BENCH_RELAY"

// benchRelayMain starts benchBackend and copies newline-framed messages
// from stdin to the backend and from the backend to stdout, one write per
// message, without decoding them: the least a stdio gateway can do.
func benchRelayMain() int {
	srv := benchBackend()
	cmd := exec.Command(srv.Command)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, envBenchRelay+"=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	for k, v := range srv.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench relay:", err)
		return 1
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench relay:", err)
		return 1
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "bench relay:", err)
		return 1
	}
	relayLines := func(dst io.Writer, src io.Reader) {
		br := bufio.NewReaderSize(src, 64<<10)
		for {
			line, err := br.ReadBytes('\n')
			if len(line) > 0 {
				if _, werr := dst.Write(line); werr != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}
	go func() {
		relayLines(in, os.Stdin)
		in.Close() // the client is gone: the backend's stdin closes too
	}()
	relayLines(os.Stdout, out)
	_ = cmd.Wait()
	return 0
}

// startRelayProcess is a client session through the test binary
// re-executed as a relay in front of benchBackend.
func startRelayProcess(b *testing.B) *mcp.ClientSession {
	return connectCommand(b, reexec(b, envBenchRelay))
}

// reexec is this test binary run again with env set (see init).
func reexec(b *testing.B, env string) *exec.Cmd {
	b.Helper()
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), env+"=1")
	cmd.Stderr = os.Stderr
	return cmd
}

// connectCommand starts cmd and connects a client session to it over
// stdio; cleanup closes the session, which waits for the process.
func connectCommand(b *testing.B, cmd *exec.Cmd) *mcp.ClientSession {
	b.Helper()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench"}, nil).Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cs.Close() })
	return cs
}

// gatewayProcess is a client session to the test binary re-executed as a
// stdio gateway (see init), with the process's counters at mark.
type gatewayProcess struct {
	cs   *mcp.ClientSession
	pid  int
	cpu  time.Duration
	stat benchStats
}

func startGatewayProcess(b *testing.B, audited bool) *gatewayProcess {
	cmd := reexec(b, envBenchGateway)
	if audited {
		cmd.Env = append(cmd.Env, envBenchGatewayAudit+"="+filepath.Join(b.TempDir(), "audit.jsonl"))
	}
	cs := connectCommand(b, cmd)
	return &gatewayProcess{cs: cs, pid: cmd.Process.Pid}
}

// mark records the gateway process's counters before the timed calls.
func (gp *gatewayProcess) mark(b *testing.B) {
	gp.stat = gatewayStats(b, gp.cs)
	gp.cpu = procCPU(b, gp.pid)
}

// report charges the gateway process's CPU time, allocations and GC cycles
// since mark to n calls.
func (gp *gatewayProcess) report(b *testing.B, n int) {
	cpu := procCPU(b, gp.pid)
	st := gatewayStats(b, gp.cs)
	b.ReportMetric(float64((cpu-gp.cpu).Microseconds())/float64(n), "gw-cpu-µs/op")
	b.ReportMetric(float64(st.TotalAlloc-gp.stat.TotalAlloc)/float64(n), "gw-B/op")
	b.ReportMetric(float64(st.NumGC-gp.stat.NumGC)/float64(n), "gw-gc/op")
}

// connectDirect is a client session straight to a backend process.
func connectDirect(b *testing.B, srv config.Server) *mcp.ClientSession {
	cmd := exec.Command(srv.Command)
	cmd.Env = os.Environ()
	for k, v := range srv.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	return connectCommand(b, cmd)
}

// caller is one call of params on cs, for perf.Alternate: an error result
// is an error.
func caller(cs *mcp.ClientSession, params *mcp.CallToolParams) func() error {
	return func() error {
		res, err := cs.CallTool(context.Background(), params)
		if err == nil && res.IsError {
			err = fmt.Errorf("%s: %s", params.Name, text(res))
		}
		return err
	}
}

type benchStats struct {
	TotalAlloc uint64
	NumGC      uint32
}

func gatewayStats(b *testing.B, cs *mcp.ClientSession) benchStats {
	b.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: benchStatsTool, Arguments: map[string]any{}})
	if err != nil {
		b.Fatal(err)
	}
	var st benchStats
	if err := json.Unmarshal([]byte(text(res)), &st); err != nil {
		b.Fatal(err)
	}
	return st
}

// procCPU is the user+system CPU time the process pid has used so far.
func procCPU(b *testing.B, pid int) time.Duration {
	b.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Skip("no /proc: ", err)
	}
	// Fields after the command name (which may hold spaces) start at ')'.
	f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+2:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / 100 // USER_HZ
}

// benchBackend is the fake backend process (this test binary), named "fake".
func benchBackend() config.Server {
	exe, err := os.Executable()
	if err != nil {
		panic(err)
	}
	return config.Server{Name: "fake", Type: config.TypeStdio, Command: exe,
		Env: map[string]string{backendtest.EnvMode: backendtest.ModeNormal}}
}

// benchGateway is a Gateway over a started pool of srv, with a BM25 engine
// over the pool's catalog.
func benchGateway(srv config.Server, opts *Options) (*Gateway, func()) {
	ctx := context.Background()
	pool := backend.New([]config.Server{srv}, nil)
	pool.Start(ctx)
	ix, err := index.Build(ctx, backend.Catalog(pool.Tools()), nil, nil)
	if err != nil {
		panic(err)
	}
	eng := search.New(ix, nil, nil)
	return New(eng, pool, opts), func() { eng.Close(); pool.Close() }
}

// connectPipes connects a client to g over two OS pipes with go-sdk's
// stdio framing, as a client talks to `toolgate serve`.
func connectPipes(b *testing.B, g *Gateway) *mcp.ClientSession {
	b.Helper()
	ctx := context.Background()
	c2sR, c2sW, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	s2cR, s2cW, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	ss, err := g.Server().Connect(ctx, &linerpc.Transport{Reader: c2sR, Writer: s2cW}, nil)
	if err != nil {
		b.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench"}, nil).Connect(ctx, &mcp.IOTransport{Reader: s2cR, Writer: c2sW}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		cs.Close()
		ss.Wait()
		for _, f := range []io.Closer{c2sR, c2sW, s2cR, s2cW} {
			f.Close()
		}
	})
	return cs
}
