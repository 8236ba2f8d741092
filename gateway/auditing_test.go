package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/gateway/audit"
	"github.com/toolgate/toolgate/gateway/audit/audittest"
	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/internal/linerpc"
	"github.com/toolgate/toolgate/search"
)

// TestClientNameIsClientInfos: the client name of an audit record
// (clientName) is the one req.ClientInfo() gives, for every request go-sdk
// hands a tool handler. clientName reads a 2026-07-28 request's clientInfo
// from its _meta instead of having ClientInfo encode and decode it again;
// that is right only because go-sdk refuses a request whose clientInfo
// does not decode into an mcp.Implementation before any handler sees it.
// The refusals below fail loudly the day go-sdk lets such a request
// through (clientName would then name a client ClientInfo does not).
func TestClientNameIsClientInfos(t *testing.T) {
	log := &audittest.Log{}
	g := New(&fakeSearcher{}, &fakeCaller{}, &Options{Audit: log})
	type seen struct{ name, info, client string }
	got := make(chan seen, 1)
	const probe = "probe_client"
	g.server.AddTool(&mcp.Tool{Name: probe, InputSchema: json.RawMessage(`{"type":"object"}`)},
		g.audited(probe, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			name, version := clientInfo(req)
			s := seen{name: name + " " + version, client: clientOf(req, "")}
			if ci := req.ClientInfo(); ci != nil {
				s.info = ci.Name + " " + ci.Version
			}
			got <- s
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
		}))

	c2sR, c2sW := io.Pipe()
	s2cR, s2cW := io.Pipe()
	ctx := context.Background()
	ss, err := g.Server().Connect(ctx, &linerpc.Transport{Reader: c2sR, Writer: s2cW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c2sW.Close(); ss.Wait() })
	replies := bufio.NewScanner(s2cR)
	id := 0
	// send writes one tools/call of the probe with meta as its _meta and
	// returns the reply.
	send := func(meta string) map[string]any {
		t.Helper()
		id++
		line := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":{},"_meta":%s}}`+"\n", id, probe, meta)
		if _, err := io.WriteString(c2sW, line); err != nil {
			t.Fatal(err)
		}
		if !replies.Scan() {
			t.Fatalf("no reply to %s: %v", line, replies.Err())
		}
		var reply map[string]any
		if err := json.Unmarshal(replies.Bytes(), &reply); err != nil {
			t.Fatal(err)
		}
		return reply
	}
	stateless := func(clientInfo string) string {
		m := `{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}`
		if clientInfo != "" {
			m += `,"io.modelcontextprotocol/clientInfo":` + clientInfo
		}
		return m + "}"
	}

	for _, meta := range []string{
		stateless(`{"name":"alpha","version":"1"}`),
		stateless(`{"name":"beta","version":"1","title":"B","icons":[{"src":"https://example.com/b.png"}]}`),
		stateless(`{"version":"1"}`),                                            // no name
		stateless(`{"name":null,"version":"1"}`),                                // a null name decodes as none
		stateless(``),                                                           // no clientInfo: the session's
		`{"io.modelcontextprotocol/clientInfo":{"name":"gamma","version":"1"}}`, // an older request naming its client anyway
	} {
		reply := send(meta)
		if reply["error"] != nil {
			t.Fatalf("_meta %s refused: %v", meta, reply["error"])
		}
		s := <-got
		if s.name != s.info {
			t.Errorf("_meta %s: clientName %q, ClientInfo().Name %q", meta, s.name, s.info)
		}
		recs := log.Records()
		if r, want := recs[len(recs)-1], s.client; r.Client != want {
			t.Errorf("_meta %s: the audit record names client %q, want %q", meta, r.Client, want)
		}
	}
	if recs := log.Records(); recs[0].Client != "alpha/1" {
		t.Errorf("the first record names client %q, want alpha/1", recs[0].Client)
	}

	// What clientName does not look at, go-sdk must refuse.
	for _, clientInfo := range []string{
		`{"name":7,"version":"1"}`,
		`{"name":"delta","version":2}`,
		`{"name":"delta","version":"1","icons":"none"}`,
		`"delta"`,
		`null`,
	} {
		reply := send(stateless(clientInfo))
		if reply["error"] == nil {
			s := <-got
			t.Errorf("go-sdk handed a tool a request whose clientInfo is %s (clientName %q, ClientInfo().Name %q): clientName must decode it as ClientInfo does",
				clientInfo, s.name, s.info)
		}
	}
}

// req0 is a tools/call request with meta (JSON) as its _meta.
func req0(meta string) *mcp.CallToolRequest {
	var m mcp.Meta
	if err := json.Unmarshal([]byte(meta), &m); err != nil {
		panic(err)
	}
	return &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Meta: m}}
}

// TestClientOf: an audit record's client is the MCP client's own name and
// version, with the HTTP User-Agent after it when that says something
// more, and the User-Agent alone for a request without clientInfo.
func TestClientOf(t *testing.T) {
	meta := func(ci string) string {
		return `{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":` + ci + `}`
	}
	for _, c := range []struct{ meta, agent, want string }{
		{meta(`{"name":"claude-ai","version":"0.1.0"}`), "node", "claude-ai/0.1.0 (node)"},
		{meta(`{"name":"claude-ai","version":"0.1.0"}`), "", "claude-ai/0.1.0"},
		{meta(`{"name":"claude-ai","version":""}`), "curl/8.5.0", "claude-ai (curl/8.5.0)"},
		{meta(`{"name":"claude-ai","version":"0.1.0"}`), "claude-ai/0.1.0 (toolgate connect)", "claude-ai/0.1.0 (toolgate connect)"}, // toolgate connect's
		{meta(`{"name":"claude-ai","version":"0.1.0"}`), "claude-ai/0.1.0", "claude-ai/0.1.0"},
		{meta(`{"version":"1"}`), "node", "node"},
		{`{}`, "node", "node"}, // an older HTTP request: its initialize was another request's
		{`{}`, "", ""},
	} {
		if got := clientOf(req0(c.meta), c.agent); got != c.want {
			t.Errorf("_meta %s, User-Agent %q: client %q, want %q", c.meta, c.agent, got, c.want)
		}
	}
}

// TestAuditedArguments: an execute_tool call's audit record hashes (and,
// with AuditArguments, records) its arguments decoded as they were sent,
// whatever they are and however the call ends: the handler hands over the
// arguments it decoded when they are that decoding, and the record decodes
// them itself otherwise (none, null, long numbers, not an object, a call
// refused before they were looked at).
func TestAuditedArguments(t *testing.T) {
	log := &audittest.Log{}
	var kept []any
	tool := catalog.Tool{Server: "fake", Name: "echo", InputSchema: json.RawMessage(`{"type":"object"}`)}
	ok := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}
	fs := &fakeSearcher{tools: []catalog.Tool{tool}, search: func(search.Query) (search.Result, error) { return search.Result{}, nil }}
	g := New(fs,
		&fakeCaller{call: func(string, string, map[string]any) (*mcp.CallToolResult, error) { return ok, nil }},
		&Options{Audit: log, AuditArguments: func(v any) any { kept = append(kept, v); return v }})
	h := g.audited(ExecuteToolName, g.handleExecute)
	for _, args := range []string{
		`{"name":"fake__echo","arguments":{"text":"ok","n":1.5,"list":[1,"a",null]}}`,
		`{"name":"fake__echo"}`,
		`{"name":"fake__echo","arguments":null}`,
		`{"name":"fake__echo","arguments":{}}`,
		`{"name":"fake__echo","arguments":{"id":12345678901234567890}}`, // kept exact for the backend
		`{"name":"fake__echo","arguments":{"id":1e400}}`,                // past float64
		`{"name":"fake__echo","arguments":[1,2]}`,                       // not an object
		`{"name":"fake__nope","arguments":{"a":1}}`,                     // unknown tool
		`{"name":"","arguments":{"a":1}}`,
		`{"name":7}`, // does not decode
	} {
		kept = kept[:0]
		req := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: ExecuteToolName, Arguments: json.RawMessage(args)}}
		if _, err := h(context.Background(), req); err != nil {
			t.Fatal(err)
		}
		// What the record held before: the "arguments" member (or, for
		// arguments that do not decode, the whole), decoded into any.
		var a struct {
			Name      string
			Arguments json.RawMessage
		}
		raw := json.RawMessage(args)
		if json.Unmarshal(raw, &a) == nil {
			raw = a.Arguments
		}
		var want any
		if json.Unmarshal(raw, &want) != nil {
			want = nil
		}
		recs := log.Records()
		r := recs[len(recs)-1]
		if r.ArgumentsSHA256 != audit.HashArguments(want) {
			t.Errorf("%s: the record hashes the arguments as %q, want %q (of %v)", args, r.ArgumentsSHA256, audit.HashArguments(want), want)
		}
		switch {
		case want == nil && len(kept) != 0:
			t.Errorf("%s: arguments %v recorded, want none", args, kept)
		case want != nil && (len(kept) != 1 || !reflect.DeepEqual(kept[0], want)):
			t.Errorf("%s: arguments %v recorded, want %v", args, kept, want)
		}
	}
}

// TestAuditedNameAsWritten: the record of an execute_tool call names the
// tool its "name" gave, as written: Go's decoder also takes "NAME" or
// "Name" for it (the last one it reads), which the call is refused for
// (unknown argument), so {"name": "fake__echo", "NAME": "other__secret"}
// was recorded as an allowed call of other__secret, a tool outside the
// key's scope that did not run (a probe, 2026-12-07).
func TestAuditedNameAsWritten(t *testing.T) {
	log := &audittest.Log{}
	tool := catalog.Tool{Server: "fake", Name: "echo", InputSchema: json.RawMessage(`{"type":"object"}`)}
	ok := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}
	fs := &fakeSearcher{tools: []catalog.Tool{tool}, search: func(search.Query) (search.Result, error) { return search.Result{}, nil }}
	g := New(fs, &fakeCaller{call: func(string, string, map[string]any) (*mcp.CallToolResult, error) { return ok, nil }}, &Options{Audit: log})
	h := g.audited(ExecuteToolName, g.handleExecute)
	for args, want := range map[string]string{
		`{"name":"fake__echo","NAME":"other__secret"}`:   "fake__echo",
		`{"NAME":"other__secret","name":"fake__echo"}`:   "fake__echo",
		`{"name":"fake__echo","Name":"other__secret"}`:   "fake__echo",
		`{"Name":"other__secret"}`:                       "",
		`{"Name":"other__secret","arguments":{"a":1}}`:   "",
		`{"name":"fake__echo","args":{"a":1}}`:           "fake__echo",
		`{"name":"fake__echo","arguments":{"a":1}}`:      "fake__echo",
		`{"name":"fake__echo","ARGUMENTS":{"a":1}}`:      "fake__echo",
		`{"name":"other__secret","NAME":"fake__echo"}`:   "other__secret",
		`{"name":["fake__echo"],"NAME":"other__secret"}`: "",
	} {
		req := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: ExecuteToolName, Arguments: json.RawMessage(args)}}
		res, err := h(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		recs := log.Records()
		if r := recs[len(recs)-1]; r.Tool != want {
			t.Errorf("%s: recorded as a call of %q (%s), want %q", args, r.Tool, text(res), want)
		}
	}
}

// TestResultBytes: a record's resultBytes counts the structured content as
// json.Marshal encodes it (HTML characters escaped, a json.RawMessage
// compacted, a value that does not encode as nothing), and the texts.
func TestResultBytes(t *testing.T) {
	for _, sc := range []any{
		map[string]any{"a": 1.5, "b": []any{"x", nil, true}},
		map[string]any{"html": "<b>&</b>"},
		json.RawMessage(`{ "id" : 12345678901234567890 }`),
		struct {
			N int    `json:"n"`
			S string `json:"s,omitempty"`
		}{N: 3},
		map[string]any{"nan": math.NaN()}, // does not encode
	} {
		res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "four"}}, StructuredContent: sc}
		want := 4
		if b, err := json.Marshal(sc); err == nil {
			want += len(b)
		}
		if got := resultBytes(res); got != want {
			t.Errorf("resultBytes with structured content %v = %d, want %d", sc, got, want)
		}
	}
}

// notingCaller is a Caller whose calls say what they did (audit.Note), as
// the management tools do, and end in res.
type notingCaller struct {
	server, what string
	res          *mcp.CallToolResult
}

func (c notingCaller) CallTool(ctx context.Context, _, _ string, _ map[string]any) (*mcp.CallToolResult, error) {
	audit.Note(ctx, c.server, c.what)
	return c.res, nil
}

// TestAuditedNote: what a call's tool said it acts on (audit.Note: the
// server a management tool disabled) is its record's server and reason,
// whether the call ended ok or isError; a call that ran nothing says none.
func TestAuditedNote(t *testing.T) {
	tool := catalog.Tool{Server: "toolgate", Name: "disable_server", InputSchema: json.RawMessage(`{"type":"object"}`)}
	fs := &fakeSearcher{tools: []catalog.Tool{tool}, search: func(search.Query) (search.Result, error) { return search.Result{}, nil }}
	for _, isError := range []bool{false, true} {
		log := &audittest.Log{}
		res := &mcp.CallToolResult{IsError: isError, Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}
		g := New(fs, notingCaller{server: "memory", what: `server "memory"`, res: res}, &Options{Audit: log})
		h := g.audited(ExecuteToolName, g.handleExecute)
		for _, args := range []string{`{"name":"toolgate__disable_server","arguments":{"name":"memory"}}`, `{"name":"toolgate__nope"}`} {
			req := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: ExecuteToolName, Arguments: json.RawMessage(args)}}
			if _, err := h(context.Background(), req); err != nil {
				t.Fatal(err)
			}
		}
		recs := log.Records()
		if len(recs) != 2 {
			t.Fatalf("%d records, want 2", len(recs))
		}
		if r := recs[0]; r.Server != "memory" || r.Reason != `server "memory"` || r.Tool != "toolgate__disable_server" || (r.Outcome == audit.IsError) != isError {
			t.Errorf("isError %v: the record of the call: tool %q outcome %q server %q reason %q, want server memory, reason %q", isError, r.Tool, r.Outcome, r.Server, r.Reason, `server "memory"`)
		}
		if r := recs[1]; r.Server != "" || r.Reason == `server "memory"` {
			t.Errorf("the record of a call that ran nothing says server %q, %q", r.Server, r.Reason)
		}
	}
}

// TestDeniedSentenceEndsOnce: a refusal whose words end their sentence (the
// management tools': "… or to run `toolgate servers add|remove`.") is
// answered with one full stop, not "…add|remove`..".
func TestDeniedSentenceEndsOnce(t *testing.T) {
	tool := catalog.Tool{Server: "toolgate", Name: "add_server", InputSchema: json.RawMessage(`{"type":"object"}`)}
	fs := &fakeSearcher{tools: []catalog.Tool{tool}, search: func(search.Query) (search.Result, error) { return search.Result{}, nil }}
	g := New(fs, &fakeCaller{call: func(string, string, map[string]any) (*mcp.CallToolResult, error) {
		return nil, fmt.Errorf("toolgate__add_server is refused: ask the user to run `toolgate servers add`.%w", errorsJoinQuiet(ErrDenied))
	}}, nil)
	res, err := g.handleExecute(context.Background(), &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: ExecuteToolName, Arguments: json.RawMessage(`{"name":"toolgate__add_server"}`)}})
	if err != nil {
		t.Fatal(err)
	}
	if got := text(res); !res.IsError || !strings.HasSuffix(got, "`toolgate servers add`.") {
		t.Errorf("a refusal ending its sentence: %q, want it to end with one full stop", got)
	}
}

// errorsJoinQuiet wraps err so that it adds nothing to the text of the
// error it is wrapped in with %w.
func errorsJoinQuiet(err error) error { return quietErr{err} }

type quietErr struct{ err error }

func (quietErr) Error() string   { return "" }
func (q quietErr) Unwrap() error { return q.err }

// TestAuditedUnknownToolRefused: an execute_tool of a tool the gateway
// does not have ran nothing, though its decision is allowed: its record
// is marked Refused, so that the audit log coalesces a key's repeats of it
// as a refusal's; a call the backend answered with isError is not.
func TestAuditedUnknownToolRefused(t *testing.T) {
	log := &audittest.Log{}
	tool := catalog.Tool{Server: "fake", Name: "echo", InputSchema: json.RawMessage(`{"type":"object"}`)}
	bad := &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "the tool failed"}}}
	fs := &fakeSearcher{tools: []catalog.Tool{tool}, search: func(search.Query) (search.Result, error) { return search.Result{}, nil }}
	g := New(fs, &fakeCaller{call: func(string, string, map[string]any) (*mcp.CallToolResult, error) { return bad, nil }}, &Options{Audit: log})
	h := g.audited(ExecuteToolName, g.handleExecute)
	for args, refused := range map[string]bool{`{"name":"fake__nosuch"}`: true, `{"name":"nosuch"}`: true, `{"name":"fake__echo"}`: false} {
		req := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: ExecuteToolName, Arguments: json.RawMessage(args)}}
		if _, err := h(context.Background(), req); err != nil {
			t.Fatal(err)
		}
		recs := log.Records()
		// Unlisted too: a made-up name may go to the key's other refusals.
		if r := recs[len(recs)-1]; r.Refused != refused || r.Unlisted != refused || r.Decision != audit.Allowed || r.Outcome != audit.IsError {
			t.Errorf("%s: recorded %s/%s, refused %v, unlisted %v; want allowed/isError, refused and unlisted %v", args, r.Decision, r.Outcome, r.Refused, r.Unlisted, refused)
		}
	}
}
