package typo

import (
	"testing"
)

func TestDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"", "abc", 3},
		{"mode", "mode", 0},
		{"mdoe", "mode", 1}, // a swap of neighbours is one edit
		{"ca", "abc", 3},    // optimal string alignment: no edit of a swapped pair
		{"json", "jsn", 1},
		{"kitten", "sitting", 3},
		{"filesystem__read_file", "filesystem__raed_flie", 2},
		{"Mode", "mode", 1}, // case counts
		{"naïve", "naive", 1},
		{"日本語", "日本", 1}, // by rune, not byte
	} {
		if got := Distance(tc.a, tc.b); got != tc.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
		if got := Distance(tc.b, tc.a); got != tc.want {
			t.Errorf("Distance(%q, %q) = %d, want %d (symmetric)", tc.b, tc.a, got, tc.want)
		}
	}
}

func TestSuggest(t *testing.T) {
	known := []string{"mcpServers", "toolgate", "allow", "deny", "json"}
	for _, tc := range []struct {
		k, want string
		ok      bool
	}{
		{"tolgate", "toolgate", true},
		{"MCPSERVERS", "mcpServers", true}, // case aside
		{"alow", "allow", true},
		{"jsn", "json", true},
		{"dney", "deny", true},
		{"servers", "", false}, // too far from each
		{"x", "", false},
	} {
		got, ok := Suggest(tc.k, known)
		if ok != tc.ok || ok && got != tc.want {
			t.Errorf("Suggest(%q) = %q, %v; want %q, %v", tc.k, got, ok, tc.want, tc.ok)
		}
	}
	if _, ok := Suggest("a", nil); ok {
		t.Error("Suggest with no known names suggested one")
	}
}

// FuzzDistance checks the three-row Distance against the whole table it
// replaced (gateway/config's editDistance), and that it is a distance.
func FuzzDistance(f *testing.F) {
	for _, s := range [][2]string{{"mdoe", "mode"}, {"ca", "abc"}, {"", "x"}, {"日本語", "本日語"}, {"a\xffb", "ab"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		if len(a) > 64 || len(b) > 64 {
			return
		}
		d := Distance(a, b)
		if want := fullTable(a, b); d != want {
			t.Fatalf("Distance(%q, %q) = %d, the full table says %d", a, b, d, want)
		}
		if d != Distance(b, a) || (d == 0) != (string([]rune(a)) == string([]rune(b))) || d > max(len([]rune(a)), len([]rune(b))) {
			t.Fatalf("Distance(%q, %q) = %d: not symmetric, or out of bounds", a, b, d)
		}
	})
}

// fullTable is the optimal-string-alignment distance computed over the
// whole table, as gateway/config's editDistance did.
func fullTable(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}
