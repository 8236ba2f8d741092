package console

import (
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

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

// blockingActivity is an audit log whose reads wait for release, counting
// them: three records, oldest first.
type blockingActivity struct {
	calls   atomic.Int32
	release chan struct{}
}

func (a *blockingActivity) Tail(n int) ([]audit.Record, error) {
	a.calls.Add(1)
	<-a.release
	t0 := time.Date(2026, 12, 8, 1, 0, 0, 0, time.UTC)
	recs := []audit.Record{{Time: t0, Key: "a"}, {Time: t0.Add(time.Second), Key: "b"}, {Time: t0.Add(2 * time.Second), Key: "c"}}
	return recs[max(0, len(recs)-n):], nil
}

// TestActivityReadsShared: the requests for the recent activity that come
// while a read of the log for as many records is out share that read: a
// read goes through the log's newest file (the rotated ones too just after
// a rotation, a second or so), and the page's Refresh button pressed
// again aborts its request, not the read, so each press read the whole
// log again beside the others (four at once took 4.9 s each on two
// cores). Each gets the records newest first; a request after the read
// reads again.
func TestActivityReadsShared(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		act := &blockingActivity{release: make(chan struct{})}
		h := New(&Options{Backends: &fakeBackends{}, Catalog: fakeCatalog{}, Loop: fakeLoop{}, Activity: act}).Handler()
		get := func(bodies chan<- string) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("GET", "/ui/api/activity", nil))
			bodies <- rec.Body.String()
		}
		bodies := make(chan string, 3)
		for range 3 {
			go get(bodies)
		}
		synctest.Wait() // each request is waiting for a read
		if n := act.calls.Load(); n != 1 {
			t.Errorf("three requests at once: %d reads of the log, want 1 they share", n)
		}
		close(act.release)
		for range 3 {
			var ans ActivityAnswer
			if body := <-bodies; json.Unmarshal([]byte(body), &ans) != nil || len(ans.Records) != 3 || ans.Records[0].Key != "c" || ans.Records[2].Key != "a" {
				t.Errorf("a request sharing a read: %s, want the three records newest first", body)
			}
		}
		go get(bodies)
		<-bodies
		if n := act.calls.Load(); n != 2 {
			t.Errorf("a request after the read: %d reads in all, want 2", n)
		}
	})
}
