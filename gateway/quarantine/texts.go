package quarantine

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/pmezard/go-difflib/difflib"

	"github.com/toolgate/toolgate/index/catalog"
)

// Texts are the texts of a pinned definition that its hash covers, its
// name aside (the tool's ID holds it), so that the review of a changed
// definition shows what changed (Pin.Changes) and not only that its hash
// did. A definition keeps at most maxKeptTexts bytes of them, as the
// gateway cuts a description (catalog.MaxDescription): Cut names the
// texts kept in part.
type Texts struct {
	Title            string `json:"title,omitempty"`
	AnnotationsTitle string `json:"annotationsTitle,omitempty"`
	Description      string `json:"description,omitempty"`
	// InputSchema is compact JSON in the backend's key order, as a
	// Definition shows it.
	InputSchema string `json:"inputSchema,omitempty"`
	// OutputSchema is as InputSchema; empty for a tool without one, and
	// in a pin written before output schemas were pinned.
	OutputSchema string   `json:"outputSchema,omitempty"`
	Cut          []string `json:"cut,omitempty"`
}

// maxKeptTexts bounds the texts one pin keeps: at 50,000 tools the pins
// file holds every one of them, and is read whole at start.
const maxKeptTexts = catalog.MaxDescription

// maxKeptTitle bounds each title a pin keeps (of maxKeptTexts).
const maxKeptTitle = 512

// TextsSince is the day toolgate began to keep the pinned texts: a pin
// accepted before has none until its definition is listed again.
const TextsSince = "2026-12-06"

// The fields a Texts holds, as a Finding names them.
const (
	fieldTitle            = "title"
	fieldAnnotationsTitle = "annotations.title"
	fieldDescription      = "description"
	fieldInputSchema      = "inputSchema"
	fieldOutputSchema     = "outputSchema"
)

func textsOf(t catalog.Tool) *Texts {
	var out string
	if len(t.OutputSchema) > 0 {
		out = compactSchema(t.OutputSchema)
	}
	return keptTexts(t.Title, AnnotationsTitle(t), t.Description, compactSchema(t.InputSchema), out)
}

// kept is the texts of a held definition, to pin when it is approved.
func (d *Definition) kept() *Texts {
	return keptTexts(d.Title, d.AnnotationsTitle, d.Description, d.InputSchema, d.OutputSchema)
}

// keptTexts cuts the texts to maxKeptTexts in all: each title to
// maxKeptTitle, and the description and the schemas share what is left,
// alike (shares), a text shorter than its share leaving the rest to the
// others.
func keptTexts(title, annotationsTitle, description, schema, output string) *Texts {
	k := &Texts{}
	cut := func(field, s string, n int) string {
		if len(s) <= n {
			return s
		}
		k.Cut = append(k.Cut, field)
		return catalog.CutBytes(s, n)
	}
	k.Title = cut(fieldTitle, title, maxKeptTitle)
	k.AnnotationsTitle = cut(fieldAnnotationsTitle, annotationsTitle, maxKeptTitle)
	n := shares(maxKeptTexts-len(k.Title)-len(k.AnnotationsTitle), len(description), len(schema), len(output))
	k.Description = cut(fieldDescription, description, n[0])
	k.InputSchema = cut(fieldInputSchema, schema, n[1])
	k.OutputSchema = cut(fieldOutputSchema, output, n[2])
	return k
}

// shares splits room among texts of the lengths given: each that fits
// its even share of what is left whole, the others that share alike, the
// last of them what the division leaves (with two texts and no third: the
// description half, rounded down, as a pin kept them before output
// schemas were).
func shares(room int, lens ...int) []int {
	n := make([]int, len(lens))
	open := make([]bool, len(lens))
	left := 0
	for i := range lens {
		open[i] = true
		left++
	}
	for left > 0 {
		share, fit := room/left, false
		for i, l := range lens {
			if open[i] && l <= share {
				n[i], open[i], fit = l, false, true
				room -= l
				left--
			}
		}
		if !fit {
			break
		}
	}
	last := -1
	for i := range lens {
		if open[i] {
			n[i], last = room/left, i
		}
	}
	if last >= 0 {
		n[last] += room - left*(room/left)
	}
	return n
}

// What a held definition is compared with (Changes.Against): the pinned
// definition, as it was accepted.
const (
	AgainstFirstSeen     = "first seen"
	AgainstApproved      = "approved" // by a person: toolgate tools approve
	AgainstWarn          = "followed under onDefinitionChange warn"
	AgainstApprovedTools = "followed under approvedTools"
)

// Changes is how a held definition's texts differ from those of the
// definition pinned: the one approved last, followed last, or first seen.
type Changes struct {
	// Against is how the pinned definition was accepted: AgainstApproved,
	// AgainstWarn, AgainstApprovedTools or AgainstFirstSeen.
	Against string `json:"against"`
	// Fields are the texts that differ, in the order of a definition.
	Fields []Change `json:"fields,omitempty"`
	// NotKept, when set, says why the pinned texts cannot be compared
	// (Fields is then empty).
	NotKept string `json:"notKept,omitempty"`
}

// Change is one text that differs.
type Change struct {
	// Field is title, annotations.title, description, inputSchema or
	// outputSchema (a schema compared with its keys sorted, as the hash
	// reads it).
	Field string `json:"field"`
	// Diff is a word diff of the text: "[-removed-]" and "{+added+}"
	// amid a few words of what stayed ("…" for the rest).
	Diff string `json:"diff"`
	// Removed and Added are the spans of Diff, whole.
	Removed []string `json:"removed,omitempty"`
	Added   []string `json:"added,omitempty"`
	// Note says what the diff cannot show: the pinned text was kept in
	// part.
	Note string `json:"note,omitempty"`
}

// Changes compares the held definition with the pinned one, or is nil
// when the pin is not held for a change (or the hold has no definition:
// one written before definitions were kept). Every text is shown as a
// reviewer reads findings' excerpts: the text that Unicode tag characters
// hide decoded, invisible, bidi and control characters escaped (reveal).
func (p *Pin) Changes() *Changes {
	if p.Hold == nil || !p.Hold.Changed || p.Hold.Definition == nil {
		return nil
	}
	c := &Changes{Against: AgainstFirstSeen}
	switch {
	case p.Approved:
		c.Against = AgainstApproved
	case p.Followed == FollowedWarn:
		c.Against = AgainstWarn
	case p.Followed == FollowedApprovedTools:
		c.Against = AgainstApprovedTools
	}
	was := p.Texts
	if was == nil {
		c.NotKept = "the earlier text was not kept (pinned before " + TextsSince + ")"
		return c
	}
	now := p.Hold.Definition
	wasSchema, nowSchema := canonicalPair(was.InputSchema, now.InputSchema)
	wasOutput, nowOutput := canonicalPair(was.OutputSchema, now.OutputSchema)
	for _, f := range [...]struct{ field, was, now string }{
		{fieldTitle, was.Title, now.Title},
		{fieldAnnotationsTitle, was.AnnotationsTitle, now.AnnotationsTitle},
		{fieldDescription, was.Description, now.Description},
		{fieldInputSchema, wasSchema, nowSchema},
		{fieldOutputSchema, wasOutput, nowOutput},
	} {
		if ch, ok := diffText(f.field, f.was, f.now, slices.Contains(was.Cut, f.field)); ok {
			c.Fields = append(c.Fields, ch)
		}
	}
	if len(c.Fields) == 0 {
		// The hash covers the whole texts: what changed is past the part
		// kept, or in the schema's form (a value written otherwise).
		c.NotKept = "the texts kept are the same: what changed lies past the part kept (" + strconv.Itoa(maxKeptTexts) + " bytes of a definition) or in how the schema is written"
	}
	return c
}

// canonicalPair is two schemas canonical (canonicalSchema) when both are
// JSON, else as they are.
func canonicalPair(was, now string) (string, string) {
	if a, ok := canonicalSchema(was); ok {
		if b, ok := canonicalSchema(now); ok {
			return a, b
		}
	}
	return was, now
}

// canonicalSchema is a schema's JSON with its keys sorted (numbers as
// written, <, > and & as they are), as the hash reads it, so that a schema
// listed again in another key order shows no change.
func canonicalSchema(s string) (string, bool) {
	v, ok := decodeSchema(json.RawMessage(s))
	if !ok {
		return "", false
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if enc.Encode(v) != nil {
		return "", false
	}
	return strings.TrimSuffix(b.String(), "\n"), true
}

// contextBytes is about how much of what stayed a diff shows beside a
// change.
const contextBytes = 40

// diffText is the word diff of one text, ok false when it did not
// change. With wasCut (the pinned text kept in part), what the held text
// has past the part kept is left out rather than shown as added.
func diffText(field, was, now string, wasCut bool) (Change, bool) {
	if was == now {
		return Change{}, false
	}
	a, b := words(was), words(now)
	ch := Change{Field: field}
	if wasCut {
		// The pinned text ends where it was cut, maybe within a word:
		// that word is left out, and what the held text has past the end
		// is the part not kept, not an insertion.
		a = a[:len(a)-1]
		ch.Note = "the earlier text was kept to its first " + strconv.Itoa(len(was)) + " bytes: the rest is not compared"
	}
	ops := opCodes(a, b, !wasCut)
	if n := len(ops); wasCut && n > 0 && ops[n-1].Tag == 'i' {
		ops = ops[:n-1]
	}
	var d strings.Builder
	changed := false
	for i, op := range ops {
		switch op.Tag {
		case 'e':
			d.WriteString(context(a[op.I1:op.I2], i == 0, i == len(ops)-1))
		case 'd', 'r', 'i':
			changed = true
			if op.I2 > op.I1 {
				s := reveal(strings.Join(a[op.I1:op.I2], ""))
				ch.Removed = append(ch.Removed, s)
				d.WriteString("[-" + s + "-]")
			}
			if op.J2 > op.J1 {
				s := reveal(strings.Join(b[op.J1:op.J2], ""))
				ch.Added = append(ch.Added, s)
				d.WriteString("{+" + s + "+}")
			}
		}
	}
	if !changed {
		return Change{}, false
	}
	ch.Diff = d.String()
	return ch, true
}

// opCodes is how to turn a into b. The words both start with, and with
// ends they end with, are set aside first: a change to a long text is
// mostly those, and the matcher takes time of the order of the product of
// the lengths it is given (0.5 s for two texts of 8 and 16 KiB that say
// one sentence over and over, the worst case; 4 ms for one sentence
// inserted in one of 16 KiB).
func opCodes(a, b []string, ends bool) []difflib.OpCode {
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for ends && suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	var ops []difflib.OpCode
	add := func(op difflib.OpCode) {
		if n := len(ops); n > 0 && op.Tag == 'e' && ops[n-1].Tag == 'e' {
			ops[n-1].I2, ops[n-1].J2 = op.I2, op.J2
			return
		}
		ops = append(ops, op)
	}
	if pre > 0 {
		add(difflib.OpCode{Tag: 'e', I1: 0, I2: pre, J1: 0, J2: pre})
	}
	// No junk heuristic: a text's spaces and punctuation are most of its
	// words, and must match as any other.
	for _, op := range difflib.NewMatcherWithJunk(a[pre:len(a)-suf], b[pre:len(b)-suf], false, nil).GetOpCodes() {
		if op.I1 == op.I2 && op.J1 == op.J2 {
			continue
		}
		op.I1, op.I2, op.J1, op.J2 = op.I1+pre, op.I2+pre, op.J1+pre, op.J2+pre
		add(op)
	}
	if suf > 0 {
		add(difflib.OpCode{Tag: 'e', I1: len(a) - suf, I2: len(a), J1: len(b) - suf, J2: len(b)})
	}
	slideLeft(ops, a, b)
	return ops
}

// slideLeft moves each insertion or deletion between two runs that
// stayed as far toward the start as it reads the same: `{"{+"x":1,+}"y"`
// rather than `{"{+x":1,"+}y"`, whichever the matcher found.
func slideLeft(ops []difflib.OpCode, a, b []string) {
	for i := 1; i < len(ops); i++ {
		prev, op := &ops[i-1], &ops[i]
		if prev.Tag != 'e' || i+1 == len(ops) || ops[i+1].Tag != 'e' {
			continue
		}
		for prev.I2 > prev.I1 {
			var moved bool
			switch op.Tag {
			case 'i':
				moved = b[op.J2-1] == b[prev.J2-1]
			case 'd':
				moved = a[op.I2-1] == a[prev.I2-1]
			}
			if !moved {
				break
			}
			prev.I2, prev.J2 = prev.I2-1, prev.J2-1
			op.I1, op.I2, op.J1, op.J2 = op.I1-1, op.I2-1, op.J1-1, op.J2-1
			ops[i+1].I1, ops[i+1].J1 = ops[i+1].I1-1, ops[i+1].J1-1
		}
	}
}

// context is a run of words that stayed, shown in part: its end before
// the first change, its start after the last, both ends between two.
func context(w []string, first, last bool) string {
	whole := strings.Join(w, "")
	if len(whole) <= 2*contextBytes && !(first && last) {
		return reveal(whole)
	}
	head, tail := 0, len(w) // w[:head] and w[tail:] are shown
	for n := 0; head < len(w) && n+len(w[head]) <= contextBytes; head++ {
		n += len(w[head])
	}
	for n := 0; tail > head && n+len(w[tail-1]) <= contextBytes; tail-- {
		n += len(w[tail-1])
	}
	var s string
	switch {
	case first && last:
		return "…"
	case first:
		s = "…" + strings.Join(w[tail:], "")
	case last:
		s = strings.Join(w[:head], "") + "…"
	case head >= tail:
		s = whole
	default:
		s = strings.Join(w[:head], "") + "…" + strings.Join(w[tail:], "")
	}
	return reveal(s)
}

// words splits s into the units a diff compares: runs of letters and
// digits, runs of white space, runs of Unicode tag characters (one hidden
// text), and every other character alone.
func words(s string) []string {
	var out []string
	kind := func(r rune) int {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_':
			return 1
		case unicode.IsSpace(r):
			return 2
		case isTag(r):
			return 3
		}
		return 0
	}
	start, prev := 0, -1
	for i, r := range s {
		k := kind(r)
		if i > start && (k == 0 || k != prev) {
			out = append(out, s[start:i])
			start = i
		}
		prev = k
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

// reveal is a text as a reviewer must see it: the ASCII that a run of
// Unicode tag characters hides decoded, as a finding's excerpt shows it
// ([hidden text "…"]), and each invisible, bidi or control character
// escaped (\u200b) as the excerpts quote them.
func reveal(s string) string {
	if !strings.ContainsFunc(s, hidden) {
		return s
	}
	var b strings.Builder
	var tags strings.Builder
	inTags := false
	flush := func() {
		if inTags {
			b.WriteString("[" + hiddenTextLabel + strconv.Quote(tags.String()) + "]")
			tags.Reset()
			inTags = false
		}
	}
	for _, r := range s {
		if isTag(r) {
			inTags = true
			if c, ok := tagASCII(r); ok {
				tags.WriteRune(c)
			}
			continue
		}
		flush()
		if hidden(r) {
			q := strconv.QuoteRuneToASCII(r)
			b.WriteString(q[1 : len(q)-1])
			continue
		}
		b.WriteRune(r)
	}
	flush()
	return b.String()
}

// hidden reports the characters reveal decodes or escapes: those the
// scanner flags as hiding text (the zero-width joiner included, even
// inside an emoji), and invalid UTF-8.
func hidden(r rune) bool {
	return isTag(r) || isInvisible(r) || isSelector(r) || r == 0x200D || isBidi(r) || isControl(r) || r == utf8.RuneError
}
