package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/gateway/audit"
	"github.com/toolgate/toolgate/gateway/audit/audittest"
	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/gateway/policy"
	"github.com/toolgate/toolgate/index"
	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/search"
)

// memorySchema is the input schema of the bundled memory server's
// create_entities (as server-memory 2026.8.31 lists it).
const memorySchema = `{"type":"object","properties":{"entities":{"type":"array","items":{"type":"object","properties":{
"name":{"type":"string","description":"The name of the entity"},
"entityType":{"type":"string","description":"The type of the entity"},
"observations":{"type":"array","items":{"type":"string"},"description":"An array of observation contents associated with the entity"}},
"required":["name","entityType","observations"],"additionalProperties":false}}},"required":["entities"],"additionalProperties":false,
"$schema":"http://json-schema.org/draft-07/schema#"}`

// validateWith runs jsonschema-go on args as execute_tool does and returns
// its message ("" when valid).
func validateWith(t *testing.T, schema string, args string) string {
	t.Helper()
	var s jsonschema.Schema
	if err := json.Unmarshal([]byte(schema), &s); err != nil {
		t.Fatal(err)
	}
	s.Schema = ""
	rs, err := s.Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(args), &m); err != nil {
		t.Fatal(err)
	}
	if err := rs.Validate(m); err != nil {
		return err.Error()
	}
	return ""
}

// pydanticSchema is the input schema the Python MCP SDK (mcp 2.3.0, from
// pydantic) lists for cmd/toolgate/testdata/pyserver.py's order_books: its
// nested models are $defs reached through $ref, an optional field is an
// anyOf with null, Field(ge=1) is a minimum.
const pydanticSchema = `{"$defs":{"Reader":{"properties":{"name":{"title":"Name","type":"string"},"card":{"description":"library card number","minimum":1,"title":"Card","type":"integer"}},"required":["name","card"],"title":"Reader","type":"object"},` +
	`"Request":{"properties":{"reader":{"$ref":"#/$defs/Reader"},"titles":{"items":{"type":"string"},"minItems":1,"title":"Titles","type":"array"},"note":{"anyOf":[{"type":"string"},{"type":"null"}],"default":null,"title":"Note"}},"required":["reader","titles"],"title":"Request","type":"object"}},` +
	`"properties":{"delivery":{"enum":["pickup","post","locker"],"title":"Delivery","type":"string"},"request":{"$ref":"#/$defs/Request"}},"required":["delivery","request"],"title":"order_booksArguments","type":"object"}`

func TestPlainWords(t *testing.T) {
	enumSchema := `{"type":"object","properties":{"mode":{"enum":["fast","slow"]},"n":{"type":["integer","null"]},"p/q":{"type":"string"}}}`
	boundsSchema := `{"type":"object","properties":{"r":{"type":"number","exclusiveMinimum":0.5,"maximum":10}}}`
	listSchema := `{"type":"object","properties":{"readers":{"type":"array","items":{"$ref":"#/$defs/Reader"}}},"$defs":{"Reader":{"type":"object","properties":{"card":{"type":"integer"}},"required":["card"]}}}`
	draft7Schema := `{"type":"object","properties":{"p":{"$ref":"#/definitions/P"}},"definitions":{"P":{"type":"object","properties":{"x":{"type":"integer","exclusiveMaximum":3}}}}}`
	for _, tc := range []struct {
		schema, args, want string
	}{
		{memorySchema, `{"entities":"not-a-list"}`, `"entities" must be an array, not a string ("not-a-list")`},
		{memorySchema, `{}`, `the arguments are missing the required argument "entities"`},
		{memorySchema, `{"entities":[{"name":"a"}]}`, `"entities[]" is missing the required fields "entityType", "observations"`},
		{memorySchema, `{"entities":[{"name":"a","entityType":"p","observations":[1]}]}`, `"entities[].observations[]" must be a string, not an integer (1)`},
		{memorySchema, `{"entities":[],"x":1,"y":2}`, `"x", "y" are not arguments of this tool: remove them`},
		{memorySchema, `{"entities":[],"x":1}`, `"x" is not an argument of this tool: remove it`},
		{memorySchema, `{"entities":[{"name":"a","entityType":"p","observations":[],"zz":1}]}`, `"zz" is not a field of "entities[]": remove it`},
		{enumSchema, `{"mode":"medium"}`, `"mode" must be one of "fast", "slow", not "medium"`},
		{enumSchema, `{"n":"x"}`, `"n" must be an integer or null, not a string ("x")`},
		{enumSchema, `{"p/q":3}`, `"p/q" must be a string, not an integer (3)`},
		// Nested models through $ref name the argument from the root.
		{pydanticSchema, `{"delivery":"post","request":{"reader":{"name":"Ada"},"titles":["x"]}}`, `"request.reader" is missing the required field "card"`},
		{pydanticSchema, `{"delivery":"post","request":{"reader":{"name":"Ada","card":0},"titles":["x"]}}`, `"request.reader.card" must be at least 1, not 0`},
		{pydanticSchema, `{"delivery":"post","request":{"reader":{"name":"Ada","card":"7"},"titles":["x"]}}`, `"request.reader.card" must be an integer, not a string ("7")`},
		{pydanticSchema, `{"delivery":"post","request":"Dune"}`, `"request" must be an object, not a string ("Dune")`},
		{pydanticSchema, `{"delivery":"post","request":{"reader":{"name":"Ada","card":1},"titles":[]}}`, `"request.titles": minItems: array length 0 is less than 1`},
		{pydanticSchema, `{"delivery":"drone","request":{"reader":{"name":"Ada","card":1},"titles":["x"]}}`, `"delivery" must be one of "pickup", "post", "locker", not "drone"`},
		{listSchema, `{"readers":[{"card":1},{}]}`, `"readers[]" is missing the required field "card"`},
		{draft7Schema, `{"p":{"x":3}}`, `"p.x" must be less than 3, not 3`},
		{boundsSchema, `{"r":0.5}`, `"r" must be greater than 0.5, not 0.5`},
		{boundsSchema, `{"r":10.25}`, `"r" must be at most 10, not 10.25`},
		// Values as JSON, as sent, not as Go prints them.
		{memorySchema, `{"entities":{"name":"a b"}}`, `"entities" must be an array, not an object ({"name":"a b"})`},
		{memorySchema, `{"entities":null}`, `"entities" must be an array, not null`},
		{enumSchema, `{"p/q":["a b","c"]}`, `"p/q" must be a string, not an array (["a b","c"])`},
		{enumSchema, `{"n":"2"}`, `"n" must be an integer or null, not a string ("2")`},
		{memorySchema, `{"entities":[{"name":"a","entityType":"p","observations":["ok",{"k":1}]}]}`, `"entities[].observations[]" must be a string, not an object ({"k":1})`},
	} {
		msg := validateWith(t, tc.schema, tc.args)
		if msg == "" {
			t.Fatalf("%s: valid", tc.args)
		}
		var root, sent map[string]any
		if err := json.Unmarshal([]byte(tc.schema), &root); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(tc.args), &sent); err != nil {
			t.Fatal(err)
		}
		if got := plainWords(msg, root, sent); got != tc.want {
			t.Errorf("%s:\n  validator: %s\n  got:  %s\n  want: %s", tc.args, msg, got, tc.want)
		}
	}
	if got := plainWords("something else entirely", nil, nil); got != "something else entirely" {
		t.Errorf("unknown message: %q", got)
	}
}

func TestExampleArgs(t *testing.T) {
	for _, tc := range []struct {
		schema string
		want   string
	}{
		{memorySchema, `{"entities":[{"entityType":"<entityType>","name":"<name>","observations":["<observation>"]}]}`},
		{`{"type":"object","properties":{"path":{"type":"string"},"depth":{"type":"integer"}},"required":["path"]}`, `{"path":"<path>"}`},
		{`{"type":"object","properties":{"a":{"type":"number","minimum":1},"b":{"type":"boolean"},"m":{"enum":["x","y"]},"c":{"const":7},"d":{"type":"string","default":"dd"},"o":{"type":"object"},"any":{}},"required":["a","b","m","c","d","o","any"]}`,
			`{"a":1,"any":"<any>","b":false,"c":7,"d":"dd","m":"x","o":{}}`},
		{`{"type":"object"}`, `{}`},
		// zod's .int() (every TypeScript server's integer) bounds it by
		// ±(2^53-1): the example is 0, not -9007199254740991, which a
		// model would send as given. A bound that leaves 0 out is kept.
		{`{"type":"object","properties":{"a":{"type":"integer","minimum":-9007199254740991,"maximum":9007199254740991},"b":{"type":"number","maximum":-2},"c":{"type":"integer","exclusiveMinimum":0},"d":{"type":"number","exclusiveMaximum":0},"e":{"type":"integer","minimum":3,"maximum":9}},"required":["a","b","c","d","e"]}`,
			`{"a":0,"b":-2,"c":1,"d":-1,"e":3}`},
		{`{"type":"object","properties":{"v":{"anyOf":[{"type":"integer"},{"type":"string"}]}},"required":["v"]}`, `{"v":0}`},
		// The Python SDK's nested models: objects through $ref, not "<request>".
		{pydanticSchema, `{"delivery":"pickup","request":{"reader":{"card":1,"name":"<name>"},"titles":["<title>"]}}`},
		{`{"type":"object","properties":{"p":{"$ref":"#/definitions/P","description":"a point"}},"required":["p"],"definitions":{"P":{"type":"object","properties":{"x":{"type":"integer"}},"required":["x"]}}}`, `{"p":{"x":0}}`},
	} {
		ex, ok := exampleArgs(json.RawMessage(tc.schema))
		if !ok {
			t.Errorf("%s: no example", tc.schema)
			continue
		}
		var buf strings.Builder
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		enc.Encode(ex)
		b := strings.TrimSpace(buf.String())
		if diff := cmp.Diff(tc.want, b); diff != "" {
			t.Errorf("example of %s (-want +got):\n%s", tc.schema, diff)
		}
		if msg := validateWith(t, tc.schema, b); msg != "" {
			t.Errorf("the example %s does not validate: %s", b, msg)
		}
	}
	// A definition that requires itself (no instance validates) is a
	// placeholder where it comes again.
	ex, _ := exampleArgs(json.RawMessage(`{"type":"object","properties":{"t":{"$ref":"#/$defs/T"}},"required":["t"],"$defs":{"T":{"type":"object","properties":{"kid":{"$ref":"#/$defs/T"}},"required":["kid"]}}}`))
	if b, _ := json.Marshal(ex); string(b) != `{"t":{"kid":"\u003ckid\u003e"}}` {
		t.Errorf("self-referring definition: %s", b)
	}
	if _, ok := exampleArgs(json.RawMessage(`{"type":"string"}`)); ok {
		t.Error("an example for a non-object schema")
	}
	if _, ok := exampleArgs(json.RawMessage(`not json`)); ok {
		t.Error("an example for a schema that is not JSON")
	}
}

// TestExampleArgsBounded: an example grows with the schema, not with the
// product of its $refs' required properties. A model that requires itself
// under twelve properties (456 bytes) made a 38 MB example in 10 s; twelve
// distinct definitions each requiring the next under six properties, a
// 6^6-value one.
func TestExampleArgsBounded(t *testing.T) {
	self := map[string]any{}
	var req []any
	for i := range 12 {
		k := fmt.Sprintf("p%d", i)
		self[k] = map[string]any{"$ref": "#/$defs/A"}
		req = append(req, k)
	}
	chain := map[string]any{}
	for lvl := range 12 {
		props := map[string]any{}
		var r []any
		for i := range 6 {
			k := fmt.Sprintf("q%d", i)
			props[k] = map[string]any{"$ref": fmt.Sprintf("#/$defs/L%d", lvl+1)}
			r = append(r, k)
		}
		chain[fmt.Sprintf("L%d", lvl)] = map[string]any{"type": "object", "properties": props, "required": r}
	}
	chain["L12"] = map[string]any{"type": "string"}
	for name, schema := range map[string]map[string]any{
		"self":  {"$defs": map[string]any{"A": map[string]any{"type": "object", "properties": self, "required": req}}, "$ref": "#/$defs/A"},
		"chain": {"$defs": chain, "$ref": "#/$defs/L0"},
	} {
		raw, err := json.Marshal(schema)
		if err != nil {
			t.Fatal(err)
		}
		ex, ok := exampleArgs(raw)
		if !ok || len(ex) == 0 {
			t.Fatalf("%s: no example (%v)", name, ex)
		}
		call := exampleCall("x__y", ex)
		// At most maxExampleValues values, and placeholders for the rest
		// of the properties of the objects being filled when they ran out.
		if len(call) > 4096 {
			t.Errorf("%s: the example is %d bytes: %.200s…", name, len(call), call)
		}
		if !strings.Contains(call, `"p0":"<p0>"`) && !strings.Contains(call, `"q0":{"q0":`) {
			t.Errorf("%s: the example lost its shape: %.300s", name, call)
		}
	}
}

// A schema over 32 KB is not shown whole in the answer to arguments that
// do not fit it, but by its argument line: an 8 MB one came back whole.
func TestExplainInvalidLongSchema(t *testing.T) {
	props := map[string]any{}
	for i := range 2000 {
		props[fmt.Sprintf("p%04d", i)] = map[string]any{"type": "string", "description": strings.Repeat("words ", 5)}
	}
	raw, err := json.Marshal(map[string]any{"type": "object", "properties": props, "required": []string{"p0000"}})
	if err != nil {
		t.Fatal(err)
	}
	got := explainInvalid("big__tool", raw, `validating root: required: missing properties: ["p0000"]`, nil)
	for _, want := range []string{
		fmt.Sprintf("The inputSchema of big__tool is %d KB, too long to show here (search_tools with {\"query\": \"big__tool\", \"limit\": 1, \"detail\": \"full\"} gives it whole); its arguments: p0000*: string, p0001: string,", len(raw)>>10),
		", +1",
		`{"name":"big__tool","arguments":{"p0000":"<p0000>"}}`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the answer lacks %q:\n%.2000s", want, got)
		}
	}
	if len(got) > 4<<10 {
		t.Errorf("the answer is %d bytes", len(got))
	}
	// A schema of the usual size is shown whole.
	small := json.RawMessage(`{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}`)
	if got := explainInvalid("x__y", small, "validating root: required: missing properties: [\"a\"]", nil); !strings.Contains(got, "The inputSchema of x__y:\n"+string(small)+"\n") {
		t.Errorf("a small schema is not shown whole:\n%s", got)
	}
}

// The example call keeps the arguments that were sent and are not the
// problem: {"a": 1} missing "b" was answered {"a": 0, "b": 0}, which a
// model copied.
func TestExplainInvalidKeepsSent(t *testing.T) {
	schema := `{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"},"note":{"type":"string"}},"required":["a","b"]}`
	for _, c := range []struct{ args, want string }{
		{`{"a":1}`, `{"name":"x__sum","arguments":{"a":1,"b":0}}`},
		{`{"a":1,"b":"3","note":"n"}`, `{"name":"x__sum","arguments":{"a":1,"b":0,"note":"n"}}`},
		{`{"a":1,"b":2,"note":5}`, `{"name":"x__sum","arguments":{"a":1,"b":2}}`},
		// Two wrong: the validator names the first, and the example kept
		// the second as sent, "right" to a model that copied it.
		{`{"a":"1","b":"2","note":"n"}`, `{"name":"x__sum","arguments":{"a":0,"b":0,"note":"n"}}`},
		{`{"a":"1","b":"2","note":7}`, `{"name":"x__sum","arguments":{"a":0,"b":0}}`},
	} {
		msg := validateWith(t, schema, c.args)
		var sent map[string]any
		if err := json.Unmarshal([]byte(c.args), &sent); err != nil {
			t.Fatal(err)
		}
		if got := explainInvalid("x__sum", json.RawMessage(schema), msg, sent); !strings.Contains(got, "\n"+c.want+"\n") {
			t.Errorf("%s: the example is not %s:\n%s", c.args, c.want, got)
		}
	}
	// A required argument missing beside one of the wrong type: both.
	got1 := explainInvalid("x__sum", json.RawMessage(schema), validateWith(t, schema, `{"a":"1"}`), map[string]any{"a": "1"})
	if first, _, _ := strings.Cut(got1, "\n"); !strings.Contains(first, `"a" must be a number, not a string ("1")`) || !strings.Contains(first, `the required argument "b" is missing`) {
		t.Errorf("a missing and a wrong argument:\n%s", got1)
	}
	// Every argument that does not fit is named, not the first alone: a
	// model fixed "a", sent again, and was told of "b".
	sent := map[string]any{"a": "1", "b": "2", "note": 7.0}
	got := explainInvalid("x__sum", json.RawMessage(schema), validateWith(t, schema, `{"a":"1","b":"2","note":7}`), sent)
	if first, _, _ := strings.Cut(got, "\n"); !strings.Contains(first, `"a" must be a number, not a string ("1"); "b" must be a number, not a string ("2"); "note" must be a string, not an integer (7).`) {
		t.Errorf("not every wrong argument named:\n%s", got)
	}
}

// TestExecuteToolRepairs: invalid arguments come back with plain words, the
// schema and an example call; an unknown name with the closest names and
// what search_tools finds for its words. Nothing reaches the backend.
func TestExecuteToolRepairs(t *testing.T) {
	caller := &fakeCaller{}
	g, fs := newTestGateway(t, caller)
	fs.tools = append(fs.tools[:len(fs.tools):len(fs.tools)], fs.tools[0])
	fs.tools[len(fs.tools)-1].Name, fs.tools[len(fs.tools)-1].InputSchema = "create_entities_v2", json.RawMessage(memorySchema)
	cs := connect(t, g)

	res := call(t, cs, ExecuteToolName, map[string]any{"name": "memory__create_entities_v2", "arguments": map[string]any{"entities": "not-a-list"}})
	txt := text(res)
	for _, want := range []string{
		`execute_tool memory__create_entities_v2: the arguments do not match the tool's inputSchema: "entities" must be an array, not a string ("not-a-list").`,
		`The inputSchema of memory__create_entities_v2:`,
		`"entityType":{"type":"string","description":"The type of the entity"}`,
		`{"name":"memory__create_entities_v2","arguments":{"entities":[{"entityType":"<entityType>","name":"<name>","observations":["<observation>"]}]}}`,
	} {
		if !res.IsError || !strings.Contains(txt, want) {
			t.Errorf("isError=%v, text lacks %q:\n%s", res.IsError, want, txt)
		}
	}

	res = call(t, cs, ExecuteToolName, map[string]any{"name": "memory__make_entities"})
	txt = text(res)
	for _, want := range []string{`unknown tool "memory__make_entities"`, "Closest names: memory__create_entities", `search_tools "make entities" also finds:`, "call search_tools"} {
		if !res.IsError || !strings.Contains(txt, want) {
			t.Errorf("isError=%v, text lacks %q:\n%s", res.IsError, want, txt)
		}
	}
	// One of the gateway's own two tools, sent through execute_tool.
	for _, name := range []string{"search_tools", "Execute_Tool"} {
		res = call(t, cs, ExecuteToolName, map[string]any{"name": name, "arguments": map[string]any{"query": "x"}})
		if want := "is one of this gateway's two tools, not a tool of a server: call it directly"; !res.IsError || !strings.Contains(text(res), want) {
			t.Errorf("execute_tool %s: isError=%v %s", name, res.IsError, text(res))
		}
	}
	// What the caller sent is said back cut short: a name of 200,000 runes
	// (megabytes fit in a request) is quoted by its start, matched by its
	// first maxMatchRunes, and the answer stays small.
	for _, name := range []string{"memory__make_entities" + strings.Repeat("x", 200_000), strings.Repeat("y", 200_000), "nope" + strings.Repeat("z", 200_000) + "__tool"} {
		res = call(t, cs, ExecuteToolName, map[string]any{"name": name})
		txt = text(res)
		if !res.IsError || len(txt) > 2000 || !strings.Contains(txt, name[:40]) || !strings.Contains(txt, "…") {
			t.Errorf("a name of %d bytes: isError=%v, a text of %d bytes: %.300s", len(name), res.IsError, len(txt), txt)
		}
	}
	// Arguments the tool lacks, named by the caller: a name of 100,000
	// runes, and 10,000 of them.
	extra := map[string]any{"entities": []any{}, "zz" + strings.Repeat("k", 100_000): 1}
	for i := range 10_000 {
		extra[fmt.Sprintf("x%05d", i)] = i
	}
	res = call(t, cs, ExecuteToolName, map[string]any{"name": "memory__create_entities_v2", "arguments": extra})
	txt = text(res)
	if !res.IsError || len(txt) > 4000 || !strings.Contains(txt, `"x00000", "x00001"`) || !strings.Contains(txt, "and 9991 more") {
		t.Errorf("10,001 arguments the tool lacks: isError=%v, a text of %d bytes: %.600s", res.IsError, len(txt), txt)
	}
	// A key of execute_tool's own that it does not take: {"name", "args"}
	// ran the tool with no arguments, the caller's dropped.
	res = call(t, cs, ExecuteToolName, map[string]any{"name": "memory__create_entities_v2", "args": map[string]any{"entities": []any{}}})
	if txt = text(res); !res.IsError || !strings.Contains(txt, `execute_tool: unknown argument "args". It takes "name" (the tool, server__tool, as search_tools returned it) and "arguments"`) {
		t.Errorf(`"args": isError=%v %s`, res.IsError, txt)
	}
	// The tool's own arguments beside "name" instead of inside
	// "arguments", as models often write them: the call meant is shown,
	// with what "arguments" held, and not run.
	for _, c := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"name": "memory__create_entities_v2", "entities": []any{map[string]any{"name": "a"}}},
			`"entities" is an argument of memory__create_entities_v2, not of execute_tool: the tool's own arguments go inside "arguments". The call meant, which was not run:
{"name":"memory__create_entities_v2","arguments":{"entities":[{"name":"a"}]}}`},
		{map[string]any{"name": "memory__create_entities_v2", "entities": []any{}, "arguments": `{"dryRun": true}`},
			`{"name":"memory__create_entities_v2","arguments":{"dryRun":true,"entities":[]}}`},
		{map[string]any{"name": "memory__create_entities_v2", "entities": []any{strings.Repeat("e", 3000)}},
			`{"name":"memory__create_entities_v2","arguments":{"entities":"…"}}`},
		// The server as "server", beside the tool's bare name or its ID.
		{map[string]any{"server": "memory", "name": "create_entities_v2", "arguments": map[string]any{"entities": []any{}}},
			`execute_tool: "server" goes in "name": a tool is named server__tool, memory__create_entities_v2. The call meant, which was not run:
{"name":"memory__create_entities_v2","arguments":{"entities":[]}}`},
		{map[string]any{"server": "memory", "name": "memory__create_entities_v2", "entities": []any{}},
			`execute_tool: "server" goes in "name": a tool is named server__tool, memory__create_entities_v2; "entities" is an argument of memory__create_entities_v2, not of execute_tool`},
		{map[string]any{"server": "filesystem", "name": "create_entities_v2"},
			`execute_tool: unknown argument "server". It takes "name"`},
		// The tool's ID under another key than "name", as models write
		// calls of other gateways ("tool", "tool_name"): the call meant.
		{map[string]any{"tool": "memory__create_entities_v2", "arguments": map[string]any{"entities": []any{}}},
			`execute_tool: "tool" is not an argument of execute_tool: the tool goes in "name". The call meant, which was not run:
{"name":"memory__create_entities_v2","arguments":{"entities":[]}}`},
		{map[string]any{"tool_name": "memory__create_entities_v2", "entities": []any{}},
			`execute_tool: "tool_name" is not an argument of execute_tool: the tool goes in "name"; "entities" is an argument of memory__create_entities_v2, not of execute_tool: the tool's own arguments go inside "arguments". The call meant, which was not run:
{"name":"memory__create_entities_v2","arguments":{"entities":[]}}`},
		{map[string]any{"tool": "memory__no_such_tool", "arguments": map[string]any{}},
			`execute_tool: unknown argument "tool". It takes "name"`},
		// Not all of them the tool's: unknown keys, as before.
		{map[string]any{"name": "memory__create_entities_v2", "entities": []any{}, "args": 1},
			`execute_tool: unknown argument "args", "entities". It takes "name"`},
	} {
		res = call(t, cs, ExecuteToolName, c.args)
		if txt = text(res); !res.IsError || !strings.Contains(txt, c.want) {
			t.Errorf("%v: isError=%v\n%s\nwant %s", c.args, res.IsError, txt, c.want)
		}
	}
	if n := caller.calls.Load(); n != 0 {
		t.Errorf("%d calls reached the backend", n)
	}
}

// Arguments sent as a string that holds a JSON object, as a model that
// writes a function's arguments as text does, are that object (they were
// refused); a string that holds no object still is.
func TestExecuteToolArgumentsInAString(t *testing.T) {
	var got map[string]any
	caller := &fakeCaller{call: func(server, tool string, args map[string]any) (*mcp.CallToolResult, error) {
		got = args
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
	}}
	g, _ := newTestGateway(t, caller)
	cs := connect(t, g)
	res := call(t, cs, ExecuteToolName, map[string]any{"name": "everything__add", "arguments": `{"a": 1, "b": 12345678901234567890}`})
	if res.IsError || fmt.Sprint(got["a"]) != "1" || fmt.Sprint(got["b"]) != "12345678901234567890" {
		t.Errorf("isError=%v %s; the backend got %v", res.IsError, text(res), got)
	}
	res = call(t, cs, ExecuteToolName, map[string]any{"name": "everything__add", "arguments": `{"a": "one"}`})
	if !res.IsError || !strings.Contains(text(res), `"a" must be a number, not a string ("one")`) {
		t.Errorf("an object in a string that does not fit: isError=%v %s", res.IsError, text(res))
	}
	// What a model writes around the object as text: a Markdown code
	// fence; and an object encoded twice (a framework that encodes the
	// model's text again). Each was "must be a JSON object".
	for _, around := range []string{"```json\n{\"a\": 2, \"b\": 3}\n```", "```\n{\"a\": 2, \"b\": 3}\n```\n", `"{\"a\": 2, \"b\": 3}"`} {
		got = nil
		res = call(t, cs, ExecuteToolName, map[string]any{"name": "everything__add", "arguments": around})
		if res.IsError || fmt.Sprint(got["a"], got["b"]) != "2 3" {
			t.Errorf("%q: isError=%v %s; the backend got %v", around, res.IsError, text(res), got)
		}
	}
	for _, bad := range []string{"a and b", `[1, 2]`, "```json\n[1, 2]\n```", `"\"a\""`} {
		res = call(t, cs, ExecuteToolName, map[string]any{"name": "everything__add", "arguments": bad})
		if !res.IsError || !strings.Contains(text(res), `"arguments" must be a JSON object (got "`) {
			t.Errorf("%q: isError=%v %s", bad, res.IsError, text(res))
		}
	}
	// An object in the string that does not parse: where it stops, not
	// "must be a JSON object", which the model thought it had sent.
	for bad, want := range map[string]string{
		`{"a": 1, "b": 2`:                `"arguments" is a string whose JSON does not parse (unexpected end of JSON input after byte 15): send "arguments" as an object (got "{\"a\": 1, \"b\": 2")`,
		`{"a": 1 "b": 2}`:                `(invalid character '"' after object key:value pair at byte 9)`,
		"```json\n{'a': 1, 'b': 2}\n```": `(invalid character '\'' looking for beginning of object key string at byte 2)`,
	} {
		res = call(t, cs, ExecuteToolName, map[string]any{"name": "everything__add", "arguments": bad})
		if !res.IsError || !strings.Contains(text(res), want) || !strings.Contains(text(res), `{"name":"everything__add","arguments":{"a":0,"b":0}}`) {
			t.Errorf("%q: isError=%v %s\nwant %s", bad, res.IsError, text(res), want)
		}
	}
	if n := caller.calls.Load(); n != 4 {
		t.Errorf("%d calls reached the backend, want 4", n)
	}
}

// A name with what a model may write around it (space, a line end,
// backticks or quotes, "()") runs the tool it names; " everything__add"
// answered `there is no server named " everything"`.
func TestExecuteToolNameAsWritten(t *testing.T) {
	var ran []string
	caller := &fakeCaller{call: func(server, tool string, args map[string]any) (*mcp.CallToolResult, error) {
		ran = append(ran, server+"/"+tool)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
	}}
	g, fs := newTestGateway(t, caller)
	fs.tools = append(fs.tools[:len(fs.tools):len(fs.tools)], catalog.Tool{Server: "memory", Name: "Dup"}, catalog.Tool{Server: "memory", Name: "dup"})
	cs := connect(t, g)
	args := map[string]any{"a": 1, "b": 2}
	for _, name := range []string{" everything__add", "everything__add\n", "`everything__add`", `"everything__add"`, "everything__add()", " 'Everything__ADD' "} {
		if res := call(t, cs, ExecuteToolName, map[string]any{"name": name, "arguments": args}); res.IsError {
			t.Errorf("%q: %s", name, text(res))
		}
	}
	if len(ran) != 6 || ran[0] != "everything/add" || ran[5] != "everything/add" {
		t.Errorf("ran %v, want everything/add six times", ran)
	}
	// Two tools whose names differ in case only: neither is guessed, both
	// are named.
	if res := call(t, cs, ExecuteToolName, map[string]any{"name": "memory__DUP"}); !res.IsError || !strings.Contains(text(res), `"memory__DUP" may be any of "memory__Dup", "memory__dup"`) {
		t.Errorf("memory__DUP: isError=%v %s", res.IsError, text(res))
	}
	res := call(t, cs, ExecuteToolName, map[string]any{"name": " everything__nope ", "arguments": args})
	if txt := text(res); !res.IsError || !strings.Contains(txt, `unknown tool "everything__nope". Closest names: everything__add.`) {
		t.Errorf("an unknown name: isError=%v %s", res.IsError, txt)
	}
	// Another separator between server and tool, when one tool's ID is so.
	ran = nil
	for name, want := range map[string]string{
		"filesystem.list_directory": "filesystem/list_directory",
		"filesystem/list_directory": "filesystem/list_directory",
		"FileSystem:list_directory": "filesystem/list_directory",
		"filesystem_list_directory": "filesystem/list_directory",
		"memory_create_entities":    "memory/create_entities",
		// "_" for "-" and the reverse, as a model half-remembers a name.
		"filesystem__list-directory": "filesystem/list_directory",
		"filesystem.list-directory":  "filesystem/list_directory",
		"Memory__Create-Entities":    "memory/create_entities",
	} {
		ran = nil
		a := map[string]any{"path": "/"}
		if strings.HasPrefix(want, "memory") {
			a = map[string]any{"entities": []any{}}
		}
		res := call(t, cs, ExecuteToolName, map[string]any{"name": name, "arguments": a})
		if res.IsError || len(ran) != 1 || ran[0] != want {
			t.Errorf("%q: ran %v, want %s: %s", name, ran, want, text(res))
		}
	}
	// Not guessed: a name of no tool, and one of two ("memory.dup").
	for _, name := range []string{"filesystem.nope", "memory.dup", "DUP"} {
		ran = nil
		if res := call(t, cs, ExecuteToolName, map[string]any{"name": name}); !res.IsError || len(ran) != 0 {
			t.Errorf("%q: isError=%v, ran %v", name, res.IsError, ran)
		}
	}
}

// TestExecuteToolBareName: a tool's name without its server, the slip a
// model makes most after search_tools showed server__tool, runs the one
// tool the caller may see that has it; a name two servers' tools share is
// not guessed, and the answer names both.
func TestExecuteToolBareName(t *testing.T) {
	var ran []string
	caller := &fakeCaller{call: func(server, tool string, args map[string]any) (*mcp.CallToolResult, error) {
		ran = append(ran, server+"/"+tool)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
	}}
	g, fs := newTestGateway(t, caller)
	fs.tools = append(fs.tools[:len(fs.tools):len(fs.tools)], catalog.Tool{Server: "memory", Name: "write_file"})
	cs := connect(t, g)
	for name, want := range map[string]string{
		"list_directory":    "filesystem/list_directory",
		" `add()` ":         "everything/add",
		"Create-Entities":   "memory/create_entities",
		"do__it":            "", // an ID's form: server "do", not weird__do__it
		"write_file":        "", // two servers have it
		"nope_nothing_else": "",
	} {
		ran = nil
		args := map[string]any{"path": "/", "a": 1, "b": 2, "entities": []any{}}
		if strings.Contains(name, "list_directory") {
			args = map[string]any{"path": "/"}
		}
		res := call(t, cs, ExecuteToolName, map[string]any{"name": name, "arguments": args})
		switch {
		case want != "" && (res.IsError || len(ran) != 1 || ran[0] != want):
			t.Errorf("%q: ran %v, want %s: %s", name, ran, want, text(res))
		case want == "" && (!res.IsError || len(ran) != 0):
			t.Errorf("%q: isError=%v, ran %v", name, res.IsError, ran)
		}
	}
	res := call(t, cs, ExecuteToolName, map[string]any{"name": "write_file"})
	if txt := text(res); !strings.Contains(txt, "filesystem__write_file") || !strings.Contains(txt, "memory__write_file") {
		t.Errorf("a name two servers share does not name both: %s", txt)
	}
}

// A name outside ASCII runs its tool however Unicode lets it be written
// (catalog.Caseless): café decomposed (the form a Mac's clipboard gives),
// STRASSE for straße, full-width letters. The decomposed café answered
// `unknown tool "intl__café". Closest names: intl__café`, which read the
// same as the name sent.
func TestExecuteToolNameBeyondASCII(t *testing.T) {
	var ran []string
	caller := &fakeCaller{call: func(server, tool string, args map[string]any) (*mcp.CallToolResult, error) {
		ran = append(ran, server+"/"+tool)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
	}}
	g, fs := newTestGateway(t, caller)
	fs.tools = append(fs.tools[:len(fs.tools):len(fs.tools)],
		catalog.Tool{Server: "memory", Name: "café"}, catalog.Tool{Server: "memory", Name: "straße_suchen"},
		catalog.Tool{Server: "memory", Name: "天気を取得"}, catalog.Tool{Server: "memory", Name: "ıslak"})
	cs := connect(t, g)
	for name, want := range map[string]string{
		"memory__cafe\u0301":     "memory/café",
		"MEMORY__CAFE\u0301":     "memory/café",
		"memory__STRASSE_SUCHEN": "memory/straße_suchen",
		"memory__strasse-suchen": "memory/straße_suchen",
		"ｍｅｍｏｒｙ__天気を取得":          "memory/天気を取得",
		"memory.cafe\u0301":      "memory/café",
	} {
		ran = nil
		res := call(t, cs, ExecuteToolName, map[string]any{"name": name})
		if res.IsError || len(ran) != 1 || ran[0] != want {
			t.Errorf("%q: ran %v, want %s: %s", name, ran, want, text(res))
		}
	}
	// ı is another letter than i, as Unicode folds them: named, not run.
	ran = nil
	if res := call(t, cs, ExecuteToolName, map[string]any{"name": "memory__islak"}); !res.IsError || len(ran) != 0 || !strings.Contains(text(res), "memory__ıslak") {
		t.Errorf("memory__islak: isError=%v, ran %v: %s", res.IsError, ran, text(res))
	}
}

// A tools/call of a tool search_tools found, made directly instead of
// through execute_tool, is told how to run it (go-sdk said only `unknown
// tool "everything__add"`); nothing reaches the backend.
func TestDirectCallOfAFoundTool(t *testing.T) {
	caller := &fakeCaller{}
	_, fs := newTestGateway(t, caller)
	log := &audittest.Log{}
	g := New(fs, caller, &Options{Audit: log})
	cs := connect(t, g)
	calls := map[string]string{
		"everything__add": `unknown tool "everything__add": this gateway has two tools, search_tools and execute_tool; everything__add is a tool of server "everything" behind this gateway: run it through execute_tool, {"name": "everything__add", "arguments": {...}}`,
		"read_my_mind":    `unknown tool "read_my_mind": this gateway has two tools, search_tools and execute_tool; run a tool search_tools found through execute_tool: {"name": "read_my_mind", "arguments": {...}}`,
		"search_tool":     `unknown tool "search_tool": this gateway has two tools, search_tools and execute_tool; did you mean search_tools? {"query": "what you want to do"}`,
		"Execute":         `unknown tool "Execute": this gateway has two tools, search_tools and execute_tool; did you mean execute_tool? {"name": "server__tool", "arguments": {...}}`,
	}
	for name, want := range calls {
		_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: map[string]any{"a": 1}})
		var werr *jsonrpc.Error
		if !errors.As(err, &werr) || werr.Code != jsonrpc.CodeInvalidParams || werr.Message != want {
			t.Errorf("%s: %v, want the invalid-params error %q", name, err, want)
		}
	}
	if n := caller.calls.Load(); n != 0 {
		t.Errorf("%d calls reached the backend", n)
	}
	// Each refusal is in the audit log, with the name as the client wrote it.
	recs := log.Records()
	if len(recs) != len(calls) {
		t.Fatalf("%d audit records, want one for each of the %d calls: %+v", len(recs), len(calls), recs)
	}
	for _, r := range recs {
		want, ok := calls[r.Tool]
		if !ok || r.Action != "tools/call" || r.Decision != audit.Allowed || r.Outcome != audit.IsError || r.Reason != want || r.Client != "test" || r.Transport != policy.TransportStdio {
			t.Errorf("audit record %+v, want action tools/call, a tool called, outcome isError, the reason sent, client test over stdio", r)
		}
	}
}

// The schema a text shows leaves out its "$schema" (the draft's URL tells
// a model nothing); structuredContent keeps it.
func TestShownSchemaWithoutDraft(t *testing.T) {
	raw := json.RawMessage(`{"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "properties": {"$schema": {"type": "string"}}}`)
	if got, want := shownSchema(raw), `{"type":"object","properties":{"$schema":{"type":"string"}}}`; got != want {
		t.Errorf("shownSchema = %s, want %s", got, want)
	}
	if got := explainInvalid("x__y", raw, `validating root: required: missing properties: ["a"]`, nil); strings.Contains(got, "draft-07") {
		t.Errorf("the answer shows the draft's URL:\n%s", got)
	}
}

// An unknown name near no tool, whose words search_tools finds nothing
// for, is not told to "use one of these names": it offered none.
func TestUnknownToolNothingOffered(t *testing.T) {
	g, fs := newTestGateway(t, nil)
	fs.search = func(search.Query) (search.Result, error) {
		return search.Result{NoMatch: true, Mode: search.ModeHybrid}, nil
	}
	cs := connect(t, g)
	res := call(t, cs, ExecuteToolName, map[string]any{"name": "weather__forecast_for_tomorrow"})
	want := `execute_tool: unknown tool "weather__forecast_for_tomorrow". Call search_tools with what you want to do to find the tool's name.`
	if txt := text(res); !res.IsError || txt != want {
		t.Errorf("an unknown name near no tool: isError=%v\n%s\nwant\n%s", res.IsError, txt, want)
	}
}

// With no tool index yet (a cold start builds it in the background), an
// unknown name says so and to search in a few seconds, not that the tool
// does not exist: a client may call a name it knows from an earlier
// session.
func TestUnknownToolBeforeTheIndex(t *testing.T) {
	g := New(&fakeSearcher{}, &fakeCaller{}, nil)
	cs := connect(t, g)
	res := call(t, cs, ExecuteToolName, map[string]any{"name": "memory__create_entities", "arguments": map[string]any{}})
	want := `execute_tool: unknown tool "memory__create_entities": the gateway has no tool index yet (a first start on a data folder builds it, and search_tools says how far it is): call search_tools in a few seconds.`
	if txt := text(res); !res.IsError || txt != want {
		t.Errorf("before the index: isError=%v\n%s\nwant\n%s", res.IsError, txt, want)
	}
}

// While a cold start's first index is built (Options.Building), an unknown
// name says so, offers the closest names the servers listed so far, and
// runs no search: one would wait for the index, then answer that it is
// being built.
func TestUnknownToolWhileBuilding(t *testing.T) {
	searched := 0
	s := &fakeSearcher{tools: testCatalog, search: func(search.Query) (search.Result, error) {
		searched++
		return search.Result{}, errors.New("the index is being built")
	}}
	building := errors.New("the tool index is being built (256 of 10013 tools embedded; first start on this data folder); try again in a few seconds")
	ran := &fakeCaller{call: func(server, tool string, _ map[string]any) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ran " + server + "__" + tool}}}, nil
	}}
	g := New(s, ran, &Options{Building: func() error { return building }})
	cs := connect(t, g)
	for name, want := range map[string]string{
		"memory__create_entity": `execute_tool: unknown tool "memory__create_entity": no server listed it so far, and search_tools cannot look for it yet: the tool index is being built (256 of 10013 tools embedded; first start on this data folder); try again in a few seconds. Closest names: memory__create_entities. Use one of these names, or call search_tools with what you want to do once the index is built.`,
		"weather__forecast":     `execute_tool: unknown tool "weather__forecast": no server listed it so far, and search_tools cannot look for it yet: the tool index is being built (256 of 10013 tools embedded; first start on this data folder); try again in a few seconds.`,
	} {
		res := call(t, cs, ExecuteToolName, map[string]any{"name": name, "arguments": map[string]any{}})
		if txt := text(res); !res.IsError || txt != want {
			t.Errorf("%s while building: isError=%v\n%s\nwant\n%s", name, res.IsError, txt, want)
		}
	}
	if searched != 0 {
		t.Errorf("%d searches for the unknown names while building, want none", searched)
	}
	// A listed tool runs.
	res := call(t, cs, ExecuteToolName, map[string]any{"name": "filesystem__write_file", "arguments": map[string]any{"path": "/tmp/a", "content": "b"}})
	if txt := text(res); res.IsError || txt != "ran filesystem__write_file" {
		t.Errorf("a listed tool while building: isError=%v %s", res.IsError, txt)
	}
}

// A name longer than every ID is not read at each of its separators
// (otherSeparator): a name of 40 kB of "a." built 20,000 readings of 40 kB
// each (1.9 s, and memory by the name's length squared), twice once
// unknownTool asked too.
func TestOtherSeparatorLongName(t *testing.T) {
	ids := []string{"everything__add", "memory__create_entities"}
	name := strings.Repeat("a.", 20_000)
	if allocs := testing.AllocsPerRun(3, func() { otherSeparator(name, ids) }); allocs > 2 {
		t.Errorf("otherSeparator of a %d-byte name: %.0f allocations, want none for each separator", len(name), allocs)
	}
	if got := otherSeparator("Everything.add", ids); !slices.Equal(got, []string{"everything__add"}) {
		t.Errorf("otherSeparator(Everything.add) = %v", got)
	}
}

// An unknown name's "search_tools … also finds" offers only the tools that
// fit the name's words (Hit.Fits: they reach minConfidence), also when
// another one does: a weak match would invite a wrong call.
func TestUnknownToolOffersOnlyToolsThatFit(t *testing.T) {
	g, fs := newTestGateway(t, nil)
	inner := fs.search
	fs.search = func(q search.Query) (search.Result, error) {
		r, err := inner(q)
		for i := range r.Hits {
			r.Hits[i].Fits = r.Hits[i].Tool.ID() == "filesystem__list_directory"
		}
		return r, err
	}
	res := call(t, connect(t, g), ExecuteToolName, map[string]any{"name": "fs__show_folder"})
	txt := text(res)
	if !res.IsError || !strings.Contains(txt, `search_tools "show folder" also finds: filesystem__list_directory.`) {
		t.Errorf("isError=%v, text lacks the one tool that fits, alone:\n%s", res.IsError, txt)
	}
}

// The tool's arguments nested one level too deep, as models write them:
// {"arguments": {"arguments": {...}}}, or the whole call again inside
// "arguments". The answer said only that the required arguments were
// missing (they were sent, one level down), and a tool that requires
// none ran without its arguments; now the call meant is shown, and not
// run. A tool that takes an argument named "arguments", and inner keys
// that are not the tool's, are left to the schema as before.
func TestExecuteToolArgumentsNested(t *testing.T) {
	var got map[string]any
	caller := &fakeCaller{call: func(server, tool string, args map[string]any) (*mcp.CallToolResult, error) {
		got = args
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
	}}
	g, fs := newTestGateway(t, caller)
	fs.tools = append(slices.Clip(fs.tools),
		catalog.Tool{Server: "everything", Name: "tiny_image", Description: "Returns a tiny image", InputSchema: json.RawMessage(`{"type":"object","properties":{}}`)},
		catalog.Tool{Server: "tasks", Name: "run", Description: "Runs a task with its arguments",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"task":{"type":"string"},"arguments":{"type":"object"}},"required":["task"]}`)})
	cs := connect(t, g)
	for _, c := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"name": "everything__add", "arguments": map[string]any{"arguments": map[string]any{"a": 1, "b": 2}}},
			`execute_tool everything__add: the tool's own arguments are nested one level too deep (inside "arguments" is "arguments" again): they go directly in "arguments". The call meant, which was not run:
{"name":"everything__add","arguments":{"a":1,"b":2}}`},
		{map[string]any{"name": "everything__add", "arguments": map[string]any{"name": "everything__add", "arguments": map[string]any{"a": 1}}},
			`(inside "arguments" is "name" and "arguments" again)`},
		{map[string]any{"name": "everything__add", "arguments": `{"arguments": {"a": 1, "b": 2}}`},
			`{"name":"everything__add","arguments":{"a":1,"b":2}}`},
		{map[string]any{"name": "everything__add", "arguments": map[string]any{"arguments": `{"a": 1, "b": 2}`}},
			`{"name":"everything__add","arguments":{"a":1,"b":2}}`},
	} {
		res := call(t, cs, ExecuteToolName, c.args)
		if txt := text(res); !res.IsError || !strings.Contains(txt, c.want) {
			t.Errorf("%v: isError=%v\n%s\nwant %s", c.args, res.IsError, txt, c.want)
		}
	}
	if n := caller.calls.Load(); n != 0 {
		t.Errorf("%d nested calls reached the backend", n)
	}
	// Not so: the schema's own words, or the call as sent.
	res := call(t, cs, ExecuteToolName, map[string]any{"name": "everything__add", "arguments": map[string]any{"arguments": map[string]any{"x": 1}}})
	if txt := text(res); !res.IsError || !strings.Contains(txt, `missing the required arguments "a", "b"`) {
		t.Errorf("inner keys not the tool's: isError=%v %s", res.IsError, txt)
	}
	res = call(t, cs, ExecuteToolName, map[string]any{"name": "everything__add", "arguments": map[string]any{"name": "filesystem__list_directory", "arguments": map[string]any{"a": 1}}})
	if txt := text(res); !res.IsError || strings.Contains(txt, "nested") {
		t.Errorf("another tool's name inside: isError=%v %s", res.IsError, txt)
	}
	// Nothing inside: the call would do what the call meant does (a schema
	// that forbids the key says to remove it).
	res = call(t, cs, ExecuteToolName, map[string]any{"name": "everything__tiny_image", "arguments": map[string]any{"arguments": map[string]any{}}})
	if res.IsError {
		t.Errorf("a tool that takes none, {\"arguments\": {}} inside: %s", text(res))
	}
	res = call(t, cs, ExecuteToolName, map[string]any{"name": "tasks__run", "arguments": map[string]any{"task": "t", "arguments": map[string]any{"task": "u"}}})
	if res.IsError || got["task"] != "t" {
		t.Errorf("a tool that takes \"arguments\": isError=%v %s; the backend got %v", res.IsError, text(res), got)
	}
}

// Arguments that are no JSON object get the call of the right shape, as
// arguments that fail the schema do: the model had only "must be a JSON
// object" to go on. A required argument missing beside one the tool does
// not take (a wrong name for it: "file" for "path") names both, whichever
// the validator names.
func TestExecuteToolArgumentsShape(t *testing.T) {
	caller := &fakeCaller{}
	g, _ := newTestGateway(t, caller)
	cs := connect(t, g)
	for _, c := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"name": "everything__add", "arguments": "a=1, b=2"},
			`execute_tool everything__add: "arguments" must be a JSON object (got "a=1, b=2"). A call of the right shape (replace each <placeholder>; optional arguments left out):
{"name":"everything__add","arguments":{"a":0,"b":0}}`},
		{map[string]any{"name": "filesystem__list_directory", "arguments": []any{"/tmp"}},
			`{"name":"filesystem__list_directory","arguments":{"path":"<path>"}}`},
		// Several tools in one call; "arguments must be an object like …"
		// was said of an object.
		{map[string]any{"name": []any{"everything__add", "filesystem__list_directory"}},
			`execute_tool: "name" must be a string, not a JSON array: one tool per call, {"name": "server__tool", "arguments": {...}}.`},
		{map[string]any{"name": "everything__add", "arguments": map[string]any{"x": 1, "b": 2}},
			`the arguments are missing the required argument "a"; "x" is not an argument of this tool.`},
		// The schema forbids other keys: the validator names those only.
		{map[string]any{"name": "filesystem__list_directory", "arguments": map[string]any{"file": "/tmp"}},
			`"file" is not an argument of this tool: remove it; the required argument "path" is missing.`},
		{map[string]any{"name": "filesystem__write_file", "arguments": map[string]any{"file": "a", "text": "b"}},
			`the arguments are missing the required arguments "path", "content"; "file", "text" are not arguments of this tool.`},
	} {
		res := call(t, cs, ExecuteToolName, c.args)
		if txt := text(res); !res.IsError || !strings.Contains(txt, c.want) {
			t.Errorf("%v: isError=%v\n%s\nwant %s", c.args, res.IsError, txt, c.want)
		}
	}
	if n := caller.calls.Load(); n != 0 {
		t.Errorf("%d calls reached the backend", n)
	}
}

// held is a rule of a tool's state, not of who calls (its Scope is ""), as
// the quarantine is: it holds the tools of ids.
type held []string

func (held) Name() string                { return "quarantine" }
func (held) Scope(*policy.Caller) string { return "" }
func (h held) Check(_ *policy.Caller, t catalog.Tool) string {
	if slices.Contains(h, t.ID()) {
		return t.ID() + " is quarantined"
	}
	return ""
}

// twoWriteFiles is the test catalog's engine with memory__write_file
// beside filesystem__write_file, and a caller that records the tools it
// ran ("server/tool") in *ran.
func twoWriteFiles(t *testing.T) (eng *search.Engine, caller *fakeCaller, ran *[]string) {
	t.Helper()
	cat := append(slices.Clone(testCatalog), catalog.Tool{Server: "memory", Name: "write_file", Description: "Write a memory file"})
	ix, err := index.Build(context.Background(), cat, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	eng = search.New(ix, nil, nil)
	t.Cleanup(func() { eng.Close() })
	ran = new([]string)
	caller = &fakeCaller{call: func(server, tool string, _ map[string]any) (*mcp.CallToolResult, error) {
		*ran = append(*ran, server+"/"+tool)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
	}}
	return eng, caller, ran
}

// A tool's name without its server runs the one tool of that name only
// when no other tool the caller's own scope shows has it: a server
// disabled at run time, or a tool quarantined since (a changed
// definition), is one the model may have found by search before and mean.
// "write_file" ran memory__write_file, with the arguments meant for
// filesystem__write_file, once filesystem was disabled or its write_file
// quarantined. A tool outside the caller's profile still does not count:
// the caller learns nothing of it.
func TestExecuteToolBareNameNotAnotherServers(t *testing.T) {
	eng, caller, ran := twoWriteFiles(t)
	pol := policy.NewSet(
		policy.NewConfigured([]string{"memory", "filesystem", "everything", "weird"}),
		policy.NewProfiles(map[string]config.Profile{"kg": {Servers: []string{"memory"}}}),
	)
	g := New(eng, caller, &Options{Policy: pol})
	args := map[string]any{"name": "write_file", "arguments": map[string]any{"path": "/a", "content": "x"}}
	run := func(c *policy.Caller) (*mcp.CallToolResult, []string) {
		*ran = nil
		return call(t, connectAs(t, g, c), ExecuteToolName, args), *ran
	}
	if res, got := run(&policy.Caller{Profile: "kg"}); res.IsError || !slices.Equal(got, []string{"memory/write_file"}) {
		t.Errorf("profile kg (memory alone): ran %v: %s", got, text(res))
	}
	for what, rule := range map[string]policy.Rule{
		"filesystem disabled":         policy.NewDisabled([]string{"filesystem"}),
		"filesystem__write_file held": held{"filesystem__write_file"},
	} {
		pol.Put(rule)
		if res, got := run(&policy.Caller{}); !res.IsError || len(got) != 0 {
			t.Errorf("%s: ran %v, want nothing run: %s", what, got, text(res))
		}
		if res, got := run(&policy.Caller{Profile: "kg"}); res.IsError || !slices.Equal(got, []string{"memory/write_file"}) {
			t.Errorf("%s, profile kg: ran %v: %s", what, got, text(res))
		}
		if res, _ := run(&policy.Caller{}); !strings.Contains(text(res), "filesystem__write_file has that name and cannot run now: ") {
			t.Errorf("%s: the answer does not name filesystem__write_file and why it cannot run: %s", what, text(res))
		}
		pol.Put(policy.NewDisabled(nil))
		pol.Put(held{})
	}
}

// TestHeldBareReadAsBareName: a bare name that bareName reads as a held
// tool's (full-width letters, "-" for "_") runs nothing, and the answer
// names that tool and why, as it does for the name in another case. It
// read the name by strings.EqualFold alone: "ｗｒｉｔｅ_file" ran nothing,
// but the answer named only the other server's tool ("search_tools also
// finds: memory__write_file"), the one the model did not mean.
func TestHeldBareReadAsBareName(t *testing.T) {
	eng, caller, ran := twoWriteFiles(t)
	pol := policy.NewSet(policy.NewConfigured([]string{"memory", "filesystem", "everything", "weird"}), policy.NewDisabled([]string{"filesystem"}))
	g := New(eng, caller, &Options{Policy: pol})
	cs := connectAs(t, g, &policy.Caller{})
	for _, name := range []string{"WRITE_FILE", "ｗｒｉｔｅ_file", "write-file"} {
		*ran = nil
		res := call(t, cs, ExecuteToolName, map[string]any{"name": name, "arguments": map[string]any{"path": "/a", "content": "x"}})
		if !res.IsError || len(*ran) != 0 {
			t.Errorf("%s: ran %v, want nothing run: %s", name, *ran, text(res))
		}
		if !strings.Contains(text(res), "filesystem__write_file has that name and cannot run now: ") {
			t.Errorf("%s: the answer does not name filesystem__write_file and why it cannot run: %s", name, text(res))
		}
	}
}
