package sleepwatch

import (
	"testing"
	"time"
)

func TestSleptReadsBothClocks(t *testing.T) {
	at := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	before := Reading{Wall: at, Mono: time.Minute}
	for _, tc := range []struct {
		name       string
		wall, mono time.Duration // how far each clock ran
		want       time.Duration
	}{
		{"awake", 5 * time.Second, 5 * time.Second, 0},
		{"slept an hour", time.Hour + 5*time.Second, 5 * time.Second, time.Hour},
		{"clock set back", 5 * time.Second, 65 * time.Second, -time.Minute},
	} {
		after := Reading{Wall: at.Add(tc.wall), Mono: before.Mono + tc.mono}
		if got := Slept(before, after); got != tc.want {
			t.Errorf("%s: slept %s, want %s", tc.name, got, tc.want)
		}
	}
}
