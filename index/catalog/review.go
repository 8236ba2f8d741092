package catalog

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"maps"
	"reflect"
	"regexp"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/toolgate/toolgate/internal/jsonwords"
	"github.com/toolgate/toolgate/internal/plural"
)

// ResolveSchema reads an input schema as the gateway validates arguments
// with it. The $schema keyword names drafts the validator may not know;
// validation keywords are shared, so they are checked regardless. An error
// is a schema the gateway cannot validate with: it lets calls through (the
// backend validates) and indexes none of its arguments.
func ResolveSchema(text json.RawMessage) (*jsonschema.Resolved, error) {
	var s jsonschema.Schema
	if err := json.Unmarshal(text, &s); err != nil {
		return nil, err
	}
	s.Schema = ""
	rs, err := s.Resolve(nil)
	if err != nil {
		return nil, err
	}
	if err := passable(&s); err != nil {
		return nil, err
	}
	return rs, nil
}

// jsonTypes are the names JSON Schema has for the kinds of JSON value.
var jsonTypes = []string{"array", "boolean", "integer", "null", "number", "object", "string"}

// passable is an error when no call could pass s, a tool's input schema
// the library resolved: it does not check a "type"'s name, a validator
// then refuses every value there ("must be a objetc"), and a model told to
// fix its arguments cannot. It names the keyword, where, and the fix.
func passable(s *jsonschema.Schema) error {
	if w := (schemaWalk{}); w.walk(s) {
		// Found: walk again with the maps' keys in order, so that of two
		// faults the same one is named each time (the verdicts are saved).
		w = schemaWalk{sorted: true}
		w.walk(s)
		return w.err
	}
	if types := schemaTypes(s); len(types) > 0 && !slices.Contains(types, "object") {
		listed, _ := json.Marshal(s.Type)
		if s.Type == "" {
			listed, _ = json.Marshal(s.Types)
		}
		return fmt.Errorf(`the top-level "type" is %s, but a tool's arguments are always a JSON object, so no call could pass: it must be "object"`, listed)
	}
	return nil
}

// schemaTypes are the names s's "type" gives (none when it has none).
func schemaTypes(s *jsonschema.Schema) []string {
	if s.Type != "" {
		return []string{s.Type}
	}
	return s.Types
}

// schemaWalk looks through a resolved schema, depth first, for what no
// value can pass (passable). A resolved schema is a tree ($refs are not
// followed), so it ends. The fields holding schemas are named, not found
// by reflection at each schema (TestSchemaWalkReadsEveryField holds the
// list to the library's), and the path is a stack of keywords made words
// only for a fault: the walk is 1 % of the CPU of checking 10,000 schemas
// (BenchmarkFlawLog10k/first), the library's decoding and Resolve the rest.
type schemaWalk struct {
	sorted bool   // the maps' keys in order
	path   []step // where the walk is
	err    error  // the fault found, with where (when sorted)
}

// step is a keyword of the path to a schema: kw, kw.key or kw[i].
type step struct {
	kw, key string
	i       int // -1: none
}

// walk reports whether s or a schema inside it has a fault.
func (w *schemaWalk) walk(s *jsonschema.Schema) bool {
	if w.check(s) {
		return true
	}
	return w.byName("$defs", s.Defs) || w.byName("definitions", s.Definitions) || w.byName("dependencies", s.DependencySchemas) ||
		w.list("prefixItems", s.PrefixItems) || w.one("items", "", -1, s.Items) || w.list("items", s.ItemsArray) ||
		w.one("additionalItems", "", -1, s.AdditionalItems) || w.one("contains", "", -1, s.Contains) ||
		w.one("unevaluatedItems", "", -1, s.UnevaluatedItems) ||
		w.byName("properties", s.Properties) || w.byName("patternProperties", s.PatternProperties) ||
		w.one("additionalProperties", "", -1, s.AdditionalProperties) || w.one("propertyNames", "", -1, s.PropertyNames) ||
		w.one("unevaluatedProperties", "", -1, s.UnevaluatedProperties) ||
		w.list("allOf", s.AllOf) || w.list("anyOf", s.AnyOf) || w.list("oneOf", s.OneOf) ||
		w.one("not", "", -1, s.Not) || w.one("if", "", -1, s.If) || w.one("then", "", -1, s.Then) || w.one("else", "", -1, s.Else) ||
		w.byName("dependentSchemas", s.DependentSchemas) || w.one("contentSchema", "", -1, s.ContentSchema)
}

func (w *schemaWalk) one(kw, key string, i int, c *jsonschema.Schema) bool {
	if c == nil {
		return false
	}
	w.path = append(w.path, step{kw, key, i})
	found := w.walk(c)
	w.path = w.path[:len(w.path)-1]
	return found
}

func (w *schemaWalk) list(kw string, cs []*jsonschema.Schema) bool {
	for i, c := range cs {
		if w.one(kw, "", i, c) {
			return true
		}
	}
	return false
}

func (w *schemaWalk) byName(kw string, m map[string]*jsonschema.Schema) bool {
	if !w.sorted {
		for k, c := range m {
			if w.one(kw, k, -1, c) {
				return true
			}
		}
		return false
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if w.one(kw, k, -1, m[k]) {
			return true
		}
	}
	return false
}

// check reports whether s itself has a fault, and when sorted says it in
// w.err.
func (w *schemaWalk) check(s *jsonschema.Schema) bool {
	for _, t := range schemaTypes(s) {
		if !slices.Contains(jsonTypes, t) {
			if w.sorted {
				w.err = fmt.Errorf(`%s"type" is %q, not a JSON Schema type (%s)`, w.at(), t, strings.Join(jsonTypes, ", "))
			}
			return true
		}
	}
	// "additionalProperties": false is decoded as {"not": {}}.
	if a := s.AdditionalProperties; a != nil && a.Not != nil && reflect.ValueOf(*a.Not).IsZero() && len(s.PatternProperties) == 0 {
		for _, r := range s.Required {
			if _, ok := s.Properties[r]; !ok {
				if w.sorted {
					w.err = fmt.Errorf(`%s"required" names %q, which is not in "properties", and "additionalProperties" is false, so no call could pass: add %q to "properties" or take it out of "required"`, w.at(), r, r)
				}
				return true
			}
		}
	}
	return false
}

// at is where the walk is, as keywords and ": " ("properties.n.items: "),
// or "" at the top.
func (w *schemaWalk) at() string {
	if len(w.path) == 0 {
		return ""
	}
	var b strings.Builder
	for i, st := range w.path {
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(st.kw)
		if st.key != "" {
			b.WriteString("." + st.key)
		}
		if st.i >= 0 {
			fmt.Fprintf(&b, "[%d]", st.i)
		}
	}
	return b.String() + ": "
}

// MaxDescription caps a tool's description, in bytes: the gateway cuts a
// longer one a backend lists, and Review a tools file's, so that an index
// built offline and eval rank what the gateway would. One of 40 MB took
// toolgate index 86 s and 5 GB of memory.
const MaxDescription = 16 << 10

// MaxSchemaShown caps an input schema a model is shown, in bytes of
// compact JSON: past it, a compact search_tools answer, and execute_tool's
// answer to arguments that do not fit, give the schema's arguments
// instead, and the warnings name the tool. 8.4 KB is the largest of the
// dev catalogs; an enum of 100,000 values is 1.4 MB, some 350,000 tokens
// (Claude Code refuses a tool's answer over 25,000).
const MaxSchemaShown = 32 << 10

// ShownKB is the size of an input schema in compact JSON, in KB, when it
// is over MaxSchemaShown (0 when it is not).
func ShownKB(schema json.RawMessage) int {
	if len(schema) <= MaxSchemaShown {
		return 0 // compacting makes it no longer
	}
	var b bytes.Buffer
	if json.Compact(&b, schema) != nil || b.Len() <= MaxSchemaShown {
		return 0
	}
	return b.Len() >> 10
}

// HugeSchema follows "the input schema of TOOL is over 32 KB: ".
const HugeSchema = `a compact search_tools answer gives its arguments in its place (the whole schema only in a "detail": "full" answer of that tool alone), as an answer that carried it would fill the model's context; ask its server's author for a smaller one (an enum of thousands of values is better a string the tool checks)`

// CutDescription is s cut to at most MaxDescription bytes, at the start
// of a character, and whether it was cut.
func CutDescription(s string) (string, bool) {
	return CutBytes(s, MaxDescription), len(s) > MaxDescription
}

// CutBytes is s cut to at most n bytes, at the start of a character (a
// character is kept whole or left out).
func CutBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Cut is a tool whose description was cut to MaxDescription: its ID and
// the description's length before, in bytes.
type Cut struct {
	ID    string
	Bytes int
}

// Review readies the tools of the file at path as the gateway readies a
// backend's: a description over MaxDescription is cut, with a warning to
// w, and so is an input schema ResolveSchema refuses (the tool is kept:
// the gateway lets its calls through), each warning naming at most five
// tools and why. The file's author meant them to count: a "properties"
// written as a list was silently no argument. It returns how many tools
// were warned of.
//
// A tool without a description is warned of too: a file made by joining
// two sources often loses them, and the figures of such a catalog are
// those of names alone.
func Review(w io.Writer, path string, tools []Tool) int {
	var f FlawLog
	return f.Review(w, path, tools)
}

// Review is Review with the schemas' verdicts f knows (Seed), and those
// it resolves remembered (Checks saves them).
func (f *FlawLog) Review(w io.Writer, path string, tools []Tool) int {
	var cuts []Cut
	var bare []string
	for i, t := range tools {
		if d, ok := CutDescription(t.Description); ok {
			cuts = append(cuts, Cut{ID: t.ID(), Bytes: len(t.Description)})
			tools[i].Description = d
		}
		if strings.TrimSpace(t.Description) == "" {
			bare = append(bare, strconv.Quote(t.ID()))
		}
	}
	if len(bare) > 0 {
		named := bare[:min(5, len(bare))]
		more := ""
		if len(bare) > len(named) {
			more = fmt.Sprintf(", and %d more", len(bare)-len(named))
		}
		verb := "have"
		if len(bare) == 1 {
			verb = "has"
		}
		fmt.Fprintf(w, "toolgate: warning: %s: %s %s no \"description\": %s%s: they are ranked by their names (and schemas) alone; give each its description if the source had one\n",
			path, plural.Of(len(bare), "tool"), verb, strings.Join(named, ", "), more)
	}
	return len(bare) + f.Warn(w, path, cuts, tools)
}

// Warn writes Review's warnings, each starting with where (a file, a
// config): of the descriptions cuts lists, and of the tools whose input
// schema ResolveSchema refuses or whose name is not one MCP recommends
// (Flaws), and of those whose input schema is over MaxSchemaShown. It
// returns how many tools it warned of.
func Warn(w io.Writer, where string, cuts []Cut, tools []Tool) int {
	var f FlawLog
	return f.Warn(w, where, cuts, tools)
}

// Warn is Warn with the schemas' verdicts f knows (Seed), and those it
// resolves remembered (Checks saves them).
func (f *FlawLog) Warn(w io.Writer, where string, cuts []Cut, tools []Tool) int {
	var cut, schemas, names, huge []string
	nSchemas, nNames, nHuge := 0, 0, 0
	for _, c := range cuts {
		if len(cut) < 5 {
			cut = append(cut, fmt.Sprintf("%q (%d bytes)", c.ID, c.Bytes))
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, t := range tools {
		_, schema := f.schemaFlaw(t.InputSchema)
		name := nameFlaw(t)
		if name != "" {
			if nNames++; len(names) < 5 {
				names = append(names, name)
			}
		}
		if schema != "" {
			if nSchemas++; len(schemas) < 5 {
				schemas = append(schemas, fmt.Sprintf("%q (%s)", t.ID(), schema))
			}
		}
		if kb := ShownKB(t.InputSchema); kb > 0 {
			if nHuge++; len(huge) < 5 {
				huge = append(huge, fmt.Sprintf("%q (%d KB)", t.ID(), kb))
			}
		}
	}
	more := func(n int, named []string) string {
		if n > len(named) {
			return fmt.Sprintf(", and %d more", n-len(named))
		}
		return ""
	}
	if len(cuts) > 0 {
		fmt.Fprintf(w, "toolgate: warning: %s: the description of %s is over %d KiB, cut there as the gateway cuts a backend's: %s%s\n",
			where, plural.Of(len(cuts), "tool"), MaxDescription>>10, strings.Join(cut, ", "), more(len(cuts), cut))
	}
	if nSchemas > 0 {
		fmt.Fprintf(w, "toolgate: warning: %s: the input schema of %s %s: %s%s: %s\n",
			where, plural.Of(nSchemas, "tool"), SchemaFlaw, strings.Join(schemas, ", "), more(nSchemas, schemas), SchemaFlawEffect(nSchemas))
	}
	if nNames > 0 {
		fmt.Fprintf(w, "toolgate: warning: %s: the name of %s %s: %s%s: %s\n",
			where, plural.Of(nNames, "tool"), NameFlaw, strings.Join(names, ", "), more(nNames, names), NameFlawEffect(nNames))
	}
	if nHuge > 0 {
		fmt.Fprintf(w, "toolgate: warning: %s: the input schema of %s is over %d KB: %s%s: %s\n",
			where, plural.Of(nHuge, "tool"), MaxSchemaShown>>10, strings.Join(huge, ", "), more(nHuge, huge), HugeSchema)
	}
	return len(cuts) + nSchemas + nNames + nHuge
}

// The words of the warnings of a tool definition's flaws (Flaws), which
// `toolgate index` writes and serve logs.
const (
	// SchemaFlaw follows "the input schema of TOOL".
	SchemaFlaw = "is not a JSON Schema the gateway can read"
	// NameFlaw follows "the name of TOOL".
	NameFlaw = "is not one MCP recommends (1 to 128 characters of A-Z a-z 0-9 _ - .)"
)

// SchemaFlawEffect is what the gateway does with n tools whose input
// schema it cannot read.
func SchemaFlawEffect(n int) string {
	return "the gateway lets " + plural.Pick(n, "its", "their") + " calls through unchecked, and leaves the arguments it cannot read out of the index"
}

// NameFlawEffect is what becomes of n tools whose name MCP does not
// recommend.
func NameFlawEffect(n int) string {
	it := plural.Pick(n, "it", "them")
	return fmt.Sprintf("the gateway serves %s as %s (a model calls %s through execute_tool, by the name search_tools gives), but a client that connects to the server directly may refuse %s",
		it, plural.Pick(n, "it is", "they are"), it, it)
}

// Flaws says what is wrong with t's definition that the gateway serves
// anyway: why its input schema is not one ResolveSchema reads ("" when it
// is, or there is none), and its ID quoted, with its length when that is
// the fault, when its name is not one MCP recommends ("" when it is).
// Resolving a schema takes some 50 µs: check a definition once (FlawLog).
func Flaws(t Tool) (schema, name string) {
	return schemaFlaw(t.InputSchema), nameFlaw(t)
}

// nameFlaw is Flaws' name: a pattern match, cheap enough to do again.
func nameFlaw(t Tool) string {
	if mcpNameRE.MatchString(t.Name) {
		return ""
	}
	name := fmt.Sprintf("%q", t.ID())
	if l := utf8.RuneCountInString(t.Name); l > 128 {
		name += fmt.Sprintf(" (%d characters)", l)
	}
	return name
}

// schemaFlaw is Flaws' schema: it resolves the schema, which costs.
func schemaFlaw(text json.RawMessage) string {
	if len(text) == 0 {
		return ""
	}
	_, err := ResolveSchema(text)
	if err == nil {
		return ""
	}
	// JSON's words, not Go's, without the library's inner type.
	why := strings.ReplaceAll(jsonwords.Describe(err), `"schemaWithoutMethods.`, `"`)
	if why == "" {
		why = err.Error()
	}
	return why
}

// FlawLog logs the flaws (Flaws) of the tool definitions servers list, once
// per definition: serve tells it each listing, and a listing that changes
// other tools (a server's author editing one) says nothing more of a
// flawed one it did not change. It resolves each input schema once: the
// verdicts of those it knows from before (Seed, a Checks a toolgate of the
// same Checker saved) are taken as they are, so that a start whose servers
// list what they listed before resolves none (1.8 s of CPU at 10,000
// tools, which the client's first searches waited for) and still logs
// each flaw. The zero value is ready; it is safe for concurrent use.
type FlawLog struct {
	mu    sync.Mutex
	seen  map[string]map[string]uint64 // server → tool name → fingerprint of the definition checked
	known map[string]string            // SchemaFingerprint → schemaFlaw of the schema
	// resolved counts the schemas resolved, hashed the schemas hashed
	// (SchemaFingerprint) (the tests' counters).
	resolved, hashed int
}

// Seed takes the verdicts of c as known, when a toolgate that checks
// schemas as this one does made them (c.Checker is Checker): a schema
// with one is not resolved again. It logs nothing: Listed logs each flaw
// when a server lists the tool.
func (f *FlawLog) Seed(c Checks) {
	if c.Format != ChecksFormat || c.Checker != Checker() {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.known == nil {
		f.known = make(map[string]string, len(c.Clean)+len(c.Flawed))
	}
	for _, fp := range c.Clean {
		f.known[fp] = ""
	}
	for fp, why := range c.Flawed {
		if why != "" {
			f.known[fp] = why
		}
	}
}

// schemaFlaw is schemaFlaw(text), resolved once per schema. f.mu is held.
func (f *FlawLog) schemaFlaw(text json.RawMessage) (fp, why string) {
	if len(text) == 0 {
		return "", ""
	}
	fp = SchemaFingerprint(text)
	f.hashed++
	why, ok := f.known[fp]
	if !ok {
		why = schemaFlaw(text)
		f.resolved++
		if f.known == nil {
			f.known = map[string]string{}
		}
		f.known[fp] = why
	}
	return fp, why
}

// Listed checks the definitions of server's tools (its full listing) that
// were not checked before in the form listed, and logs each flaw to log.
func (f *FlawLog) Listed(log *slog.Logger, server string, tools []Tool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.seen == nil {
		f.seen = map[string]map[string]uint64{}
	}
	was := f.seen[server]
	now := make(map[string]uint64, len(tools))
	for _, t := range tools {
		h := fnv.New64a()
		h.Write([]byte(t.Name))
		h.Write([]byte{0})
		h.Write(t.InputSchema)
		fp := h.Sum64()
		now[t.Name] = fp
		if old, ok := was[t.Name]; ok && old == fp {
			continue
		}
		if _, schema := f.schemaFlaw(t.InputSchema); schema != "" {
			log.Warn("the input schema of a tool "+SchemaFlaw+": "+SchemaFlawEffect(1), "tool", t.ID(), "why", schema)
		}
		if nameFlaw(t) != "" {
			log.Warn("the name of a tool "+NameFlaw+": "+NameFlawEffect(1), "tool", t.ID())
		}
		if kb := ShownKB(t.InputSchema); kb > 0 {
			log.Warn(fmt.Sprintf("the input schema of a tool is over %d KB: %s", MaxSchemaShown>>10, HugeSchema), "tool", t.ID(), "kb", kb)
		}
	}
	f.seen[server] = now
}

// ToolFlaw is a tool whose input schema the gateway cannot read, and why
// (the words of Flaws): what GET /status lists (the "schemaFlaws"
// section).
type ToolFlaw struct {
	Tool string `json:"tool"` // its ID, server__name
	Flaw string `json:"flaw"`
}

// Flawed are the tools whose input schema the gateway cannot read, by ID,
// with the verdicts f knows (Seed, Listed), resolving those it does not.
func (f *FlawLog) Flawed(tools []Tool) []ToolFlaw {
	flawed, _ := f.verdicts(tools, true, false)
	return flawed
}

// ShownFlaws are the tools whose input schema is over MaxSchemaShown, each
// with its size, and those whose name MCP does not recommend, each with
// what is wrong with it, by ID: definitions the gateway serves (and checks
// calls against), which Listed logs once, as it does a schema it cannot
// read (Flawed). Nothing is resolved: a pattern match, and a compaction
// of the schemas over the cap.
func ShownFlaws(tools []Tool) (huge, names []ToolFlaw) {
	for _, t := range tools {
		if kb := ShownKB(t.InputSchema); kb > 0 {
			huge = append(huge, ToolFlaw{Tool: t.ID(), Flaw: fmt.Sprintf("%d KB of compact JSON", kb)})
		}
		if why := nameWhy(t.Name); why != "" {
			names = append(names, ToolFlaw{Tool: t.ID(), Flaw: why})
		}
	}
	byID := func(a, b ToolFlaw) int { return strings.Compare(a.Tool, b.Tool) }
	slices.SortFunc(huge, byID)
	slices.SortFunc(names, byID)
	return huge, names
}

// nameWhy says what keeps name from being one MCP recommends (mcpNameRE),
// "" when nothing does: its length, or the characters it may not have.
func nameWhy(name string) string {
	if mcpNameRE.MatchString(name) {
		return ""
	}
	if n := utf8.RuneCountInString(name); n == 0 || n > 128 {
		return fmt.Sprintf("%d characters, not 1 to 128", n)
	}
	var bad []string
	for _, r := range name {
		if q := strconv.QuoteRune(r); !mcpNameRE.MatchString(string(r)) && !slices.Contains(bad, q) {
			bad = append(bad, q)
		}
	}
	return fmt.Sprintf("%s %s not among A-Z a-z 0-9 _ - .", strings.Join(bad, ", "), plural.Pick(len(bad), "is", "are"))
}

// Checks are the verdicts of tools' input schemas, resolving those f
// does not know, to save (index.WriteChecks) for the next start's Seed.
func (f *FlawLog) Checks(tools []Tool) Checks {
	_, c := f.verdicts(tools, false, true)
	return c
}

// Settled is Flawed and Checks of one catalog (what serve takes after each
// index: GET /status's flawed tools and the verdicts to save) in one pass:
// each schema hashed once, where the two hashed each twice (10,000 tools:
// BenchmarkFlawLog10k/settle).
func (f *FlawLog) Settled(tools []Tool) ([]ToolFlaw, Checks) {
	return f.verdicts(tools, true, true)
}

// verdicts is Flawed (when flawed) and Checks (when checks) of tools.
func (f *FlawLog) verdicts(tools []Tool, flawed, checks bool) ([]ToolFlaw, Checks) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []ToolFlaw
	c := Checks{Format: ChecksFormat, Checker: Checker()}
	var done map[string]bool
	if checks {
		done = make(map[string]bool, len(tools))
	}
	for _, t := range tools {
		fp, why := f.schemaFlaw(t.InputSchema)
		if flawed && why != "" {
			out = append(out, ToolFlaw{Tool: t.ID(), Flaw: why})
		}
		if !checks || fp == "" || done[fp] {
			continue
		}
		done[fp] = true
		if why == "" {
			c.Clean = append(c.Clean, fp)
		} else {
			if c.Flawed == nil {
				c.Flawed = map[string]string{}
			}
			c.Flawed[fp] = why
		}
	}
	slices.SortFunc(out, func(a, b ToolFlaw) int { return strings.Compare(a.Tool, b.Tool) })
	slices.Sort(c.Clean)
	return out, c
}

// Checks are the verdicts of ResolveSchema on input schemas, by
// SchemaFingerprint: the file index/flaws.json of the data folder
// (index.ReadChecks), which a start seeds its FlawLog with.
type Checks struct {
	Format  int    `json:"format"`  // ChecksFormat
	Checker string `json:"checker"` // Checker() of the toolgate that resolved them
	// Clean are the schemas ResolveSchema reads.
	Clean []string `json:"clean,omitempty"`
	// Flawed are those it refuses, each with why (the words of Flaws).
	Flawed map[string]string `json:"flawed,omitempty"`
}

// ChecksFormat is the version of Checks' JSON.
const ChecksFormat = 1

// Same reports whether c and d hold the same verdicts, by the same Checker.
func (c Checks) Same(d Checks) bool {
	return c.Format == d.Format && c.Checker == d.Checker && slices.Equal(c.Clean, d.Clean) && maps.Equal(c.Flawed, d.Flawed)
}

// checkerRevision changes whenever ResolveSchema, schemaFlaw or the words
// they give change: verdicts of another revision are checked again.
const checkerRevision = 2

// Checker names how this toolgate checks a schema: checkerRevision, the
// jsonschema-go module it was built with and the Go release (whose
// regexp reads a schema's patterns). An upgrade of any of them checks
// every schema again, once.
func Checker() string {
	return checker()
}

var checker = sync.OnceValue(func() string {
	lib := "unknown"
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, d := range info.Deps {
			if d.Path == "github.com/google/jsonschema-go" {
				lib = d.Version
				if d.Replace != nil {
					lib = d.Replace.Path + "@" + d.Replace.Version
				}
			}
		}
	}
	return fmt.Sprintf("%d jsonschema-go@%s %s", checkerRevision, lib, runtime.Version())
})

// SchemaFingerprint names an input schema by its bytes as listed: the
// first 128 bits of their SHA-256, in hex.
func SchemaFingerprint(text json.RawMessage) string {
	sum := sha256.Sum256(text)
	return hex.EncodeToString(sum[:16])
}

// mcpNameChars are the characters MCP recommends a tool name be of
// (2025-11-25, SEP-986), as a regexp's character class.
const mcpNameChars = `[A-Za-z0-9_.-]`

// mcpNameRE is what MCP recommends a tool name be.
var mcpNameRE = regexp.MustCompile(`^` + mcpNameChars + `{1,128}$`)

// plainNameRE is a name of mcpNameChars alone, of any length.
var plainNameRE = regexp.MustCompile(`^` + mcpNameChars + `+$`)

// PlainName reports whether s, a name, is of the characters MCP
// recommends alone (any length): a name that a reader of a list, where
// names are parted by ", " or followed by ": ", cannot misparse.
func PlainName(s string) bool { return plainNameRE.MatchString(s) }
