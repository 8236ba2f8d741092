package console

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/gateway/audit"
	"github.com/toolgate/toolgate/gateway/audit/audittest"
	"github.com/toolgate/toolgate/gateway/policy"
)

// activityLog is an audit log of three records, oldest first: a call of
// key a, a refusal of key b whose reason holds a key's secret (a line of
// a toolgate that masked less), and a request without a key.
func activityLog(t *testing.T) *audit.Log {
	t.Helper()
	path := filepath.Join(t.TempDir(), "audit", "audit.jsonl")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	lines := `{"time":"2026-12-08T01:00:00Z","key":"a","transport":"http","action":"execute_tool","tool":"memory__read_graph","decision":"allowed","outcome":"ok","durationMs":3,"resultBytes":10}
{"time":"2026-12-08T01:00:01Z","key":"b","transport":"http","action":"execute_tool","tool":"filesystem__write_file","decision":"denied","reason":"the key's scope does not allow it (sent with tg_abcdefghijklmnopqrstuvwxyz012345)","durationMs":0,"resultBytes":0}
{"time":"2026-12-08T01:00:02Z","transport":"http","remote":"127.0.0.1:5000","action":"http","decision":"denied","reason":"no API key","route":"POST /mcp","status":401,"durationMs":0,"resultBytes":0}
`
	if err := os.WriteFile(path, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	l := audit.Open(path, nil)
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// TestActivity: GET /ui/api/activity is the audit log's last records,
// newest first, masked as the log masks them, to an admin key (and
// without keys); a key that is not admin gets 403 (audited) and a state
// without hasActivity (the page hides the section); no key, 401.
func TestActivity(t *testing.T) {
	fk := &fakeKeys{key: "tg_secret", scopes: map[string]*policy.Key{
		"tg_a": {Name: "a"}, "tg_root": {Name: "root", Admin: true},
	}}
	refusals := &audittest.Log{}
	e := newEnvWith(t, &Options{Catalog: fakeCatalog{}, Keys: fk, Audit: refusals, Activity: activityLog(t)})

	hasActivity := func(key string) bool {
		t.Helper()
		resp, body := e.do(t, "GET", "/ui/api/state", "", "Authorization", "Bearer "+key)
		var st State
		if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &st) != nil {
			t.Fatalf("state as %s: %d %s", key, resp.StatusCode, body)
		}
		return st.HasActivity
	}
	if !hasActivity("tg_root") || hasActivity("tg_a") {
		t.Errorf("hasActivity: admin %v, key a %v; want true, false", hasActivity("tg_root"), hasActivity("tg_a"))
	}

	resp, body := e.do(t, "GET", "/ui/api/activity", "", "Authorization", "Bearer tg_root")
	var ans ActivityAnswer
	if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &ans) != nil {
		t.Fatalf("activity as admin: %d %s", resp.StatusCode, body)
	}
	var who []string
	for _, r := range ans.Records {
		who = append(who, r.Key+" "+r.Decision)
	}
	if got, want := strings.Join(who, ", "), " denied, b denied, a allowed"; got != want || ans.Limit != defaultActivity {
		t.Errorf("activity as admin: records %q (limit %d), want %q newest first (limit %d)", got, ans.Limit, want, defaultActivity)
	}
	if strings.Contains(body, "abcdefghijklmnopqrstuvwxyz") || !strings.Contains(body, "tg_***") {
		t.Errorf("activity as admin: a key's secret in a reason is not masked as the log masks it:\n%s", body)
	}

	resp, body = e.do(t, "GET", "/ui/api/activity?n=1", "", "Authorization", "Bearer tg_root")
	if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &ans) != nil || len(ans.Records) != 1 || ans.Records[0].Route != "POST /mcp" {
		t.Errorf("activity?n=1 as admin: %d %s, want the newest record alone", resp.StatusCode, body)
	}
	for _, n := range []string{"0", "501", "x"} {
		if resp, body := e.do(t, "GET", "/ui/api/activity?n="+n, "", "Authorization", "Bearer tg_root"); resp.StatusCode != 400 || !strings.Contains(body, "from 1 to 500") {
			t.Errorf("activity?n=%s: %d %s, want 400 saying the range", n, resp.StatusCode, body)
		}
	}

	resp, body = e.do(t, "GET", "/ui/api/activity", "", "Authorization", "Bearer tg_a")
	if resp.StatusCode != 403 || strings.Contains(body, "memory__read_graph") || !strings.Contains(body, "admin keys") {
		t.Errorf("activity as key a (not admin): %d %s, want 403 saying it is for admin keys", resp.StatusCode, body)
	}
	if recs := refusals.Records(); len(recs) != 1 || recs[0].Key != "a" || recs[0].Status != 403 || recs[0].Decision != audit.Denied {
		t.Errorf("the refusal of key a: audit records %+v, want one denied 403 of key a", recs)
	}

	if resp, body := e.do(t, "GET", "/ui/api/activity", ""); resp.StatusCode != 401 || strings.Contains(body, "memory__read_graph") {
		t.Errorf("activity without a key: %d %s, want 401", resp.StatusCode, body)
	}

	// Without keys: every caller reads it, as it reads every recent call.
	open := newEnvWith(t, &Options{Catalog: fakeCatalog{}, Activity: activityLog(t)})
	if resp, body := open.do(t, "GET", "/ui/api/activity", ""); resp.StatusCode != 200 || !strings.Contains(body, "memory__read_graph") {
		t.Errorf("activity without keys: %d %s, want 200 with the records", resp.StatusCode, body)
	}
	// A console without an audit log: no section, 404.
	none := newEnv(t, nil)
	if resp, body := none.do(t, "GET", "/ui/api/activity", ""); resp.StatusCode != 404 {
		t.Errorf("activity of a console without an audit log: %d %s, want 404", resp.StatusCode, body)
	}
}
