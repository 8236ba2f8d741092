package audit

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// One API key sending refused calls as fast as it may must not rotate
// another key's earlier record out of the log: its refusals alike are
// counted into one record, and one that varies the tool opens at most
// CoalesceKinds kinds a window, the rest counted into one record. Before,
// each refusal was a record of its own, and 2,000 of them rotated alice's
// call out of a log of 2 × 64 KiB.
func TestRefusalFloodKeepsOthersRecords(t *testing.T) {
	const flood = 2000
	for _, tc := range []struct {
		name string
		tool func(i int) string
		// unlisted: names the gateway does not have (as it marks them)
		unlisted bool
		// want: mallory's records, and what the counted ones add up to
		records int
	}{
		{"same tool", func(int) string { return "memory__delete_entities" }, false, 2},
		{"a made-up tool each", func(i int) string { return fmt.Sprintf("nosuch__x%d", i) }, true, DefaultCoalesceKinds + 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, path, _ := openLog(t, &Options{MaxFileBytes: 64 << 10, MaxFiles: 1})
			start := time.Now()
			l.Write(Record{Time: start, Key: "alice", Transport: "http", Action: "execute_tool", Tool: "memory__read_graph", Decision: Allowed, Outcome: OK})
			for i := range flood {
				l.Write(Record{Time: start.Add(time.Duration(i+1) * time.Millisecond), Key: "mallory", Transport: "http", Remote: fmt.Sprintf("127.0.0.1:%d", 40000+i),
					Action: "execute_tool", Tool: tc.tool(i), Decision: Denied, Route: "POST /mcp", Unlisted: tc.unlisted,
					Reason: `the API key "mallory" lacks access to this tool: the key's --allow or --deny globs leave it out` + strings.Repeat(".", 300)})
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			if got := readAll(t, path, Filter{Key: "alice"}); len(got) != 1 {
				t.Fatalf("alice's records after mallory's %d refusals: %d, want her 1 call", flood, len(got))
			}
			recs := readAll(t, path, Filter{Key: "mallory"})
			stood, full := 0, 0
			for _, r := range recs {
				stood += max(r.Count, 1)
				if r.Count == 0 {
					full++
				}
				if r.Count > 0 && (r.FirstTime.IsZero() || !r.LastTime.Equal(r.Time) || r.FirstTime.After(r.LastTime) || r.Decision != Denied) {
					t.Errorf("coalesced record %+v: want a denied record with firstTime ≤ lastTime = time", r)
				}
			}
			if len(recs) != tc.records || stood != flood {
				t.Errorf("mallory: %d records standing for %d refusals, want %d for %d", len(recs), stood, tc.records, flood)
			}
			if st := l.Stats(); st.Coalesced != uint64(flood-full) || st.Written != uint64(tc.records+1) {
				t.Errorf("stats %+v, want %d coalesced, %d written", st, flood-full, tc.records+1)
			}
		})
	}
}

// An allowed call is never coalesced, whatever its likeness: each is a
// record of its own (the allowed-call path only pays the check). Before
// summaries carried their count, the key's 429 summary was folded into
// its "other refusals" once the key had used its kinds.
func TestAllowedNotCoalesced(t *testing.T) {
	l, path, _ := openLog(t, nil)
	now := time.Now()
	for i := range 50 {
		l.Write(Record{Time: now.Add(time.Duration(i)), Key: "alice", Action: "search_tools", Decision: Allowed, Outcome: OK})
		l.Write(Record{Time: now.Add(time.Duration(i)), Key: "alice", Action: "execute_tool", Tool: "memory__x", Decision: Allowed, Outcome: IsError})
	}
	// Nor is a record that stands for several already (the summary of a
	// key's 429s over its rate): each is written as it is.
	for i := range 40 {
		l.Write(Record{Time: now.Add(time.Duration(i)), Key: "mallory", Action: "http", Decision: RateLimited, Count: 1000 + i, FirstTime: now})
	}
	l.Close()
	if recs := readAll(t, path, Filter{}); len(recs) != 140 {
		t.Fatalf("%d records of 100 allowed calls and 40 summaries", len(recs))
	}
}

// A window that ended is written while the log runs, not only at Close:
// the refusals after it open a new window with a record in full.
func TestCoalescedWindowEnds(t *testing.T) {
	l, path, _ := openLog(t, &Options{Coalesce: 40 * time.Millisecond})
	r := Record{Key: "mallory", Action: ToolsCall, Tool: "nosuch", Decision: Allowed, Outcome: IsError, Reason: "unknown tool"}
	for range 3 {
		l.Write(r)
	}
	// Waits on the log's own counter: the summary is written once its
	// window ends.
	for l.Stats().Written < 2 {
		time.Sleep(5 * time.Millisecond)
	}
	l.Write(r)
	l.Close()
	recs := readAll(t, path, Filter{})
	var counts []int
	for _, r := range recs {
		counts = append(counts, r.Count)
	}
	if fmt.Sprint(counts) != "[0 2 0]" {
		t.Errorf("counts of the records %v, want [0 2 0]: one in full, one for the two after it, one in full in the next window", counts)
	}
}

// A rotation that removes records younger than MinRetention says so, and
// names the key that wrote most of the file just rotated: the operator
// learns the log holds less than they count on, and who fills it.
func TestRotationUnderMinRetentionWarned(t *testing.T) {
	for _, floor := range []time.Duration{0, -1} {
		l, _, logs := openLog(t, &Options{MaxFileBytes: 8 << 10, MaxFiles: 1, MinRetention: floor})
		l.Write(Record{Key: "alice", Action: "search_tools", Decision: Allowed, Outcome: OK})
		for i := range 300 {
			l.Write(Record{Key: "bulk", Action: "search_tools", Decision: Allowed, Outcome: OK, ArgumentsSHA256: HashArguments(i)})
		}
		l.Close()
		st := l.Stats()
		warned := strings.Contains(logs.String(), "audit log rotation removed records younger than toolgate.audit.minRetention")
		switch {
		case floor == 0 && (st.RotatedEarly == 0 || !warned || !strings.Contains(logs.String(), "topKey=bulk")):
			t.Errorf("default floor (%s): rotatedEarly %d, log:\n%s\nwant the early rotations counted and warned of, naming bulk", DefaultMinRetention, st.RotatedEarly, logs.String())
		case floor < 0 && (st.RotatedEarly != 0 || warned):
			t.Errorf("no floor: rotatedEarly %d, log:\n%s\nwant none", st.RotatedEarly, logs.String())
		}
	}
}

// fakeClock is Options.clock for a test: the time the log reads as now,
// moved by the test (the writer goroutine reads it too).
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// A window is a minute of the gateway's own elapsed time, not of the
// records' wall-clock times: when the machine's clock steps back an hour
// (NTP, a VM restored), a refusal after the minute opens a new window
// written in full. Before, the window was measured on the records' times,
// so the refusals of the hour after the step were all counted into the
// group opened before it (one record for an hour, the new refusals never
// written in full), and its summary waited an hour to be written.
func TestCoalesceWindowElapsedNotWallClock(t *testing.T) {
	clock := &fakeClock{now: time.Date(2026, 12, 8, 2, 0, 0, 0, time.UTC)}
	l, path, _ := openLog(t, &Options{clock: clock.Now})
	wall := clock.Now()
	r := Record{Key: "mallory", Action: "execute_tool", Tool: "memory__delete_entities", Decision: Denied, Reason: "outside the key's scope"}
	for i := range 2 {
		r.Time = wall.Add(time.Duration(i) * time.Second)
		l.Write(r)
	}
	clock.Add(time.Minute + time.Second)
	r.Time = wall.Add(-time.Hour + time.Minute) // the wall clock stepped back an hour
	l.Write(r)
	l.Close()
	var counts []int
	for _, rec := range readAll(t, path, Filter{}) {
		counts = append(counts, rec.Count)
	}
	slices.Sort(counts)
	if fmt.Sprint(counts) != "[0 0 1]" {
		t.Errorf("counts of the records %v, want [0 0 1]: the first in full, the one after the minute in full (a new window), one summary for the second", counts)
	}

	// The writer closes a window by elapsed time too: records stamped an
	// hour ahead of the clock it reads (the clock stepped back since).
	c := newCoalescer(time.Minute, DefaultCoalesceKinds)
	at := clock.Now()
	r.Time = at.Add(time.Hour)
	for range 3 {
		rr := r
		c.add(&rr, at)
	}
	if s := c.due(at.Add(time.Minute), false); len(s) != 1 || s[0].Count != 2 {
		t.Errorf("summaries due a minute after the window opened: %+v, want one counting 2", s)
	}
}

// A key that used its kinds on names the gateway does not have (a client
// chooses them freely) cannot hide a refusal of a tool that exists (or a
// quarantined one) in its "other" record: that one still opens a kind of
// its own, written in full at once. Before, the 33rd refusal was only
// counted, and the next made-up name became the "last" its record named:
// the refused tool that mattered was in the log nowhere.
func TestOtherRefusalsCannotHideAKnownTool(t *testing.T) {
	l, path, _ := openLog(t, nil)
	now := time.Now()
	made := func(i int) Record {
		return Record{Time: now, Key: "mallory", Action: "execute_tool", Tool: fmt.Sprintf("nosuch__x%d", i), Decision: Denied,
			Reason: "outside the key's scope", Unlisted: true}
	}
	for i := range DefaultCoalesceKinds {
		l.Write(made(i))
	}
	l.Write(Record{Time: now, Key: "mallory", Action: "execute_tool", Tool: "memory__delete_entities", Decision: Denied, Reason: "outside the key's scope"})
	l.Write(Record{Time: now, Key: "mallory", Action: "execute_tool", Tool: "fs__write_file", Decision: Quarantined, Reason: "quarantined"})
	for i := range 100 {
		l.Write(made(1000 + i))
	}
	l.Close()
	var full []string
	for _, r := range readAll(t, path, Filter{Key: "mallory"}) {
		if r.Count == 0 {
			full = append(full, r.Tool)
		}
	}
	for _, want := range []string{"memory__delete_entities", "fs__write_file"} {
		if !slices.Contains(full, want) {
			t.Errorf("refusal of %s not written in full after 32 kinds of made-up names; written in full: %v", want, full)
		}
	}
	if len(full) != DefaultCoalesceKinds+3 {
		t.Errorf("%d records in full, want %d: the 32 kinds, the two tools that exist and the first other made-up name; the rest counted", len(full), DefaultCoalesceKinds+3)
	}
}

// A record that stands for refusals from firstTime to lastTime (its time)
// is in a span of --since/--until that any part of it overlaps: before,
// --until between its first and last refusal left it out (its time is the
// last), so `audit tail --until 10:00:30` showed the first refusal of
// 10:00:01 alone and none of the 500 counted after it up to 10:00:59.
func TestFilterSpanOverlapsSummary(t *testing.T) {
	at := func(s int) time.Time { return time.Date(2026, 12, 8, 10, 0, s, 0, time.UTC) }
	sum := Record{Time: at(59), Key: "mallory", Decision: Denied, Count: 500, FirstTime: at(2), LastTime: at(59)}
	for _, tc := range []struct {
		since, until time.Time
		want         bool
	}{
		{time.Time{}, at(30), true},
		{at(30), at(40), true},
		{at(30), time.Time{}, true},
		{time.Time{}, at(2), false}, // Until is out
		{at(60), time.Time{}, false},
		{time.Time{}, at(1), false},
	} {
		if got := (Filter{Since: tc.since, Until: tc.until}).Match(sum); got != tc.want {
			t.Errorf("since %s until %s: match %v, want %v", tc.since.Format(time.TimeOnly), tc.until.Format(time.TimeOnly), got, tc.want)
		}
	}
	// A record in full is matched on its time alone.
	one := Record{Time: at(59), Decision: Denied}
	if (Filter{Until: at(30)}).Match(one) {
		t.Error("a record of 10:00:59 matched --until 10:00:30")
	}
}

// A key revoked after it used its kinds on made-up names: the first
// request it sends then (refused before MCP, 401, a path the client
// chose) is written in full at once, not counted into the record of its
// made-up names for a minute. Each action and status of a key's other
// refusals writes its first in full; the rest are counted. Probed before:
// the revoked key's 401s were "12 more refusals (denied)" a minute later,
// with its made-up tools.
func TestRevokedAfterKindsWrittenAtOnce(t *testing.T) {
	l, path, _ := openLog(t, nil)
	now := time.Now()
	for i := range DefaultCoalesceKinds + 5 {
		l.Write(Record{Time: now, Key: "mallory", Action: "execute_tool", Tool: fmt.Sprintf("nosuch__x%d", i), Decision: Denied, Reason: "outside the key's scope", Unlisted: true})
	}
	revoked := Record{Time: now, Key: "mallory", Action: "http", Route: "POST /mcp", Decision: Denied, Status: 401, Reason: "the API key was revoked", Unlisted: true}
	for range 3 {
		l.Write(revoked)
	}
	// Read before the log closes (no summary yet), once alice's record,
	// queued after them, is in the file.
	l.Write(Record{Time: now, Key: "alice", Action: "search_tools", Decision: Allowed, Outcome: OK})
	for len(readAll(t, path, Filter{Key: "alice"})) == 0 {
		time.Sleep(time.Millisecond)
	}
	recs := readAll(t, path, Filter{Key: "mallory", Decisions: []string{Denied}})
	if !slices.ContainsFunc(recs, func(r Record) bool { return r.Status == 401 && r.Count == 0 }) {
		t.Errorf("the revoked key's 401 not written at once after its %d kinds", DefaultCoalesceKinds)
	}
	l.Close()
	stood := 0
	for _, r := range readAll(t, path, Filter{Key: "mallory"}) {
		stood += max(r.Count, 1)
	}
	if stood != DefaultCoalesceKinds+8 {
		t.Errorf("mallory's records stand for %d refusals, want %d", stood, DefaultCoalesceKinds+8)
	}
}
