package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/jsonc"

	"github.com/toolgate/toolgate/embed"
	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/gateway/audit"
	"github.com/toolgate/toolgate/gateway/backend"
	"github.com/toolgate/toolgate/gateway/limit"
	"github.com/toolgate/toolgate/gateway/quarantine"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/search"
)

// TestExampleReadmeShowsTheDefaults holds examples/README.md's annotated
// config to its word, "every value shown is the default": each value of its
// toolgate section is the one the code falls back to. (minConfidence stayed
// at 0.1 there after the code's default moved to 0.09.)
func TestExampleReadmeShowsTheDefaults(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "examples", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(data), "```jsonc\n")
	if ok {
		block, _, ok = strings.Cut(block, "```")
	}
	if !ok {
		t.Fatal("examples/README.md has no ```jsonc block")
	}
	var doc struct {
		Toolgate map[string]any `json:"toolgate"`
	}
	if err := json.Unmarshal(jsonc.ToJSON([]byte(block)), &doc); err != nil {
		t.Fatalf("the annotated config is not JSONC: %v", err)
	}
	get := func(path string) any {
		var v any = doc.Toolgate
		for _, k := range strings.Split(path, ".") {
			m, _ := v.(map[string]any)
			v = m[k]
		}
		return v
	}
	durs := func(ds ...time.Duration) []any {
		out := []any{}
		for _, d := range ds {
			out = append(out, d)
		}
		return out
	}
	for path, want := range map[string]any{
		"connectTimeout":              backend.DefaultConnectTimeout,
		"callTimeout":                 backend.DefaultCallTimeout,
		"keepAlive":                   backend.DefaultKeepAlive,
		"maxConcurrentConnects":       backend.DefaultMaxConcurrentConnects,
		"maxResultBytes":              gateway.DefaultMaxResultBytes,
		"restart.delays":              durs(backend.DefaultRestartDelays...),
		"restart.stableAfter":         backend.DefaultStableAfter,
		"search.mode":                 string(search.ModeHybrid),
		"search.keywordWeight":        search.DefaultKeywordWeight,
		"search.vectorWeight":         search.DefaultVectorWeight,
		"search.defaultLimit":         gateway.DefaultLimit,
		"search.maxLimit":             gateway.MaxLimit,
		"search.minConfidence":        search.DefaultMinConfidence,
		"search.stepWeight":           search.DefaultStepWeight,
		"learn.enabled":               true,
		"learn.fromKeys":              gateway.DefaultLearnFromKeys,
		"embed.variant":               string(embed.FP32),
		"embed.keepUnused":            embed.DefaultUnused,
		"http.maxBodyBytes":           gateway.DefaultMaxBodyBytes,
		"http.heartbeat":              gateway.DefaultHeartbeat,
		"security.onDefinitionChange": quarantine.OnChangeQuarantine,
		"security.maxTextLength":      quarantine.DefaultMaxTextLength,
		"audit.maxFileBytes":          audit.DefaultMaxFileBytes,
		"audit.maxFiles":              audit.DefaultMaxFiles,
		"limits.requestsPerSecond":    limit.DefaultRequestsPerSecond,
		"limits.burst":                limit.DefaultBurst,
		"limits.maxStreams":           limit.DefaultMaxStreams,
		"limits.maxInFlight":          limit.DefaultMaxInFlight,
		"limits.queueTimeout":         limit.DefaultQueueTimeout,
	} {
		if got, want := norm(get(path)), norm(want); got != want {
			t.Errorf("examples/README.md shows toolgate.%s: %s, the default is %s", path, got, want)
		}
	}
}

// norm renders a README value and a Go default alike: durations as Go
// writes them, numbers without a type.
func norm(v any) string {
	switch v := v.(type) {
	case string:
		if d, err := time.ParseDuration(v); err == nil {
			return d.String()
		}
		return fmt.Sprintf("%q", v)
	case []any:
		parts := make([]string, len(v))
		for i, x := range v {
			parts[i] = norm(x)
		}
		return "[" + strings.Join(parts, " ") + "]"
	case time.Duration:
		return v.String()
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	return fmt.Sprint(v)
}

// TestDefaultCallTimeoutBeforeTheTSSDKs: a client built on the TypeScript
// MCP SDK (the bundled one, examples/servers/node_modules) gives up on a
// request after its DEFAULT_REQUEST_TIMEOUT_MSEC (60 s). toolgate's
// default callTimeout was that same 60 s, so which error such a client
// read was a race: toolgate's (the call timed out, the server was sent
// notifications/cancelled, it may have run) or the SDK's bare "Request
// timed out". The default ends the call callTimeoutMargin sooner, so the
// client gets toolgate's answer.
func TestDefaultCallTimeoutBeforeTheTSSDKs(t *testing.T) {
	const callTimeoutMargin = 5 * time.Second
	js := filepath.Join(repoRoot(t), "examples", "servers", "node_modules", "@modelcontextprotocol", "sdk", "dist", "esm", "shared", "protocol.js")
	src, err := os.ReadFile(js)
	if err != nil {
		testenv.Missing(t, "bundled npm servers are not installed in examples/servers/node_modules (make deps-servers): %v", err)
	}
	_, rest, ok := strings.Cut(string(src), "DEFAULT_REQUEST_TIMEOUT_MSEC = ")
	ms, err := strconv.Atoi(strings.TrimSpace(strings.Split(rest, ";")[0]))
	if !ok || err != nil {
		t.Fatalf("%s no longer says DEFAULT_REQUEST_TIMEOUT_MSEC = N;: read the TS SDK's default request timeout anew", js)
	}
	sdk := time.Duration(ms) * time.Millisecond
	if backend.DefaultCallTimeout > sdk-callTimeoutMargin {
		t.Errorf("default callTimeout %s, the TS SDK's request timeout %s: toolgate's must end at least %s sooner, for its error to reach such a client first",
			backend.DefaultCallTimeout, sdk, callTimeoutMargin)
	}
}
