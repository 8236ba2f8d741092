package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// The two tools' input schemas are what a model provider sees as function
// declarations, through an agent framework's converter. Each provider takes
// a subset of JSON Schema; these are the rules found by running the
// converters on the schemas tools/list returns (README "Agent frameworks and
// model providers"), kept here so an edit that leaves a provider's subset
// fails without Python:
//
//   - google-genai 3.3.0's MCP path (tools=[session], mcp_to_gemini_tool)
//     raised AttributeError: 'bool' object has no attribute 'items' on a
//     boolean "additionalProperties"; Gemini's Schema has no such key
//     anyway, nor $ref, $defs, $schema, const, oneOf, allOf, not, if, a type
//     list or a non-string enum value.
//   - OpenAI's strict mode (openai-agents' convert_schemas_to_strict,
//     LangChain's strict=True): no anyOf at the root, at most 5 levels of
//     nesting and 100 properties, and every property made required: so each
//     optional argument has a value that means "as if left out" (a test
//     below calls search_tools so).
//   - An object without properties (execute_tool's "arguments", which any
//     tool's arguments must fit) cannot be strict: openai-agents serves that
//     tool non-strict, langchain-google-genai declares it a string (which
//     execute_tool decodes). It is the only one.
var (
	providerForbiddenKeys = []string{"additionalProperties", "$ref", "$defs", "definitions", "$schema", "$id", "$anchor",
		"const", "oneOf", "allOf", "not", "if", "then", "else", "patternProperties", "prefixItems"}
	providerTypes       = []string{"object", "string", "integer", "number", "boolean", "array"}
	providerOpenObjects = []string{ExecuteToolName + ".arguments"}
)

const (
	providerMaxDepth      = 5   // OpenAI strict: levels of nested objects
	providerMaxProperties = 100 // OpenAI strict: properties in all
	providerMaxEnum       = 500 // OpenAI strict: enum values in all
)

// providerSchemaProblems lists where schema leaves the subset every provider
// takes; at is the tool's name.
func providerSchemaProblems(at string, schema map[string]any) []string {
	var problems []string
	if schema["type"] != "object" {
		problems = append(problems, fmt.Sprintf("%s: the root's type is %v, not \"object\"", at, schema["type"]))
	}
	if _, ok := schema["anyOf"]; ok {
		problems = append(problems, at+": anyOf at the root (OpenAI strict refuses it)")
	}
	props, enums := 0, 0
	var walk func(path string, s map[string]any, depth int)
	walk = func(path string, s map[string]any, depth int) {
		for _, k := range providerForbiddenKeys {
			if _, ok := s[k]; ok {
				problems = append(problems, fmt.Sprintf("%s: %q is outside the providers' subset", path, k))
			}
		}
		typ, ok := s["type"].(string)
		if !ok || !slices.Contains(providerTypes, typ) {
			problems = append(problems, fmt.Sprintf("%s: type %v is not one of %v (a list of types is not taken by Gemini)", path, s["type"], providerTypes))
		}
		if path != at {
			if d, _ := s["description"].(string); strings.TrimSpace(d) == "" {
				problems = append(problems, path+": no description (the one place every converter keeps what an argument means)")
			}
		}
		if e, ok := s["enum"]; ok {
			vals, _ := e.([]any)
			enums += len(vals)
			for _, v := range vals {
				if _, ok := v.(string); !ok {
					problems = append(problems, fmt.Sprintf("%s: enum value %v is not a string (Gemini takes strings only)", path, v))
				}
			}
		}
		if typ == "object" {
			if depth > providerMaxDepth {
				problems = append(problems, fmt.Sprintf("%s: nested %d deep, over %d", path, depth, providerMaxDepth))
			}
			p, _ := s["properties"].(map[string]any)
			if len(p) == 0 && !slices.Contains(providerOpenObjects, path) {
				problems = append(problems, path+": an object without properties cannot be made strict")
			}
			props += len(p)
			req, _ := s["required"].([]any)
			for _, r := range req {
				if _, ok := p[fmt.Sprint(r)]; !ok {
					problems = append(problems, fmt.Sprintf("%s: required %v is not a property", path, r))
				}
			}
			for name, sub := range p {
				m, _ := sub.(map[string]any)
				walk(path+"."+name, m, depth+1)
			}
		}
		if it, ok := s["items"].(map[string]any); ok {
			walk(path+"[]", it, depth)
		}
		if alts, ok := s["anyOf"].([]any); ok {
			for i, v := range alts {
				m, _ := v.(map[string]any)
				walk(fmt.Sprintf("%s.anyOf[%d]", path, i), m, depth)
			}
		}
	}
	walk(at, schema, 1)
	if props > providerMaxProperties {
		problems = append(problems, fmt.Sprintf("%s: %d properties, over %d", at, props, providerMaxProperties))
	}
	if enums > providerMaxEnum {
		problems = append(problems, fmt.Sprintf("%s: %d enum values, over %d", at, enums, providerMaxEnum))
	}
	return problems
}

// TestTwoToolsFitProviderSchemas: the input schemas tools/list gives stay
// within the subset of JSON Schema that OpenAI (strict), Gemini and
// Anthropic take, as their frameworks convert them.
func TestTwoToolsFitProviderSchemas(t *testing.T) {
	g, _ := newTestGateway(t, nil)
	cs := connect(t, g)
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range res.Tools {
		b, _ := json.Marshal(tl.InputSchema)
		var schema map[string]any
		if err := json.Unmarshal(b, &schema); err != nil {
			t.Fatalf("%s: %v", tl.Name, err)
		}
		for _, p := range providerSchemaProblems(tl.Name, schema) {
			t.Error(p)
		}
	}
	// The rules catch what they are for.
	bad := map[string]any{"type": "object", "additionalProperties": false, "properties": map[string]any{
		"a": map[string]any{"type": []any{"string", "null"}, "description": "a"},
		"b": map[string]any{"type": "string", "enum": []any{"x", 1.0}},
		"c": map[string]any{"type": "object", "description": "c"},
	}, "required": []any{"d"}}
	if got := providerSchemaProblems("bad", bad); len(got) != 6 {
		t.Errorf("a schema with 6 problems gave %d:\n%s", len(got), strings.Join(got, "\n"))
	}
}

// TestSearchToolsStrictCall: a model under OpenAI's strict mode must send
// every argument; sent as "left out" (the default limit, no server, all
// tools, compact), the answer is the one to the query alone.
func TestSearchToolsStrictCall(t *testing.T) {
	g, _ := newTestGateway(t, nil)
	cs := connect(t, g)
	plain := call(t, cs, SearchToolName, map[string]any{"query": "write a file"})
	strict := call(t, cs, SearchToolName, map[string]any{"query": "write a file", "limit": DefaultLimit, "server": "", "readOnly": false, "detail": DetailCompact})
	if strict.IsError || text(strict) != text(plain) {
		t.Errorf("strict-mode call answered (isError %v):\n%s\nwant as the query alone:\n%s", strict.IsError, text(strict), text(plain))
	}
	// The schema tells the model so.
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range res.Tools {
		if tl.Name != SearchToolName {
			continue
		}
		b, _ := json.Marshal(tl.InputSchema)
		var s struct {
			Properties map[string]struct{ Description string } `json:"properties"`
		}
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatal(err)
		}
		if d := s.Properties["server"].Description; !strings.Contains(d, `""`) {
			t.Errorf("server's description %q does not say what a model that must send it sends for all servers", d)
		}
	}
}
