package jsonnum

import (
	"encoding/json"
	"math"
	"strconv"
	"testing"
)

func TestLong(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want bool
	}{
		{`{"id": 9007199254740993}`, true}, // 2^53 + 1: a float64 rounds it
		{`{"id": 123456789012345}`, false}, // 15 digits
		{`{"id": 1234567890123456}`, true}, // 16
		{`{"x": 1.5, "y": [1, 2, 3]}`, false},
		{`{"pi": 3.1415926535897932}`, true}, // a long fraction: the careful path, harmless
		{`{"s": "a 1234567890123456 b"}`, true},
		{`{"a": 12345678, "b": 12345678}`, false}, // runs do not join across other bytes
	} {
		if got := Long([]byte(tc.in)); got != tc.want {
			t.Errorf("Long(%s) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

// Digits is the bound that matters: every integer with fewer digits
// survives a float64, and one with Digits may not.
func TestDigitsBound(t *testing.T) {
	if float64(int64(1e15-1)) != 1e15-1 || int64(math.Pow10(Digits-1)) > 1<<53 {
		t.Fatalf("integers of %d digits are not all below 2^53", Digits-1)
	}
	n := int64(1<<53 + 1) // 16 digits
	var f float64
	if err := json.Unmarshal([]byte(strconv.FormatInt(n, 10)), &f); err != nil || int64(f) == n {
		t.Fatalf("2^53+1 (%d digits) survived a float64: %v, %v", len(strconv.FormatInt(n, 10)), f, err)
	}
}
