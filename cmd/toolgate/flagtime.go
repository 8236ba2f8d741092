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
// --since): a duration from now, ahead or back (Go's units, and d, w and y
// for calendar days, weeks and years: 90m, 12h, 30d, 2w, 1y), a date (the
// start of that day in loc: 2026-12-31) or an RFC 3339 time.
func flagTime(s string, now time.Time, ahead bool, loc *time.Location) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	if t, err := time.ParseInLocation(time.DateOnly, s, loc); err == nil {
		return t, nil
	} else if len(s) == len(time.DateOnly) && s[4] == '-' && s[7] == '-' {
		// A date, but not one the calendar has (2026-02-30).
		var pe *time.ParseError
		if errors.As(err, &pe) && pe.Message != "" {
			return time.Time{}, errors.New("not a date" + pe.Message) // Message is ": day out of range"
		}
		return time.Time{}, errors.New("not a date: want YYYY-MM-DD, e.g. 2026-12-31")
	}
	if i := strings.IndexFunc(s, func(r rune) bool { return r < '0' || r > '9' }); i > len("2006") && s[i] == '-' {
		// A date, or an RFC 3339 time, after year 9999 (10000-01-01),
		// which neither form can write.
		return time.Time{}, fmt.Errorf("%s is %w", s, errTooFar)
	}
	sign := 1
	if !ahead {
		sign = -1
	}
	if n, unit := strings.TrimRight(s, "dwy"), strings.TrimLeft(s, "0123456789"); len(n) < len(s) && (unit == "d" || unit == "w" || unit == "y") {
		v, err := strconv.Atoi(n)
		if err != nil || v <= 0 {
			return time.Time{}, errors.New("want a positive number of days, weeks or years, e.g. 30d, 2w or 1y")
		}
		if v > 10000*366 { // AddDate would overflow long before
			return time.Time{}, fmt.Errorf("%s is %w", s, errTooFar)
		}
		switch unit {
		case "y":
			return now.AddDate(sign*v, 0, 0), nil
		case "w":
			return now.AddDate(0, 0, sign*7*v), nil
		}
		return now.AddDate(0, 0, sign*v), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return time.Time{}, errors.New("want a duration like 90m, 12h, 30d, 2w or 1y, a date like 2026-12-31, or an RFC 3339 time like 2026-12-31T18:00:00Z")
	}
	return now.Add(time.Duration(sign) * d), nil
}
