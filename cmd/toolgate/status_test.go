package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/gateway/backend"
	"github.com/toolgate/toolgate/gateway/live"
	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/internal/storage"
	"github.com/toolgate/toolgate/search"
)

type statusSource []backend.Status

func (s statusSource) Status() []backend.Status { return s }

type loopStats live.Stats

func (s loopStats) Stats() live.Stats { return live.Stats(s) }

func TestStatusCommand(t *testing.T) {
	now := time.Now()
	loop := loopStats{CatalogGeneration: 4, CatalogTools: 12, DisabledTools: 5, Reindexing: true, ReloadGeneration: 2, Disabled: []string{"kg", "web"},
		LastReload:      &live.Reload{At: now, Trigger: "SIGHUP"},
		LastReloadError: "config /x.json: invalid JSON at line 2", LastReloadErrorAt: now.Add(-time.Minute)}
	src := statusSource{
		{Name: "memory", Transport: "stdio", State: backend.StateUp, Tools: 9, Since: now.Add(-time.Minute), PID: 4242, Protocol: "2026-07-28", Restarts: 1},
		{Name: "remote", Transport: "http", State: backend.StateDown, Tools: 3, Since: now, Err: "backend \"remote\" at http://h/mcp: connection refused:\ncheck url; last stderr lines: \x1b]0;pwned\a\u202eboom", Restarts: 3},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/status" {
			http.NotFound(w, r)
			return
		}
		gateway.StatusHandler(src, &gateway.StatusOptions{Version: "9.9.9", Started: now.Add(-time.Hour), Loop: loop}).ServeHTTP(w, r)
	}))
	defer srv.Close()
	hostport := strings.TrimPrefix(srv.URL, "http://")

	t.Run("table", func(t *testing.T) {
		for _, addr := range []string{hostport, srv.URL, srv.URL + "/mcp"} {
			var out bytes.Buffer
			err := runStatus(context.Background(), &out, statusFlags{addr: addr})
			requireDegraded(t, err, `degraded: remote is down`)
			got := out.String()
			for _, want := range []string{"toolgate 9.9.9, up 1h0m0s: 1 of 2 backends up", "catalog: generation 4, 12 tools (re-indexing), 5 more held back by disabled servers",
				"config reloads: 2, the last applied at", "(SIGHUP); last rejected at", "invalid JSON at line 2", "disabled at run time: kg, web (stopped, tools hidden", "SERVER", "memory", "up", "4242", "2026-07-28", "remote", "down", "connection refused: check url"} {
				if !strings.Contains(got, want) {
					t.Errorf("--addr %s: output lacks %q:\n%s", addr, want, got)
				}
			}
			// A backend's stderr reaches the terminal escaped: no window title set, no text reversed.
			if strings.ContainsAny(got, "\x1b\a\u202e") || !strings.Contains(got, `last stderr lines: \x1b]0;pwned\a\u202eboom`) {
				t.Errorf("--addr %s: the backend's control characters are not escaped:\n%q", addr, got)
			}
		}
	})
	t.Run("json", func(t *testing.T) {
		var out bytes.Buffer
		requireDegraded(t, runStatus(context.Background(), &out, statusFlags{addr: hostport, asJSON: true}), "remote is down")
		var rep gateway.StatusReport
		if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
			t.Fatalf("--json output is not a report: %v\n%s", err, out.String())
		}
		if rep.Version != "9.9.9" || len(rep.Backends) != 2 || rep.Backends[0].PID != 4242 || rep.Up != 1 || rep.Stats == nil || rep.ReloadGeneration != 2 {
			t.Errorf("report = %+v", rep)
		}
	})
	t.Run("address from config", func(t *testing.T) {
		cfg := writeConfig(t, `{"mcpServers": {"a": {"command": "x"}}, "toolgate": {"http": {"addr": "`+hostport+`"}}}`)
		var out bytes.Buffer
		err := runStatus(context.Background(), &out, statusFlags{config: cfg})
		requireDegraded(t, err, "remote is down")
		if !strings.Contains(out.String(), "memory") {
			t.Fatalf("output:\n%s", out.String())
		}
	})
	t.Run("healthy exits 0", func(t *testing.T) {
		healthy := statusSource{
			{Name: "memory", Transport: "stdio", State: backend.StateUp, Tools: 9, Since: now},
			{Name: "lazy", Transport: "stdio", State: backend.StateIdle, Since: now},
		}
		srv := httptest.NewServer(gateway.StatusHandler(healthy, nil))
		defer srv.Close()
		var out bytes.Buffer
		if err := runStatus(context.Background(), &out, statusFlags{addr: srv.URL}); err != nil {
			t.Fatalf("all backends up or idle, got %v\n%s", err, out.String())
		}
	})
}

// requireDegraded checks that err is the degraded exit (status 3) naming want.
func requireDegraded(t *testing.T, err error, want string) {
	t.Helper()
	var ee exitError
	if !errors.As(err, &ee) || ee.code != degradedExit || !strings.Contains(err.Error(), want) {
		t.Fatalf("want exit %d naming %q, got %v", degradedExit, want, err)
	}
}

// A rejected reload that is the latest is said once, with what it means.
func TestPrintLoopStatsRejectedLast(t *testing.T) {
	at := time.Date(2026, 12, 4, 19, 56, 21, 0, time.Local)
	var out bytes.Buffer
	printLoopStats(&out, &live.Stats{ReloadGeneration: 5, LastReload: &live.Reload{At: at, Trigger: "file changed", Error: "read config: open toolgate.json: no such file or directory"},
		LastReloadError: "read config: open toolgate.json: no such file or directory", LastReloadErrorAt: at})
	want := "config reloads: 5, the last REJECTED at " + clock(at) + " (file changed): read config: open toolgate.json: no such file or directory; the config before it stays in effect\n"
	if !strings.HasSuffix(out.String(), want) || strings.Count(out.String(), "no such file") != 1 {
		t.Errorf("got:\n%s\nwant it to end with:\n%s", out.String(), want)
	}
}

// Counts of one are in the singular: it said "1 tools", "1 pairs".
func TestStatusCountsOfOne(t *testing.T) {
	var out bytes.Buffer
	printLoopStats(&out, &live.Stats{CatalogTools: 1})
	printLearning(&out, &gateway.LearningStatus{Holder: gateway.ThisGateway, Pairs: 1, Tools: 1})
	for _, want := range []string{"catalog: generation 0, 1 tool\n", "learning: 1 pair for 1 tool\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("got:\n%s\nwant in it %q", out.String(), want)
		}
	}
}

func TestStatusCommandErrors(t *testing.T) {
	// A port nobody listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	notStatus := httptest.NewServer(http.NotFoundHandler())
	defer notStatus.Close()

	tests := []struct {
		name  string
		addr  string
		usage bool
		want  []string
	}{
		{"unreachable", closed, false, []string{"no gateway answered at http://" + closed + "/status", "connection refused", "toolgate serve --config FILE --http " + closed}},
		{"not a gateway", notStatus.URL, false, []string{"404 Not Found", "check --addr"}},
		{"bad address", "nope", true, []string{`--addr "nope": want host:port`}},
		{"IPv6 without brackets", "::1:8931", true, []string{`--addr "::1:8931": want host:port, e.g. 127.0.0.1:8931, or a URL: an IPv6 address goes in brackets before its port: [::1]:8931`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			err := runStatus(context.Background(), &out, statusFlags{addr: tt.addr, timeout: 2 * time.Second})
			if err == nil {
				t.Fatalf("no error; output:\n%s", out.String())
			}
			var ue usageError
			if errors.As(err, &ue) != tt.usage {
				t.Errorf("usage error = %v, want %v (%v)", !tt.usage, tt.usage, err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q: %v", w, err)
				}
			}
			if out.Len() != 0 {
				t.Errorf("wrote output on error: %s", out.String())
			}
		})
	}
}

// TestStatusGatewayNotAccepting: a gateway out of file descriptors cannot
// accept a connection; the kernel takes it into the listener's queue and no
// answer comes. `toolgate status` says a gateway may be there, out of
// descriptors or stuck, and exits 3 (degraded); it used to say that no
// gateway answered and to start one (exit 1).
func TestStatusGatewayNotAccepting(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0") // never accepts
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var out bytes.Buffer
	err = runStatus(context.Background(), &out, statusFlags{addr: ln.Addr().String(), timeout: 300 * time.Millisecond})
	requireDegraded(t, err, "took the connection but sent no answer")
	if !strings.Contains(err.Error(), "cannot accept connections") {
		t.Errorf("the error does not point at the log line: %v", err)
	}
}

type storageSource storage.Report

func (s storageSource) Report() storage.Report { return storage.Report(s) }

// TestStatusStorage: `toolgate status` prints the storage section — one
// line while the folder is fine (with the last error), the fault, the fix
// and each failing writer while it is not — and a fault is degraded (3).
func TestStatusStorage(t *testing.T) {
	now := time.Now()
	up := statusSource{{Name: "memory", Transport: "stdio", State: backend.StateUp, Tools: 9, Since: now}}
	serve := func(st storageSource) string {
		srv := httptest.NewServer(gateway.StatusHandler(up, &gateway.StatusOptions{Storage: st}))
		t.Cleanup(srv.Close)
		return strings.TrimPrefix(srv.URL, "http://")
	}
	fine := serve(storageSource{DataDir: "/d", Writable: true, LastError: "index: disk full", LastErrorAt: now,
		Writers: []storage.WriterReport{{Name: "index", OK: true, Failures: 1}}})
	var out bytes.Buffer
	if err := runStatus(context.Background(), &out, statusFlags{addr: fine}); err != nil {
		t.Fatalf("a writable folder: %v", err)
	}
	if !strings.Contains(out.String(), "storage: /d writable; last error at") || !strings.Contains(out.String(), "index: disk full") {
		t.Errorf("output:\n%s", out.String())
	}
	// Stores open to every user: said with the fix, not degraded (a warning).
	open := serve(storageSource{DataDir: "/d", Writable: true, Open: "/d/learn (0755)", OpenFix: "chmod -R go= /d/learn", Writers: []storage.WriterReport{}})
	out.Reset()
	if err := runStatus(context.Background(), &out, statusFlags{addr: open}); err != nil {
		t.Fatalf("open stores: %v", err)
	}
	if want := "storage: /d writable\n  OPEN to every user of this machine (the searches' queries, the learned pairs, the audit log, the logins): /d/learn (0755)\n  fix: chmod -R go= /d/learn\n"; !strings.Contains(out.String(), want) {
		t.Errorf("output lacks %q:\n%s", want, out.String())
	}

	broken := serve(storageSource{DataDir: "/d", Error: "data folder /d does not exist", Fix: "mkdir -p /d", Since: now,
		Writers: []storage.WriterReport{{Name: "embedding cache", Error: "data folder /d does not exist", Since: now, Failures: 7, Degraded: "searches embed without storing new vectors"},
			{Name: "audit log", Error: "data folder /d does not exist", Since: now, Failures: 1, Degraded: "records are counted as lost"}}})
	out.Reset()
	requireDegraded(t, runStatus(context.Background(), &out, statusFlags{addr: broken}), "the data folder cannot take writes")
	for _, want := range []string{"storage: /d NOT WRITABLE since", "data folder /d does not exist", "fix: mkdir -p /d",
		"embedding cache: failing since", "7 failures; searches embed without storing new vectors", "(1 failure; records are counted as lost)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	requireDegraded(t, runStatus(context.Background(), &out, statusFlags{addr: broken, asJSON: true}), "data folder")
	var rep gateway.StatusReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil || rep.Storage == nil || rep.Storage.Writable || rep.Storage.Writers[0].Failures != 7 {
		t.Errorf("--json storage = %+v (%v)", rep.Storage, err)
	}
}

// TestStatusSchemaFlaws: toolgate status names the tools whose input
// schema the gateway cannot read, one line each with why, and how many
// more: it ran their calls unchecked while only serve's log said so. The
// names are the backend's, escaped as quarantined ones are. A warning,
// not a fault: the gateway serves them, and status exits 0.
func TestStatusSchemaFlaws(t *testing.T) {
	srv := httptest.NewServer(gateway.StatusHandler(statusSource{}, &gateway.StatusOptions{Version: "9.9.9", Started: time.Now(),
		SchemaFlaws: func() ([]catalog.ToolFlaw, bool) {
			all := []catalog.ToolFlaw{
				{Tool: "acme__create_invoice", Flaw: `"type" is "objetc", not a JSON Schema type`},
				{Tool: "e2__x\x1b]0;pwned\a", Flaw: "\x1b[2Jbad\nschema"},
			}
			for i := range gateway.MaxSchemaFlawsShown {
				all = append(all, catalog.ToolFlaw{Tool: fmt.Sprintf("z__t%02d", i), Flaw: "\"properties\" must be an object"})
			}
			return all, true
		},
		ShownFlaws: func() (huge, names []catalog.ToolFlaw) {
			return []catalog.ToolFlaw{{Tool: "big__pick_code", Flaw: "1356 KB of compact JSON"}}, []catalog.ToolFlaw{{Tool: "acme__send payment!", Flaw: `' ', '!' are not among A-Z a-z 0-9 _ - .`}}
		}}))
	defer srv.Close()
	var out bytes.Buffer
	if err := runStatus(context.Background(), &out, statusFlags{addr: srv.URL}); err != nil {
		t.Fatalf("status exits with %v; want 0, a schema's flaw is a warning", err)
	}
	got := out.String()
	for _, want := range []string{
		"schema flaws: the input schema of 1 tool is over 32 KB: " + catalog.HugeSchema + "\n  big__pick_code: 1356 KB of compact JSON\n",
		"schema flaws: the name of 1 tool " + catalog.NameFlaw + ": " + catalog.NameFlawEffect(1) + "\n  \"acme__send payment!\": ' ', '!' are not among A-Z a-z 0-9 _ - .\n",
		"schema flaws: the input schema of 22 tools " + catalog.SchemaFlaw + ": " + catalog.SchemaFlawEffect(22) + "; ask their server's author to fix it\n",
		"  acme__create_invoice: \"type\" is \"objetc\", not a JSON Schema type\n",
		`  "e2__x\x1b]0;pwned\a": \x1b[2Jbad schema` + "\n",
		"  z__t17: \"properties\" must be an object\n  and 2 more (toolgate status --json lists the first 20; serve's log names each)\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("toolgate status lacks %q:\n%s", want, got)
		}
	}
	if strings.ContainsAny(got, "\x1b\a") || strings.Contains(got, "z__t18") {
		t.Errorf("toolgate status:\n%q", got)
	}
}

// The IDs of quarantined tools are the backend's names, held because they
// may be hostile: a name with a terminal escape (quarantined for it)
// reached the terminal of whoever ran toolgate status as it was, setting
// the window's title and clearing the screen; one with ", " read as two
// names in the list. Each name not of MCP's recommended characters is
// quoted, as in the schema-flaws lists.
func TestStatusQuarantinedEscaped(t *testing.T) {
	srv := httptest.NewServer(gateway.StatusHandler(statusSource{}, &gateway.StatusOptions{Version: "9.9.9", Started: time.Now(),
		Security: func() *gateway.SecurityStatus {
			return &gateway.SecurityStatus{Quarantined: []string{"e2__x\x1b]0;pwned\a\x1b[2Jy", "e2__ok", "e2__a, e2__b", "e2__c: d"}}
		}}))
	defer srv.Close()
	var out bytes.Buffer
	if err := runStatus(context.Background(), &out, statusFlags{addr: srv.URL}); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	if strings.ContainsAny(got, "\x1b\a") || !strings.Contains(got, `quarantined: "e2__x\x1b]0;pwned\a\x1b[2Jy", e2__ok, "e2__a, e2__b", "e2__c: d" (`) {
		t.Errorf("toolgate status:\n%q", got)
	}
}

// toolgate status says how searches rank and, only when some wait for a
// slot, how many rank and wait.
func TestPrintRankingWaiting(t *testing.T) {
	for _, tt := range []struct {
		st   search.State
		want string
	}{
		{search.State{Mode: search.ModeHybrid, Model: "m", Running: 1, Slots: 2}, "search: hybrid (model m)\n"},
		{search.State{Mode: search.ModeHybrid, Model: "m", Running: 2, Waiting: 7, Slots: 2},
			"search: hybrid (model m)\nsearches: 2 ranking, 7 waiting for one of 2 slots\n"},
	} {
		var b bytes.Buffer
		printRanking(&b, &tt.st)
		if b.String() != tt.want {
			t.Errorf("printRanking(%+v) = %q, want %q", tt.st, b.String(), tt.want)
		}
	}
}

// TestStatusLoginExpiry: a login that cannot be refreshed is printed below
// the table with when it expires and the login to run; once expired, the
// line says so and the gateway is degraded (exit status 3).
func TestStatusLoginExpiry(t *testing.T) {
	login := "toolgate auth login demo --config /etc/toolgate.json"
	at := func(name string, exp time.Time) gateway.BackendStatus {
		return gateway.BackendStatus{Status: backend.Status{Name: name, State: backend.StateUp, LoginExpiry: &backend.LoginExpiry{Expires: exp, Login: login}}}
	}
	rep := gateway.StatusReport{Backends: []gateway.BackendStatus{
		at("soon", time.Now().Add(30*time.Minute)), at("gone", time.Now().Add(-time.Minute)),
		{Status: backend.Status{Name: "fine", State: backend.StateUp}},
	}}
	var out strings.Builder
	if err := printStatus(&out, rep); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"\nsoon: the access token of its OAuth login expires at ",
		"and cannot be refreshed (the authorization server gave no refresh token): run `" + login + "` before then, or its calls fail from then until you do\n",
		"\ngone: the access token of its OAuth login expired at ",
		"run `" + login + "`; its calls fail until you do\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("status: no %q in\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "\nfine:") {
		t.Errorf("status speaks of a server with no such login:\n%s", out.String())
	}
	if bad := degradedReasons(rep); !slices.Equal(bad, []string{"gone's login has expired"}) {
		t.Errorf("degraded reasons %v: want gone's login alone", bad)
	}
}

// TestStatusDownErrorCommandInFull: a server down with an error that ends
// in the command to run (a login its server no longer takes: the
// TypeScript SDK's example OAuth server restarted answers 500) had that
// command cut from the table's LAST ERROR at 100 characters, and nothing
// below it, while `toolgate auth status` said "logged in": the fix was in
// `status --json` alone. It is printed in full under the table, as a
// needed login's is.
func TestStatusDownErrorCommandInFull(t *testing.T) {
	login := "`toolgate auth login demo --config /home/me/my-servers.json --data-dir /home/me/.local/share/toolgate` logs in again"
	down := "backend \"demo\" at http://localhost:3000/mcp: the server answered a POST with 500 Internal Server Error: the server, or a proxy before it, failed: its own log says why; the request carried the stored login's token, which a server may fail on once it no longer takes it (its authorization server restarted, or revoked it): " + login
	short := "backend \"other\": connection refused"
	var rep gateway.StatusReport
	rep.Backends = []gateway.BackendStatus{
		{Status: backend.Status{Name: "demo", State: backend.StateDown, Err: down, LastErr: down}},
		{Status: backend.Status{Name: "other", State: backend.StateDown, Err: short, LastErr: short}},
	}
	var out bytes.Buffer
	if err := writeStatus(&out, nil, rep, false); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "\n"+down+"\n") {
		t.Errorf("status: the error with its command is not in full:\n%s", out.String())
	}
	if strings.Count(out.String(), short) != 1 {
		t.Errorf("status: an error the table holds whole is said again:\n%s", out.String())
	}
}
