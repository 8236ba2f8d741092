package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // America/Santiago on a machine without a zone database

	"github.com/toolgate/toolgate/gateway/keys"
)

// Every flag that reads a time (keys create --expires, audit tail --since
// and --until) reads a date or a date and time without a zone in one zone,
// the local one (the zone of now), and says so; a time with Z or an offset
// is read as written. --expires read a bare date in UTC and --since in
// local time: the same words named two instants hours apart.
func TestFlagTimesOneZone(t *testing.T) {
	zone := time.FixedZone("XST", 5*3600)
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, zone)
	for _, tc := range []struct{ in, want, note string }{
		{"2026-12-31", "2026-12-31T00:00:00+05:00", "read in local time, XST (UTC+05:00): 2026-12-31T00:00:00+05:00"},
		{"2026-12-31T18:30", "2026-12-31T18:30:00+05:00", "read in local time, XST (UTC+05:00): 2026-12-31T18:30:00+05:00"},
		{"2026-12-31 18:30:15", "2026-12-31T18:30:15+05:00", "read in local time"},
		{"2026-12-31T18:00:00Z", "2026-12-31T18:00:00Z", ""},
		{"2026-12-31T18:00:00-03:00", "2026-12-31T21:00:00Z", ""},
		{"30d", "2027-01-05T12:00:00+05:00", ""},
	} {
		want, err := time.Parse(time.RFC3339, tc.want)
		if err != nil {
			t.Fatal(err)
		}
		exp, _, err := parseExpiry(tc.in, now, neverCreate)
		if err != nil || !exp.Equal(want) {
			t.Errorf("--expires %s: %v, %v; want %s", tc.in, exp, err, tc.want)
		}
		if strings.HasSuffix(tc.in, "d") {
			continue // back from now for --since
		}
		f := auditTailFlags{since: tc.in}
		var note bytes.Buffer
		if err := f.parseFilter(now, &note); err != nil || !f.filter.Since.Equal(want) {
			t.Errorf("--since %s: %v, %v; want %s", tc.in, f.filter.Since, err, tc.want)
		}
		if got := note.String(); (tc.note == "") != (got == "") || !strings.Contains(got, tc.note) || (got != "" && !strings.Contains(got, "--since "+tc.in)) {
			t.Errorf("--since %s: note %q, want one that says %q", tc.in, got, tc.note)
		}
	}
	var out, errOut bytes.Buffer
	g := &globals{dataDir: t.TempDir()}
	if err := runKeysCreate(g, &out, &errOut, keysCreateFlags{spec: keys.Spec{Name: "ci"}, expires: "2026-12-31"}, now); err != nil {
		t.Fatal(err)
	}
	if s := errOut.String(); !strings.Contains(s, "--expires 2026-12-31 has no time zone: read in local time, XST (UTC+05:00): 2026-12-31T00:00:00+05:00") ||
		!strings.Contains(out.String(), "expires 2026-12-30T19:00:00Z") {
		t.Errorf("keys create --expires 2026-12-31: stdout %q, stderr %q", out.String(), s)
	}
}

// A day whose midnight the clocks skip (Chile's summer time begins at
// 00:00: 2026-09-06 starts at 01:00 -03) starts at its first instant:
// today, a date and --since yesterday --until today each read the previous
// day's 23:00 -04 as its start, an hour early, so `audit tail --since
// yesterday --until today` lost yesterday's last hour to today.
func TestFlagDaySkippedMidnight(t *testing.T) {
	santiago, err := time.LoadLocation("America/Santiago")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 9, 6, 4, 0, 0, 0, time.UTC) // 01:00 -03, the day's first instant
	for _, tc := range []struct {
		in  string
		now time.Time
	}{
		{"today", time.Date(2026, 9, 6, 12, 0, 0, 0, santiago)},
		{"yesterday", time.Date(2026, 9, 7, 12, 0, 0, 0, santiago)},
		{"tomorrow", time.Date(2026, 9, 5, 12, 0, 0, 0, santiago)},
		{"2026-09-06", time.Date(2026, 12, 6, 12, 0, 0, 0, santiago)},
	} {
		got, local, err := flagTime(tc.in, tc.now, false)
		if err != nil || !local || !got.Equal(start) {
			t.Errorf("%s (now %s): %s, %v, %v; want %s", tc.in, tc.now, got, local, err, start.In(santiago))
		}
	}
	// A midnight that is there is read as before, in either offset.
	for _, d := range []time.Time{time.Date(2026, 9, 5, 0, 0, 0, 0, santiago), time.Date(2026, 9, 7, 0, 0, 0, 0, santiago), time.Date(2026, 4, 5, 0, 0, 0, 0, santiago)} {
		got, _, err := flagTime(d.Format(time.DateOnly), d, false)
		if err != nil || !got.Equal(d) {
			t.Errorf("%s: %s, %v; want %s", d.Format(time.DateOnly), got, err, d)
		}
	}
}
