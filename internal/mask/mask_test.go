package mask

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestString(t *testing.T) {
	m := New([]string{"abcd-1234-secret", "1", "Bearer tok_0123456789"})
	tests := []struct{ in, want string }{
		{"using key abcd-1234-secret now", "using key *** now"},
		{"auth tok_0123456789 ok", "auth *** ok"},
		{"Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.x.y", "Authorization: Bearer ***"},
		{"token=zzzzzzzz other=1", "token=*** other=1"},
		{"key tg_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "key tg_***"},
		{"debug level 1", "debug level 1"},
	}
	for _, tc := range tests {
		if got := m.String(tc.in); got != tc.want {
			t.Errorf("String(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	var zero *Masker
	if got := zero.String("password=hunter22"); got != "password=***" {
		t.Errorf("nil masker: %q", got)
	}
}

// Value hides a secret-named field whole (a pattern alone would leave the
// words after a space) and the secrets in every other string, at any depth,
// without changing the input.
func TestValue(t *testing.T) {
	m := New([]string{"configured-secret-value"})
	in := map[string]any{
		"password": "correct horse battery staple",
		"apiKey":   42.0,
		"query":    "find configured-secret-value and Bearer abcdefghijk",
		"nested":   []any{map[string]any{"client_secret": "x", "n": 1.0}, "plain"},
		"token":    nil,
	}
	want := map[string]any{
		"password": "***",
		"apiKey":   "***",
		"query":    "find *** and Bearer ***",
		"nested":   []any{map[string]any{"client_secret": "***", "n": 1.0}, "plain"},
		"token":    nil,
	}
	if d := cmp.Diff(want, m.Value(in)); d != "" {
		t.Errorf("Value (-want +got):\n%s", d)
	}
	if in["password"] != "correct horse battery staple" {
		t.Error("Value changed its input")
	}
}

// A path segment is a key when it mixes letters and digits over 20
// characters or more; a path's words are not.
func TestKeyLike(t *testing.T) {
	for seg, want := range map[string]bool{
		"mcp": false, "sse": false, "v1": false, "a-long-workspace-name-here": false, "2024_11_05_and_more_digits": true,
		"sk-ak-7f3a9c2e1b4d8f6a0c5e": true, "123e4567-e89b-12d3-a456-426614174000": true, "abc.def.ghi.jkl.mno.pqr1": false,
	} {
		if got := KeyLike(seg); got != want {
			t.Errorf("KeyLike(%q) = %v, want %v", seg, got, want)
		}
	}
}

// A secret written out in a config: a secret-sounding key's value, or a
// credential's shape under any key; not a ${VAR} reference, nor an
// ordinary value.
func TestInClear(t *testing.T) {
	for _, c := range []struct {
		key, value string
		want       bool
	}{
		{"GITHUB_PERSONAL_ACCESS_TOKEN", "ghp_abcdefghijklmnopqrstuvwxyz0123456789", true},
		{"API_KEY", "abc123xyz", true},
		{"Authorization", "Bearer abcdefgh12345", true},
		{"GH", "ghp_abcdefghijklmnopqrstuvwxyz0123456789", true}, // the shape, whatever the key
		{"url", "https://x.example/mcp?api_key=abcdef123", true},
		{"GITHUB_TOKEN", "${GITHUB_TOKEN}", false},
		{"Authorization", "Bearer ${NOTES_TOKEN}", false},
		{"API_KEY", "abc", false}, // shorter than MinLen
		{"LOG_LEVEL", "debug", false},
		{"MEMORY_FILE_PATH", "/home/me/memory.jsonl", false},
		{"url", "https://x.example/mcp", false},
	} {
		if got := InClear(c.key, c.value); got != c.want {
			t.Errorf("InClear(%q, %q) = %v, want %v", c.key, c.value, got, c.want)
		}
	}
}

func TestSecretName(t *testing.T) {
	for name, want := range map[string]bool{
		"GITHUB_TOKEN": true, "OPENAI_API_KEY": true, "STRIPE_KEY": true, "GH_PAT": true, "api-key": true, "key": true,
		"DB_PASSWORD": true, "client-secret": true, "github-token": true,
		"HOME": false, "PATH": false, "KEYBOARD": false, "PORT": false, "MEMORY_FILE_PATH": false, "verbose": false, "PATH_PAT_X": false,
	} {
		if got := SecretName(name); got != want {
			t.Errorf("SecretName(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestArgs(t *testing.T) {
	args := []string{"-y", "server", "--api-key", "k1-secret", "--github-token=k2-secret", "--token", "${GH_TOKEN}", "--verbose", "--key"}
	masked, values := Args(args, "xxxxx")
	want := []string{"-y", "server", "--api-key", "xxxxx", "--github-token=xxxxx", "--token", "${GH_TOKEN}", "--verbose", "--key"}
	if !slices.Equal(masked, want) || !slices.Equal(values, []string{"k1-secret", "k2-secret"}) {
		t.Errorf("Args = %q, %q; want %q and the two keys", masked, values, want)
	}
	if args[3] != "k1-secret" {
		t.Error("Args changed its argument")
	}
}

// Tokens hides the shapes of credentials (a toolgate key a client pasted
// into a session id, a GitHub token in a query) and leaves prose that
// names a secret ("refresh token: invalid_grant") as it is, which String
// would mask.
func TestTokens(t *testing.T) {
	key := "tg_h_cD03fp0_GMGEnIvWFyRfyAZyhfCC4hUpXh8McrBkM"
	for in, want := range map[string]string{
		"sess-" + key:    "sess-tg_***",
		"memory__" + key: "memory__tg_***",
		"agent/1 " + key: "agent/1 tg_***",
		"GET /" + key:    "GET /tg_***",
		"find ghp_abcdefghijklmnopqrstuvwxyz0123":    "find gh*_***",
		"github__ghp_abcdefghijklmnopqrstuvwxyz0123": "github__gh*_***",
		"openai__sk-abcdefghijklmnop0123":            "openai__sk-***",
		"aws__AKIAABCDEFGHIJKLMNOP":                  "aws__AKIA***",
		"slack__xoxb-1234567890-abcdef":              "slack__xox*-***",
		"gh__github_pat_abcdefghijklmnopqrstuvwxyz":  "gh__github_pat_***",
		"Authorization: Bearer abcdefgh12345":        "Authorization: Bearer ***",
		"refresh token: invalid_grant":               "refresh token: invalid_grant",
		"password=hunter22 memory__read_graph":       "password=hunter22 memory__read_graph",
		"tg_short":                                   "tg_short",
	} {
		if got := Tokens(in); got != want {
			t.Errorf("Tokens(%q) = %q, want %q", in, got, want)
		}
	}
}

// BenchmarkTokens: a log line or audit field without a credential (the
// usual case) and one with a key.
//
//	go test -run XXX -bench Tokens ./internal/mask/
func BenchmarkTokens(b *testing.B) {
	for name, s := range map[string]string{
		"plain": `backend call failed tool=memory__create_entities server=memory err="backend \"memory\" call timed out after 55s: the server did not answer; try again or raise callTimeout"`,
		"key":   `tool call denied tool=memory__tg_h_cD03fp0_GMGEnIvWFyRfyAZyhfCC4hUpXh8McrBkM server=memory err="the API key \"scoped\" lacks access to this tool"`,
	} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				Tokens(s)
			}
		})
	}
}
