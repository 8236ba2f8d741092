package termtext

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestEscape(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"plain\ttext\nkept", "plain\ttext\nkept"},
		{"a\x1b[2Jb", `a\x1b[2Jb`},
		{"a\x7fb", `a\x7fb`},
		{"a\u202eb", `a\u202eb`},
		{"a\U000E0001b", `a\U000e0001b`},
		{"a\xffb", `a\xffb`},
	} {
		if got := Escape(c.in); got != c.want {
			t.Errorf("Escape(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// A JSON line escaped for a terminal is still JSON, and decodes to the
// text it held: Escape's \x7f and \U000e0001 are not JSON escapes.
func TestEscapeJSON(t *testing.T) {
	for _, s := range []string{"a\x1b[2Jb", "a\x7fb", "a\u202eb", "a\u009bb", "a\U000E0001b", "a\u200bb", "\ufffd"} {
		line, _ := json.Marshal(map[string]string{"reason": s})
		got := EscapeJSON(string(line))
		var back map[string]string
		if err := json.Unmarshal([]byte(got), &back); err != nil || back["reason"] != s {
			t.Errorf("EscapeJSON(%s) = %s: decodes to %q (%v), want %q", line, got, back["reason"], err, s)
		}
		for _, r := range got {
			if Unsafe(r) {
				t.Errorf("EscapeJSON(%s) = %s keeps %U", line, got, r)
			}
		}
	}
	// A stray byte (a line not written by encoding/json) is U+FFFD, as
	// a JSON decoder reads it.
	if got := EscapeJSON(`{"r":"a` + "\xff" + `b"}`); got != `{"r":"a\ufffdb"}` {
		t.Errorf("EscapeJSON of a stray byte = %s", got)
	}
}

// Value escapes every string of a decoded JSON value, keys too, and keeps
// its shape and other values.
func TestValue(t *testing.T) {
	in := map[string]any{"a\x1b": []any{"b\u202e", 1.5, true, nil, map[string]any{"c": "d\ne"}}}
	want := map[string]any{`a\x1b`: []any{`b\u202e`, 1.5, true, nil, map[string]any{"c": "d\ne"}}}
	if got := Value(in); !reflect.DeepEqual(got, want) {
		t.Errorf("Value(%#v) = %#v, want %#v", in, got, want)
	}
	if got := Value(json.Number("7")); got != json.Number("7") {
		t.Errorf("Value of a number = %#v", got)
	}
}
