package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// errTooFar is flagTime's error for a count of days, weeks or years that
// no calendar reaches, or a date after year 9999.
var errTooFar = errors.New("too far off")

// flagTime reads a time a flag gives (keys create --expires, audit tail
// --since and --until): a duration from now, ahead or back (Go's units,
// and d, w and y for calendar days, weeks and years: 90m, 12h, 30d, 2w,
// 1y), an RFC 3339 time (its Z or offset honoured), or a date or a date and
// time without a zone (2026-12-31, the start of that day, as are today,
// yesterday and tomorrow; 2026-12-31T18:00 or 2026-12-31 18:00:05), read
// in the zone of now: the local zone, as
// `date` and `audit tail` show times. local says it was one of those:
// zoneNote says how it was read.
func flagTime(s string, now time.Time, ahead bool) (t time.Time, local bool, err error) {
	if days, ok := dayWords[strings.ToLower(s)]; ok {
		// A day's start in the zone of now, as a date is: who called what
		// yesterday is --since yesterday --until today.
		y, m, d := now.Date()
		return dayStart(y, m, d+days, now.Location()), true, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, false, nil
	}
	for _, layout := range localLayouts {
		if t, err := time.ParseInLocation(layout, s, now.Location()); err == nil {
			if layout == time.DateOnly {
				d, _ := time.Parse(time.DateOnly, s) // the date as written: t is in the previous day where its midnight is skipped
				t = dayStart(d.Year(), d.Month(), d.Day(), now.Location())
			}
			return t, true, nil
		}
	}
	if _, err := time.ParseInLocation(time.DateOnly, s, now.Location()); len(s) == len(time.DateOnly) && s[4] == '-' && s[7] == '-' {
		// A date, but not one the calendar has (2026-02-30).
		var pe *time.ParseError
		if errors.As(err, &pe) && pe.Message != "" {
			return time.Time{}, false, errors.New("not a date" + pe.Message) // Message is ": day out of range"
		}
		return time.Time{}, false, errors.New("not a date: want YYYY-MM-DD, e.g. 2026-12-31")
	}
	if i := strings.IndexFunc(s, func(r rune) bool { return r < '0' || r > '9' }); i > len("2006") && s[i] == '-' {
		// A date, or an RFC 3339 time, after year 9999 (10000-01-01),
		// which neither form can write.
		return time.Time{}, false, fmt.Errorf("%s is %w", s, errTooFar)
	}
	sign := 1
	if !ahead {
		sign = -1
	}
	if n, unit := strings.TrimRight(s, "dwy"), strings.TrimLeft(s, "0123456789"); len(n) < len(s) && (unit == "d" || unit == "w" || unit == "y") {
		v, err := strconv.Atoi(n)
		if err != nil || v <= 0 {
			return time.Time{}, false, errors.New("want a positive number of days, weeks or years, e.g. 30d, 2w or 1y")
		}
		if v > 10000*366 { // AddDate would overflow long before
			return time.Time{}, false, fmt.Errorf("%s is %w", s, errTooFar)
		}
		switch unit {
		case "y":
			return now.AddDate(sign*v, 0, 0), false, nil
		case "w":
			return now.AddDate(0, 0, sign*7*v), false, nil
		}
		return now.AddDate(0, 0, sign*v), false, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return time.Time{}, false, errors.New("want a duration like 90m, 12h, 30d, 2w or 1y, a date like 2026-12-31 (or today, yesterday, tomorrow) or a date and time like 2026-12-31T18:00 (in local time), or an RFC 3339 time like 2026-12-31T18:00:00Z")
	}
	return now.Add(time.Duration(sign) * d), false, nil
}

// dayStart is the first instant of the day y-m-d in loc: its midnight, or
// where the clocks skip midnight (summer time that begins at 00:00, as in
// Chile, Cuba or Paraguay) the first instant after the skip. time.Date
// reads a skipped midnight in the offset before the change, the previous
// day's 23:00, so `--since yesterday --until today` lost yesterday's last
// hour to today.
func dayStart(y int, m time.Month, d int, loc *time.Location) time.Time {
	t := time.Date(y, m, d, 0, 0, 0, 0, loc)
	noon := time.Date(y, m, d, 12, 0, 0, 0, loc)
	if t.YearDay() == noon.YearDay() {
		return t
	}
	_, before := t.Zone()
	_, after := noon.Zone()
	return t.Add(time.Duration(after-before) * time.Second)
}

// dayWords are the days flagTime reads by name, each the start of that
// day (local midnight), counted from today.
var dayWords = map[string]int{"yesterday": -1, "today": 0, "tomorrow": 1}

// localLayouts are the times without a zone flagTime reads in the local
// zone.
var localLayouts = []string{time.DateOnly, "2006-01-02T15:04", "2006-01-02T15:04:05", "2006-01-02 15:04", time.DateTime}

// zoneNote says how flag's value in, a time without a zone, was read (t,
// flagTime's in the local zone): in which zone, and how to name another.
func zoneNote(flag, in string, t time.Time) string {
	name, _ := t.Zone()
	return fmt.Sprintf("note: %s %s has no time zone: read in local time, %s (UTC%s): %s; write Z or an offset for another zone, e.g. %s",
		flag, in, name, t.Format("-07:00"), t.Format(time.RFC3339), t.Format("2006-01-02T15:04:05")+"Z")
}
