// Package mask owns the rules that hide secrets in text toolgate writes
// down: a backend's stderr in the log (gateway/backend) and the arguments
// an audit log keeps (audit.arguments "masked"). It hides configured values
// verbatim (env and header values, OAuth client secrets) and the shapes of
// common credentials: bearer tokens, key=value pairs with a secret-sounding
// key, and the token formats of OpenAI/Anthropic, GitHub, AWS, Slack and
// toolgate's own API keys.
package mask

import (
	"regexp"
	"slices"
	"strings"
)

// Hidden replaces what is masked.
const Hidden = "***"

// patterns match credentials that commonly show up in text: each is a
// token's shape (Tokens applies those alone), but for the one marked named,
// a value after a secret-sounding word, which words of prose can match.
// A pattern runs only on text that holds one of its lits (any case with
// fold): most text holds none, and the regexps cost 41 µs on a 160-byte
// line, 14 µs on each audit record, where the look for lits costs 0.6 µs
// and 0.3 µs (BenchmarkTokens, audit's BenchmarkWrite).
var patterns = []struct {
	re    *regexp.Regexp
	repl  string
	named bool
	lits  []string
	fold  bool
}{
	{regexp.MustCompile(`(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{6,}`), "$1 ***", false, []string{"bearer", "basic"}, true},
	{regexp.MustCompile(`(?i)((?:api[_-]?key|access[_-]?key|secret|token|passw(?:or)?d)["']?\s*[:=]\s*["']?)[^\s"',;]{4,}`), "${1}***", true, nil, false},
	{regexp.MustCompile(`(\b|_)sk-[A-Za-z0-9_-]{16,}`), "${1}sk-***", false, []string{"sk-"}, false},
	{regexp.MustCompile(`(\b|_)gh[pousr]_[A-Za-z0-9]{20,}`), "${1}gh*_***", false, []string{"gh"}, false},
	{regexp.MustCompile(`(\b|_)github_pat_[A-Za-z0-9_]{20,}`), "${1}github_pat_***", false, []string{"github_pat_"}, false},
	{regexp.MustCompile(`(\b|_)AKIA[0-9A-Z]{16}\b`), "${1}AKIA***", false, []string{"AKIA"}, false},
	{regexp.MustCompile(`(\b|_)xox[abprs]-[A-Za-z0-9-]{10,}`), "${1}xox*-***", false, []string{"xox"}, false},
	// Each token's shape after an underscore too: a namespaced name a
	// client made of one (memory__tg_…, github__ghp_…), where \b sees no
	// boundary.
	{regexp.MustCompile(`(\b|_)tg_[A-Za-z0-9_-]{20,}`), "${1}tg_***", false, []string{"tg_"}, false},
}

// mayMatch reports whether s holds one of lits (any case with fold), or
// lits is empty.
func mayMatch(s string, lits []string, fold bool) bool {
	if len(lits) == 0 {
		return true
	}
	for _, l := range lits {
		if !fold && strings.Contains(s, l) {
			return true
		}
		for i := 0; fold && i+len(l) <= len(s); i++ {
			if s[i]|0x20 == l[0] && strings.EqualFold(s[i:i+len(l)], l) { // l is lower-case ASCII
				return true
			}
		}
	}
	return false
}

// secretKey matches the names of fields whose whole value is a secret.
var secretKey = regexp.MustCompile(`(?i)(api[_-]?key|access[_-]?key|secret|token|passw(or)?d|passphrase|credential|authorization|private[_-]?key|cookie)`)

// secretName matches the names of variables and command-line flags whose
// value is a secret: those secretKey matches, and names that end in a word
// KEY or PAT (STRIPE_KEY, --key, GH_PAT).
var secretName = regexp.MustCompile(secretKey.String() + `|(?i)(^|[_-])(key|pat)$`)

// SecretName reports whether a variable or flag named name (GITHUB_TOKEN,
// OPENAI_API_KEY, api-key) holds a secret.
func SecretName(name string) bool { return secretName.MatchString(name) }

// Args returns args with the value of each flag named like a secret
// (SecretName: --api-key KEY, --github-token=KEY) replaced by with, and
// the values replaced; a value that holds a ${VAR} reference is kept (the
// secret lives in the environment).
func Args(args []string, with string) (masked, values []string) {
	masked = slices.Clone(args)
	for i, a := range args {
		flag, val, eq := strings.Cut(a, "=")
		if !strings.HasPrefix(flag, "-") || !SecretName(strings.TrimLeft(flag, "-")) {
			continue
		}
		at := i + 1
		if eq {
			at = i
		} else if at >= len(args) {
			continue
		} else {
			val = args[at]
		}
		if val == "" || strings.Contains(val, "${") {
			continue
		}
		values = append(values, val)
		if eq {
			masked[at] = flag + "=" + with
		} else {
			masked[at] = with
		}
	}
	return masked, values
}

// MinLen is the shortest configured value that is masked verbatim; shorter
// values ("1", "true") would mask ordinary words.
const MinLen = 6

// Masker hides secrets. The zero value hides the common shapes only.
type Masker struct {
	values *strings.Replacer // configured values; nil: none
}

// New returns a masker that also hides each of values verbatim (those of
// at least MinLen bytes, and the token of a "Bearer abc…" value alone).
func New(values []string) *Masker {
	var vals []string
	for _, v := range values {
		if len(v) >= MinLen {
			vals = append(vals, v)
		}
		if _, tok, ok := strings.Cut(v, " "); ok && len(tok) >= MinLen {
			vals = append(vals, tok)
		}
	}
	// Longest first so that a value containing another is masked whole.
	slices.SortFunc(vals, func(a, b string) int { return len(b) - len(a) })
	var pairs []string
	for _, v := range slices.Compact(vals) {
		pairs = append(pairs, v, Hidden)
	}
	m := &Masker{}
	if len(pairs) > 0 {
		m.values = strings.NewReplacer(pairs...)
	}
	return m
}

// String hides the secrets in s.
func (m *Masker) String(s string) string {
	if m != nil && m.values != nil {
		s = m.values.Replace(s)
	}
	for _, p := range patterns {
		if mayMatch(s, p.lits, p.fold) {
			s = p.re.ReplaceAllString(s, p.repl)
		}
	}
	return s
}

// Tokens hides the shapes of credentials in s (a toolgate key tg_…, a
// GitHub, OpenAI, AWS or Slack token, a "Bearer …" value), not a value
// after a secret-sounding word: for text a client chose that the gateway
// writes down (an audit record's session id, User-Agent, tool name, path,
// reason; a log line; a learned query), where prose such as "refresh
// token: invalid_grant" is words, not a secret.
func Tokens(s string) string {
	for _, p := range patterns {
		if !p.named && mayMatch(s, p.lits, p.fold) {
			s = p.re.ReplaceAllString(s, p.repl)
		}
	}
	return s
}

// Configured hides only the configured values in s, not the shapes of
// credentials: for the gateway's own prose (error messages), where a shape
// such as "refresh token: invalid_grant" is words, not a secret.
func (m *Masker) Configured(s string) string {
	if m != nil && m.values != nil {
		return m.values.Replace(s)
	}
	return s
}

// Value returns a copy of a decoded JSON value (maps, slices, strings,
// numbers …) with the secrets hidden: the whole value of a field whose name
// sounds secret ("password", "apiKey", "token" …), and the secrets in
// every other string, as String does.
func (m *Masker) Value(v any) any {
	switch x := v.(type) {
	case string:
		return m.String(x)
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, val := range x {
			if secretKey.MatchString(k) && val != nil {
				out[k] = Hidden
				continue
			}
			out[k] = m.Value(val)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, val := range x {
			out[i] = m.Value(val)
		}
		return out
	default:
		return v
	}
}

// InClear reports whether value, given under key (an env variable, a
// header, a field), is a secret written out in a config: a key that sounds
// secret (GITHUB_TOKEN, Authorization) with a value of MinLen bytes or
// more, or a value of a credential's shape (ghp_…, "Bearer …"). A value
// that takes anything from a ${VAR} reference is not: the secret lives in
// the environment.
func InClear(key, value string) bool {
	if strings.Contains(value, "${") {
		return false
	}
	return secretKey.MatchString(key) && len(value) >= MinLen || (&Masker{}).String(value) != value
}

// KeyLike says whether a URL's path segment looks like a key: 20
// characters or more of letters, digits, "-" and "_", with letters and
// digits both (sk-ak-3f9c…, a token, a UUID), where a path's words are
// letters alone (mcp, sse, v1, servers).
func KeyLike(seg string) bool {
	if len(seg) < 20 {
		return false
	}
	var letter, digit bool
	for _, c := range seg {
		switch {
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			letter = true
		case c >= '0' && c <= '9':
			digit = true
		case c == '-' || c == '_':
		default:
			return false
		}
	}
	return letter && digit
}
