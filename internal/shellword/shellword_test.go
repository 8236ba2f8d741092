package shellword

import (
	"os/exec"
	"testing"
)

func TestJoin(t *testing.T) {
	for _, tc := range []struct {
		words []string
		want  string
	}{
		{[]string{"toolgate", "models", "fetch", "--dir", "/srv/toolgate/models"}, "toolgate models fetch --dir /srv/toolgate/models"},
		{[]string{"--dir", "/srv/my models"}, `--dir '/srv/my models'`},
		{[]string{"a;b", "", "~/x", "$HOME", "it's"}, `'a;b' '' '~/x' '$HOME' 'it'\''s'`},
	} {
		if got := Join(tc.words...); got != tc.want {
			t.Errorf("Join(%q) = %s, want %s", tc.words, got, tc.want)
		}
	}
}

// TestJoinShellReadsBack: sh reads each joined word back as it was.
func TestJoinShellReadsBack(t *testing.T) {
	words := []string{"plain", "two words", "$HOME", "`id`", "it's", `back\slash`, "a\nb", "*", "", "!x", "{a,b}"}
	script := "for w in " + Join(words...) + `; do printf '%s\0' "$w"; done`
	out, err := exec.Command("sh", "-c", script).Output()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for start, i := 0, 0; i < len(out); i++ {
		if out[i] == 0 {
			got = append(got, string(out[start:i]))
			start = i + 1
		}
	}
	if len(got) != len(words) {
		t.Fatalf("sh read %q, want %q", got, words)
	}
	for i := range words {
		if got[i] != words[i] {
			t.Errorf("word %d: sh read %q, want %q", i, got[i], words[i])
		}
	}
}
