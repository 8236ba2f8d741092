package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/toolgate/toolgate/gateway/audit"
	"github.com/toolgate/toolgate/internal/dirs"
)

// TestFormatRecordEscapes: `audit tail` prints what clients chose (a tool
// name, a User-Agent, a session id) on one line, with no control
// character: a newline in a tool name forged a second record on the
// operator's screen, and a terminal escape could rewrite it.
func TestFormatRecordEscapes(t *testing.T) {
	r := audit.Record{Time: time.Unix(0, 0), Key: "ci", Transport: "http", Action: "execute_tool",
		Tool:    "memory__x\x1b[31mRED\x1b[0m\n2026-12-01 00:00:00.000  key=admin  execute_tool  memory__read_graph  allowed",
		Session: "s\rid", Client: "agent\u202egnp.exe", Remote: "127.0.0.1:5555", Decision: "denied", Reason: "unknown tool \"x\nforged\""}
	line := formatRecord(r)
	if strings.ContainsFunc(line, func(c rune) bool { return unicode.IsControl(c) || unicode.Is(unicode.Cf, c) }) {
		t.Errorf("a control or format character reaches the terminal: %q", line)
	}
	for _, want := range []string{`\x1b[31mRED`, `\n2026-12-01`, `\u202e`, "remote=127.0.0.1:5555"} {
		if !strings.Contains(line, want) {
			t.Errorf("line %q lacks %q", line, want)
		}
	}
	if plain := formatRecord(audit.Record{Time: time.Unix(0, 0), Action: "search_tools", Decision: "allowed", Tool: "memory__read_graph"}); strings.Contains(plain, `"`) {
		t.Errorf("a plain record is quoted: %s", plain)
	}
}

// TestFormatRecordRoute: a record's route is printed with the status it
// was answered, and alone when the record has none (the console's buttons
// wrote none before: "POST /ui/api/restart→0").
func TestFormatRecordRoute(t *testing.T) {
	for _, tc := range []struct {
		status     int
		want, nope string
	}{
		{409, "  POST /ui/api/disable→409  allowed", ""},
		{0, "  POST /ui/api/disable  allowed", "→0"},
	} {
		line := formatRecord(audit.Record{Time: time.Unix(0, 0), Action: "toolgate__disable_server", Route: "POST /ui/api/disable", Status: tc.status, Decision: "allowed", Outcome: "isError"})
		if !strings.Contains(line, tc.want) || (tc.nope != "" && strings.Contains(line, tc.nope)) {
			t.Errorf("status %d: %q, want %q", tc.status, line, tc.want)
		}
	}
}

// TestFormatRecordTrimmed: `audit tail` says how much of a result over
// maxResultBytes was left out (it printed only what the client got).
func TestFormatRecordTrimmed(t *testing.T) {
	r := audit.Record{Time: time.Unix(0, 0), Action: "execute_tool", Tool: "filesystem__read_text_file", Decision: "allowed", Outcome: "ok", DurationMs: 670, ResultBytes: 100376, TrimmedBytes: 10050024}
	if line := formatRecord(r); !strings.Contains(line, "  670ms 100376B  trimmed=10050024B") {
		t.Errorf("%q lacks trimmed=10050024B after the result's size", line)
	}
	r.TrimmedBytes = 0
	if line := formatRecord(r); strings.Contains(line, "trimmed") {
		t.Errorf("%q says trimmed of a result that went whole", line)
	}
}

// TestAuditTailFilters: --since, --until, --decision and --outcome narrow
// `audit tail` to what an operator looks into ("what was refused in the
// last hour"), add up with each other, and print every record of a span
// unless -n is given; a value they cannot take is a usage error that says
// what they take.
func TestAuditTailFilters(t *testing.T) {
	data := t.TempDir()
	now := time.Now()
	for _, r := range []audit.Record{
		{Time: now.Add(-3 * time.Hour), Action: "search_tools", Decision: audit.Allowed, Outcome: audit.OK},
		{Time: now.Add(-90 * time.Minute), Action: "execute_tool", Tool: "a__denied", Decision: audit.Denied},
		{Time: now.Add(-10 * time.Minute), Action: "http", Decision: audit.RateLimited},
		{Time: now.Add(-5 * time.Minute), Action: "execute_tool", Tool: "a__failed", Decision: audit.Allowed, Outcome: audit.IsError},
	} {
		if err := audit.Append(dirs.Audit(data), r); err != nil {
			t.Fatal(err)
		}
	}
	tail := func(f auditTailFlags) ([]audit.Record, string, error) {
		t.Helper()
		if !f.nSet {
			f.n = 20
		}
		f.asJSON = true
		var out, errOut bytes.Buffer
		err := runAuditTail(context.Background(), &globals{dataDir: data}, &out, &errOut, f)
		var recs []audit.Record
		for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			if line == "" {
				continue
			}
			var r audit.Record
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatalf("%q: %v", line, err)
			}
			recs = append(recs, r)
		}
		return recs, errOut.String(), err
	}
	kinds := func(recs []audit.Record) string {
		var s []string
		for _, r := range recs {
			s = append(s, r.Decision+"/"+r.Outcome)
		}
		return strings.Join(s, " ")
	}
	for _, tc := range []struct {
		f    auditTailFlags
		want string
	}{
		{auditTailFlags{since: "2h"}, "denied/ rate-limited/ allowed/isError"},
		{auditTailFlags{since: "2h", decisions: []string{"denied", "Rate-Limited"}}, "denied/ rate-limited/"},
		{auditTailFlags{outcomes: []string{"iserror"}}, "allowed/isError"},
		{auditTailFlags{until: "1h"}, "allowed/ok denied/"},
		{auditTailFlags{since: "2h", n: 1, nSet: true}, "allowed/isError"},
		{auditTailFlags{since: now.Add(-20 * time.Minute).Format(time.RFC3339), until: "7m"}, "rate-limited/"},
	} {
		recs, stderr, err := tail(tc.f)
		if err != nil || kinds(recs) != tc.want {
			t.Errorf("%+v: %q (%v, %s), want %q", tc.f, kinds(recs), err, stderr, tc.want)
		}
	}
	if recs, stderr, err := tail(auditTailFlags{since: "1m", decisions: []string{"denied"}}); err != nil || len(recs) != 0 ||
		stderr != "toolgate: no record of the audit log at "+dirs.Audit(data)+" matches --since 1m --decision denied\n" {
		t.Errorf("nothing in the span: %v, %v, stderr %q", recs, err, stderr)
	}
	for _, tc := range []struct {
		f    auditTailFlags
		want string
	}{
		{auditTailFlags{since: "1h", until: "2h"}, "--since 1h is not before --until 2h: no record can be in that span"},
		{auditTailFlags{decisions: []string{"refused"}}, `--decision "refused": want one of allowed, denied, rate-limited, quarantined`},
		{auditTailFlags{outcomes: []string{"error"}}, `--outcome "error": want one of ok, isError, timeout, down`},
		{auditTailFlags{since: "last week"}, "--since last week: want a duration like 90m, 12h, 30d, 2w or 1y, a date like 2026-12-31 (or today, yesterday, tomorrow) or a date and time like 2026-12-31T18:00 (in local time), or an RFC 3339 time like 2026-12-31T18:00:00Z"},
		{auditTailFlags{until: "2026-02-30"}, "--until 2026-02-30: not a date: day out of range"},
	} {
		_, _, err := tail(tc.f)
		if ue := (usageError{}); !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want a usage error that says %q", tc.f, err, tc.want)
		}
	}
	// Back from now, a date from local midnight.
	day := time.Date(2026, 12, 5, 10, 0, 0, 0, time.Local)
	for in, want := range map[string]time.Time{
		"2d":         day.AddDate(0, 0, -2),
		"90m":        day.Add(-90 * time.Minute),
		"2026-12-01": time.Date(2026, 12, 1, 0, 0, 0, 0, time.Local),
		// Who called what yesterday: --since yesterday --until today, the
		// local midnights (they were refused).
		"yesterday": time.Date(2026, 12, 4, 0, 0, 0, 0, time.Local),
		"Today":     time.Date(2026, 12, 5, 0, 0, 0, 0, time.Local),
	} {
		if got, _, err := flagTime(in, day, false); err != nil || !got.Equal(want) {
			t.Errorf("flagTime(%s) back: %v, %v; want %v", in, got, err, want)
		}
	}
}

// audit tail --json prints each record as stored, so a newer toolgate's
// fields (and the field order) are kept: it printed them decoded and
// encoded again, without the fields this toolgate does not know.
func TestAuditTailJSONAsStored(t *testing.T) {
	data := t.TempDir()
	if err := audit.Append(dirs.Audit(data), audit.Record{Time: time.Now(), Action: "search_tools", Decision: audit.Allowed, Outcome: audit.OK}); err != nil {
		t.Fatal(err)
	}
	newer := `{"time":"` + time.Now().UTC().Format(time.RFC3339Nano) + `","action":"execute_tool","tool":"a__b","decision":"allowed","outcome":"ok","costUSD":0.25,"region":"eu"}`
	f, err := os.OpenFile(dirs.Audit(data), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(f, newer)
	f.Close()
	var out, errOut bytes.Buffer
	if err := runAuditTail(context.Background(), &globals{dataDir: data}, &out, &errOut, auditTailFlags{n: 20, asJSON: true}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || lines[1] != newer {
		t.Errorf("audit tail --json:\n%s\nwant its last line as stored:\n%s", out.String(), newer)
	}
}

// audit tail --json prints a record's control and format characters as
// JSON escapes: encoding/json stores a bidi override (U+202E) or a C1
// control (U+009B, a terminal's CSI) as it is, and a reason quoting what a
// server said held them, which reached the terminal. The record reads the
// same as JSON, DEL and a format character past U+FFFF too (their Go
// escapes, \x7f and \U000e0001, are not JSON: jq stopped at the line).
func TestAuditTailJSONEscapes(t *testing.T) {
	data := t.TempDir()
	reason := "backend \"evil\" is unavailable: all good \u202eop \u009b31m \x7f\U000E0001"
	if err := audit.Append(dirs.Audit(data), audit.Record{Time: time.Now(), Action: "execute_tool", Tool: "evil__x", Decision: audit.Allowed, Outcome: audit.Down, Reason: reason}); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if err := runAuditTail(context.Background(), &globals{dataDir: data}, &out, &errOut, auditTailFlags{n: 20, asJSON: true}); err != nil {
		t.Fatal(err)
	}
	var r audit.Record
	if strings.ContainsAny(out.String(), "\u202e\u009b\x7f\U000E0001") || !strings.Contains(out.String(), `all good \u202eop \u009b31m \u007f\udb40\udc01`) {
		t.Errorf("audit tail --json printed %q", out.String())
	}
	if err := json.Unmarshal(out.Bytes(), &r); err != nil || r.Reason != reason {
		t.Errorf("the record's reason reads %q as JSON (%v), want %q", r.Reason, err, reason)
	}
}

// firstWrite calls once before the first Write reaches buf.
type firstWrite struct {
	buf  bytes.Buffer
	once func()
}

func (w *firstWrite) Write(p []byte) (int, error) {
	if w.once != nil {
		w.once()
		w.once = nil
	}
	return w.buf.Write(p)
}

// audit tail -n 0 prints the records as it reads them: it held every one
// it printed (395 MiB for the 181,000 records of a full log at the
// defaults). A record written once the printing has begun is still printed
// (it is in the file read last), which it was not when everything was read
// first; the lines are the stored ones, in order (--json), and the text is
// each record's formatRecord line, the filters applying.
func TestAuditTailAllStreams(t *testing.T) {
	data := t.TempDir()
	path := dirs.Audit(data)
	var stored []string
	line := func(n int, key string) string {
		b, err := json.Marshal(audit.Record{Time: time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC).Add(time.Duration(n) * time.Second),
			Key: key, Action: "execute_tool", Tool: "syn042__noop", Decision: audit.Allowed, Outcome: audit.OK, ResultBytes: n})
		if err != nil {
			t.Fatal(err)
		}
		stored = append(stored, string(b))
		return string(b) + "\n"
	}
	var rotated, newest strings.Builder
	for n := range 2000 { // well over the output's buffer
		rotated.WriteString(line(n, fmt.Sprintf("k%d", n%3)))
	}
	newest.WriteString(line(2000, "k0"))
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(audit.Rotated(path, 1), []byte(rotated.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(newest.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	late := line(2001, "k1")
	w := &firstWrite{once: func() {
		f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString(late)
		f.Close()
	}}
	var errOut bytes.Buffer
	if err := runAuditTail(context.Background(), &globals{dataDir: data}, w, &errOut, auditTailFlags{n: 0, asJSON: true}); err != nil {
		t.Fatal(err)
	}
	if got, want := w.buf.String(), strings.Join(stored, "\n")+"\n"; got != want {
		t.Errorf("audit tail -n 0 --json printed %d lines (last %q), want the %d stored, the one written while it printed last",
			strings.Count(got, "\n"), got[strings.LastIndex(strings.TrimSuffix(got, "\n"), "\n")+1:], len(stored))
	}

	rd := audit.NewReader(path, 0, audit.Filter{Key: "k1"})
	recs, err := rd.Tail(len(stored))
	rd.Close()
	if err != nil || len(recs) != 668 {
		t.Fatalf("Tail: %d records, %v", len(recs), err)
	}
	var want strings.Builder
	for _, r := range recs {
		want.WriteString(formatRecord(r) + "\n")
	}
	var out bytes.Buffer
	if err := runAuditTail(context.Background(), &globals{dataDir: data}, &out, &errOut, auditTailFlags{n: 0, filter: audit.Filter{Key: "k1"}}); err != nil {
		t.Fatal(err)
	}
	if out.String() != want.String() {
		t.Errorf("audit tail -n 0 --key k1 printed %d lines, want the %d records of k1, each as formatRecord", strings.Count(out.String(), "\n"), len(recs))
	}
}

// TestAuditTailServedBy: with gateways of two configs sharing a data
// folder's audit log, --served-by FILE prints the records of the gateway
// of that config (the file named as its gateway names it: absolute, links
// resolved), and each record's line says its config.
func TestAuditTailServedBy(t *testing.T) {
	data, dir := t.TempDir(), t.TempDir()
	a, b := filepath.Join(dir, "a.json"), filepath.Join(dir, "b.json")
	for _, r := range []audit.Record{
		{Action: "execute_tool", Tool: "memory__read_graph", Decision: audit.Allowed, Outcome: audit.OK, Config: a},
		{Action: "execute_tool", Tool: "memory__read_graph", Decision: audit.Allowed, Outcome: audit.OK, Config: b},
	} {
		if err := audit.Append(dirs.Audit(data), r); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(dir)
	var out, errOut bytes.Buffer
	if err := runAuditTail(context.Background(), &globals{dataDir: data}, &out, &errOut, auditTailFlags{n: 20, servedBy: "b.json"}); err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(out.String()), "\n"); len(lines) != 1 || !strings.HasSuffix(lines[0], "  config="+b) {
		t.Errorf("--served-by b.json: %q, want b's one record, with config=%s", out.String(), b)
	}
	out.Reset()
	errOut.Reset()
	if err := runAuditTail(context.Background(), &globals{dataDir: data}, &out, &errOut, auditTailFlags{n: 20, servedBy: "c.json"}); err != nil || out.Len() != 0 ||
		errOut.String() != "toolgate: no record of the audit log at "+dirs.Audit(data)+" matches --served-by "+filepath.Join(dir, "c.json")+"\n" {
		t.Errorf("--served-by c.json: %v, %q, stderr %q", err, out.String(), errOut.String())
	}
}

// TestAuditTailServedByOlderRecords: records that name no config (of a
// toolgate of before 2026-12-07, on a data folder upgraded in place, or of
// a command) are left out of --served-by, and stderr says how many and why
// (it printed the newer records alone, as if the older were gone).
func TestAuditTailServedByOlderRecords(t *testing.T) {
	data, dir := t.TempDir(), t.TempDir()
	a := filepath.Join(dir, "a.json")
	for _, r := range []audit.Record{
		{Action: "execute_tool", Tool: "memory__read_graph", Decision: audit.Allowed, Outcome: audit.OK},
		{Action: "search_tools", Decision: audit.Allowed, Outcome: audit.OK},
		{Action: "execute_tool", Tool: "memory__read_graph", Decision: audit.Allowed, Outcome: audit.OK, Config: a},
	} {
		if err := audit.Append(dirs.Audit(data), r); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(dir)
	var out, errOut bytes.Buffer
	if err := runAuditTail(context.Background(), &globals{dataDir: data}, &out, &errOut, auditTailFlags{n: 0, servedBy: "a.json"}); err != nil {
		t.Fatal(err)
	}
	if strings.Count(out.String(), "\n") != 1 {
		t.Errorf("--served-by a.json printed %q, want a's one record", out.String())
	}
	if want := "toolgate: note: 2 records name no config (written by a toolgate of before 2026-12-07, or by a command): --served-by leaves them out\n"; errOut.String() != want {
		t.Errorf("stderr %q, want %q", errOut.String(), want)
	}
	out.Reset()
	errOut.Reset()
	if err := runAuditTail(context.Background(), &globals{dataDir: data}, &out, &errOut, auditTailFlags{n: 0, servedBy: "a.json", filter: audit.Filter{Tool: "search_tools"}}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(errOut.String(), "1 record names no config") {
		t.Errorf("--served-by a.json --tool search_tools: stderr %q, want the one record left out counted", errOut.String())
	}
}

// TestAuditRotate: `toolgate audit rotate` rotates the audit log now, as
// the gateway does by size: audit.jsonl becomes .1, the older files move
// up, those past the config's maxFiles go (and are named), the rotation is
// recorded in the new file, and audit tail reads across it all. An admin
// had no way to rotate but renaming the file by hand, which replaced an
// older audit.jsonl.1 and its records. A data folder without a log is
// told so, exit 0.
func TestAuditRotate(t *testing.T) {
	data := t.TempDir()
	if out, stderr, err := runToolgate(t, data, "audit", "rotate"); err != nil || out != "" || !strings.Contains(stderr, "holds no record: nothing rotated") {
		t.Fatalf("audit rotate without a log: %v\n%s%s", err, out, stderr)
	}
	path := dirs.Audit(data)
	for i, tool := range []string{"a__older", "a__old"} { // .2 then .1
		if err := audit.Append(audit.Rotated(path, 2-i), audit.Record{Action: "execute_tool", Tool: tool, Decision: audit.Allowed, Outcome: audit.OK}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tool := range []string{"a__one", "a__two", "a__three"} {
		if err := audit.Append(path, audit.Record{Action: "execute_tool", Tool: tool, Decision: audit.Allowed, Outcome: audit.OK}); err != nil {
			t.Fatal(err)
		}
	}
	cfg := filepath.Join(t.TempDir(), "servers.json")
	if err := os.WriteFile(cfg, []byte(`{"mcpServers": {}, "toolgate": {"audit": {"maxFiles": 2}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	out, stderr, err := runToolgate(t, data, "audit", "rotate", "--config", cfg)
	if err != nil || !strings.Contains(out, "Rotated the audit log: audit.jsonl is now "+audit.Rotated(path, 1)) ||
		!strings.Contains(out, "Keeping 2 rotated files (toolgate.audit.maxFiles of "+cfg+"); removed the oldest: "+audit.Rotated(path, 2)) {
		t.Fatalf("audit rotate: %v\n%s%s", err, out, stderr)
	}
	out, stderr, err = runToolgate(t, data, "audit", "tail", "-n", "0", "--json", "--config", cfg)
	var tools []string
	for line := range strings.SplitSeq(strings.TrimSpace(out), "\n") {
		var r audit.Record
		if json.Unmarshal([]byte(line), &r) != nil {
			t.Fatalf("audit tail: %v %q\n%s", err, line, stderr)
		}
		tools = append(tools, r.Tool+r.Action)
	}
	if fmt.Sprint(tools) != "[a__oldexecute_tool a__oneexecute_tool a__twoexecute_tool a__threeexecute_tool audit rotate]" {
		t.Errorf("audit tail after the rotation read %v, want a__old (.2), the three of .1 and the rotation's own record", tools)
	}
}

// TestAuditRotateUnknownMaxFiles: `audit rotate` that knows no config (no
// -c, no gateway running on the data folder: stopped, or a cron job while
// it restarts) removes no rotated file: it took the default 5 for
// toolgate.audit.maxFiles and removed .5 to .8 of a gateway configured
// to keep 8, records its own rotations keep.
func TestAuditRotateUnknownMaxFiles(t *testing.T) {
	data := t.TempDir()
	path := dirs.Audit(data)
	for i := 8; i >= 0; i-- {
		if i == 6 {
			continue // a gap: .7 is kept all the same
		}
		p := path
		if i > 0 {
			p = audit.Rotated(path, i)
		}
		if err := audit.Append(p, audit.Record{Action: "execute_tool", Tool: fmt.Sprintf("a__t%d", i), Decision: audit.Allowed, Outcome: audit.OK}); err != nil {
			t.Fatal(err)
		}
	}
	out, stderr, err := runToolgate(t, data, "audit", "rotate")
	if err != nil || strings.Contains(out, "removed") || !strings.Contains(out, "Keeping every rotated file (no --config given, and no gateway serving one runs on the data folder, so its toolgate.audit.maxFiles is not known: give --config FILE to remove those past it)") {
		t.Errorf("audit rotate without a config: %v\n%s%s", err, out, stderr)
	}
	for i := 1; i <= 9; i++ {
		if i == 7 {
			continue
		}
		b, err := os.ReadFile(audit.Rotated(path, i))
		if want := fmt.Sprintf(`"a__t%d"`, i-1); err != nil || !strings.Contains(string(b), want) {
			t.Errorf("%s: %v %q, want the record of %s", audit.Rotated(path, i), err, b, want)
		}
	}
}

// TestAuditTailKeyCoalesced: `audit tail --key mallory` after a flood of
// mallory's refusals alike shows the one written in full and the one
// that counts the others (×N since its first), and alice's earlier call
// is still in the log; --decision and --tool find the counted record as
// they find the first; --json keeps count, firstTime and lastTime.
func TestAuditTailKeyCoalesced(t *testing.T) {
	g := &globals{dataDir: t.TempDir()}
	path := dirs.Audit(g.DataDir())
	l := audit.Open(path, &audit.Options{MaxFileBytes: 32 << 10, MaxFiles: 1})
	start := time.Date(2026, 12, 8, 1, 0, 0, 0, time.UTC)
	l.Write(audit.Record{Time: start, Key: "alice", Transport: "http", Action: "execute_tool", Tool: "memory__read_graph", Decision: audit.Allowed, Outcome: audit.OK})
	for i := range 1000 {
		l.Write(audit.Record{Time: start.Add(time.Duration(i+1) * time.Second / 50), Key: "mallory", Transport: "http", Action: "execute_tool",
			Tool: "memory__delete_entities", Decision: audit.Denied, Reason: `the API key "mallory" lacks access to this tool`})
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	tail := func(f auditTailFlags) string {
		t.Helper()
		var out, errOut bytes.Buffer
		if err := runAuditTail(context.Background(), g, &out, &errOut, f); err != nil {
			t.Fatal(err, errOut.String())
		}
		return out.String()
	}
	out := tail(auditTailFlags{n: 0, filter: audit.Filter{Key: "mallory"}})
	lines := strings.Split(strings.TrimSpace(out), "\n")
	first := start.Add(2 * time.Second / 50).Local().Format("2006-01-02 15:04:05.000")
	if len(lines) != 2 || strings.Contains(lines[0], "×") || !strings.Contains(lines[1], "memory__delete_entities  denied  0ms 0B  ×999 since "+first) {
		t.Errorf("audit tail --key mallory printed\n%s\nwant the first refusal, then one line of the 999 after it (×999 since %s)", out, first)
	}
	if got := tail(auditTailFlags{n: 0, decisions: []string{audit.Denied}, filter: audit.Filter{Key: "mallory", Tool: "memory__delete_entities"}}); got != out {
		t.Errorf("--decision denied --tool memory__delete_entities printed\n%s\nwant what --key alone printed", got)
	}
	if got := tail(auditTailFlags{n: 0, filter: audit.Filter{Key: "alice"}}); !strings.Contains(got, "memory__read_graph  allowed  ok") {
		t.Errorf("alice's call is gone after mallory's flood: %q", got)
	}
	var rec map[string]any
	js := strings.Split(strings.TrimSpace(tail(auditTailFlags{n: 1, nSet: true, asJSON: true, filter: audit.Filter{Key: "mallory"}})), "\n")
	if err := json.Unmarshal([]byte(js[len(js)-1]), &rec); err != nil {
		t.Fatal(err)
	}
	if rec["count"] != 999.0 || rec["firstTime"] != start.Add(2*time.Second/50).Format(time.RFC3339Nano) || rec["lastTime"] != rec["time"] {
		t.Errorf("--json: %v, want count 999, firstTime the second refusal's, lastTime the record's time", rec)
	}
}

// TestAuditTailKeyNamedLikeACredential: a key whose name looks like a
// credential (created before keys create refused such names, or from a
// keysFile) is written masked in the audit log, so `audit tail --key NAME`
// found none of its records and said only that none matched. It says how
// the log writes the name, and the --key that finds them.
func TestAuditTailKeyNamedLikeACredential(t *testing.T) {
	data := t.TempDir()
	path := dirs.Audit(data)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	name := "ops-sk-deploy-production-eu"
	if err := audit.Append(path, audit.Record{Action: "search_tools", Key: name, Decision: audit.Allowed, Outcome: audit.OK}); err != nil {
		t.Fatal(err)
	}
	f := auditTailFlags{n: 10}
	f.filter.Key = name
	var out, errOut bytes.Buffer
	if err := runAuditTail(context.Background(), &globals{dataDir: data}, &out, &errOut, f); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(errOut.String(), "matches --key "+name+": the audit log writes this name as ops-sk-*** (it looks like a credential") ||
		!strings.Contains(errOut.String(), "audit tail --key 'ops-sk-***'") || out.Len() > 0 {
		t.Errorf("audit tail --key of a name the log masks: stdout %q, stderr %q", out.String(), errOut.String())
	}
	f.filter.Key = "ops-sk-***"
	out.Reset()
	if err := runAuditTail(context.Background(), &globals{dataDir: data}, &out, &errOut, f); err != nil || !strings.Contains(out.String(), "key=ops-sk-***") {
		t.Errorf("audit tail --key as the log writes it: %v, %q", err, out.String())
	}
}
