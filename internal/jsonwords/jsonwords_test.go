package jsonwords

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	segjson "github.com/segmentio/encoding/json"
)

func TestExplain(t *testing.T) {
	type args struct {
		Name     string   `json:"name"`
		Relevant []string `json:"relevant"`
		Limit    int      `json:"limit,omitempty"`
		Nested   struct {
			On bool `json:"on"`
		} `json:"nested"`
	}
	for _, tc := range []struct{ in, want string }{
		{`{"name": 42}`, `"name" must be a string, not a JSON number`},
		{`{"relevant": "a__b"}`, `"relevant" must be a list of strings, not a JSON string`},
		{`{"relevant": [1]}`, `"relevant" must be a list of strings, not a JSON number`},
		{`{"limit": "5"}`, `"limit" must be a number, not a JSON string`},
		{`{"nested": {"on": "yes"}}`, `"nested.on" must be a boolean, not a JSON string`},
		{`"just text"`, `a JSON string, not an object`},
		{`[1, 2]`, `a JSON array, not an object`},
	} {
		var v args
		got := Explain(json.Unmarshal([]byte(tc.in), &v), &v)
		if got == nil || got.Error() != tc.want {
			t.Errorf("Explain(%s) = %v, want %q", tc.in, got, tc.want)
		}
	}
	var m map[string]json.RawMessage
	if got := Explain(json.Unmarshal([]byte(`true`), &m), &m); got == nil || got.Error() != "a JSON bool, not an object" {
		t.Errorf("into a map: %v", got)
	}
	// segmentio's decoder (go-sdk's messages are read with it) writes the
	// value itself, quoted; Describe reads the type from the error alone.
	type block struct{ Type string }
	var res struct {
		Content []*block `json:"content"`
		N       int      `json:"n"`
	}
	for in, want := range map[string]string{
		`{"content": {"type": "text", "text": "hi"}}`: `"content" must be a list of objects, not a JSON object`,
		`{"content": "hi"}`:                           `"content" must be a list of objects, not a JSON string`,
		`{"n": [1]}`:                                  `"n" must be a number, not a JSON array`,
		`{"n": true}`:                                 `"n" must be a number, not a JSON bool`,
	} {
		err := segjson.Unmarshal([]byte(in), &res)
		if got := Describe(fmt.Errorf("calling: %w", err)); got != want {
			t.Errorf("Describe(segmentio's error for %s) = %q (the error: %v), want %q", in, got, err, want)
		}
		if got := Describe(fmt.Errorf("calling: %w", json.Unmarshal([]byte(in), &res))); got != want {
			t.Errorf("Describe(encoding/json's error for %s) = %q, want %q", in, got, want)
		}
	}
	if got := Describe(errors.New("EOF")); got != "" {
		t.Errorf("Describe of no type error: %q", got)
	}
	other := errors.New("unexpected end of JSON input")
	if got := Explain(other, &m); got != other {
		t.Errorf("an error that is no type error: %v, want it as it is", got)
	}
	if Explain(nil, &m) != nil {
		t.Error("Explain(nil) is not nil")
	}
}

// TestNumberOutOfItsType: a JSON number that its field's type cannot hold
// (a float past float64's range, a fraction or a number too large for an
// integer field) is said with the number and the range, by either decoder:
// it read `"e" must be a number, not a JSON number`, a number.
func TestNumberOutOfItsType(t *testing.T) {
	var v struct {
		E any     `json:"e"`
		F float32 `json:"f"`
		N int     `json:"n"`
		U uint8   `json:"u"`
	}
	for in, want := range map[string]string{
		`{"e": 1e400, "x": 1}`: `"e" must be a number within ±1.7976931348623157e+308, not 1e400`,
		`{"f": -1e39}`:         `"f" must be a number within ±3.4028234663852886e+38, not -1e39`,
		`{"n": 1.5}`:           `"n" must be a whole number from -9223372036854775808 to 9223372036854775807, not 1.5`,
		`{"n": 1e30}`:          `"n" must be a whole number from -9223372036854775808 to 9223372036854775807, not 1e30`,
		`{"u": 300}`:           `"u" must be a whole number from 0 to 255, not 300`,
		`{"u": -1}`:            `"u" must be a whole number from 0 to 255, not -1`,
	} {
		for dec, err := range map[string]error{"encoding/json": json.Unmarshal([]byte(in), &v), "segmentio": segjson.Unmarshal([]byte(in), &v)} {
			if got := Describe(fmt.Errorf("calling: %w", err)); got != want {
				t.Errorf("Describe(%s's error for %s) = %q (the error: %v), want %q", dec, in, got, err, want)
			}
		}
	}
}
