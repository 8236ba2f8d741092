package quarantine

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/mtibben/confusables"
	"golang.org/x/text/unicode/norm"
	"golang.org/x/text/unicode/runenames"

	"github.com/toolgate/toolgate/index/catalog"
)

// Rules: what a Finding found.
const (
	RuleHiddenTag      = "hidden-tag"           // <IMPORTANT>-style tags, chat-template markers
	RuleConceal        = "conceal"              // "do not tell the user …"
	RuleOverride       = "override"             // "ignore previous instructions …"
	RuleCredentialPath = "credential-path"      // an instruction to read ~/.ssh, .env, ~/.aws, another client's MCP config …
	RuleUnicodeTags    = "unicode-tags"         // U+E0000–E007F: invisible text a model reads
	RuleInvisible      = "invisible"            // zero-width characters, fillers, variation selectors
	RuleBidi           = "bidi-control"         // bidirectional controls that reorder what people see
	RuleControl        = "control-chars"        // C0/C1 controls but tab and newlines: terminal escapes, NUL
	RuleOverlong       = "overlong"             // a text longer than MaxTextLength
	RuleHiddenMarkup   = "hidden-markup"        // an HTML or Markdown comment, an empty link: hidden when rendered
	RuleDuplicateKey   = "duplicate-key"        // a JSON object of the input or output schema with a key given twice
	RuleRemoteImage    = "remote-image"         // a Markdown or HTML image whose URL is on another host: rendering it fetches it
	RuleContextExfil   = "context-exfiltration" // an instruction to put the conversation, the system prompt or other tools' output in an argument or a URL
)

// ruleText says what a rule means, in words for the isError a model reads
// and for people.
var ruleText = map[string]string{
	RuleHiddenTag:      "a hidden-instruction tag",
	RuleConceal:        "an instruction to keep something from the user",
	RuleOverride:       "an instruction to ignore other instructions",
	RuleCredentialPath: "an instruction to read credentials or another client's configuration",
	RuleUnicodeTags:    "Unicode tag characters (invisible text)",
	RuleInvisible:      "invisible characters",
	RuleBidi:           "bidirectional control characters",
	RuleControl:        "control characters (terminal escapes)",
	RuleOverlong:       "overlong text",
	RuleHiddenMarkup:   "markup that hides text from people (a comment, an empty link)",
	RuleDuplicateKey:   "a key given twice in one object (readers disagree on which value counts)",
	RuleRemoteImage:    "an image on another host (rendering it sends a request there)",
	RuleContextExfil:   "an instruction to put the conversation, the system prompt or other tools' output in an argument or a URL",
}

// Finding is one suspicious thing in a tool definition.
type Finding struct {
	Rule string `json:"rule"`
	// Field is where: name, title, description, or a path into the input
	// schema such as inputSchema.properties.path.description.
	Field string `json:"field"`
	// Excerpt shows people what matched, quoted with invisible characters
	// escaped (Unicode tag text decoded). It is never shown to a model.
	Excerpt string `json:"excerpt,omitempty"`
}

// Summary is the finding in words, without the excerpt: safe to show a
// model. The field's property names, which the backend chose (and which
// may be the very text flagged), are left out: see ModelField.
func (f Finding) Summary() string { return f.What() + " in " + ModelField(f.Field) }

// What is the finding's rule in words ("an instruction to ignore other
// instructions").
func (f Finding) What() string { return ruleText[f.Rule] }

// Detail is Summary with the field whole, property names included, for
// the person who reviews the tool (escape it for a terminal).
func (f Finding) Detail() string { return f.What() + " in " + f.Field }

// fieldWords are the words of a Field that name a part of a definition
// or a JSON Schema keyword: the only ones ModelField keeps.
var fieldWords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`name title description annotations inputSchema outputSchema serverInfo instructions
		type properties items prefixItems additionalProperties patternProperties propertyNames unevaluatedProperties unevaluatedItems
		required enum const default examples format pattern $ref $schema $id $anchor $comment $defs definitions
		anyOf oneOf allOf not if then else dependentSchemas dependentRequired contains contentMediaType contentEncoding
		minimum maximum minLength maxLength minItems maxItems deprecated readOnly writeOnly`) {
		m[w] = true
	}
	return m
}()

// ModelField is field with every word that is not a part of a definition
// or a JSON Schema keyword (a property name, the backend's choice, which
// may hold dots itself) written "*", once for a run of them:
// "inputSchema.properties.*.description". What is left holds no text of
// the backend's.
func ModelField(field string) string {
	var out []string
	for _, p := range strings.Split(field, ".") {
		word, index := p, ""
		if j := strings.IndexByte(p, '['); j >= 0 && isIndexes(p[j:]) {
			word, index = p[:j], p[j:]
		}
		if !fieldWords[word] {
			word = "*"
			if n := len(out); n > 0 && out[n-1] == "*" {
				out = out[:n-1]
			}
		}
		out = append(out, word+index)
	}
	return strings.Join(out, ".")
}

// isIndexes reports whether s is one or more array indexes: "[1]", "[0][2]".
func isIndexes(s string) bool {
	for s != "" {
		end := strings.IndexByte(s, ']')
		if s[0] != '[' || end < 2 {
			return false
		}
		for _, c := range s[1:end] {
			if c < '0' || c > '9' {
				return false
			}
		}
		s = s[end+1:]
	}
	return true
}

// DefaultMaxTextLength is the longest text (in characters) of a definition
// that is not flagged as overlong. The longest description of the bundled
// servers and of the 379 tools of the bench catalogs is about 1,000.
const DefaultMaxTextLength = 10000

// Scanner scans tool definitions. The zero value uses the defaults.
type Scanner struct {
	// MaxTextLength flags a text longer than this many characters
	// (0 = DefaultMaxTextLength).
	MaxTextLength int
}

var (
	// Tags a definition has no business holding: they address the model,
	// not the person reading the description.
	// Tags that address the model, not the person reading: the strong
	// names anywhere, the weak ones (also used as placeholders, as in
	// "--model <model>") only as a closing tag, which no placeholder has.
	hiddenTagRE = regexp.MustCompile(`(?i)<\s*/?\s*(important|instructions?|system|hidden|critical)(\s[^<>]{0,40})?>|<\s*/\s*(secret|admin|assistant|ai|model|prompt|note|context)\s*>|\[/?INST\]|<<\s*/?SYS\s*>>|<\|[a-z_\x{2581}]{2,40}\|>|<(start|end)_of_turn>`)
	concealRE   = []*regexp.Regexp{
		regexp.MustCompile(`(?i)\b(do\s+not|don'?t|never|must\s+not|should\s+not|without)\s+(tell|mention|inform|reveal|show|notify|notifying|alert|disclos(e|es|ing)|let(s|ting)?)(ing|s)?\b[^.!?\n]{0,80}\b(the\s+)?(user|human|operator)s?\b`),
		regexp.MustCompile(`(?i)\b(hide|conceal|keep)\b[^.!?\n]{0,40}\bfrom\s+(the\s+)?(user|human|operator)s?\b`),
		regexp.MustCompile(`(?i)\b(user|human)s?\s+(must|should|need|does|do)\s*(not|n't)\s+(know|see|notice|find\s+out|be\s+(told|informed|aware))\b`),
		regexp.MustCompile(`(?i)\bwithout\s+(the\s+)?(user|human|operator)(s|'s|s')?\s+(knowing|knowledge|noticing|seeing|finding\s+out|being\s+(told|informed|aware))\b`),
	}
	overrideRE = regexp.MustCompile(`(?i)\b(ignore|disregard|forget|override)\s+((all|any|and|the|of|your|these|those)\s+){0,4}(previous|prior|above|earlier|other|your|system)\s+(instructions|directions|directives|rules|guidelines|prompts?)\b`)
	// Files whose content is someone's credentials or another MCP client's
	// server list (with its secrets).
	credentialPathRE = regexp.MustCompile(`(?i)(~|\$home|%userprofile%)?/?\.ssh\b|\bid_(rsa|dsa|ecdsa|ed25519)\b|\.aws/(credentials|config)\b|~/\.aws\b|(^|[\s'"` + "`" + `(\[/~])\.env\b|\.netrc\b|\.npmrc\b|\.pypirc\b|\.git-credentials\b|\.docker/config\.json|\.kube/config\b|\.gnupg\b|/etc/(shadow|sudoers)\b|\.config/gcloud\b|claude_desktop_config\.json|\.claude\.json|\.cursor/mcp\.json|\.vscode/mcp\.json|windsurf/mcp_config\.json|cline_mcp_settings\.json|\.(bash|zsh)_history\b`)
	// Markup a rendered description (a client's tool list, a registry's
	// page) hides from the people who read it, while the model reads it
	// all: an HTML comment, a Markdown comment ([//]: # (…)), a link with
	// no text ([](…), ![](…)), an HTML element with the hidden attribute
	// or a style that hides it (display: none, visibility: hidden, a zero
	// font size or opacity).
	hiddenMarkupRE = regexp.MustCompile(`<!--|(?m)^[ \t]*\[[^\]\n]*\]:[ \t]*#|\[[ \t]*\]\(|` +
		`(?i)<[a-z][a-z0-9]*\s([^<>]*\s)?(hidden[\s/>=]|style\s*=\s*["']?[^<>"']*(display\s*:\s*none|visibility\s*:\s*hidden|(font-size|opacity)\s*:\s*0+(\.0+)?(px|em|rem|pt|%)?\s*([;"'>]|$)))`)
	// A run of base64 long enough to hold an instruction (18 bytes).
	base64RE = regexp.MustCompile(`[A-Za-z0-9+/_-]{24,}={0,2}`)
	// A credential path is an instruction when one of these verbs is near.
	instructionVerbRE = regexp.MustCompile(`(?i)\b(read|cat|open|load|include|send|pass|upload|copy|attach|provide|append|forward|extract|output|print|dump|exfiltrat\w*|contents?\s+of|put)\b`)
)

// verbWindow is how far from a credential path (in bytes, each side) an
// instruction verb makes it an instruction.
const verbWindow = 100

// Scan returns the findings of t, in the order of its fields (nil when it
// looks clean).
func (s Scanner) Scan(t catalog.Tool) []Finding {
	schema, ok := decodeSchema(t.InputSchema)
	return s.scan(t, schema, ok)
}

// lineRules are the rules ScanLine applies: words that address a model,
// and characters people cannot see. A program's error lines name
// credentials files ("cannot read ~/.aws/credentials"), colour themselves
// with terminal escapes, dump HTML pages and run long, and are shown as
// written, never rendered: those rules stay with tool definitions.
var lineRules = map[string]bool{
	RuleHiddenTag: true, RuleConceal: true, RuleOverride: true,
	RuleUnicodeTags: true, RuleInvisible: true, RuleBidi: true,
}

// ScanLine returns the findings of a line a backend wrote outside its tool
// definitions (a stderr line, which toolgate__server_status and a server's
// errors show the model) that address a model or hide text from people
// (nil when it looks clean). Field is "line".
func (s Scanner) ScanLine(line string) []Finding {
	sc := &scanner{Scanner: s}
	sc.text(line)
	out := sc.out[:0]
	for _, f := range sc.out {
		if lineRules[f.Rule] {
			f.Field = "line"
			out = append(out, f)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// decodeSchema decodes an input schema once for Hash and Scan (numbers
// kept as written); ok is false for one that is empty or not JSON.
func decodeSchema(raw json.RawMessage) (v any, ok bool) {
	if len(raw) == 0 {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if dec.Decode(&v) != nil {
		return nil, false
	}
	return v, true
}

// scan is Scan of a definition whose input schema is decoded.
func (s Scanner) scan(t catalog.Tool, schema any, ok bool) []Finding {
	return (&scanner{Scanner: s}).definition(t, schema, ok)
}

// definition scans the texts of t and of its decoded schema.
func (sc *scanner) definition(t catalog.Tool, schema any, ok bool) []Finding {
	if ok {
		sc.schema = schema
	}
	for _, f := range [...]struct{ name, text string }{{"name", t.Name}, {"title", t.Title}, {"description", t.Description}, {"annotations.title", AnnotationsTitle(t)}} {
		n := len(sc.out)
		sc.text(f.text)
		sc.named(n, f.name)
	}
	if ok {
		if err := duplicateKey(t.InputSchema); err != nil {
			// The walk reads the last value of the key, as Go's decoder
			// does; the model reads the schema's text, the other values
			// too.
			sc.out = append(sc.out, Finding{Rule: RuleDuplicateKey, Field: "inputSchema", Excerpt: clip(strconv.QuoteToASCII(err.Error()), 200)})
		}
		sc.path = append(sc.path, "inputSchema"...)
		sc.inSchema = true
		sc.walk(schema)
		sc.inSchema = false
	}
	// The output schema is shown to the model too (a full search_tools
	// answer): its texts are scanned as the input schema's are.
	if out, ok := decodeSchema(t.OutputSchema); ok {
		if err := duplicateKey(t.OutputSchema); err != nil {
			sc.out = append(sc.out, Finding{Rule: RuleDuplicateKey, Field: fieldOutputSchema, Excerpt: clip(strconv.QuoteToASCII(err.Error()), 200)})
		}
		sc.path = append(sc.path[:0], fieldOutputSchema...)
		sc.inSchema = true
		sc.walk(out)
		sc.inSchema = false
	}
	return sc.out
}

// duplicateKey returns the error naming the first object member of raw,
// a schema that decodes, whose name its object gives twice (nil for none).
func duplicateKey(raw json.RawMessage) error {
	if jsontext.Value(raw).IsValid(jsontext.AllowInvalidUTF8(true)) {
		return nil
	}
	dec := jsontext.NewDecoder(bytes.NewReader(raw), jsontext.AllowInvalidUTF8(true))
	_, err := dec.ReadValue()
	if err == nil {
		return nil
	}
	return err
}

// AnnotationsTitle is the title in t's annotations when it is not t's
// Title ("" otherwise): search_tools hands the annotations to the client
// as the backend declared them, so that title reaches the model too, and
// is scanned and hashed as the definition's other texts are. (A tool with
// no title of its own takes its annotations' one as Title:
// backend.Catalog.)
func AnnotationsTitle(t catalog.Tool) string {
	if !bytes.Contains(t.Annotations, []byte(`"title"`)) {
		return ""
	}
	var a struct {
		Title string `json:"title"`
	}
	if json.Unmarshal(t.Annotations, &a) != nil || a.Title == t.Title {
		return ""
	}
	return a.Title
}

// scanner is one scan's state: the findings so far and the path of the
// schema value being walked (made a string only for a finding).
type scanner struct {
	Scanner
	out  []Finding
	path []byte
	// schema is the decoded input schema, whose property names (params,
	// lower case, found at the first need) name where to: "put it in
	// notes" when notes is one.
	schema any
	params map[string]bool
	// inSchema is set while the input schema's texts are scanned: each
	// describes an argument, so an instruction there need not say where.
	inSchema bool
	// exhaustive runs every expression on every text (tests: the hints
	// must never change what a scan finds).
	exhaustive bool
}

// named names the findings from the n-th on after field.
func (sc *scanner) named(n int, field string) {
	for i := n; i < len(sc.out); i++ {
		sc.out[i].Field = field
	}
}

// atPath names the findings from the n-th on after the path walked.
func (sc *scanner) atPath(n int) {
	if len(sc.out) > n {
		sc.named(n, string(sc.path))
	}
}

// walk scans every string of a decoded schema: keys (property names are
// shown to the model too) and values (descriptions, titles, defaults,
// enums, examples …).
func (sc *scanner) walk(v any) {
	switch x := v.(type) {
	case string:
		n := len(sc.out)
		sc.text(x)
		sc.atPath(n)
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		n := len(sc.path)
		for _, k := range keys {
			sc.path = append(append(sc.path[:n], '.'), k...)
			// A key is scanned as every other text: a property name
			// is shown to the model as much as its description.
			m := len(sc.out)
			sc.text(k)
			sc.atPath(m)
			sc.walk(x[k])
		}
		sc.path = sc.path[:n]
	case []any:
		n := len(sc.path)
		for i, e := range x {
			sc.path = append(strconv.AppendInt(append(sc.path[:n], '['), int64(i), 10), ']')
			sc.walk(e)
		}
		sc.path = sc.path[:n]
	}
}

// Words without which a rule cannot match: each rule's expression runs
// only on a text that holds one (in any case), which keeps a scan to a few
// microseconds per tool — most texts hold none.
var (
	tagHints      = []string{"<", "[inst", "[/inst"}
	concealHints  = []string{"user", "human", "operator"}
	overrideHints = []string{"ignore", "disregard", "forget", "override"}
	// One literal that each alternative of credentialPathRE needs, whole
	// ("cursor" alone is every paginated API's parameter).
	pathHints = []string{".ssh", "id_rsa", "id_dsa", "id_ecdsa", "id_ed25519", ".aws", ".env", ".netrc", ".npmrc", ".pypirc", ".git-credentials",
		".docker/config.json", ".kube/config", ".gnupg", "/etc/shadow", "/etc/sudoers", ".config/gcloud", "claude_desktop_config.json", ".claude.json",
		".cursor/mcp.json", ".vscode/mcp.json", "windsurf/mcp_config.json", "cline_mcp_settings.json", "_history"}
	// … and one of these: each conceal expression has a negation or a
	// verb of hiding ("don'?t" matches "dont").
	concealVerbHints = []string{"not", "n't", "dont", "never", "without", "hide", "conceal", "keep"}
	markupHints      = []string{"<!--", "]:", "](", "hidden", "style"}
	imageHints       = []string{"![", "<img", "<image", "<source", "<video", "<input"}
)

// The hint groups, as bits of a hintMask.
const (
	hintTag hintMask = 1 << iota
	hintConceal
	hintConcealVerb
	hintOverride
	hintPath
	hintMarkup
	hintImage
	hintConv
	hintSoFar
	hintSoFarNoun
	hintSaid
	hintMsgQual
	hintMsgNoun
	hintSys
	hintYour
	hintSysNoun
	hintSysMod
	hintQuant
	hintOther
	hintOtherNoun
	hintCred
	hintCredQual
	hintAll = 1<<iota - 1
)

type hintMask uint32

// hint is one word of a hint group.
type hint struct {
	s   string
	bit hintMask
}

// hintsByFirst lists each hint under its first byte, so that one pass over
// a text finds every group it holds a hint of; wordHintsByFirst those that
// are looked for only where a word starts (the exfiltration rule's: each
// starts a word of what its expression matches), which keeps the pass
// short with many of them.
var hintsByFirst, wordHintsByFirst = byFirst(map[hintMask][]string{hintTag: tagHints, hintConceal: concealHints, hintConcealVerb: concealVerbHints,
	hintOverride: overrideHints, hintPath: pathHints, hintMarkup: markupHints, hintImage: imageHints}), byFirst(exfilHints)

func byFirst(groups map[hintMask][]string) (t [256][]hint) {
	for bit, words := range groups {
		for _, w := range words {
			if len(w) > 1 && w[1] == ' ' {
				panic("quarantine: a hint's second byte is a letter (hints checks it alone): " + w)
			}
			t[w[0]] = append(t[w[0]], hint{w, bit})
		}
	}
	return t
}

// hints returns the groups whose hints t holds, ignoring ASCII case. A
// text that is not all ASCII gets every group: case folding there can make
// a hint of other letters (the expressions' (?i) matches "uſer" for
// "user"), so every expression runs.
func hints(t string, ascii bool) hintMask {
	if !ascii {
		return hintAll
	}
	var m hintMask
	for i := 0; i < len(t); i++ {
		// The second byte, checked before the call: most hints of the
		// first byte differ there.
		c, d := lowerASCII(t[i]), byte(0)
		if i+1 < len(t) {
			d = lowerASCII(t[i+1])
		}
		for _, h := range hintsByFirst[c] {
			if m&h.bit == 0 && (len(h.s) == 1 || h.s[1] == d) && hasPrefixFold(t[i:], h.s) {
				m |= h.bit
			}
		}
		if i > 0 && isWordByte(t[i-1]) {
			continue
		}
		for _, h := range wordHintsByFirst[c] {
			if m&h.bit == 0 && (len(h.s) == 1 || h.s[1] == d) && hasPrefixFold(t[i:], h.s) {
				m |= h.bit
			}
		}
	}
	return m
}

// isWordByte reports the bytes \w matches (\b is between one and another).
func isWordByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_'
}

func lowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// hasPrefixFold reports whether the ASCII text t starts with the
// lowercase hint h, in any case; a space of h stands for a run of white
// space (what \s+ matches: "so far" is a hint of "so\n far").
func hasPrefixFold(t, h string) bool {
	i := 0
	for j := 0; j < len(h); j++ {
		if h[j] == ' ' {
			k := i
			for k < len(t) && isSpace(t[k]) {
				k++
			}
			if k == i {
				return false
			}
			i = k
			continue
		}
		if i >= len(t) || lowerASCII(t[i]) != h[j] {
			return false
		}
		i++
	}
	return true
}

// isSpace reports the bytes \s matches.
func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r' }

// text applies every rule to one text (the findings' Field is for the
// caller to fill).
func (sc *scanner) text(t string) {
	if t == "" {
		return
	}
	out := &sc.out
	ascii, control, b64 := classify(t)
	if !ascii {
		sc.chars(t)
	}
	if control {
		// An escape sequence in a description can hide or rewrite it on
		// the terminal of the person reviewing it (`toolgate search`,
		// `tools quarantined`); no definition needs one.
		*out = append(*out, Finding{Rule: RuleControl, Excerpt: codepoints(controls(t))})
	}
	maxLen := sc.MaxTextLength
	if maxLen <= 0 {
		maxLen = DefaultMaxTextLength
	}
	if len(t) > maxLen { // bytes ≥ characters: count only when it may be over
		if n := utf8.RuneCountInString(t); n > maxLen {
			*out = append(*out, Finding{Rule: RuleOverlong, Excerpt: fmt.Sprintf("%d characters (limit %d)", n, maxLen)})
		}
	}
	m := hints(t, ascii)
	if sc.exhaustive {
		m = hintAll
	}
	if m&hintMarkup != 0 {
		if loc := hiddenMarkupRE.FindStringIndex(t); loc != nil {
			*out = append(*out, Finding{Rule: RuleHiddenMarkup, Excerpt: excerpt(t, loc)})
		}
	}
	n := len(*out)
	sc.phrases(t, m, "")
	if !ascii {
		// Letters of other scripts that look like Latin ones (Cyrillic о,
		// Greek ο), fullwidth forms and typographic quotes: a model reads
		// the words they spell.
		if f := fold(t); f != t {
			sc.phrases(f, hintAll, "read as ASCII: ", sc.found(n)...)
		}
	}
	if strings.Contains(t, "&") {
		// HTML character references (&lt;, &#73;), which a rendered
		// page shows as the characters they stand for.
		if u := html.UnescapeString(t); u != t {
			sc.phrases(foldIf(u), hintAll, "as HTML reads: ", sc.found(n)...)
		}
	}
	if strings.Contains(t, `\`) {
		// Escapes of JSON, JavaScript, Go, Python (\u003c, \x3c), which a
		// model reads as the characters.
		if u := replaceRuns(t, codeEscapeRE, unescapeCode); u != t {
			sc.phrases(foldIf(u), hintAll, "as escapes read: ", sc.found(n)...)
		}
	}
	if strings.Contains(t, "%") {
		// Percent-encoding (%3C, %20), as a URL's query carries text.
		if u := replaceRuns(t, percentRE, unescapePercent); u != t {
			sc.phrases(foldIf(u), hintAll, "URL-decoded: ", sc.found(n)...)
		}
	}
	if b64 || sc.exhaustive {
		for _, loc := range base64RE.FindAllStringIndex(t, -1) {
			if d, ok := decodeBase64(t[loc[0]:loc[1]]); ok {
				sc.phrases(d, hintAll, "base64 of: ", sc.found(n)...)
			}
		}
	}
}

var (
	// An escape of one character in a programming language's string.
	codeEscapeRE = regexp.MustCompile(`\\(u[0-9A-Fa-f]{4}|U[0-9A-Fa-f]{8}|x[0-9A-Fa-f]{2})`)
	// A run of percent-encoded bytes.
	percentRE = regexp.MustCompile(`(%[0-9A-Fa-f]{2})+`)
)

// replaceRuns is t with each match of re replaced by what decode makes of
// it, or left as it is where decode fails.
func replaceRuns(t string, re *regexp.Regexp, decode func(string) (string, bool)) string {
	return re.ReplaceAllStringFunc(t, func(run string) string {
		if d, ok := decode(run); ok {
			return d
		}
		return run
	})
}

// unescapeCode is the character one escape (\u003c) stands for.
func unescapeCode(esc string) (string, bool) {
	r, _, tail, err := strconv.UnquoteChar(esc, '"')
	if err != nil || tail != "" {
		return "", false
	}
	return string(r), true
}

// unescapePercent is the text a run of percent-encoded bytes stands for,
// when it is UTF-8.
func unescapePercent(run string) (string, bool) {
	d, err := url.PathUnescape(run)
	return d, err == nil && utf8.ValidString(d)
}

// foldIf is u folded (fold) when it is not all ASCII.
func foldIf(u string) string {
	if isASCII(u) {
		return u
	}
	return fold(u)
}

// found lists the rules of the findings from the n-th on.
func (sc *scanner) found(n int) []string {
	var rules []string
	for _, f := range sc.out[n:] {
		rules = append(rules, f.Rule)
	}
	return rules
}

// phrases applies the rules that read words (tags, conceal, override,
// credential paths, remote images, context exfiltration) to t, those of the hint groups m, but the rules in
// skip; label leads each excerpt (what t is read as).
func (sc *scanner) phrases(t string, m hintMask, label string, skip ...string) {
	out := &sc.out
	add := func(rule string, loc []int) {
		if !slices.Contains(skip, rule) {
			*out = append(*out, Finding{Rule: rule, Excerpt: label + excerpt(t, loc)})
		}
	}
	if m&hintTag != 0 {
		if loc := hiddenTagRE.FindStringIndex(t); loc != nil {
			add(RuleHiddenTag, loc)
		}
	}
	if m&hintConceal != 0 && m&hintConcealVerb != 0 {
		for _, re := range concealRE {
			if loc := re.FindStringIndex(t); loc != nil {
				add(RuleConceal, loc)
				break
			}
		}
	}
	if m&hintOverride != 0 {
		if loc := overrideRE.FindStringIndex(t); loc != nil {
			add(RuleOverride, loc)
		}
	}
	if m&hintPath != 0 {
		for _, loc := range credentialPathRE.FindAllStringIndex(t, -1) {
			lo, hi := max(loc[0]-verbWindow, 0), min(loc[1]+verbWindow, len(t))
			if instructionVerbRE.MatchString(t[lo:loc[0]]) || instructionVerbRE.MatchString(t[loc[1]:hi]) {
				add(RuleCredentialPath, []int{lo, hi})
				break
			}
		}
	}
	if m&hintImage != 0 {
		if loc := remoteImage(t); loc != nil {
			add(RuleRemoteImage, loc)
		}
	}
	if loc := sc.contextExfil(t, m); loc != nil {
		add(RuleContextExfil, loc)
	}
}

// fold is t with each character that stands for ASCII written as that
// ASCII: its compatibility form without its accents (NFKD: fullwidth Ｉ,
// ＜, ligatures, Í), its UTS #39 skeleton (Cyrillic о, Greek ο,
// typographic quotes) or the letter it is a small capital of (ᴅ), when
// that is ASCII; the invisible and reordering characters chars flags, and
// combining marks, dropped, as a model reads past them.
func fold(t string) string {
	var b strings.Builder
	for _, r := range t {
		switch {
		case r < utf8.RuneSelf:
			b.WriteRune(r)
		case isTag(r) || r == 0x200D || isBidi(r) || isInvisible(r) || isSelector(r):
		case unicode.In(r, unicode.Mn, unicode.Me):
			// A combining mark (an accent, a stroke through the letter):
			// a model reads the letter under it.
		default:
			// Its compatibility decomposition without its marks (NFKD:
			// fullwidth Ｉ, ligatures, accented Í), else the UTS #39
			// skeleton of that (Cyrillic о, ӧ), else the letter a Latin
			// small capital is (ᴅ).
			c := unmarked(norm.NFKD.String(string(r)))
			if isASCII(c) {
				b.WriteString(c)
			} else if k := confusables.Skeleton(strings.ToLower(c)); isASCII(k) {
				b.WriteString(k)
			} else if k := smallCapital(r); k != 0 {
				b.WriteByte(k)
			} else {
				b.WriteRune(r)
			}
		}
	}
	return b.String()
}

// unmarked is s without its combining marks.
func unmarked(s string) string {
	if !strings.ContainsFunc(s, func(r rune) bool { return unicode.In(r, unicode.Mn, unicode.Me) }) {
		return s
	}
	return strings.Map(func(r rune) rune {
		if unicode.In(r, unicode.Mn, unicode.Me) {
			return -1
		}
		return r
	}, s)
}

// smallCapitalName leads the Unicode name of each Latin small capital
// ("LATIN LETTER SMALL CAPITAL N", ɴ), a letter that UTS #39's skeletons
// map to the ASCII one it looks like only in part (ᴏ and ᴜ, not ᴅ or ɴ).
const smallCapitalName = "LATIN LETTER SMALL CAPITAL "

// smallCapital is the lowercase ASCII letter r is a small capital of, or 0.
func smallCapital(r rune) byte {
	if !unicode.Is(unicode.Latin, r) {
		return 0
	}
	name, ok := strings.CutPrefix(runenames.Name(r), smallCapitalName)
	if !ok || len(name) != 1 || name[0] < 'A' || name[0] > 'Z' {
		return 0
	}
	return name[0] + 'a' - 'A'
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return s != ""
}

// decodeBase64 decodes a run of base64 (either alphabet, padded or not)
// that holds text: valid UTF-8 with a space, no control characters but
// tab and newlines. A run that holds bytes (a key, a hash, an image) is
// not text, and not read.
func decodeBase64(run string) (string, bool) {
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		b, err := enc.DecodeString(run)
		if err != nil {
			continue
		}
		d := string(b)
		if !utf8.ValidString(d) || !strings.ContainsRune(d, ' ') || len(controls(d)) > 0 || strings.ContainsRune(d, utf8.RuneError) {
			return "", false
		}
		return d, true
	}
	return "", false
}

// classify reports, in one pass over t, whether it is all ASCII (which
// has none of the characters chars looks for), whether it holds a control
// character (see controls), and whether it holds a run that base64RE
// matches (24 characters of base64 or more).
func classify(t string) (ascii, control, b64 bool) {
	ascii = true
	run := 0
	for i := 0; i < len(t); i++ {
		c := t[i]
		switch {
		case c >= utf8.RuneSelf:
			ascii = false
		case c < 0x20 && c != '\t' && c != '\n' && c != '\r', c == 0x7F:
			control = true
		}
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '+' || c == '/' || c == '_' || c == '-' {
			if run++; run >= 24 {
				b64 = true
			}
		} else {
			run = 0
		}
	}
	if !ascii && !control {
		control = len(controls(t)) > 0 // a C1 control is two bytes
	}
	return ascii, control, b64
}

// controls lists the C0 and C1 control characters of t (and DEL), but
// tab, newline and carriage return.
func controls(t string) []rune {
	var out []rune
	for _, r := range t {
		if isControl(r) {
			out = append(out, r)
		}
	}
	return out
}

// chars flags invisible and reordering characters (one finding per rule;
// the caller fills Field).
func (sc *scanner) chars(t string) {
	out := &sc.out
	var tags strings.Builder
	var tagged bool
	var invisible, bidi []rune
	prev := rune(0)
	runes := []rune(t)
	for i, r := range runes {
		switch {
		case isTag(r):
			tagged = true
			if c, ok := tagASCII(r); ok {
				tags.WriteRune(c)
			}
		case r == 0x200D:
			// A zero-width joiner between two pictographs builds one
			// emoji (👩‍💻); anywhere else it hides.
			next := rune(0)
			if i+1 < len(runes) {
				next = runes[i+1]
			}
			if !pictograph(prev) || !pictograph(next) {
				invisible = append(invisible, r)
			}
		case isSelector(r):
			// A variation selector picks the form of the character
			// before it (❤️, ↩︎, a Mongolian letter's): one, after a
			// character that has forms. A run of them, or one after a
			// Latin letter, a space or nothing, carries hidden data.
			before := rune(' ')
			if i > 0 {
				before = runes[i-1]
			}
			if isSelector(before) || unicode.IsSpace(before) || before < utf8.RuneSelf && unicode.IsLetter(before) {
				invisible = append(invisible, r)
			}
		case isBidi(r):
			bidi = append(bidi, r)
		case isInvisible(r):
			invisible = append(invisible, r)
		}
		if r != 0xFE0F { // the emoji presentation selector follows the pictograph
			prev = r
		}
	}
	if tagged {
		*out = append(*out, Finding{Rule: RuleUnicodeTags, Excerpt: hiddenTextLabel + clip(strconv.Quote(tags.String()), 160)})
	}
	if len(invisible) > 0 {
		*out = append(*out, Finding{Rule: RuleInvisible, Excerpt: codepoints(invisible)})
	}
	if len(bidi) > 0 {
		*out = append(*out, Finding{Rule: RuleBidi, Excerpt: codepoints(bidi)})
	}
}

// hiddenTextLabel leads the text that Unicode tag characters hide, decoded
// and quoted, wherever a reviewer is shown it (a finding's excerpt, a
// change's diff: reveal).
const hiddenTextLabel = "hidden text "

// isTag reports the Unicode tag characters (U+E0000–E007F): invisible,
// but a model reads the ASCII they mirror.
func isTag(r rune) bool { return r >= 0xE0000 && r <= 0xE007F }

// tagASCII is the ASCII character tag character r hides, if it hides one.
func tagASCII(r rune) (rune, bool) {
	if r >= 0xE0020 && r <= 0xE007E {
		return r - 0xE0000, true
	}
	return 0, false
}

// isControl reports the C0 and C1 control characters (and DEL) but tab,
// newline and carriage return.
func isControl(r rune) bool {
	return (r < 0x20 && r != '\t' && r != '\n' && r != '\r') || r >= 0x7F && r <= 0x9F
}

// isInvisible reports the characters that render as nothing: zero-width
// characters, fillers, the format characters (Unicode's Cf: word joiner,
// interlinear annotation, musical and shorthand format controls …, but
// the Arabic and Syriac signs that show with the digits after them), the
// other default-ignorable ones (Khmer inherent vowels, Hangul fillers,
// unassigned U+2065 …) and the variation selectors of the supplement
// (which can carry bytes of hidden data). Tags, bidi controls and the
// variation selectors before U+E0100 are told apart by the caller.
func isInvisible(r rune) bool {
	switch {
	case r < 0xA0:
		return false
	case r >= 0x0600 && r <= 0x0605, r == 0x06DD, r == 0x070F, r == 0x0890, r == 0x0891, r == 0x08E2, r == 0x110BD, r == 0x110CD:
		return false // prepended concatenation marks: they show
	}
	return r >= 0xE0100 && r <= 0xE01EF || unicode.Is(unicode.Cf, r) || unicode.Is(unicode.Other_Default_Ignorable_Code_Point, r) ||
		r == 0x180E || r == 0x3164 || r == 0xFFA0 || r == 0x115F || r == 0x1160
}

// isSelector reports the variation selectors a character may take (VS1–
// VS16, the Mongolian free variation selectors).
func isSelector(r rune) bool {
	return r >= 0xFE00 && r <= 0xFE0F || r >= 0x180B && r <= 0x180D || r == 0x180F
}

// isBidi reports the bidirectional formatting characters, which make
// text read differently from how it is shown.
func isBidi(r rune) bool {
	return r >= 0x202A && r <= 0x202E || r >= 0x2066 && r <= 0x2069 || r == 0x200E || r == 0x200F || r == 0x061C
}

// pictograph reports the symbols emoji sequences join.
func pictograph(r rune) bool {
	return r >= 0x1F000 && r <= 0x1FAFF || r >= 0x2600 && r <= 0x27BF || unicode.Is(unicode.So, r)
}

// codepoints lists the distinct characters as U+XXXX.
func codepoints(rs []rune) string {
	slices.Sort(rs)
	rs = slices.Compact(rs)
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = fmt.Sprintf("U+%04X", r)
	}
	return clip(strings.Join(parts, " "), 160)
}

// excerpt quotes t[loc[0]:loc[1]] with a little context, escaping what is
// not printable ASCII.
func excerpt(t string, loc []int) string {
	lo, hi := max(loc[0]-30, 0), min(loc[1]+30, len(t))
	for lo > 0 && !utf8.RuneStart(t[lo]) {
		lo--
	}
	for hi < len(t) && !utf8.RuneStart(t[hi]) {
		hi++
	}
	return clip(strconv.QuoteToASCII(t[lo:hi]), 200)
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
