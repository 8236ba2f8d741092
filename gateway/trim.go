package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/plural"
)

// DefaultMaxResultBytes bounds the text of one execute_tool result
// (Options.MaxResultBytes; the config's maxResultBytes): the bytes of its
// text blocks, embedded text resources and structuredContent's JSON. It is
// Claude Code's own cap on an MCP tool's output (MAX_MCP_OUTPUT_TOKENS,
// 25,000 tokens) at about four bytes a token, so an agent never gets more
// through toolgate than that client would show its model; the results of
// the bundled servers' tools are 0.1 to 6 KB (a log dump or a file read
// of megabytes used to reach the agent whole).
const DefaultMaxResultBytes = 100_000

// maxTrimDepth is the deepest JSON nesting trimJSON follows (that of
// encoding/json's decoder); a text nested deeper is cut as text.
const maxTrimDepth = 10000

// Trimmed says what execute_tool left out of a result over its bound
// (Options.MaxResultBytes): the server and tool, the bound, the bytes of
// text the backend's result held and how many of them were left out.
type Trimmed struct {
	Server, Tool string
	Limit        int
	Bytes, Cut   int
	// structured says the structuredContent was cut or left out.
	structured bool
}

// trimming is what trimResult did to each part, for the note.
type trimming struct {
	limit, total, kept int
	cutBlock           int    // bytes the block cut short had (0: none)
	cutAt              int    // and where it was cut
	cutHow             string // how (cutText)
	dropped            int    // text blocks left out whole
	scBytes            int    // structuredContent's JSON (0: none, or kept whole)
	scKept             int    // bytes of it kept (0: left out)
}

// trimResult is res with its text bounded by limit bytes (a copy when it
// is over): text blocks and embedded text resources in order, then
// structuredContent's JSON with what is left (left out when that is less
// than a tenth of the bound). The first block that does not fit is cut,
// at a line end near the bound or else between two characters (never
// inside a UTF-8 sequence); a block that holds JSON is cut as JSON
// (trimJSON), so that it still parses. When less than a tenth of the
// bound is left for it, it is left out instead (the last of many small
// blocks is not worth a cut). The blocks after it that hold text are left
// out; images, audio, blobs and resource links stay (a cut image
// is no image; a model sees one by its pixels, not its bytes). A text
// block at the end says what was left out and how to ask for less (with
// the arguments of the tool's input schema that may: narrowingArgs). ok
// is false when res is within the bound.
func trimResult(res *mcp.CallToolResult, limit int, id string, schema json.RawMessage) (out *mcp.CallToolResult, t Trimmed, ok bool) {
	if res == nil || limit <= 0 {
		return res, t, false
	}
	// structuredContent's JSON is made once, to be counted and, when the
	// result is over, trimmed: a decoded one of megabytes was encoded
	// twice (BenchmarkBigResult).
	raw := structuredJSON(res.StructuredContent)
	total := len(raw)
	for _, c := range res.Content {
		if s, set := textOf(c); set != nil {
			total += len(s)
		}
	}
	if total <= limit {
		return res, t, false
	}
	tr := trimming{limit: limit, total: total}
	room := limit
	o := *res
	o.Content = make([]mcp.Content, 0, len(res.Content)+1)
	for _, c := range res.Content {
		s, set := textOf(c)
		switch {
		case set == nil:
			o.Content = append(o.Content, c)
		case len(s) <= room && tr.cutBlock == 0 && tr.dropped == 0:
			o.Content = append(o.Content, c)
			room -= len(s)
		case tr.cutBlock == 0 && tr.dropped == 0 && room >= limit/10:
			kept, how := cutText(s, room)
			tr.cutBlock, tr.cutAt, tr.cutHow = len(s), len(kept), how
			o.Content = append(o.Content, set(kept))
			room -= len(kept)
		default:
			tr.dropped++
		}
	}
	if len(raw) > 0 {
		switch {
		case len(raw) <= room:
			room -= len(raw)
		default:
			// Cut to less than a tenth of the bound, it would be an
			// outline of empty arrays that tells the agent nothing.
			tr.scBytes = len(raw)
			o.StructuredContent = nil
			if room < limit/10 {
				break
			}
			if kept, _, err := trimJSON(bytes.NewReader(raw), room); err == nil && len(kept) > 0 {
				o.StructuredContent = json.RawMessage(kept)
				tr.scKept = len(kept)
				room -= len(kept)
			}
		}
	}
	tr.kept = limit - room
	o.Content = append(o.Content, &mcp.TextContent{Text: tr.note(id, narrowingArgs(schema))})
	return &o, Trimmed{Limit: limit, Bytes: total, Cut: total - tr.kept, structured: tr.scBytes > 0}, true
}

// note says what trimResult left out and what the agent can do.
func (tr trimming) note(id string, narrowing []string) string {
	var parts []string
	if tr.cutBlock > 0 {
		parts = append(parts, fmt.Sprintf("a text of %d bytes cut after %d (%s)", tr.cutBlock, tr.cutAt, tr.cutHow))
	}
	if tr.dropped > 0 {
		more := "more "
		if tr.cutBlock == 0 {
			more = ""
		}
		parts = append(parts, more+plural.Of(tr.dropped, "text block")+" left out")
	}
	switch {
	case tr.scBytes > 0 && tr.scKept > 0:
		parts = append(parts, fmt.Sprintf("structuredContent cut from %d to %d bytes of JSON (arrays end after a whole element, objects early, long strings in …)", tr.scBytes, tr.scKept))
	case tr.scBytes > 0:
		parts = append(parts, fmt.Sprintf("structuredContent (%d bytes of JSON) left out", tr.scBytes))
	}
	ask := "narrower arguments"
	if len(narrowing) > 0 {
		ask = "arguments that ask for less (it takes " + quoted(narrowing) + ")"
	}
	return fmt.Sprintf("[toolgate: this result was trimmed to its limit of %d bytes of text (maxResultBytes): %d of its %d bytes were left out: %s. The rest is not kept: to see another part, call %s again with %s.]",
		tr.limit, tr.total-tr.kept, tr.total, strings.Join(parts, "; "), id, ask)
}

// textOf is c's text and a function that makes a copy of c with another
// text, for a text block or an embedded text resource; set is nil for any
// other block.
func textOf(c mcp.Content) (s string, set func(string) mcp.Content) {
	switch c := c.(type) {
	case *mcp.TextContent:
		return c.Text, func(t string) mcp.Content {
			o := *c
			o.Text = t
			return &o
		}
	case *mcp.EmbeddedResource:
		if c.Resource == nil || c.Resource.Blob != nil {
			return "", nil
		}
		return c.Resource.Text, func(t string) mcp.Content {
			o, r := *c, *c.Resource
			r.Text = t
			o.Resource = &r
			return &o
		}
	case emptyTextResource:
		return "", nil // empty: never over a bound
	}
	return "", nil
}

// lineSlack is how far before the bound cutText looks for a line end to
// cut at, so that a log or a listing ends on a whole line.
const lineSlack = 4096

// How cutText cut a text, as the note says it.
const (
	cutAsJSON      = "as JSON: arrays end after a whole element, objects early, long strings in …"
	cutAtLine      = "at a line end"
	cutAtCharacter = "between two characters"
)

// cutText is s cut to at most n bytes (n < len(s)), and how: as JSON
// when s is a JSON object or array (trimJSON), else at the last line
// end within lineSlack of n, else at n less the bytes of a UTF-8 sequence
// it would split.
func cutText(s string, n int) (kept, how string) {
	if t := strings.TrimLeftFunc(s, unicode.IsSpace); t != "" && (t[0] == '{' || t[0] == '[') {
		// A value that fits whole is not all of the text (JSON Lines, a
		// JSON then prose): that is cut as text.
		if j, whole, err := trimJSON(strings.NewReader(t), n); err == nil && len(j) > 0 && !whole {
			return string(j), cutAsJSON
		}
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	if j := strings.LastIndexByte(s[:i], '\n'); j >= 0 && i-(j+1) <= lineSlack {
		return s[:j+1], cutAtLine
	}
	return s[:i], cutAtCharacter
}

// trimJSON reads one JSON value from r and writes as much of it as fits
// in n bytes as valid JSON: an array keeps its first whole elements (its
// first cut short when not even it fits whole), an object its first
// members (in the order written, the last of them cut short), a string
// that does not fit is cut between two characters and ends in "…";
// numbers keep their digits. whole says the value fit as it was. It
// reads no further than the value kept needs, so a value of megabytes
// costs the bytes kept. An error when r holds no JSON value (a text that
// only starts like one) or one nested deeper than maxTrimDepth.
func trimJSON(r io.Reader, n int) (out []byte, whole bool, err error) {
	dec := json.NewDecoder(r)
	dec.UseNumber()
	t := &jsonTrimmer{dec: dec}
	tok, err := dec.Token()
	if err != nil {
		return nil, false, err
	}
	if _, whole, err = t.value(tok, n, 0); err != nil {
		return nil, false, err
	}
	return t.out.Bytes(), whole, nil
}

type jsonTrimmer struct {
	dec *json.Decoder
	out bytes.Buffer
}

var errTooDeep = errors.New("JSON nested too deep to trim")

// value writes the value that starts with tok, as much of it as fits
// within limit (the length out may reach): wrote says whether any of it
// went out (then it is valid JSON), whole whether all of it did.
func (t *jsonTrimmer) value(tok json.Token, limit, depth int) (wrote, whole bool, err error) {
	switch v := tok.(type) {
	case json.Delim:
		if depth >= maxTrimDepth {
			return false, false, errTooDeep
		}
		if t.out.Len()+2 > limit {
			return false, false, nil
		}
		t.out.WriteByte(byte(v))
		whole, err := t.members(v == '{', limit-1, depth+1)
		if v == '{' {
			t.out.WriteByte('}')
		} else {
			t.out.WriteByte(']')
		}
		return true, whole, err
	case string:
		wrote, whole = t.str(v, limit)
		return wrote, whole, nil
	default: // json.Number, bool, nil
		b, _ := json.Marshal(v)
		if t.out.Len()+len(b) > limit {
			return false, false, nil
		}
		t.out.Write(b)
		return true, true, nil
	}
}

// members writes the elements of an array (or the members of an object)
// whose opening delimiter was read, as many as fit within limit, and
// reports whether they all did. It reads no further than the first that
// does not fit whole (kept in part when some of it fits).
func (t *jsonTrimmer) members(object bool, limit, depth int) (whole bool, err error) {
	for first := true; t.dec.More(); first = false {
		mark := t.out.Len()
		if !first {
			t.out.WriteByte(',')
		}
		if object {
			k, err := t.dec.Token()
			if err != nil {
				return false, err
			}
			key, _ := marshalString(k.(string))
			if t.out.Len()+len(key)+1 > limit {
				t.out.Truncate(mark)
				return false, nil
			}
			t.out.Write(key)
			t.out.WriteByte(':')
		}
		tok, err := t.dec.Token()
		if err != nil {
			return false, err
		}
		wrote, whole, err := t.value(tok, limit, depth)
		if err != nil {
			return false, err
		}
		// An array keeps whole elements (rows an agent could take for
		// complete), but for its first, whose part is all there is of it;
		// an object keeps the member cut short (its "rows" after "meta").
		if !wrote || !whole && !object && !first {
			t.out.Truncate(mark)
		}
		if !whole {
			return false, nil
		}
	}
	_, err = t.dec.Token() // the closing delimiter
	return err == nil, err
}

// ellipsis ends a string trimJSON cut short.
const ellipsis = "…"

// str writes s as a JSON string within limit, cut between two characters
// and ended with an ellipsis when it does not fit whole; nothing when not
// even one character and the ellipsis fit.
func (t *jsonTrimmer) str(s string, limit int) (wrote, whole bool) {
	room := limit - t.out.Len()
	b, _ := marshalString(s)
	if len(b) <= room {
		t.out.Write(b)
		return true, true
	}
	// Each byte of s takes at least one in JSON: start from the room and
	// shrink by what the quotes, the ellipsis and escapes add until it fits.
	for cut := min(len(s), room); cut > 0; {
		for cut > 0 && cut < len(s) && !utf8.RuneStart(s[cut]) {
			cut--
		}
		if cut == 0 {
			break
		}
		b, _ = marshalString(s[:cut] + ellipsis)
		if len(b) <= room {
			t.out.Write(b)
			return true, false
		}
		cut -= max(1, len(b)-room)
	}
	return false, false
}

// marshalString is s as a JSON string, without HTML escapes.
func marshalString(s string) ([]byte, error) {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if err := e.Encode(s); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// narrowingWords are words of an argument's name that say it asks a tool
// for part of its output: a range, a page, a count or a filter.
var narrowingWords = []string{"head", "tail", "offset", "limit", "page", "cursor", "start", "end", "line", "lines",
	"range", "max", "count", "first", "last", "since", "until", "before", "after", "filter", "query", "pattern", "grep",
	"depth", "fields", "columns", "select", "where", "skip", "top", "size", "length"}

// narrowingArgs names the arguments of an input schema whose names say
// they ask for less output (narrowingWords), in the schema's order of
// names, at most 6.
func narrowingArgs(schema json.RawMessage) []string {
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if json.Unmarshal(schema, &s) != nil {
		return nil
	}
	var out []string
	for _, name := range slices.Sorted(maps.Keys(s.Properties)) {
		if slices.ContainsFunc(nameWords(name), func(w string) bool { return slices.Contains(narrowingWords, w) }) {
			out = append(out, name)
		}
	}
	return out[:min(len(out), 6)]
}

// nameWords splits an argument's name into lower-case words at
// underscores, dashes and case changes ("maxResults": max, results).
func nameWords(name string) []string {
	var words []string
	var w strings.Builder
	flush := func() {
		if w.Len() > 0 {
			words = append(words, strings.ToLower(w.String()))
			w.Reset()
		}
	}
	prev := rune(0)
	for _, r := range name {
		switch {
		case !unicode.IsLetter(r) && !unicode.IsDigit(r):
			flush()
		case unicode.IsUpper(r) && unicode.IsLower(prev):
			flush()
			w.WriteRune(r)
		default:
			w.WriteRune(r)
		}
		prev = r
	}
	flush()
	return words
}
