package gateway

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/gateway/audit/audittest"
	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/search"
)

// bigTool is a tool whose input schema has arguments that ask for less
// output, as a file reader's do.
var bigTool = catalog.Tool{Server: "big", Name: "read", Description: "read a file",
	InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"},"head":{"type":"integer"},"tail":{"type":"integer"},"maxResults":{"type":"integer"}}}`)}

// trimGateway is a gateway whose big__read answers res, with opts (its
// Audit set to the log returned).
func trimGateway(t *testing.T, res *mcp.CallToolResult, opts *Options) (*mcp.ClientSession, *audittest.Log) {
	t.Helper()
	log := &audittest.Log{}
	if opts == nil {
		opts = &Options{}
	}
	opts.Audit = log
	fs := &fakeSearcher{tools: []catalog.Tool{bigTool}, search: func(search.Query) (search.Result, error) { return search.Result{}, nil }}
	g := New(fs, &fakeCaller{call: func(string, string, map[string]any) (*mcp.CallToolResult, error) {
		r := *res
		return &r, nil
	}}, opts)
	return connect(t, g), log
}

func execBig(t *testing.T, cs *mcp.ClientSession) *mcp.CallToolResult {
	t.Helper()
	return call(t, cs, ExecuteToolName, map[string]any{"name": "big__read", "arguments": map[string]any{"path": "a.log"}})
}

// logText is n bytes of log lines.
func logText(n int) string {
	const line = "2026-12-07T14:00:00Z INFO request served path=/api/v1/items status=200 ms=12\n"
	return strings.Repeat(line, n/len(line)+1)[:n]
}

// TestResultTrimmedToMaxResultBytes: a tool that answers 5 MB of text (a
// log dump) reached the agent whole, 5 MB in a context of a few hundred
// KB. It gets the first DefaultMaxResultBytes, cut at a line end, and a
// note that says how much was left out and which of the tool's arguments
// ask for less; the audit record says how many bytes were left out.
func TestResultTrimmedToMaxResultBytes(t *testing.T) {
	big := logText(5_000_000)
	var told []Trimmed
	cs, log := trimGateway(t, &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: big}}}, &Options{Trimmed: func(t Trimmed) { told = append(told, t) }})
	res := execBig(t, cs)
	if len(res.Content) != 2 {
		t.Fatalf("got %d content blocks, want the text cut and the note", len(res.Content))
	}
	kept := res.Content[0].(*mcp.TextContent).Text
	if len(kept) > DefaultMaxResultBytes || len(kept) < DefaultMaxResultBytes-lineSlack || !strings.HasPrefix(big, kept) || !strings.HasSuffix(kept, "\n") {
		t.Errorf("kept %d bytes (want a prefix of the text of at most %d, cut at a line end)", len(kept), DefaultMaxResultBytes)
	}
	note := res.Content[1].(*mcp.TextContent).Text
	for _, want := range []string{
		fmt.Sprintf("trimmed to its limit of %d bytes", DefaultMaxResultBytes),
		fmt.Sprintf("%d of its 5000000 bytes were left out", 5_000_000-len(kept)),
		"call big__read again",
		`"head", "maxResults", "tail"`,
	} {
		if !strings.Contains(note, want) {
			t.Errorf("note %q lacks %q", note, want)
		}
	}
	recs := log.Records()
	if len(recs) != 1 || recs[0].TrimmedBytes != 5_000_000-len(kept) || recs[0].ResultBytes != len(kept)+len(note) {
		t.Errorf("audit records %+v: want one with trimmedBytes %d", recs, 5_000_000-len(kept))
	}
	if want := (Trimmed{Server: "big", Tool: "read", Limit: DefaultMaxResultBytes, Bytes: 5_000_000, Cut: 5_000_000 - len(kept)}); len(told) != 1 || told[0] != want {
		t.Errorf("Options.Trimmed was told %+v, want %+v", told, want)
	}
}

// TestResultWithinBoundUnchanged: a result within the bound, and images of
// any size (a cut image is no image), go through as they came, and so
// does every result of a server whose bound is raised.
func TestResultWithinBoundUnchanged(t *testing.T) {
	img := &mcp.ImageContent{MIMEType: "image/png", Data: make([]byte, 3_000_000)}
	res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: logText(90_000)}, img}}
	cs, log := trimGateway(t, res, nil)
	got := execBig(t, cs)
	if len(got.Content) != 2 || len(got.Content[0].(*mcp.TextContent).Text) != 90_000 || len(got.Content[1].(*mcp.ImageContent).Data) != 3_000_000 {
		t.Errorf("a result within the bound changed: %d blocks", len(got.Content))
	}
	if r := log.Records(); r[0].TrimmedBytes != 0 {
		t.Errorf("trimmedBytes %d, want none", r[0].TrimmedBytes)
	}

	var asked []string
	res = &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: logText(300_000)}}}
	cs, _ = trimGateway(t, res, &Options{MaxResultBytes: func(s string) int { asked = append(asked, s); return 1 << 20 }})
	if got := execBig(t, cs); len(got.Content) != 1 || len(text(got)) != 300_000 {
		t.Errorf("a server's bound of 1 MiB trimmed a 300 KB result")
	}
	if len(asked) != 1 || asked[0] != "big" {
		t.Errorf("MaxResultBytes asked for %q, want the tool's server", asked)
	}
}

// TestTrimmedTextKeepsUTF8: a text of multi-byte characters with no line
// end is cut between two characters, never inside one.
func TestTrimmedTextKeepsUTF8(t *testing.T) {
	s := strings.Repeat("héllo wörld — ✓ 日本語 😀 ", 20_000)
	for limit := 1000; limit < 1012; limit++ {
		cs, _ := trimGateway(t, &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}},
			&Options{MaxResultBytes: func(string) int { return limit }})
		res := execBig(t, cs)
		kept := res.Content[0].(*mcp.TextContent).Text
		if note := text(res); !strings.Contains(note, "(between two characters)") {
			t.Errorf("note %q", note)
		}
		if !utf8.ValidString(kept) || !strings.HasPrefix(s, kept) || len(kept) > limit || len(kept) < limit-3 {
			t.Errorf("limit %d: kept %d bytes, valid UTF-8 %v", limit, len(kept), utf8.ValidString(kept))
		}
	}
}

// TestTrimmedJSONStillParses: a text that holds JSON (the rows of a
// query) and structuredContent beside it are cut as JSON: the first rows,
// a string cut short ending in "…", numbers with every digit, and each
// still parses. The content comes first: the structuredContent gets what
// is left of the bound, or is left out when nothing is.
func TestTrimmedJSONStillParses(t *testing.T) {
	var rows []map[string]any
	for i := range 20_000 {
		rows = append(rows, map[string]any{"id": json.Number(fmt.Sprint(9007199254740993 + i)), "name": fmt.Sprintf("row %d", i), "note": "é☃"})
	}
	sc, _ := json.Marshal(map[string]any{"rows": rows, "count": len(rows)})
	cases := []struct {
		name    string
		res     *mcp.CallToolResult
		textOK  bool // the text block parses as JSON
		scKept  bool // structuredContent kept, cut
		scWhole bool
	}{
		{"mirrored", &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(sc)}}, StructuredContent: json.RawMessage(sc)}, true, false, false},
		{"structured only", &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "20000 rows"}}, StructuredContent: json.RawMessage(sc)}, false, true, false},
		{"a long string", &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "a file"}}, StructuredContent: map[string]any{"content": logText(500_000)}}, false, true, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cs, log := trimGateway(t, tc.res, &Options{MaxResultBytes: func(string) int { return 10_000 }})
			res := execBig(t, cs)
			first := res.Content[0].(*mcp.TextContent).Text
			if tc.textOK {
				var v struct {
					Rows []struct {
						ID   json.Number `json:"id"`
						Note *string     `json:"note"`
					} `json:"rows"`
				}
				if err := json.Unmarshal([]byte(first), &v); err != nil || len(v.Rows) == 0 || v.Rows[0].ID != "9007199254740993" || len(first) > 10_000 {
					t.Errorf("the JSON text cut to %d bytes: %v, %d rows", len(first), err, len(v.Rows))
				}
				// Every row kept is whole: an agent takes a row for what it
				// holds (one cut after its "name" read as a row without a note).
				for i, r := range v.Rows {
					if r.Note == nil {
						t.Errorf("row %d of %d kept in part", i, len(v.Rows))
					}
				}
			}
			if got := res.StructuredContent != nil; got != tc.scKept {
				t.Fatalf("structuredContent kept: %v, want %v", got, tc.scKept)
			}
			if tc.scKept {
				b, _ := json.Marshal(res.StructuredContent)
				if !json.Valid(b) || len(b)+len(first) > 10_000 || len(b) < 9_000 {
					t.Errorf("structuredContent cut to %d bytes: %.200s", len(b), b)
				}
				if tc.name == "a long string" && !strings.HasSuffix(string(b), `…"}`) {
					t.Errorf("a string cut short does not end in an ellipsis: …%s", b[len(b)-20:])
				}
			}
			note := text(res)
			if !strings.Contains(note, "structuredContent") || log.Records()[0].TrimmedBytes == 0 {
				t.Errorf("the note does not say what became of structuredContent: %q", note)
			}
		})
	}
}

// TestManyContentBlocksTrimmed: hundreds of text blocks go while they fit
// whole; the last of them that does not fit is left out rather than cut
// to a few bytes, and the note says how many were; an image after them
// stays.
func TestManyContentBlocksTrimmed(t *testing.T) {
	var content []mcp.Content
	for i := range 500 {
		content = append(content, &mcp.TextContent{Text: fmt.Sprintf("item %03d ", i) + strings.Repeat("x", 291)})
	}
	content = append(content, &mcp.ImageContent{MIMEType: "image/png", Data: []byte("png")})
	cs, _ := trimGateway(t, &mcp.CallToolResult{Content: content}, nil)
	res := execBig(t, cs)
	// 333 whole blocks of 300 bytes fit in 100,000; 100 are left.
	if n := len(res.Content); n != 333+1+1 {
		t.Fatalf("got %d blocks, want 333 texts, the image and the note", n)
	}
	for i, c := range res.Content[:333] {
		if tc := c.(*mcp.TextContent); len(tc.Text) != 300 {
			t.Fatalf("block %d cut to %d bytes", i, len(tc.Text))
		}
	}
	if _, ok := res.Content[333].(*mcp.ImageContent); !ok {
		t.Errorf("block 333 is %T, want the image", res.Content[333])
	}
	if note := res.Content[334].(*mcp.TextContent).Text; !strings.Contains(note, "167 text blocks left out") || strings.Contains(note, "cut after") {
		t.Errorf("note %q", note)
	}
}

// TestTrimJSON: what trimJSON keeps of a value is valid JSON of at most
// the bound, whatever the bound, and stops at the first value that does
// not fit.
func TestTrimJSON(t *testing.T) {
	in := `{"a":[1,2,{"b":"hé\"llo","c":[[],{}]},true,null],"d":"` + strings.Repeat("<&>", 50) + `","e":12345678901234567890}`
	for n := 0; n <= len(in)+10; n++ {
		out, _, err := trimJSON(strings.NewReader(in), n)
		if err != nil {
			t.Fatal(err)
		}
		if len(out) > n || len(out) > 0 && !json.Valid(out) {
			t.Fatalf("bound %d: %s (%d bytes, valid %v)", n, out, len(out), json.Valid(out))
		}
	}
	out, whole, _ := trimJSON(strings.NewReader(in), 1000)
	if string(out) != in || !whole {
		t.Errorf("a value within the bound changed:\n got %s\nwant %s", out, in)
	}
	if kept, how := cutText("[1, 2, oops "+strings.Repeat("x", 100), 10); how != cutAtCharacter || kept != "[1, 2, oop" {
		t.Errorf("a text that only starts like JSON was cut as JSON: %q", kept)
	}
	// JSON Lines (a log of JSON records): each line a value, cut at a
	// line end, not after the first value.
	jsonl := strings.Repeat(`{"level":"info","msg":"served"}`+"\n", 100)
	if kept, how := cutText(jsonl, 100); how != cutAtLine || kept != strings.Repeat(`{"level":"info","msg":"served"}`+"\n", 3) {
		t.Errorf("JSON Lines cut %s: %q", how, kept)
	}
	if _, _, err := trimJSON(strings.NewReader(strings.Repeat("[", maxTrimDepth+1)), 1<<20); err == nil {
		t.Error("a value nested past maxTrimDepth was trimmed")
	}
}

// TestTrimmedForOldClients: a result with structuredContent and no text
// reaches a client before 2025-06-18 with its JSON as a text block
// (forProtocol), and the bound applies to what that client gets: the JSON
// text cut as JSON, still parsing, with the note after it.
func TestTrimmedForOldClients(t *testing.T) {
	var rows []any
	for i := range 5000 {
		rows = append(rows, map[string]any{"id": i, "name": fmt.Sprintf("row %d", i)})
	}
	res := &mcp.CallToolResult{StructuredContent: map[string]any{"rows": rows}}
	log := &audittest.Log{}
	fs := &fakeSearcher{tools: []catalog.Tool{bigTool}, search: func(search.Query) (search.Result, error) { return search.Result{}, nil }}
	g := New(fs, &fakeCaller{call: func(string, string, map[string]any) (*mcp.CallToolResult, error) {
		r := *res
		return &r, nil
	}}, &Options{Audit: log, MaxResultBytes: func(string) int { return 5000 }})
	cs := connectClient(t, g, mcp.NewClient(&mcp.Implementation{Name: "old"}, nil), "2024-11-05")
	got := execBig(t, cs)
	if len(got.Content) != 2 {
		t.Fatalf("%d blocks, want the JSON text and the note", len(got.Content))
	}
	js := got.Content[0].(*mcp.TextContent).Text
	var v struct{ Rows []map[string]any }
	if err := json.Unmarshal([]byte(js), &v); err != nil || len(js) > 5000 || len(v.Rows) < 100 {
		t.Errorf("the JSON text of %d bytes: %v, %d rows", len(js), err, len(v.Rows))
	}
}

// TestOldClientsMirrorCountsOnce: a client before 2025-06-18 shows its
// model the JSON text forProtocol adds for a structuredContent, not the
// structuredContent itself; the bound counts that text once. A result of
// 3,500 bytes of JSON under a bound of 5,000 reached a new client whole and
// an old one with a note that it was trimmed (the text whole, its
// structuredContent cut) and to call again with narrower arguments.
func TestOldClientsMirrorCountsOnce(t *testing.T) {
	var rows []any
	for i := range 150 {
		rows = append(rows, map[string]any{"id": i, "name": fmt.Sprintf("row %d", i)})
	}
	sc := map[string]any{"rows": rows}
	raw, _ := json.Marshal(sc)
	if n := len(raw); n < 2600 || n > 5000 {
		t.Fatalf("the JSON is %d bytes, want more than half the bound of 5000, and less", n)
	}
	log := &audittest.Log{}
	var told []Trimmed
	fs := &fakeSearcher{tools: []catalog.Tool{bigTool}, search: func(search.Query) (search.Result, error) { return search.Result{}, nil }}
	g := New(fs, &fakeCaller{call: func(string, string, map[string]any) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{StructuredContent: sc}, nil
	}}, &Options{Audit: log, MaxResultBytes: func(string) int { return 5000 }, Trimmed: func(t Trimmed) { told = append(told, t) }})
	cs := connectClient(t, g, mcp.NewClient(&mcp.Implementation{Name: "old"}, nil), "2024-11-05")
	got := execBig(t, cs)
	if len(got.Content) != 1 {
		t.Fatalf("%d blocks (%v), want the JSON text alone", len(got.Content), got.Content)
	}
	if js := got.Content[0].(*mcp.TextContent).Text; !jsonEqual(t, []byte(js), raw) {
		t.Errorf("the JSON text: %.200s…, want the structuredContent's whole", js)
	}
	if len(told) != 0 {
		t.Errorf("told of a trim: %+v", told)
	}
	if r := log.Records(); len(r) != 1 || r[0].TrimmedBytes != 0 {
		t.Errorf("audit records %+v, want one without trimmedBytes", r)
	}
}

// BenchmarkBoundOrdinaryResult is what the bound costs a call whose
// result is within it (every ordinary one): a text and a decoded
// structuredContent, as the bundled everything's get-structured-content
// answers.
//
//	go test ./gateway -run '^$' -bench BoundOrdinaryResult -benchmem
func BenchmarkBoundOrdinaryResult(b *testing.B) {
	res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: `{"temperature":33,"conditions":"Cloudy","humidity":82}`}},
		StructuredContent: map[string]any{"temperature": 33.0, "conditions": "Cloudy", "humidity": 82.0}}
	for b.Loop() {
		if _, _, ok := trimResult(res, DefaultMaxResultBytes, "everything__get-structured-content", nil); ok {
			b.Fatal("trimmed")
		}
	}
}

// FuzzTrimJSON: whatever JSON a backend sends and whatever the bound,
// what trimJSON keeps is valid JSON within the bound, and the value itself
// when it fits.
func FuzzTrimJSON(f *testing.F) {
	for _, s := range []string{`{"a":[1,2,{"b":"hé\"llo"}],"c":null}`, `["` + strings.Repeat("☃", 40) + `"]`, `[[[[]]]]`, `{"":{"":""}}`, `12345678901234567890`} {
		f.Add(s, 20)
	}
	f.Fuzz(func(t *testing.T, in string, n int) {
		if !json.Valid([]byte(in)) || n < 0 || n > 1<<16 {
			return
		}
		out, whole, err := trimJSON(strings.NewReader(in), n)
		if err != nil {
			return // nested past maxTrimDepth
		}
		if len(out) > n || len(out) > 0 && !json.Valid(out) || !utf8.Valid(out) {
			t.Fatalf("bound %d: %q (valid %v)", n, out, json.Valid(out))
		}
		if whole && !jsonEqual(t, out, []byte(in)) {
			t.Fatalf("kept whole but changed: %s → %s", in, out)
		}
	})
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	da, db := json.NewDecoder(strings.NewReader(string(a))), json.NewDecoder(strings.NewReader(string(b)))
	da.UseNumber()
	db.UseNumber()
	if da.Decode(&x) != nil || db.Decode(&y) != nil {
		return false
	}
	return fmt.Sprint(x) == fmt.Sprint(y)
}

// FuzzStructuredJSON: structuredJSON encodes a decoded structuredContent
// (segmentio's encoder) to the very bytes encoding/json does without HTML
// escapes, so what a trim counts and keeps is what the audit record
// counts.
func FuzzStructuredJSON(f *testing.F) {
	for _, s := range []string{`{"a":[1,2.5,-0,1e21,1e-7,{"b":"h\u00e9<&>\u2028\"\\"}],"c":null,"d":true}`, `[{"z":1,"a":2}]`, `"\ud800x"`, `123456789012345678901234567890`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		var v any
		if json.Unmarshal([]byte(in), &v) != nil {
			return
		}
		var b strings.Builder
		e := json.NewEncoder(&b)
		e.SetEscapeHTML(false)
		if e.Encode(v) != nil {
			return
		}
		want := strings.TrimSuffix(b.String(), "\n")
		if got := structuredJSON(v); string(got) != want {
			t.Fatalf("%s: structuredJSON %s, encoding/json %s", in, got, want)
		}
	})
}

// TestOverCapSaysWhatToDo: a result over the message size cap (16 MiB) is
// refused whole, as the stdio pump answers in its place. execute_tool said
// `server "big" answered with an error: …; ask for less output`, as if the
// server had failed; it says the result was too big to read, that
// maxResultBytes cannot help, and which arguments ask for less.
func TestOverCapSaysWhatToDo(t *testing.T) {
	fs := &fakeSearcher{tools: []catalog.Tool{bigTool}, search: func(search.Query) (search.Result, error) { return search.Result{}, nil }}
	g := New(fs, &fakeCaller{call: func(string, string, map[string]any) (*mcp.CallToolResult, error) {
		return nil, fmt.Errorf(`call "read" on "big": calling "tools/call": the backend's response (more than 20259803 bytes) exceeds toolgate's message size cap of 16777216 bytes; ask for less output`)
	}}, nil)
	res := execBig(t, connect(t, g))
	got := text(res)
	for _, want := range []string{"too big to read", "16777216", "maxResultBytes trims only", `call big__read again with arguments that ask for less (it takes "head", "maxResults", "tail")`} {
		if !strings.Contains(strings.ToLower(got), strings.ToLower(want)) {
			t.Errorf("%q lacks %q", got, want)
		}
	}
	if !res.IsError || strings.Contains(got, "answered with an error") {
		t.Errorf("isError %v: %s", res.IsError, got)
	}
}
