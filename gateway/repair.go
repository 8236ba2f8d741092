package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"

	"github.com/toolgate/toolgate/gateway/policy"
	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/internal/oneline"
	"github.com/toolgate/toolgate/search"
)

// This file turns execute_tool's failures into answers a model can repair
// its call from: invalid arguments come back in plain words with the tool's
// input schema and an example call, an unknown name with the closest names
// and the tools search_tools finds for the name's words.

// explainInvalid is the isError text for arguments that fail the input
// schema of the tool id: what is wrong in plain words (problem is the
// validator's message), the schema (its argument line when the schema
// is over 32 KB), and an example call derived from it.
func explainInvalid(id string, schema json.RawMessage, problem string, sent map[string]any) string {
	var b strings.Builder
	var root map[string]any
	_ = json.Unmarshal(schema, &root)
	words := plainWords(problem, root, sent) + alsoWrong(problem, root, sent)
	// The validator names one problem: the others too, so that a model
	// fixes them all at once (it fixed "a", sent the call again, and was
	// told of "b").
	mis := misfits(root, sent)
	if _, ok := mis[problemArg(problem)]; ok && len(mis) > 1 {
		words = strings.Join(sortedWords(mis), "; ")
	} else if !ok && len(mis) > 0 {
		words += "; " + strings.Join(sortedWords(mis), "; ")
	}
	if problemArg(problem) != "" {
		words += alsoSaid(missingRequired(root, sent), "; the required argument %s is missing", "; the required arguments %s are missing")
	}
	fmt.Fprintf(&b, "execute_tool %s: the arguments do not match the tool's inputSchema: %s.\n", id, words)
	if c := shownSchema(schema); len(c) <= catalog.MaxSchemaShown {
		fmt.Fprintf(&b, "The inputSchema of %s:\n%s\n", id, c)
	} else {
		// Not the whole of it: an answer that fills the agent's context
		// helps no one (a schema of 8 MB came back whole).
		fmt.Fprintf(&b, "The inputSchema of %s is %d KB, too long to show here (%s gives it whole); its arguments: %s\n",
			id, len(c)>>10, wholeSchemaCall(id), paramSummary(schema, explainArgsChars, nil))
	}
	if ex, ok := exampleOf(root); ok {
		keepSent(ex, root, sent, problem, mis)
		fmt.Fprintf(&b, "%s\n%s\n", rightShape, exampleCall(id, ex))
	}
	b.WriteString("Fix the arguments and call execute_tool again.")
	return b.String()
}

// explainArgsChars bounds the argument line that stands for an input
// schema over catalog.MaxSchemaShown.
const explainArgsChars = 1000

// standInSchema is what a compact search_tools answer gives for the input
// schema of the tool id (schema): the schema itself, or, over
// catalog.MaxSchemaShown, an object schema whose description gives its
// size, its arguments and how to have the whole. An enum of 100,000
// values (1.4 MB) went whole into every answer that ranked its tool, even
// fifth, and a client that hands the model the structuredContent (Claude
// Code) refused the answer, over its 25,000 tokens.
func standInSchema(id string, schema json.RawMessage) json.RawMessage {
	if len(schema) <= catalog.MaxSchemaShown {
		return schema // compacting makes it no longer
	}
	c := shownSchema(schema)
	if len(c) <= catalog.MaxSchemaShown {
		return schema
	}
	desc := fmt.Sprintf(`The input schema of %s is %d KB, too long for a search answer. Its arguments: %s. execute_tool checks a call against the whole schema and, when it does not fit, says what is wrong with a call of the right shape; %s gives the whole schema.`,
		id, len(c)>>10, paramSummary(schema, explainArgsChars, nil), wholeSchemaCall(id))
	b, _ := json.Marshal(map[string]string{"type": "object", "description": desc})
	return b
}

// standInOutput is standInSchema for the output schema of the tool id:
// the schema itself, or, over catalog.MaxSchemaShown, an object schema
// whose description gives its size and how to have the whole (a full
// answer of that tool alone).
func standInOutput(id string, schema json.RawMessage) json.RawMessage {
	if len(schema) <= catalog.MaxSchemaShown {
		return schema
	}
	c := shownSchema(schema)
	if len(c) <= catalog.MaxSchemaShown {
		return schema
	}
	desc := fmt.Sprintf(`The output schema of %s is %d KB, too long for a search answer; %s gives it whole.`, id, len(c)>>10, wholeSchemaCall(id))
	b, _ := json.Marshal(map[string]string{"type": "object", "description": desc})
	return b
}

// wholeSchemaCall is the search that answers with the whole input schema
// of the tool id: a full answer of that tool alone (its ID as the query
// ranks it first). A full answer of several tools has standInSchema too:
// one whose fifth hit had an enum of 1.4 MB was 2.4 MB (the schema in the
// text and in structuredContent), which a client refuses whole, though
// the schema asked for was another's.
func wholeSchemaCall(id string) string {
	q, _ := json.Marshal(id)
	return fmt.Sprintf(`search_tools with {"query": %s, "limit": 1, "detail": "full"}`, q)
}

// rightShape introduces the example call of an answer to arguments that
// do not fit.
const rightShape = "A call of the right shape (replace each <placeholder>; optional arguments left out):"

// alsoWrong adds to the validator's one problem (at the root of the
// arguments) the other half of a wrong name for an argument ("file" for
// "path"): beside required arguments missing, "; " and the keys sent that
// the schema (root) does not declare; beside keys it forbids, "; " and the
// required arguments missing. Either read alone as "path" missing, or
// "file" to remove. "" otherwise, and for a schema that declares no
// properties or has patternProperties (any key may be its).
func alsoWrong(problem string, root, sent map[string]any) string {
	arg, _, words := problemAt(problem)
	props, _ := root["properties"].(map[string]any)
	if _, patterns := root["patternProperties"]; arg != "" || props == nil || patterns {
		return ""
	}
	switch {
	case strings.HasPrefix(words, "required: "):
		var extra []string
		for k := range sent {
			if _, ok := props[k]; !ok {
				extra = append(extra, k)
			}
		}
		slices.Sort(extra)
		return alsoSaid(extra, "; %s is not an argument of this tool", "; %s are not arguments of this tool")
	case strings.HasPrefix(words, "unexpected additional properties "):
		missing := missingRequired(root, sent)
		return alsoSaid(missing, "; the required argument %s is missing", "; the required arguments %s are missing")
	}
	return ""
}

// alsoSaid is alsoWrong's words for keys: one or many (a format with the
// quoted keys), "" for none.
func alsoSaid(keys []string, one, many string) string {
	switch len(keys) {
	case 0:
		return ""
	case 1:
		return fmt.Sprintf(one, quoted(keys))
	}
	return fmt.Sprintf(many, quoted(keys))
}

// exampleCall is execute_tool's arguments for id with args, as JSON.
func exampleCall(id string, args map[string]any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // placeholders read <name>, not \u003cname\u003e
	_ = enc.Encode(struct {
		Name      string         `json:"name"`
		Arguments map[string]any `json:"arguments"`
	}{id, args})
	return strings.TrimSpace(b.String())
}

// plainWords rewrites a jsonschema-go validation error, such as
//
//	validating root: validating /properties/entities: type: not-a-list has type "string", want "array"
//
// as `"entities" must be an array, not a string ("not-a-list")`. The
// deepest schema location names the argument; a message it does not know
// is kept as it is, after the argument's name. The value the validator
// names is written as JSON, as it was sent (found in sent, the arguments),
// and an enum's values as the schema (root) gives them: the validator
// prints Go's own forms (map[a:1], [x y], <invalid reflect.Value> for null).
//
// A schema reached through a $ref (pydantic's nested models: "$ref":
// "#/$defs/Reader") is validated at its definition's location; the path
// goes on from the argument that holds the $ref, so the argument reads
// "request.reader.card", not "card" or nothing.
func plainWords(msg string, root map[string]any, sent any) string {
	return plainWordsOf(argWords, msg, root, sent)
}

// wording is what plainWordsOf calls the value checked: the arguments of
// a call, or a result's structuredContent (outputProblem).
type wording struct {
	whole string // the value as a whole: "the arguments"
	item  string // one of its top-level fields: "argument"
	fix   bool   // tell the sender to fix it ("remove it")
	one   bool   // whole is singular ("is missing")
	// bare names no value of the one checked, only where and what kind
	// of problem: what the audit record and the log keep of a result,
	// whose data they keep nowhere else (arguments only as a hash).
	bare bool
}

var (
	argWords    = wording{whole: "the arguments", item: "argument", fix: true}
	outputWords = wording{whole: "structuredContent", item: "field", one: true}
	// outputRecordWords are outputWords for the audit record and the log.
	outputRecordWords = wording{whole: "structuredContent", item: "field", one: true, bare: true}
)

// plainWordsOf is plainWords for a value that w names.
func plainWordsOf(w wording, msg string, root map[string]any, sent any) string {
	arg, loc, msg := problemAt(msg)
	where := w.whole
	if arg != "" {
		where = strconv.Quote(arg)
	}
	switch {
	case strings.HasPrefix(msg, "required: missing properties: "):
		names := parseQuoted(strings.TrimPrefix(msg, "required: missing properties: "))
		what := "required " + w.item
		if arg != "" {
			what = "required field"
		}
		if len(names) > 1 {
			what += "s"
		}
		verb := isOrAre(arg)
		if w.one {
			verb = "is"
		}
		return fmt.Sprintf("%s %s missing the %s %s", where, verb, what, quoted(names))
	case strings.HasPrefix(msg, "unexpected additional properties "):
		names := parseQuoted(strings.TrimPrefix(msg, "unexpected additional properties "))
		slices.Sort(names) // the validator lists them in map order
		verb := "is not a field"
		if len(names) > 1 {
			verb = "are not fields"
		}
		if arg == "" && w.fix {
			verb = "is not an argument" // it read "is not a argument"
			if len(names) > 1 {
				verb = "are not arguments"
			}
			return fmt.Sprintf("%s %s of this tool: remove %s", quoted(names), verb, pronoun(names))
		}
		if !w.fix {
			return fmt.Sprintf("%s %s of %s", quoted(names), verb, where)
		}
		return fmt.Sprintf("%s %s of %s: remove %s", quoted(names), verb, where, pronoun(names))
	case strings.HasPrefix(msg, "type: "):
		// "type: V has type "T", want "W"" or "... want one of "A, B""
		v, rest, ok := strings.Cut(strings.TrimPrefix(msg, "type: "), " has type ")
		got, want, ok2 := strings.Cut(rest, ", want ")
		if !ok || !ok2 {
			break
		}
		got, _ = strconv.Unquote(got)
		if w, ok := strings.CutPrefix(want, "one of "); ok {
			// one quoted list: "integer, null"
			var types []string
			for _, q := range parseQuoted(w) {
				types = append(types, strings.Split(q, ", ")...)
			}
			want = strings.Join(withArticles(types), " or ")
		} else {
			want, _ = strconv.Unquote(want)
			want = withArticle(want)
		}
		if got == "null" || w.bare {
			return fmt.Sprintf("%s must be %s, not %s", where, want, withArticle(got))
		}
		return fmt.Sprintf("%s must be %s, not %s (%s)", where, want, withArticle(got), sentJSON(sent, arg, v))
	case strings.HasPrefix(msg, "minimum: "), strings.HasPrefix(msg, "maximum: "),
		strings.HasPrefix(msg, "exclusiveMinimum: "), strings.HasPrefix(msg, "exclusiveMaximum: "):
		// "minimum: 0/1 is less than 1.000000" (a big.Rat, a %f bound)
		kw, rest, _ := strings.Cut(msg, ": ")
		v, bound, ok := strings.Cut(rest, " is ")
		if i := strings.LastIndexByte(bound, ' '); ok && i >= 0 {
			bound = bound[i+1:]
			limit := map[string]string{"minimum": "at least", "maximum": "at most", "exclusiveMinimum": "greater than", "exclusiveMaximum": "less than"}[kw]
			if w.bare {
				return fmt.Sprintf("%s must be %s %s", where, limit, plainNumber(bound))
			}
			return fmt.Sprintf("%s must be %s %s, not %s", where, limit, plainNumber(bound), plainNumber(v))
		}
	case strings.HasPrefix(msg, "enum: "):
		v, vals, ok := strings.Cut(strings.TrimPrefix(msg, "enum: "), " does not equal any of: ")
		if ok {
			if en, ok := schemaAt(root, loc)["enum"].([]any); ok && len(en) > 0 {
				vals = jsonValues(en, ", ")
			}
			if w.bare {
				return fmt.Sprintf("%s must be one of %s", where, oneline.Cut(vals, 200))
			}
			return fmt.Sprintf("%s must be one of %s, not %s", where, oneline.Cut(vals, 200), sentJSON(sent, arg, v))
		}
	}
	if w.bare {
		// The validator's own words name the value ("pattern: "…" does
		// not match …"): only its keyword.
		if kw, _, ok := strings.Cut(msg, ":"); ok && !strings.ContainsAny(kw, " \"") {
			return fmt.Sprintf("%s does not fit the schema's %q", where, kw)
		}
		return where + " does not fit the schema"
	}
	if arg == "" {
		return msg
	}
	return fmt.Sprintf("%s: %s", where, msg)
}

func isOrAre(arg string) string {
	if arg == "" {
		return "are"
	}
	return "is"
}

func pronoun(names []string) string {
	if len(names) > 1 {
		return "them"
	}
	return "it"
}

func withArticle(typ string) string {
	switch typ {
	case "":
		return "something else"
	case "null":
		return "null"
	case "array", "integer", "object":
		return "an " + typ
	}
	return "a " + typ
}

func withArticles(types []string) []string {
	out := make([]string, len(types))
	for i, t := range types {
		out[i] = withArticle(t)
	}
	return out
}

// parseQuoted reads the names of a Go %q-formatted []string: ["a" "b"].
func parseQuoted(s string) []string {
	s = strings.TrimSpace(s)
	s = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
	var out []string
	for s = strings.TrimSpace(s); s != ""; s = strings.TrimSpace(s) {
		q, err := strconv.QuotedPrefix(s)
		if err != nil {
			return append(out, s)
		}
		u, _ := strconv.Unquote(q)
		out = append(out, u)
		s = s[len(q):]
	}
	return out
}

// defLocation reports whether loc is inside a definition ("/$defs/NAME"
// or "/definitions/NAME", where jsonschema-go validates what a $ref
// points to) and returns the rest of loc after the definition's name, as
// a location of its own ("" for the definition itself).
func defLocation(loc string) (string, bool) {
	for _, p := range []string{"/$defs/", "/definitions/"} {
		if rest, ok := strings.CutPrefix(loc, p); ok {
			if _, after, ok := strings.Cut(rest, "/"); ok {
				return "/" + after, true
			}
			return "", true
		}
	}
	return "", false
}

// joinPath appends the argument path sub (as argPath writes it) to base.
func joinPath(base, sub string) string {
	if base == "" || sub == "" || strings.HasPrefix(sub, "[") {
		return base + sub
	}
	return base + "." + sub
}

// plainNumber writes a number of a validator message as a person would:
// "0/1" (a big.Rat) as 0, "3/2" as 1.5, "1.000000" as 1.
func plainNumber(s string) string {
	if r, ok := new(big.Rat).SetString(s); ok {
		if r.IsInt() {
			return r.Num().String()
		}
		f, _ := r.Float64()
		return strconv.FormatFloat(f, 'g', -1, 64)
	}
	return s
}

// argPath turns a schema location (a JSON pointer from the input schema's
// root, as jsonschema-go names it, or "root") into the argument it
// validates: /properties/entities/items/properties/name → entities[].name.
// Locations it cannot follow (combinators, definitions) end the path there.
func argPath(loc string) string {
	if !strings.HasPrefix(loc, "/") {
		return ""
	}
	segs := strings.Split(loc[1:], "/")
	var b strings.Builder
	for i := 0; i < len(segs); i++ {
		switch segs[i] {
		case "properties":
			if i+1 < len(segs) {
				if b.Len() > 0 {
					b.WriteByte('.')
				}
				b.WriteString(strings.NewReplacer("~1", "/", "~0", "~").Replace(segs[i+1]))
				i++
			}
		case "items", "additionalItems":
			b.WriteString("[]")
		case "prefixItems":
			if i+1 < len(segs) {
				fmt.Fprintf(&b, "[%s]", segs[i+1])
				i++
			}
		default:
			return b.String()
		}
	}
	return b.String()
}

// exampleArgs derives arguments that have the shape of schema: its required
// properties, each with a placeholder of its type ("<string>", 0, false,
// one item of an array, an object's own required properties), its const,
// its first enum value or its default. It reports false when the schema is
// not an object schema it can read.
func exampleArgs(schema json.RawMessage) (map[string]any, bool) {
	var s map[string]any
	if json.Unmarshal(schema, &s) != nil {
		return nil, false
	}
	return exampleOf(s)
}

// exampleOf is exampleArgs of a decoded schema (nil: none to read).
func exampleOf(s map[string]any) (map[string]any, bool) {
	if s == nil {
		return nil, false
	}
	if t, _ := s["type"].(string); t != "" && t != "object" {
		return nil, false
	}
	ex := exampler{root: s, left: maxExampleValues}
	m, _ := ex.value(s, "", 0).(map[string]any)
	if m == nil {
		m = map[string]any{}
	}
	return m, true
}

// maxExampleDepth bounds the recursion of exampler.value (schemas may nest
// deeply, and a placeholder is as good a hint below that).
const maxExampleDepth = 6

// maxExampleValues bounds how many values an example holds. A $ref repeats
// its definition wherever it stands, so without a bound the example grows
// with the product of the required properties at each level, not with the
// schema: a 456-byte schema whose model required itself under 12 properties
// made a 38 MB example in 10 s (TestExampleArgsBounded). Past the bound,
// values are placeholders.
const maxExampleValues = 100

// exampler derives the example of one schema.
type exampler struct {
	root map[string]any
	left int      // values the example may still hold
	refs []string // the $refs being expanded, outermost first
}

func (e *exampler) value(s map[string]any, name string, depth int) any {
	placeholder := "<value>"
	if name != "" {
		placeholder = "<" + name + ">"
	}
	e.left--
	if e.left < 0 {
		return placeholder
	}
	// A definition met again inside itself (a tree's node, a model that
	// requires itself) is a placeholder: expanding it again says nothing new.
	if ref, _ := s["$ref"].(string); ref != "" {
		if slices.Contains(e.refs, ref) {
			return placeholder
		}
		e.refs = append(e.refs, ref)
		defer func() { e.refs = e.refs[:len(e.refs)-1] }()
	}
	s = deref(e.root, s)
	if v, ok := s["const"]; ok {
		return v
	}
	if en, ok := s["enum"].([]any); ok && len(en) > 0 {
		return en[0]
	}
	if v, ok := s["default"]; ok {
		return v
	}
	if ex, ok := s["examples"].([]any); ok && len(ex) > 0 {
		return ex[0]
	}
	for _, k := range []string{"anyOf", "oneOf", "allOf"} {
		if alts, ok := s[k].([]any); ok && len(alts) > 0 && depth < maxExampleDepth {
			if first, ok := alts[0].(map[string]any); ok {
				return e.value(first, name, depth+1)
			}
		}
	}
	typ := ""
	switch t := s["type"].(type) {
	case string:
		typ = t
	case []any:
		for _, x := range t {
			if x, _ := x.(string); x != "null" && typ == "" {
				typ = x
			}
		}
	}
	if typ == "" {
		if _, ok := s["properties"]; ok {
			typ = "object"
		} else if _, ok := s["items"]; ok {
			typ = "array"
		}
	}
	if depth >= maxExampleDepth {
		return placeholder
	}
	switch typ {
	case "string":
		return placeholder
	case "integer", "number":
		return exampleNumber(s)
	case "boolean":
		return false
	case "null":
		return nil
	case "array":
		item, _ := s["items"].(map[string]any)
		if item == nil {
			return []any{}
		}
		return []any{e.value(item, singular(name), depth+1)}
	case "object":
		props, _ := s["properties"].(map[string]any)
		out := map[string]any{}
		req, _ := s["required"].([]any)
		for _, r := range req {
			k, _ := r.(string)
			ps, _ := props[k].(map[string]any)
			if ps == nil {
				ps = map[string]any{}
			}
			out[k] = e.value(ps, k, depth+1)
		}
		return out
	}
	return placeholder
}

// exampleNumber is the number an example call shows for schema s: 0, or
// the bound nearest to it when s's bounds leave 0 out. Not the minimum
// alone: zod's .int() bounds every integer of a TypeScript server by
// ±(2^53-1), and a model sent -9007199254740991 as the example had it.
func exampleNumber(s map[string]any) float64 {
	v := 0.0
	if m, ok := s["exclusiveMinimum"].(float64); ok && v <= m {
		v = math.Floor(m) + 1
	}
	if m, ok := s["minimum"].(float64); ok && v < m {
		v = m
	}
	if m, ok := s["exclusiveMaximum"].(float64); ok && v >= m {
		v = math.Ceil(m) - 1
	}
	if m, ok := s["maximum"].(float64); ok && v > m {
		v = m
	}
	return v
}

// deref is s with a local $ref ("#/$defs/Reader", "#/definitions/P", any
// JSON pointer into root) replaced by what it points to; the keywords
// beside the $ref win over the target's. A $ref it cannot follow (another
// document, a bad pointer) leaves s as it is.
func deref(root, s map[string]any) map[string]any {
	ref, _ := s["$ref"].(string)
	ptr, ok := strings.CutPrefix(ref, "#")
	if !ok {
		return s
	}
	var target any = root
	if ptr != "" {
		for _, seg := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
			m, _ := target.(map[string]any)
			if m == nil {
				return s
			}
			target = m[strings.NewReplacer("~1", "/", "~0", "~").Replace(seg)]
		}
	}
	t, _ := target.(map[string]any)
	if t == nil {
		return s
	}
	out := make(map[string]any, len(t)+len(s))
	for k, v := range t {
		out[k] = v
	}
	for k, v := range s {
		if k != "$ref" {
			out[k] = v
		}
	}
	return out
}

// singular names an array's item after the array: "entities" → "entity",
// "files" → "file"; other names are kept.
func singular(name string) string {
	switch {
	case strings.HasSuffix(name, "ies") && len(name) > 3:
		return name[:len(name)-3] + "y"
	case strings.HasSuffix(name, "s") && !strings.HasSuffix(name, "ss") && len(name) > 1:
		return name[:len(name)-1]
	}
	return name
}

// maxMatchRunes bounds how much of an unknown name is matched against the
// known ones: the edit distance to every ID costs the name's length times
// theirs, and a caller may send a name of megabytes: against 10,000 IDs a
// name of 40 runes takes 28 ms, of 200 runes 0.12 s, of 5,000 runes 2.8 s
// (one CPU, held by one request; BenchmarkClosest). No tool's name is near
// that long.
const maxMatchRunes = 200

// heldBare is the tools whose own name n is (a name written without its
// server, read as bareName reads it: in any case, full-width, "-" for
// "_") that caller's own scope shows but that cannot run now: of a
// disabled server, or quarantined. Read by strings.EqualFold alone, a
// name bareName took for a held tool ("ｗｒｉｔｅ_file") had the answer
// name only another server's tool of that name.
func (g *Gateway) heldBare(c *policy.Caller, n string) []catalog.Tool {
	if g.opts.Policy == nil || n == "" || strings.Contains(n, catalog.Sep) {
		return nil
	}
	fold := catalog.FoldName(n)
	var out []catalog.Tool
	for _, id := range g.searcher.IDs() {
		if _, tool, _ := strings.Cut(id, catalog.Sep); catalog.FoldName(tool) == fold && g.sees(c, id) && !g.visible(c, id) {
			if t, ok := g.searcher.Tool(id); ok {
				out = append(out, t)
			}
		}
	}
	return out
}

// unknownTool explains an unknown name: the closest known names, and the
// tools search_tools finds for the words of the name.
//
// The names and tools offered are only those the caller may run; why, when
// set, is the policy's reason that the name cannot run (a removed server),
// said instead of "unknown tool". While a cold start's first index is
// built (Options.Building), the known names are those the servers listed
// so far, and no search runs: it would wait for the index, and answer
// that it is being built.
func (g *Gateway) unknownTool(ctx context.Context, name string, why ...string) string {
	var b strings.Builder
	caller := policy.CallerFrom(ctx)
	var building error
	if g.opts.Building != nil {
		building = g.opts.Building()
	}
	server, tool, err := catalog.SplitID(name)
	var down []DownServer
	var stale string // why a server whose tools of an earlier listing the catalog holds may have more
	if err == nil && len(why) == 0 {
		if down = g.downServers(caller, server); len(down) == 0 && g.listedServers()[server] {
			stale = g.unavailable(caller, server)
		}
	}
	meant := g.idsMeant(caller, trimmedName(name))
	switch {
	case strings.EqualFold(name, SearchToolName) || strings.EqualFold(name, ExecuteToolName):
		return fmt.Sprintf("execute_tool: %s is one of this gateway's two tools, not a tool of a server: call it directly (tools/call with the name %q), not through execute_tool.", strings.ToLower(name), strings.ToLower(name))
	case len(meant) > 1:
		// Tools the caller may see, named whatever why says of the name
		// as written (that there is no server "My-fs").
		return fmt.Sprintf("execute_tool: %s.", catalog.AmbiguousName(name, meant))
	case err != nil:
		fmt.Fprintf(&b, "execute_tool: %v.", err)
		tool = name
		for _, t := range g.heldBare(caller, trimmedName(name)) {
			// The tool the model may mean, that cannot run now: said, so
			// that another server's of its name is not taken for it.
			fmt.Fprintf(&b, " %s has that name and cannot run now: %s.", t.ID(), strings.TrimSuffix(g.opts.Policy.Decide(caller, t).Reason, "."))
		}
	case len(why) > 0:
		fmt.Fprintf(&b, "execute_tool: %s.", why[0])
	case len(down) > 0:
		// Perhaps a tool of it: it cannot tell until it runs.
		fmt.Fprintf(&b, "execute_tool: %q cannot run: %s (it never listed its tools, so %q cannot be checked either). %s.", oneline.Echo(name), down[0].Reason, oneline.Echo(tool), policy.StatusHint(g.opts.Policy, caller, server))
	case stale != "":
		// A warm start's catalog holds what the server listed in the last
		// run: a tool it added since is not known until it lists again.
		fmt.Fprintf(&b, "execute_tool: unknown tool %q: %s, and the tools known of it are those it listed before: one it has added since is known once it lists its tools again (call search_tools then). %s.", oneline.Echo(name), stale, policy.StatusHint(g.opts.Policy, caller, server))
	case building != nil:
		fmt.Fprintf(&b, "execute_tool: unknown tool %q: no server listed it so far, and search_tools cannot look for it yet: %v.", oneline.Echo(name), building)
	case len(g.searcher.IDs()) == 0:
		// No index yet: a cold start builds it in the background, and a
		// client may call a name it knows from an earlier session.
		return fmt.Sprintf("execute_tool: unknown tool %q: the gateway has no tool index yet (a first start on a data folder builds it, and search_tools says how far it is): call search_tools in a few seconds.", oneline.Echo(name))
	default:
		fmt.Fprintf(&b, "execute_tool: unknown tool %q.", oneline.Echo(name))
	}
	match := name
	if r := []rune(name); len(r) > maxMatchRunes {
		match, tool = string(r[:maxMatchRunes]), string(r[:maxMatchRunes])
		if _, t, ok := strings.Cut(match, catalog.Sep); ok && err == nil {
			tool = t
		}
	}
	near := Closest(match, g.visibleIDs(caller), 3)
	offered := len(near) > 0 // names the answer offers
	if offered {
		fmt.Fprintf(&b, " Closest names: %s.", strings.Join(near, ", "))
	}
	if words := catalog.NameWords(tool); words != "" && building == nil {
		res, err := g.searcher.Search(context.WithValue(ctx, suggestionKey{}, true), search.Query{Text: words, Limit: 3, Filter: g.filter(caller)})
		var found []string
		if err == nil { // weak matches would only invite a wrong call
			for _, h := range res.Hits {
				if id := h.Tool.ID(); h.Fits && !slices.Contains(near, id) {
					found = append(found, id)
				}
			}
		}
		if len(found) > 0 {
			fmt.Fprintf(&b, " search_tools %q also finds: %s.", oneline.Echo(words), strings.Join(found, ", "))
			offered = true
		}
	}
	if len(down) > 0 {
		b.WriteString(" Retry later, or call search_tools for another tool that does it.")
		return b.String()
	}
	switch {
	case building != nil && offered:
		b.WriteString(" Use one of these names, or call search_tools with what you want to do once the index is built.")
		return b.String()
	case building != nil: // it said to try again
		return b.String()
	case !offered: // "these names" would point at none
		b.WriteString(" Call search_tools with what you want to do to find the tool's name.")
		return b.String()
	}
	b.WriteString(" Use one of these names, or call search_tools with what you want to do.")
	return b.String()
}

// problemAt splits a jsonschema-go validation error into the argument it
// is about ("request.reader.card"; "" for the arguments as a whole), the
// schema location that failed and the validator's own words.
func problemAt(msg string) (arg, loc, words string) {
	base := "" // the argument where the current definition was entered
	for {
		rest, ok := strings.CutPrefix(msg, "validating ")
		if !ok {
			break
		}
		l, tail, ok := strings.Cut(rest, ": ")
		if !ok {
			break
		}
		msg, loc = tail, l
		if def, ok := defLocation(l); ok {
			if def == "" { // the $ref's target itself: entered from arg
				base = arg
			}
			arg = joinPath(base, argPath(def))
			continue
		}
		arg, base = argPath(l), ""
	}
	return arg, loc, msg
}

// sentJSON is the value at the argument path arg of sent (the arguments as
// sent: a long number a json.Number, where the validator saw a float64)
// that the validator printed as v, written as JSON and cut to 40
// characters. Under an array ("entities[].name") it is the
// first item's value that prints as v. Where none does, v is kept.
func sentJSON(sent any, arg, v string) string {
	var found []any
	valuesAt(sent, arg, &found)
	for _, c := range found {
		if f, _ := floatNumbers(c); printed(f) == v {
			if b, err := json.Marshal(c); err == nil {
				return oneline.Cut(string(b), 40)
			}
		}
	}
	return oneline.Cut(v, 40)
}

// printed is how the validator prints a value it was given (with %v, a
// null as the zero reflect.Value).
func printed(v any) string {
	if v == nil {
		return "<invalid reflect.Value>"
	}
	return fmt.Sprint(v)
}

// valuesAt appends to found the values at the argument path (argPath's
// form: "a.b[].c", "t[0]") in v.
func valuesAt(v any, path string, found *[]any) {
	if path == "" {
		*found = append(*found, v)
		return
	}
	if rest, ok := strings.CutPrefix(path, "[]"); ok {
		items, _ := v.([]any)
		for _, it := range items {
			valuesAt(it, strings.TrimPrefix(rest, "."), found)
		}
		return
	}
	if path[0] == '[' {
		end := strings.IndexByte(path, ']')
		n, err := strconv.Atoi(path[1:max(end, 1)])
		items, _ := v.([]any)
		if end < 0 || err != nil || n < 0 || n >= len(items) {
			return
		}
		valuesAt(items[n], strings.TrimPrefix(path[end+1:], "."), found)
		return
	}
	obj, _ := v.(map[string]any)
	end := strings.IndexAny(path, ".[")
	if end < 0 {
		end = len(path)
	}
	if x, ok := obj[path[:end]]; ok {
		valuesAt(x, strings.TrimPrefix(path[end:], "."), found)
	}
}

// schemaAt is the schema at a validator's location (a JSON pointer from
// root, "root" for root itself); nil when there is none.
func schemaAt(root map[string]any, loc string) map[string]any {
	if loc == "root" {
		return root
	}
	var at any = root
	for _, seg := range strings.Split(strings.TrimPrefix(loc, "/"), "/") {
		m, _ := at.(map[string]any)
		if m == nil {
			if l, ok := at.([]any); ok {
				if n, err := strconv.Atoi(seg); err == nil && n >= 0 && n < len(l) {
					at = l[n]
					continue
				}
			}
			return nil
		}
		at = m[strings.NewReplacer("~1", "/", "~0", "~").Replace(seg)]
	}
	m, _ := at.(map[string]any)
	return m
}

// keepSent puts into ex, the example call derived from the schema, the
// arguments the caller sent that the schema knows (so the example does not
// undo what was right: {"a": 1} missing "b" gave {"a": 0, "b": 0}), all
// but the one the problem is about and those that do not fit their own
// schema either (mis): {"a": "1", "b": "2"} gave {"a": 0, "b": "2"}.
func keepSent(ex, root map[string]any, sent map[string]any, problem string, mis map[string]string) {
	props, _ := root["properties"].(map[string]any)
	bad := problemArg(problem)
	for k, v := range sent {
		if _, known := props[k]; known && k != bad && mis[k] == "" {
			ex[k] = v
		}
	}
}

// problemArg is the argument (at the root of the arguments) that the
// validator's problem is about; "" for one about the arguments as a whole.
func problemArg(problem string) string {
	arg, _, _ := problemAt(problem)
	if i := strings.IndexAny(arg, ".["); i >= 0 {
		arg = arg[:i]
	}
	return arg
}

// missingRequired are the arguments root requires that sent lacks, in
// the schema's order.
func missingRequired(root, sent map[string]any) []string {
	req, _ := root["required"].([]any)
	var out []string
	for _, r := range req {
		if k, _ := r.(string); k != "" {
			if _, ok := sent[k]; !ok {
				out = append(out, k)
			}
		}
	}
	return out
}

// maxMisfitChecks bounds the arguments misfits checks one by one.
const maxMisfitChecks = 100

// misfits are, by argument, the plain words for each argument of sent
// that root declares and whose value does not fit its own schema. The
// validator names one problem, in map order: a model that fixed it sent
// the call again and was told of the next.
func misfits(root, sent map[string]any) map[string]string {
	props, _ := root["properties"].(map[string]any)
	if len(props) == 0 || len(sent) == 0 {
		return nil
	}
	// The root without what reads several arguments together: an object
	// of one argument is then checked for that argument alone, its $refs
	// resolved in the root as before.
	one := maps.Clone(root)
	for _, k := range []string{"required", "additionalProperties", "unevaluatedProperties", "patternProperties",
		"propertyNames", "minProperties", "maxProperties", "dependentRequired", "dependentSchemas", "dependencies",
		"allOf", "anyOf", "oneOf", "not", "if", "then", "else"} {
		delete(one, k)
	}
	text, err := json.Marshal(one)
	if err != nil {
		return nil
	}
	rs, err := catalog.ResolveSchema(text)
	if err != nil {
		return nil
	}
	var out map[string]string
	keys := slices.Sorted(maps.Keys(sent))
	for _, k := range keys[:min(len(keys), maxMisfitChecks)] {
		if _, ok := props[k]; !ok {
			continue
		}
		// As the validator saw it: a long number is a json.Number in sent.
		var v any
		if b, err := json.Marshal(sent[k]); err != nil || json.Unmarshal(b, &v) != nil {
			continue
		}
		if err := rs.Validate(map[string]any{k: v}); err != nil {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = plainWords(err.Error(), root, sent)
		}
	}
	return out
}

// sortedWords are m's values in the order of their keys.
func sortedWords(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, m[k])
	}
	return out
}
