package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolgate/toolgate/gateway/backend/backendtest"
	"github.com/toolgate/toolgate/internal/testenv"
)

// jsonRecords parses every non-empty line of out as one slog JSON record
// and fails t on a line that is not one (a native library or a backend
// writing to the gateway's stderr on its own would be).
func jsonRecords(t *testing.T, what, out string) []map[string]any {
	t.Helper()
	var recs []map[string]any
	for _, l := range strings.Split(out, "\n") {
		if strings.TrimSpace(l) == "" {
			continue
		}
		var r map[string]any
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("%s: a line that is not a JSON record: %v\n%s", what, err, l)
		}
		for _, k := range []string{"time", "level", "msg"} {
			if _, ok := r[k]; !ok {
				t.Fatalf("%s: a record without %q: %s", what, k, l)
			}
		}
		recs = append(recs, r)
	}
	return recs
}

// findRecord is the first record whose msg is msg (and whose attrs match),
// or nil.
func findRecord(recs []map[string]any, msg string, attrs map[string]any) map[string]any {
	for _, r := range recs {
		if r["msg"] != msg {
			continue
		}
		ok := true
		for k, v := range attrs {
			ok = ok && r[k] == v
		}
		if ok {
			return r
		}
	}
	return nil
}

// TestLogFormatJSON: with --log-format json every line the gateway writes
// to stderr is one JSON record, its backends' stderr and ONNX Runtime's
// start included; `toolgate logs` gives the same records; a command's
// failure is a record too.
func TestLogFormatJSON(t *testing.T) {
	cfg := fakeConfig(t, map[string]string{"fake": backendtest.ModeStderrNoise}, map[string]any{"learn": map[string]any{"enabled": false}})
	data := t.TempDir()
	stdio := toolgateCmd(t, data, "--log-format", "json", "serve", "--config", cfg)
	var stderr bytes.Buffer
	stdio.Stderr = &stderr
	ctx, cs := connectStdio(t, stdio, 3*time.Minute)
	indexServed(t, ctx, cs) // a cold start past its wait answers "being built"
	if out, _ := searchTools(t, ctx, cs, "make some noise on stderr", 3); out.Mode != "hybrid" {
		testenv.Missing(t, "search_tools ran in mode %q, not hybrid: a native piece is missing:\n%s", out.Mode, stderr.String())
	}
	if res := callTool(t, ctx, cs, nil, "execute_tool", map[string]any{"name": "fake__noise", "arguments": map[string]any{"lines": 2}}); res.IsError {
		t.Fatalf("execute_tool fake__noise: %+v", res.Content)
	}
	// The backend's stderr lines reach the log as records (read through
	// `toolgate logs`, which the gateway serves from what it logged).
	var logged []map[string]any
	testenv.Eventually(t, "the backend's stderr lines in `toolgate logs`", func() bool {
		out, errOut, err := runToolgate(t, data, "--log-format", "json", "logs", "-n", "0")
		if err != nil {
			t.Fatalf("logs: %v\n%s", err, errOut)
		}
		logged = jsonRecords(t, "toolgate logs", out)
		return findRecord(logged, "backend stderr", map[string]any{"server": "fake", "line": "noise line 1"}) != nil
	})
	if findRecord(logged, "gateway ready", nil) == nil || findRecord(logged, "embedder loaded", nil) == nil {
		t.Errorf("toolgate logs: no gateway ready or embedder loaded record:\n%v", logged)
	}
	cs.Close() // waits for the gateway to exit
	if st := stdio.ProcessState; st == nil || st.ExitCode() != 0 {
		t.Fatalf("serve: %v, want exit status 0\n%s", st, stderr.String())
	}
	recs := jsonRecords(t, "serve's stderr", stderr.String())
	ready := findRecord(recs, "gateway ready", nil)
	if findRecord(recs, "backend stderr", map[string]any{"server": "fake", "transport": "stdio", "line": "noise line 1"}) == nil || ready == nil {
		t.Fatalf("serve's stderr: no gateway ready record, or no record of the backend's stderr line:\n%s", stderr.String())
	}
	// A duration reads as the text format writes it, not in nanoseconds.
	if s, ok := ready["startup"].(string); !ok {
		t.Errorf("gateway ready: startup %v (%T), want a duration as text (e.g. \"46ms\")", ready["startup"], ready["startup"])
	} else if _, err := time.ParseDuration(s); err != nil {
		t.Errorf("gateway ready: startup %q: %v", s, err)
	}

	// A command that fails says why in one record at level ERROR, with
	// its exit status; the environment variable sets the format too.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	taken := toolgateCmd(t, t.TempDir(), "serve", "--config", cfg, "--http", ln.Addr().String())
	taken.Env = append(taken.Env, "TOOLGATE_LOG_FORMAT=json")
	var takenErr bytes.Buffer
	taken.Stderr = &takenErr
	var ee *exec.ExitError
	if err := taken.Run(); !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("serve --http on a taken port: %v, want exit status 1\n%s", err, takenErr.String())
	}
	recs = jsonRecords(t, "serve on a taken port", takenErr.String())
	last := recs[len(recs)-1]
	if last["level"] != "ERROR" || last["exit"] != float64(1) || !strings.Contains(fmt.Sprint(last["msg"]), "already in use") {
		t.Errorf("serve on a taken port: last record %v, want level ERROR, exit 1 and the address in use", last)
	}

	// A bad format is a usage error that names the two it takes.
	if _, errOut, err := runToolgate(t, data, "--log-format", "xml", "status"); !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(errOut, `--log-format "xml": want text or json`) {
		t.Errorf("--log-format xml: %v, want exit status 2 naming text and json\n%s", err, errOut)
	}
}

// TestFailRecordHasFix: a write the file system refused ends in a record
// with the fix as its own field (the text format's second line).
func TestFailRecordHasFix(t *testing.T) {
	err := fmt.Errorf("keys create: %w", &fs.PathError{Op: "open", Path: t.TempDir() + "/keys.jsonl", Err: syscall.ENOSPC})
	for _, format := range []string{"json", "text"} {
		g := &globals{logFormat: format}
		var w bytes.Buffer
		if code := g.fail(&w, err); code != 1 {
			t.Errorf("%s: exit status %d, want 1", format, code)
		}
		if format == "text" {
			if !strings.Contains(w.String(), "toolgate: keys create: open ") || !strings.Contains(w.String(), "\ntoolgate: fix: free space on the file system of ") {
				t.Errorf("text: %q, want the error and a fix line", w.String())
			}
			continue
		}
		recs := jsonRecords(t, "json", w.String())
		if len(recs) != 1 || recs[0]["level"] != "ERROR" || recs[0]["exit"] != float64(1) || !strings.HasPrefix(fmt.Sprint(recs[0]["fix"]), "free space on the file system of ") {
			t.Errorf("json: %s, want one ERROR record with exit 1 and the fix", w.String())
		}
	}
	g := &globals{logFormat: "json"}
	var w bytes.Buffer
	if code := g.fail(&w, usageError{errors.New("keys create needs --name NAME")}); code != 2 || !strings.Contains(w.String(), `"exit":2`) {
		t.Errorf("usage error: %d %s, want exit status 2 in the record", code, w.String())
	}
}

// A client's text in a log line — the tool name it asked for
// ("tool call denied"), a path it requested ("refused request: API key"),
// an error quoting either — has API keys masked in both formats, in the
// message, an attribute, a group's attribute and an error alike, so
// neither stderr nor `toolgate logs` (its ring) keeps a key a client
// pasted there; both wrote it as given. Prose after a secret-sounding word
// stays ("refresh token: invalid_grant"), and JSON durations read as text.
func TestLogMasksKeys(t *testing.T) {
	const secret = "h_cD03fp0_GMGEnIvWFyRfyAZyhfCC4hUpXh8McrBkM"
	for _, format := range []string{"text", "json"} {
		var buf bytes.Buffer
		g := &globals{logFormat: format}
		slog.New(g.logHandler(&buf, nil)).With("session", "s-tg_"+secret).Info("tool call denied tg_"+secret,
			"tool", "toolgate__tg_"+secret, "err", fmt.Errorf("unknown tool %q", "tg_"+secret),
			slog.Group("req", "route", "GET /tg_"+secret), "why", "refresh token: invalid_grant", "took", 46*time.Millisecond)
		out := buf.String()
		if strings.Contains(out, secret) {
			t.Errorf("%s: the log line holds the key:\n%s", format, out)
		}
		for _, want := range []string{"toolgate__tg_***", "refresh token: invalid_grant", "46ms"} {
			if !strings.Contains(out, want) {
				t.Errorf("%s: %q missing:\n%s", format, want, out)
			}
		}
	}
}
