package catalog

import "testing"

func TestGlobs(t *testing.T) {
	for _, c := range []struct {
		glob, id string
		want     bool
	}{
		{"memory__delete_*", "memory__delete_entities", true},
		{"memory__delete_*", "memory__read_graph", false},
		{"memory__*", "memory__x__y", true},
		{"*__read_*", "filesystem__read_file", true},
		{"*", "a__b", true},
		{"mem?ry__*", "memory__a", true},
		{"memory__[dr]*", "memory__read_graph", true},
		{"memory__delete_*", "memory2__delete_x", false},
		{"memory__[", "memory__[", false}, // malformed: matches nothing
		{"s__*", "s__a/b", true},          // a deny of the server covers names with a slash
		{"s__a/*", "s__a/b", true},
		{"s__?", "s__/", true},
	} {
		if got := MatchID(c.glob, c.id); got != c.want {
			t.Errorf("MatchID(%q, %q) = %v, want %v", c.glob, c.id, got, c.want)
		}
	}
	for glob, bad := range map[string]bool{"memory__delete_*": false, "*__read_*": false, "*": false, "delete_*": true, "memory__[": true} {
		if got := CheckGlob(glob) != ""; got != bad {
			t.Errorf("CheckGlob(%q) = %q", glob, CheckGlob(glob))
		}
	}
	for glob, want := range map[string]string{"memory__delete_*": "memory", "*__x": "", "mem*__x": "", "nosep": ""} {
		if got := GlobServer(glob); got != want {
			t.Errorf("GlobServer(%q) = %q, want %q", glob, got, want)
		}
	}
}
