package backend

import (
	"regexp"
	"slices"
	"strings"

	"github.com/toolgate/toolgate/gateway/config"
)

// secretPatterns match credentials that commonly show up in a backend's
// stderr: bearer tokens, key=value pairs with a secret-sounding key, and the
// well-known token shapes of OpenAI/Anthropic, GitHub, AWS and Slack.
var secretPatterns = []struct {
	re   *regexp.Regexp
	repl string
}{
	{regexp.MustCompile(`(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{6,}`), "$1 ***"},
	{regexp.MustCompile(`(?i)((?:api[_-]?key|access[_-]?key|secret|token|passw(?:or)?d)["']?\s*[:=]\s*["']?)[^\s"',;]{4,}`), "${1}***"},
	{regexp.MustCompile(`\bsk-[A-Za-z0-9_-]{16,}`), "sk-***"},
	{regexp.MustCompile(`\bgh[pousr]_[A-Za-z0-9]{20,}`), "gh*_***"},
	{regexp.MustCompile(`\bgithub_pat_[A-Za-z0-9_]{20,}`), "github_pat_***"},
	{regexp.MustCompile(`\bAKIA[0-9A-Z]{16}\b`), "AKIA***"},
	{regexp.MustCompile(`\bxox[abprs]-[A-Za-z0-9-]{10,}`), "xox*-***"},
}

// minSecretLen is the shortest configured value that is masked verbatim;
// shorter values ("1", "true") would mask ordinary words.
const minSecretLen = 6

// newMasker returns a function that hides the server's configured env and
// header values, OAuth client secret and common credential patterns in a line of backend output.
func newMasker(srv config.Server) func(string) string {
	var vals []string
	add := func(v string) {
		if len(v) >= minSecretLen {
			vals = append(vals, v)
		}
		// "Bearer abc…": the token alone may be printed too.
		if _, tok, ok := strings.Cut(v, " "); ok && len(tok) >= minSecretLen {
			vals = append(vals, tok)
		}
	}
	for _, v := range srv.Env {
		add(v)
	}
	for _, v := range srv.Headers {
		add(v)
	}
	if srv.OAuth != nil {
		add(srv.OAuth.ClientSecret)
	}
	// Longest first so that a value containing another is masked whole.
	slices.SortFunc(vals, func(a, b string) int { return len(b) - len(a) })
	var pairs []string
	for _, v := range slices.Compact(vals) {
		pairs = append(pairs, v, "***")
	}
	r := strings.NewReplacer(pairs...)
	return func(s string) string {
		s = r.Replace(s)
		for _, p := range secretPatterns {
			s = p.re.ReplaceAllString(s, p.repl)
		}
		return s
	}
}
