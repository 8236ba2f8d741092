package gateway

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/gateway/audit/audittest"
	"github.com/toolgate/toolgate/index/catalog"
)

// TestOutputChecked: a result of a tool that declares an outputSchema
// (filesystem__list_directory's wants {"content": string}) is checked
// against it. One that fits, and an isError result, come back unchanged;
// one whose structuredContent does not fit, or that has none, comes back
// whole (its content and structuredContent as the server sent them), with
// a note after its content naming the field and what is wrong, and is
// counted (Options.OutputMismatch), written in its audit record
// (outputMismatch) and logged at warning level once for the tool. Before,
// each came back as it was, with no word to the agent or the operator.
func TestOutputChecked(t *testing.T) {
	const prefix = "toolgate: this result's structuredContent does not fit the outputSchema filesystem__list_directory declares: "
	const suffix = ". It is passed on as the server sent it: do not count on the shape search_tools showed."
	text1 := []mcp.Content{&mcp.TextContent{Text: "listing"}}
	for _, tc := range []struct {
		name    string
		res     *mcp.CallToolResult
		problem string // "" = fits: unchanged
	}{
		{"fits", &mcp.CallToolResult{Content: text1, StructuredContent: map[string]any{"content": "a.txt"}}, ""},
		{"fits, as sent", &mcp.CallToolResult{Content: text1, StructuredContent: json.RawMessage(`{"content": "a.txt", "n": 12345678901234567891}`)}, ""},
		{"error", &mcp.CallToolResult{Content: text1, IsError: true}, ""},
		{"error with structuredContent", &mcp.CallToolResult{Content: text1, IsError: true, StructuredContent: map[string]any{"code": 404.0}}, ""},
		{"wrong type", &mcp.CallToolResult{Content: text1, StructuredContent: map[string]any{"content": 42.0}},
			`"content" must be a string, not an integer (42)`},
		{"missing", &mcp.CallToolResult{Content: text1, StructuredContent: json.RawMessage(`{"contents": "a.txt"}`)},
			`structuredContent is missing the required field "content"`},
		{"none", &mcp.CallToolResult{Content: text1}, noStructured},
	} {
		t.Run(tc.name, func(t *testing.T) {
			caller := &fakeCaller{call: func(server, tool string, _ map[string]any) (*mcp.CallToolResult, error) {
				r := *tc.res
				return &r, nil
			}}
			g, _ := newTestGateway(t, caller)
			logs := &lockedBuffer{}
			log := &audittest.Log{}
			var counted []string
			g = New(g.searcher, caller, &Options{
				Logger:         slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn})),
				Audit:          log,
				OutputMismatch: func(server, tool string) { counted = append(counted, server+"/"+tool) },
			})
			cs := connect(t, g)
			var res *mcp.CallToolResult
			for range 2 {
				res = call(t, cs, ExecuteToolName, map[string]any{"name": "filesystem__list_directory", "arguments": map[string]any{"path": "."}})
			}
			wantText := text(tc.res)
			switch tc.problem {
			case "":
			case noStructured:
				wantText += "toolgate: filesystem__list_directory declares an outputSchema, but this result has no structuredContent, which MCP requires of it: what the tool returned is the content above."
			default:
				wantText += prefix + tc.problem + suffix
			}
			if got := text(res); got != wantText {
				t.Errorf("text\n%s\nwant\n%s", got, wantText)
			}
			if res.IsError != tc.res.IsError {
				t.Errorf("isError %v, want the server's %v", res.IsError, tc.res.IsError)
			}
			var want any
			if sc := tc.res.StructuredContent; sc != nil {
				_ = json.Unmarshal(structuredJSON(sc), &want)
			}
			if diff := cmp.Diff(want, res.StructuredContent); diff != "" {
				t.Errorf("structuredContent changed (-sent +got):\n%s", diff)
			}
			recs := log.Records()
			if len(recs) != 2 {
				t.Fatalf("%d audit records, want 2", len(recs))
			}
			wantProblem := strings.TrimSuffix(tc.problem, " (42)") // the record names no value of the result
			var wantCounted []string
			if tc.problem != "" {
				wantCounted = []string{"filesystem/list_directory", "filesystem/list_directory"}
			}
			if recs[1].OutputMismatch != wantProblem || recs[1].Outcome != "ok" && !tc.res.IsError {
				t.Errorf("audit record: outputMismatch %q outcome %q, want %q ok", recs[1].OutputMismatch, recs[1].Outcome, wantProblem)
			}
			if diff := cmp.Diff(wantCounted, counted); diff != "" {
				t.Errorf("counted (-want +got):\n%s", diff)
			}
			warned := strings.Count(logs.String(), "tool result does not fit its output schema")
			if want := min(len(wantCounted), 1); warned != want {
				t.Errorf("%d warnings for two such results, want %d:\n%s", warned, want, logs)
			}
		})
	}
}

// TestOutputProblemBounded: what is said of a result that does not fit is
// one line of at most maxOutputProblem characters, however long the
// value or the schema's words.
func TestOutputProblemBounded(t *testing.T) {
	long := strings.Repeat("ab\n", 2000)
	tool := testCatalog[1] // filesystem__list_directory
	tool.OutputSchema = json.RawMessage(`{"type":"object","properties":{"content":{"enum":["` + strings.Repeat("x", 5000) + `"]}}}`)
	g, _ := newTestGateway(t, nil)
	p := g.outputProblem("filesystem__list_directory", tool, &mcp.CallToolResult{StructuredContent: map[string]any{"content": long}})
	if p == "" || len([]rune(p)) > maxOutputProblem || strings.Contains(p, "\n") {
		t.Errorf("problem of %d characters (want 1 to %d, one line): %q", len([]rune(p)), maxOutputProblem, p)
	}
}

// BenchmarkOutputProblem is what the check adds to a call of a tool that
// declares an output schema: a read_graph-like schema and a result of 20
// entities (about 2 KB of structuredContent, kept as sent).
//
//	go test ./gateway -run '^$' -bench OutputProblem -count 5
func BenchmarkOutputProblem(b *testing.B) {
	tool := testCatalog[1]
	tool.OutputSchema = json.RawMessage(`{"type":"object","properties":{"entities":{"type":"array","items":{"type":"object","properties":{"name":{"type":"string"},"entityType":{"type":"string"},"observations":{"type":"array","items":{"type":"string"}}},"required":["name","entityType","observations"]}},"relations":{"type":"array","items":{"type":"object","properties":{"from":{"type":"string"},"to":{"type":"string"},"relationType":{"type":"string"}},"required":["from","to","relationType"]}}},"required":["entities","relations"]}`)
	var ents []string
	for i := range 20 {
		ents = append(ents, fmt.Sprintf(`{"name":"entity %d","entityType":"person","observations":["likes tea","lives in Oslo","works on toolgate"]}`, i))
	}
	raw := json.RawMessage(`{"entities":[` + strings.Join(ents, ",") + `],"relations":[{"from":"entity 1","to":"entity 2","relationType":"knows"}]}`)
	var decoded map[string]any
	if err := json.Unmarshal(raw, &decoded); err != nil {
		b.Fatal(err)
	}
	g, _ := newTestGateway(b, nil)
	// decoded: as go-sdk hands most results over; raw: as kept when it
	// holds an integer past 2^53, decoded once more for the check.
	for name, sc := range map[string]any{"decoded": decoded, "raw": raw} {
		b.Run(name, func(b *testing.B) {
			res := &mcp.CallToolResult{StructuredContent: sc}
			if p := g.outputProblem("filesystem__list_directory", tool, res); p != "" {
				b.Fatal(p)
			}
			b.ReportAllocs()
			for b.Loop() {
				g.outputProblem("filesystem__list_directory", tool, res)
			}
		})
	}
}

// TestOutputProblemWords: what is wrong is said of structuredContent, with
// the path of the field (as arguments' problems name theirs), and asks
// nothing of the agent, which did not write it.
func TestOutputProblemWords(t *testing.T) {
	tool := testCatalog[1]
	tool.OutputSchema = json.RawMessage(`{"type":"object","additionalProperties":false,"properties":{"entities":{"type":"array","items":{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}},"mode":{"enum":["a","b"]}}}`)
	g, _ := newTestGateway(t, nil)
	for _, tc := range []struct {
		sc   string
		want string
	}{
		{`{"entities": [{"name": 1}]}`, `"entities[].name" must be a string, not an integer (1)`},
		{`{"entities": [{}]}`, `"entities[]" is missing the required field "name"`},
		{`{"extra": 1}`, `"extra" is not a field of structuredContent`},
		{`{"mode": "c"}`, `"mode" must be one of "a", "b", not "c"`},
		{`[1, 2]`, `structuredContent must be an object, not an array ([1,2])`},
	} {
		got := g.outputProblem("filesystem__list_directory", tool, &mcp.CallToolResult{StructuredContent: json.RawMessage(tc.sc)})
		if got != tc.want {
			t.Errorf("%s: %q, want %q", tc.sc, got, tc.want)
		}
	}
}

// TestOutputNoteAfterTrim: a result over maxResultBytes whose
// structuredContent does not fit the output schema. When the trim cuts
// the structuredContent or leaves it out, it is not checked: no output
// note, no outputMismatch, not counted (the client gets none of it whole;
// the whole was checked, 111 ms for 5 MB of rows, to say so of megabytes
// it never saw). When only the text is cut and the structuredContent goes
// whole, it is checked, and the output note comes after the trim's.
func TestOutputNoteAfterTrim(t *testing.T) {
	rows := map[string]any{"content": 42.0, "rows": strings.Split(strings.Repeat("a row,", 3000), ",")}
	lines := strings.Repeat(strings.Repeat("x", 2999)+"\n", 4) // cut at a line end, room left
	for _, tc := range []struct {
		name  string
		limit int
		text  string
		sc    map[string]any
		check bool // the structuredContent went whole: checked
	}{
		{"cut", 5000, "listing", rows, false},
		{"left out", 5000, strings.Repeat("y", 5000), rows, false},
		{"text cut, structuredContent whole", 5000, lines, map[string]any{"content": 42.0}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			caller := &fakeCaller{call: func(string, string, map[string]any) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: tc.text}}, StructuredContent: tc.sc}, nil
			}}
			g, _ := newTestGateway(t, caller)
			log := &audittest.Log{}
			var counted int
			g = New(g.searcher, caller, &Options{Audit: log, MaxResultBytes: func(string) int { return tc.limit },
				OutputMismatch: func(string, string) { counted++ }})
			res := call(t, connect(t, g), ExecuteToolName, map[string]any{"name": "filesystem__list_directory", "arguments": map[string]any{"path": "."}})
			var notes []string
			for _, c := range res.Content {
				if s := c.(*mcp.TextContent).Text; strings.HasPrefix(s, "[toolgate:") || strings.HasPrefix(s, "toolgate:") {
					notes = append(notes, s)
				}
			}
			if len(notes) == 0 || !strings.Contains(notes[0], "maxResultBytes") {
				t.Fatalf("notes %q, want the trim's first", notes)
			}
			recs := log.Records()
			if len(recs) != 1 || recs[0].TrimmedBytes == 0 {
				t.Fatalf("audit records %+v, want one with trimmedBytes", recs)
			}
			if !tc.check {
				if len(notes) != 1 || counted != 0 || recs[0].OutputMismatch != "" {
					t.Errorf("notes %q, %d counted, outputMismatch %q: want the trim's note alone, nothing counted", notes, counted, recs[0].OutputMismatch)
				}
				return
			}
			want := `toolgate: this result's structuredContent does not fit the outputSchema filesystem__list_directory declares: "content" must be a string, not an integer (42). It is passed on as the server sent it: do not count on the shape search_tools showed.`
			if len(notes) != 2 || notes[1] != want || counted != 1 || recs[0].OutputMismatch == "" {
				t.Errorf("notes %q, %d counted, outputMismatch %q: want the trim's note, then\n%s\nand one counted", notes, counted, recs[0].OutputMismatch, want)
			}
		})
	}
}

// TestOutputPastFloatUnchecked: a structuredContent kept as written (a
// big one) with a number no float64 holds is JSON the validator cannot
// take: passed on unchecked. It read "structuredContent is not JSON: json:
// cannot unmarshal number 1e400 …", counted as a mismatch, with a note.
func TestOutputPastFloatUnchecked(t *testing.T) {
	g, _ := newTestGateway(t, &fakeCaller{})
	tool := catalog.Tool{Server: "filesystem", Name: "list_directory", InputSchema: json.RawMessage(`{"type":"object"}`),
		OutputSchema: json.RawMessage(`{"type":"object","properties":{"content":{"type":"string"}},"required":["content"]}`)}
	for sc, want := range map[string]string{
		`{"content": "a.txt", "n": 1e400}`: "",
		`{"n": 1e400}`:                     "",
		`{"contents": "a.txt"}`:            `structuredContent is missing the required field "content"`,
	} {
		res := &mcp.CallToolResult{StructuredContent: json.RawMessage(sc)}
		if problem, recorded := g.outputProblems(tool.ID(), tool, res); problem != want || recorded != want {
			t.Errorf("%s: %q (recorded %q), want %q", sc, problem, recorded, want)
		}
	}
}
