package catalog

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"slices"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
	"unsafe"
)

// param is one input-schema property as the index sees it.
type param struct{ Name, Description string }

// schemaParams returns the top-level properties of a JSON Schema object (and
// one level of nested object properties), sorted by name. A schema that is
// not an object, or not JSON at all, has no parameters: the index never
// rejects a tool for its schema.
func schemaParams(schema json.RawMessage) []param {
	if len(schema) == 0 {
		return nil
	}
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if json.Unmarshal(schema, &s) != nil {
		return nil
	}
	var out []param
	for name, raw := range s.Properties {
		var p struct {
			Description string                     `json:"description"`
			Title       string                     `json:"title"`
			Properties  map[string]json.RawMessage `json:"properties"`
		}
		_ = json.Unmarshal(raw, &p)
		desc := p.Description
		if desc == "" {
			desc = p.Title
		}
		out = append(out, param{name, desc})
		for sub, subRaw := range p.Properties {
			var sp struct {
				Description string `json:"description"`
			}
			_ = json.Unmarshal(subRaw, &sp)
			out = append(out, param{name + "." + sub, sp.Description})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// NameWords turns an identifier into space-separated lower-case words:
// "list_directory" → "list directory", "getUserID" → "get user id".
func NameWords(name string) string {
	parts := SplitIdent([]byte(name))
	words := make([]string, len(parts))
	for i, p := range parts {
		words[i] = strings.ToLower(string(p))
	}
	return strings.Join(words, " ")
}

// DocumentText is the text embedded for a tool: the name as words, the
// title and the description. Parameters are left out on purpose: on the
// azure-mcp bench split, adding them (names and descriptions) dropped vector
// Hit@1 from 80.6 to 60.8 (names only: 79.3) — generic parameters such as
// tenant, subscription and retry policy make every tool look alike, and
// MiniLM reads only the first 128 tokens anyway. They still count in BM25.
// The text changes only when the tool does, so the embed cache keyed on it
// makes unchanged tools free to re-index.
func DocumentText(t Tool) string {
	var b strings.Builder
	b.WriteString(NameWords(t.Name))
	if t.Title != "" {
		b.WriteString(". ")
		b.WriteString(t.Title)
	}
	if d := strings.TrimSpace(t.Description); d != "" {
		b.WriteString(". ")
		b.WriteString(d)
	}
	return b.String()
}

// Views are the texts embedded for a tool: its DocumentText, its name (as
// words, with the title) and the lead sentence of its description written
// as a request (RequestView); empty and repeated texts are left out. The
// tool's vector is the normalised sum of their vectors (index.Build): the
// full text carries every detail, while the name and the lead sentence say
// what the tool is for without the details (returned fields, options,
// caveats) that pull a long description's one vector away from the queries
// that ask for it. Measured on the bench dev splits (hybrid Hit@1 at
// weights 0.4/0.6, azure-mcp / metatool / bundled): full text alone 86.6 /
// 55.1 / 71.6; the three views 90.1 / 56.5 / 73.1; full text and name
// 88.8 / 54.2; full text and lead sentence 89.7 / 55.8. The extra texts
// are short: on the synthetic 10,000-tool catalog they add 15 % (names,
// 7,786 distinct) and 47 % (lead sentences) to the 288,491 tokens of the
// full texts; the request form adds five tokens to each lead sentence.
func Views(t Tool) []string {
	views := make([]string, 0, 3)
	add := func(s string) {
		if s == "" {
			return
		}
		for _, v := range views {
			if v == s {
				return
			}
		}
		views = append(views, s)
	}
	add(DocumentText(t))
	name := NameWords(t.Name)
	if t.Title != "" {
		name += ". " + t.Title
	}
	add(name)
	add(RequestView(LeadSentence(t.Description)))
	return views
}

// RequestPrefix starts the lead-sentence view (RequestView); the embedder
// puts the same words before every search query (the model manifest's
// query_prefix), so both sides read as requests.
const RequestPrefix = "I need a tool to "

// RequestView is a lead sentence written as a user's request, as queries
// are: "Lists the storage accounts." → "I need a tool to lists the storage
// accounts.", "Get the 2-day air quality forecast" → "I need a tool to get
// the 2-day air quality forecast". The first letter is lowered unless the
// first word is an acronym ("AI video generation" stays). "" stays "".
// Measured on the bench dev splits with the query prefix (README, "Ranking
// quality", round 7): replacing the plain lead sentence by this view lifts
// zero-shot hybrid Hit@1 where the prefixed query alone loses azure-mcp
// queries, at no embedding cost.
func RequestView(lead string) string {
	if lead == "" {
		return ""
	}
	first, _, _ := strings.Cut(lead, " ")
	if !(utf8.RuneCountInString(first) > 1 && strings.ToUpper(first) == first) {
		r, n := utf8.DecodeRuneInString(lead)
		lead = string(unicode.ToLower(r)) + lead[n:]
	}
	return RequestPrefix + lead
}

// LeadSentence is the description's first sentence (or first paragraph,
// when that ends first), white space collapsed. A sentence ends at '.',
// '!' or '?' followed by white space and then a capital letter, a digit or
// an opening quote or bracket, so "e.g. a file" does not end one.
func LeadSentence(desc string) string {
	desc = strings.TrimSpace(desc)
	end := len(desc)
	for i := 0; i < len(desc); i++ {
		c := desc[i]
		if c == '\n' {
			// A blank line ends a paragraph.
			j := i + 1
			for j < len(desc) && (desc[j] == ' ' || desc[j] == '\t' || desc[j] == '\r') {
				j++
			}
			if j < len(desc) && desc[j] == '\n' {
				end = i
				break
			}
			continue
		}
		if c != '.' && c != '!' && c != '?' {
			continue
		}
		j := i + 1
		for j < len(desc) && (desc[j] == ' ' || desc[j] == '\t' || desc[j] == '\n' || desc[j] == '\r') {
			j++
		}
		if j == i+1 || j == len(desc) {
			continue
		}
		r, _ := utf8.DecodeRuneInString(desc[j:])
		if unicode.IsUpper(r) || unicode.IsDigit(r) || strings.ContainsRune("\"'`([*#-", r) {
			end = i + 1
			break
		}
	}
	return strings.Join(strings.Fields(desc[:end]), " ")
}

// ParamsText is what the BM25 "params" field holds: parameter names (the
// analyzer splits them) and descriptions, cut at MaxDescription as a
// tool's description is (the parameters past it left out): the keyword
// index keeps some 150 times the bytes of a long word (a parameter
// description of 1 MB kept 153 MB of heap), and a server's schemas may
// hold megabytes.
func ParamsText(t Tool) string {
	var b strings.Builder
	for _, p := range schemaParams(t.InputSchema) {
		line := p.Name + " " + p.Description + "\n"
		if b.Len()+len(line) > MaxDescription {
			b.WriteString(CutBytes(line, MaxDescription-b.Len()))
			break
		}
		b.WriteString(line)
	}
	return b.String()
}

// Fingerprint identifies a catalog: the hex SHA-256 of every tool's fields
// (annotations and output schema included: they are served from the
// catalog snapshot) in ID order, so that listing order does not matter. An
// output schema is hashed only when the tool has one, its length marked
// (outputMark) so that it cannot read as the next tool's server: a catalog
// without output schemas keeps the fingerprint it had before they were
// kept. Schemas are hashed as
// they are (only surrounding space and a JSON null are normalised): backends
// serialise them the same way every time, and re-compacting every schema on
// every start cost more than the rest of opening an index. A schema that
// only changed its layout costs a rebuild that re-embeds nothing.
func Fingerprint(tools []Tool) string {
	order := make([]int, len(tools))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return CompareID(&tools[a], &tools[b]) })
	h := sha256.New()
	var n [8]byte
	field := func(s []byte) {
		binary.LittleEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write(s)
	}
	str := func(s string) { field(unsafe.Slice(unsafe.StringData(s), len(s))) }
	for _, i := range order {
		t := &tools[i]
		str(t.Server)
		str(t.Name)
		str(t.Title)
		str(t.Description)
		field(normSchema(t.InputSchema))
		field(normSchema(t.Annotations))
		if out := normSchema(t.OutputSchema); len(out) > 0 {
			binary.LittleEndian.PutUint64(n[:], uint64(len(out))|outputMark)
			h.Write(n[:])
			h.Write(out)
		}
		if t.Language != "" {
			// Marked as the output schema is: a catalog without
			// languages keeps the fingerprint it had before them.
			binary.LittleEndian.PutUint64(n[:], uint64(len(t.Language))|languageMark)
			h.Write(n[:])
			h.Write([]byte(t.Language))
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// languageMark marks the length of a tool's language in Fingerprint's
// input, as outputMark an output schema's.
const languageMark = 1 << 62

// outputMark marks the length of an output schema in Fingerprint's input:
// no other field's length has that bit.
const outputMark = 1 << 63

// SameSchema reports whether two input schemas (or two annotation objects)
// are the same bytes once surrounding space and a JSON null are normalised
// (what Fingerprint hashes).
func SameSchema(a, b json.RawMessage) bool { return bytes.Equal(normSchema(a), normSchema(b)) }

func normSchema(raw json.RawMessage) []byte {
	raw = bytes.TrimSpace(raw)
	if string(raw) == "null" {
		return nil
	}
	return raw
}

// SplitIdent returns the parts of an identifier. Apostrophes inside a word are
// dropped rather than split on ("don't" → "dont").
func SplitIdent(b []byte) [][]byte {
	var parts [][]byte
	var cur []byte
	flush := func() {
		if len(cur) > 0 {
			parts = append(parts, cur)
			cur = nil
		}
	}
	runes := []rune(string(b))
	for i, r := range runes {
		if r == '\'' || r == '’' {
			continue
		}
		if !IsWordRune(r) {
			flush()
			continue
		}
		if len(cur) > 0 && i > 0 {
			prev := runes[i-1]
			var next rune
			if i+1 < len(runes) {
				next = runes[i+1]
			}
			switch {
			case unicode.IsLower(prev) && unicode.IsUpper(r):
				flush() // getUser → get|User
			case unicode.IsUpper(prev) && unicode.IsUpper(r) && unicode.IsLower(next):
				flush() // HTTPServer → HTTP|Server
			case unicode.IsDigit(prev) != unicode.IsDigit(r) && IsWordRune(prev):
				flush() // v2beta → v|2|beta
			}
		}
		cur = utf8.AppendRune(cur, r)
	}
	flush()
	return parts
}

// IsWordRune reports whether r belongs to a word (letters, digits and
// combining marks, the spacing vowel signs of Indic scripts among them:
// without them फ़ाइल was two words and Tamil lost its vowels); the index's
// tokenizer uses the same rule.
func IsWordRune(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.In(r, unicode.Mn, unicode.Mc, unicode.Me)
}
