package backend

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// A backend's stderr or stdout line cut for a log or an error stays UTF-8:
// the cut at a byte count fell inside a character of a server that writes
// Japanese (or any text outside ASCII), and the line ended in a broken
// byte sequence (U+FFFD in JSON, \xe6 in a log).
func TestTruncateKeepsUTF8(t *testing.T) {
	line := strings.Repeat("設定ファイルが見つかりません", 20)
	for n := range 12 {
		got := truncate(line, 200+n)
		if !utf8.ValidString(got) || !strings.HasSuffix(got, "…") || len(got) > 200+n+len("…") {
			t.Errorf("truncate(…, %d) = %q: want valid UTF-8 of at most %d bytes and …", 200+n, got[len(got)-12:], 200+n)
		}
	}
	if got := truncate("short", 200); got != "short" {
		t.Errorf("truncate(short) = %q", got)
	}
}
