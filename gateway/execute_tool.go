package gateway

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	segjson "github.com/segmentio/encoding/json"
	"github.com/tidwall/gjson"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolgate/toolgate/gateway/audit"
	"github.com/toolgate/toolgate/gateway/backend"
	"github.com/toolgate/toolgate/gateway/keys"
	"github.com/toolgate/toolgate/gateway/limit"
	"github.com/toolgate/toolgate/gateway/policy"
	"github.com/toolgate/toolgate/gateway/quarantine"
	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/internal/jsonnum"
	"github.com/toolgate/toolgate/internal/oneline"
	"github.com/toolgate/toolgate/internal/typo"
)

type executeArgs struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// executeTool is execute_tool's definition; its input schema keeps to the
// providers' subset as search_tools' does (searchTool). "arguments" is an
// object of any shape, which no strict mode can take: a framework serves
// this tool non-strict (README "Agent frameworks and model providers").
func executeTool() *mcp.Tool {
	return &mcp.Tool{
		Name:  ExecuteToolName,
		Title: "Execute tool",
		Description: "Run one tool found with search_tools. " +
			"\"name\" is the namespaced tool name exactly as search_tools returned it (server__tool); " +
			"\"arguments\" must match that tool's inputSchema. The tool's own result is returned unchanged.",
		InputSchema: json.RawMessage(`{
  "type": "object",
  "properties": {
    "name": {"type": "string", "description": "Namespaced tool name from search_tools, e.g. \"filesystem__list_directory\"."},
    "arguments": {"type": "object", "description": "Arguments for the tool, matching its inputSchema."}
  },
  "required": ["name"]
}`),
		Annotations: &mcp.ToolAnnotations{OpenWorldHint: boolPtr(true)},
	}
}

func (g *Gateway) handleExecute(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	note := noteOf(ctx)
	var a executeArgs
	if err := decodeArgs(req.Params.Arguments, &a); err != nil {
		note.raw = req.Params.Arguments
		if e := err.Error(); strings.HasPrefix(e, `"name" `) && strings.HasSuffix(e, "a JSON array") { // several calls in one
			return toolError(`execute_tool: %v: one tool per call, {"name": "server__tool", "arguments": {...}}.`, err), nil
		}
		return toolError(`execute_tool: arguments must be an object like {"name": "server__tool", "arguments": {...}}: %v`, err), nil
	}
	note.tool, note.raw = a.Name, a.Arguments
	if extra := unknownKeys(req.Params.Arguments, "name", "arguments"); len(extra) > 0 {
		// Left out, they were dropped: {"name": …, "args": {…}} ran the
		// tool with no arguments.
		a = asWritten(req.Params.Arguments)
		note.tool, note.raw = a.Name, req.Params.Arguments
		if msg := g.misplacedArgs(policy.CallerFrom(ctx), a, req.Params.Arguments, extra); msg != "" {
			return toolError("%s", msg), nil
		}
		return toolError(`execute_tool: unknown argument %s. It takes "name" (the tool, server__tool, as search_tools returned it) and "arguments" (the tool's own arguments, an object): {"name": "server__tool", "arguments": {...}}.`, quoted(extra)), nil
	}
	if strings.TrimSpace(a.Name) == "" {
		return toolError(`execute_tool needs "name": a namespaced tool name returned by search_tools, e.g. "filesystem__list_directory".`), nil
	}
	var tool catalog.Tool
	var ok bool
	caller := policy.CallerFrom(ctx)
	a.Name, tool, ok = g.lookup(caller, a.Name)
	if !ok && g.awaitTool(ctx, caller, a.Name) {
		a.Name, tool, ok = g.lookup(caller, a.Name)
	}
	note.tool, note.unlisted = a.Name, !ok
	if g.opts.Policy != nil {
		t := tool
		if !ok { // a name the catalog lacks may still have a reason (a removed server)
			server, name, err := catalog.SplitID(a.Name)
			if err != nil {
				note.refused = true
				return toolError("%s", g.unknownTool(ctx, a.Name)), nil
			}
			t = catalog.Tool{Server: server, Name: name}
		}
		if d := g.opts.Policy.Decide(caller, t); !d.Allowed {
			// A key's refusal reads the same whether the tool exists or
			// not: a key learns nothing of what lies outside its scope.
			if !ok && d.Rule != keys.RuleName {
				note.decision, note.reason = audit.Denied, d.Reason
				return toolError("%s", g.unknownTool(ctx, a.Name, d.Reason)), nil
			}
			// Decided before the arguments are checked against a schema
			// the caller may not see; the refusal passes the observers.
			_, err := g.refused.CallTool(context.WithValue(ctx, refusalKey{}, d), t.Server, t.Name, nil)
			return g.callError(ctx, a.Name, t.Server, err), nil
		}
	}
	if !ok {
		note.refused = true
		return toolError("%s", g.unknownTool(ctx, a.Name)), nil
	}
	args, forSchema, plain, err := toolArgs(a.Arguments)
	if err != nil {
		msg := fmt.Sprintf("execute_tool %s: %v", a.Name, err)
		if ex, ok := exampleArgs(tool.InputSchema); ok {
			msg += fmt.Sprintf(". %s\n%s", rightShape, exampleCall(a.Name, ex))
		}
		return toolError("%s", msg), nil
	}
	if msg := g.nestedArgs(caller, tool, args); msg != "" {
		return toolError("%s", msg), nil
	}
	if plain {
		note.args = args // the audit record need not decode them again
	}
	_, vspan := g.span(ctx, spanValidate, trace.SpanKindInternal)
	msg := g.validate(a.Name, tool.InputSchema, forSchema)
	vspan.End()
	if msg != "" {
		return toolError("%s", explainInvalid(a.Name, tool.InputSchema, msg, args)), nil
	}
	if g.recent != nil && g.teaches(ctx) {
		if q := g.recent.ran(sessionKey(ctx, req), a.Name); q != "" {
			g.opts.Learner.Record(q, tool)
		}
	}
	cctx, cspan := g.callSpan(ctx, tool.Server, tool.Name)
	if hc, ok := ctx.Value(httpRequestKey{}).(context.Context); ok {
		// A stateless HTTP request: the call ends when its client goes
		// (go-sdk ties the handler to the request for 2026-07-28 clients
		// only).
		var cancel context.CancelCauseFunc
		cctx, cancel = context.WithCancelCause(cctx)
		defer cancel(nil)
		defer context.AfterFunc(hc, func() { cancel(callEnded(hc)) })()
	}
	ev, relayed := g.callEvents(ctx, req, tool.Server, tool.Name)
	if ev != nil {
		cctx = backend.WithCallEvents(cctx, ev)
	}
	cctx = backend.WithCallInput(cctx, callInput(req))
	if g.opts.Policy != nil {
		// Decided again when the call waited for its server's connection:
		// that connection's listing may have changed the tool's definition
		// since, and the quarantine then holds it (a warm start's call ran
		// the changed tool).
		cctx = backend.WithAdmit(cctx, func() error {
			if d := g.opts.Policy.Decide(caller, tool); !d.Allowed {
				return &DeniedError{Server: tool.Server, Tool: tool.Name, Rule: d.Rule, Reason: d.Reason}
			}
			return nil
		})
	}
	res, err := g.caller.CallTool(cctx, tool.Server, tool.Name, args)
	if relayed != nil {
		relayed(cctx) // what the backend sent before its result goes out first
	}
	endCall(cspan, CallOutcome(res, err))
	if err != nil {
		return g.callError(cctx, a.Name, tool.Server, err), nil
	}
	res = emptyTextKept(ownMeta(res))
	if res != nil && (res.NeedsInput() || res.InputRequests != nil) {
		return g.inputRequired(ctx, req, a.Name, tool.Server, res), nil
	}
	// Bounded first: the note on the output schema, after, is never cut.
	out, cut := g.bounded(ctx, tool, a.Name, res, forProtocol(req, res))
	// A structuredContent the bound cut or left out is not checked: the
	// client gets none of it whole, the trim's note says so, and a check
	// of the megabytes left out cost more than the rest of the call (111
	// ms of 5 MB rows, BenchmarkBigResult).
	var problem, recorded string
	if !cut {
		problem, recorded = g.outputProblems(a.Name, tool, res)
	}
	if problem != "" {
		note.output = recorded // the result's values are the client's alone
		g.warnOutput(a.Name, tool, recorded)
		if g.opts.OutputMismatch != nil {
			g.opts.OutputMismatch(tool.Server, tool.Name)
		}
		out = outputNote(out, a.Name, problem)
	}
	return out, nil
}

// bounded is sent, res as forProtocol fits it to the client, with its
// text trimmed to the bound of tool's server (Options.MaxResultBytes), as
// the client would take it; a trimmed result is logged, told to
// Options.Trimmed and noted for its audit record; cut says its
// structuredContent was cut or left out. The JSON text
// forProtocol adds for an older client, which shows its model the content
// alone, counts in place of the structuredContent it mirrors, not beside
// it: the structuredContent goes whole with the text, or not at all when
// the text was cut. Counted twice, a result within the bound for a new
// client reached an old one "trimmed", whole, with a note to call again.
func (g *Gateway) bounded(ctx context.Context, tool catalog.Tool, id string, res, sent *mcp.CallToolResult) (out *mcp.CallToolResult, cut bool) {
	limit := DefaultMaxResultBytes
	if g.opts.MaxResultBytes != nil {
		if n := g.opts.MaxResultBytes(tool.Server); n > 0 {
			limit = n
		}
	}
	in := sent
	mirrored := sent != nil && sent.StructuredContent != nil && !slices.ContainsFunc(res.Content, isText) && slices.ContainsFunc(sent.Content, isText)
	if mirrored {
		bare := *sent
		bare.StructuredContent = nil
		in = &bare
	}
	out, t, ok := trimResult(in, limit, id, tool.InputSchema)
	if !ok {
		return sent, false
	}
	t.Server, t.Tool = tool.Server, tool.Name
	noteOf(ctx).trimmed = t.Cut
	g.log.Info("result trimmed to maxResultBytes", "tool", id, "server", tool.Server, "bytes", t.Bytes, "cut", t.Cut, "limit", t.Limit)
	if g.opts.Trimmed != nil {
		g.opts.Trimmed(t)
	}
	return out, t.structured || mirrored
}

// MaxToolWait bounds how long execute_tool waits, for a name its catalog
// lacks, for the tool's server to connect and the catalog to take what it
// lists (Options.AwaitTool).
const MaxToolWait = 30 * time.Second

// awaitTool waits, for a name the catalog lacks, until the catalog holds
// it if it may come (Options.AwaitTool): after a warm start, a tool its
// server added since the last run answered "unknown tool" until the
// server had connected and the re-index that followed was served, though
// a call of a tool the catalog held waited for the same connection. Only
// for a server the gateway runs, and a name the caller's policy would let
// run: a key learns nothing by how long a name outside its scope takes.
func (g *Gateway) awaitTool(ctx context.Context, caller *policy.Caller, name string) bool {
	if g.opts.AwaitTool == nil || g.opts.Servers == nil {
		return false
	}
	server, tool, err := catalog.SplitID(trimmedName(name))
	if err != nil || !slices.Contains(g.opts.Servers(), server) {
		return false
	}
	if g.opts.Policy != nil && !g.opts.Policy.Decide(caller, catalog.Tool{Server: server, Name: tool}).Allowed {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, MaxToolWait)
	defer cancel()
	return g.opts.AwaitTool(ctx, server, tool)
}

// forProtocol is res as the client of req may take it at the protocol
// version it agreed: the one place execute_tool fits a backend's result to
// an older client (objectStructured, definedContent).
func forProtocol(req *mcp.CallToolRequest, res *mcp.CallToolResult) *mcp.CallToolResult {
	return definedContent(req, objectStructured(req, res))
}

// The protocol versions that added content block types.
const (
	audioVersion        = "2025-03-26" // audio
	resourceLinkVersion = "2025-06-18" // resource_link
)

// definedContent is res with each content block of a type the protocol of
// req's client does not define written as a text block that says what it
// was, a copy when there was one: a resource link for a client before
// 2025-06-18 (its URI, name, title, type, size and description), audio
// for one before 2025-03-26 (its type and size). The Python SDK 1.2.1
// (2024-11-05) and 1.9.4 (2025-03-26) refused the whole result otherwise
// (call_tool raised a pydantic ValidationError), its text and images lost
// with it. The block's annotations and _meta stay; a resource link's icons
// go, as an older client has nowhere to show them. A structuredContent
// (2025-06-18) is kept, as every SDK tried keeps or ignores it, and its
// JSON is added as text when the result has no text block (the spec
// advises a server to write it there; one that wrote nothing left an
// older client, which shows its model the content alone, with an empty
// answer: the Python SDK 1.2.1 showed `content: []`). A text of its own
// (prose, as toolgate's management tools write) is the server's rendering
// for the model, and is not added to.
func definedContent(req *mcp.CallToolRequest, res *mcp.CallToolResult) *mcp.CallToolResult {
	if res == nil || req.Session == nil {
		return res
	}
	ip := req.Session.InitializeParams()
	if ip == nil || ip.ProtocolVersion >= resourceLinkVersion {
		return res
	}
	pv := ip.ProtocolVersion
	undefined := func(c mcp.Content) bool { return undefinedAt(pv, c) }
	var raw []byte // structuredContent's JSON, when no text says anything
	if !slices.ContainsFunc(res.Content, isText) {
		raw = structuredJSON(res.StructuredContent)
	}
	if !slices.ContainsFunc(res.Content, undefined) && len(raw) == 0 {
		return res
	}
	out := *res
	out.Content = slices.Clone(res.Content)
	if len(raw) > 0 {
		out.Content = append(out.Content, &mcp.TextContent{Text: string(raw)})
	}
	for i, c := range out.Content {
		out.Content[i] = definedAt(pv, c)
	}
	return &out
}

// undefinedAt reports whether protocol version pv lacks c's content type:
// a resource link before 2025-06-18, audio before 2025-03-26.
func undefinedAt(pv string, c mcp.Content) bool {
	switch c.(type) {
	case *mcp.ResourceLink:
		return pv < resourceLinkVersion
	case *mcp.AudioContent:
		return pv < audioVersion
	}
	return false
}

// definedAt is c, or a text block that says what it was when protocol
// version pv lacks its type (undefinedAt); its annotations and _meta stay.
func definedAt(pv string, c mcp.Content) mcp.Content {
	if !undefinedAt(pv, c) {
		return c
	}
	switch c := c.(type) {
	case *mcp.ResourceLink:
		return &mcp.TextContent{Text: linkText(c), Meta: c.Meta, Annotations: c.Annotations}
	case *mcp.AudioContent:
		return &mcp.TextContent{Text: fmt.Sprintf(
			"Audio left out (%s, %d bytes): protocol %s has no audio content; a client of protocol %s or later receives it.",
			cmp.Or(c.MIMEType, "no type given"), len(c.Data), pv, audioVersion), Meta: c.Meta, Annotations: c.Annotations}
	}
	return c
}

// linkText is what a resource link says, as text: `Resource link:
// file:///src/main.rs (name "main.rs", title "Main", text/x-rust, 1234
// bytes): Entry point`.
func linkText(l *mcp.ResourceLink) string {
	about := []string{fmt.Sprintf("name %q", l.Name)}
	if l.Title != "" {
		about = append(about, fmt.Sprintf("title %q", l.Title))
	}
	if l.MIMEType != "" {
		about = append(about, l.MIMEType)
	}
	if l.Size != nil {
		about = append(about, fmt.Sprintf("%d bytes", *l.Size))
	}
	s := fmt.Sprintf("Resource link: %s (%s)", l.URI, strings.Join(about, ", "))
	if l.Description != "" {
		s += ": " + l.Description
	}
	return s
}

// ownMeta is res without the keys of its _meta under a prefix MCP
// reserves (its second label "modelcontextprotocol" or "mcp", as in
// io.modelcontextprotocol/serverInfo), a copy when it had one; the
// backend's own keys (an app's data for its widget) are part of its
// result and go on unscanned, as its content does. MCP's describe the
// backend's session, not the tool's answer: its serverInfo, which go-sdk's
// server keeps when present, made a 2026-07-28 client take the backend for
// the server it is connected to, and its related-task names a task of
// the backend's session that the gateway's does not have (relayed
// notifications go without any _meta: backend/relay.go noMeta).
func ownMeta(res *mcp.CallToolResult) *mcp.CallToolResult {
	if res == nil || !hasReservedMeta(res.Meta) {
		return res
	}
	out := *res
	out.Meta = nil
	// Not maps.Clone: a _meta go-sdk decoded is a map made for 64 keys
	// (segmentio's decoder), and a clone keeps its size, about 5 KB of
	// every call's garbage for a backend's serverInfo alone.
	kept := 0
	for k := range res.Meta {
		if !reservedMetaKey(k) {
			kept++
		}
	}
	if kept > 0 {
		out.Meta = make(mcp.Meta, kept)
		for k, v := range res.Meta {
			if !reservedMetaKey(k) {
				out.Meta[k] = v
			}
		}
	}
	return &out
}

// emptyTextKept is res with each embedded text resource whose text is ""
// (an empty text file) written with its "text", a copy when it has one.
// go-sdk v1.8.0 writes a resource's text with omitempty, so such a block
// reached the client with neither text nor blob, which MCP's schema does
// not allow: the TypeScript SDK's client refused the whole answer
// (invalid_union). A resource that had neither is written so too, which
// makes a broken block a valid one.
func emptyTextKept(res *mcp.CallToolResult) *mcp.CallToolResult {
	if res == nil || !slices.ContainsFunc(res.Content, emptyText) {
		return res
	}
	out := *res
	out.Content = slices.Clone(res.Content)
	for i, c := range out.Content {
		if emptyText(c) {
			out.Content[i] = emptyTextResource{c.(*mcp.EmbeddedResource)}
		}
	}
	return &out
}

func emptyText(c mcp.Content) bool {
	r, ok := c.(*mcp.EmbeddedResource)
	return ok && r.Resource != nil && r.Resource.Text == "" && r.Resource.Blob == nil
}

// emptyTextResource is an embedded resource written with its "text" even
// when empty (emptyTextKept). It is an mcp.Content: the embedded pointer
// brings the methods go-sdk's interface wants, and MarshalJSON is its own.
type emptyTextResource struct{ *mcp.EmbeddedResource }

func (c emptyTextResource) MarshalJSON() ([]byte, error) {
	type textContents struct {
		URI      string   `json:"uri"`
		MIMEType string   `json:"mimeType,omitempty"`
		Text     string   `json:"text"`
		Meta     mcp.Meta `json:"_meta,omitempty"`
	}
	r := c.Resource
	return json.Marshal(struct {
		Type        string           `json:"type"`
		Resource    textContents     `json:"resource"`
		Meta        mcp.Meta         `json:"_meta,omitempty"`
		Annotations *mcp.Annotations `json:"annotations,omitempty"`
	}{"resource", textContents{r.URI, r.MIMEType, r.Text, r.Meta}, c.Meta, c.Annotations})
}

// hasReservedMeta reports whether a key of meta is reservedMetaKey (no
// allocation: every call's result passes here).
func hasReservedMeta(meta mcp.Meta) bool {
	for k := range meta {
		if reservedMetaKey(k) {
			return true
		}
	}
	return false
}

// reservedMetaKey reports whether a _meta key's prefix (the labels before
// its "/") is one MCP reserves: its second label "modelcontextprotocol" or
// "mcp".
func reservedMetaKey(k string) bool {
	prefix, _, ok := strings.Cut(k, "/")
	if !ok {
		return false
	}
	_, rest, ok := strings.Cut(prefix, ".")
	if !ok {
		return false
	}
	second, _, _ := strings.Cut(rest, ".")
	return second == "modelcontextprotocol" || second == "mcp"
}

// objectStructured is res as a client of req's protocol may take it. From
// protocol 2026-07-28 on, structuredContent may be any JSON value
// (SEP-2106: go-sdk's servers send a []T output as an array); before, it
// is an object, and the TypeScript SDK's callTool throws on anything else
// (a ZodError: "expected record"), the Python SDK raises, and the result
// is lost. Such a client gets res without it, its JSON in a text content
// unless one already holds it, as go-sdk's server writes it for them.
func objectStructured(req *mcp.CallToolRequest, res *mcp.CallToolResult) *mcp.CallToolResult {
	if res == nil || res.StructuredContent == nil || multiRoundTrip(req) {
		return res
	}
	if _, ok := res.StructuredContent.(map[string]any); ok {
		return res
	}
	raw := structuredJSON(res.StructuredContent)
	if len(raw) == 0 || raw[0] == '{' {
		return res
	}
	out := *res
	out.StructuredContent = nil
	out.Content = withJSONText(res.Content, raw)
	return &out
}

func isText(c mcp.Content) bool {
	_, ok := c.(*mcp.TextContent)
	return ok
}

// structuredJSON is the JSON of a result's structuredContent, as sent when
// it was kept so (backend.exact: an integer past 2^53 keeps its digits);
// nil when there is none. A decoded one is encoded with segmentio's
// encoder, whose bytes are encoding/json's without HTML escapes
// (FuzzStructuredJSON) at a third of the time and without an allocation
// per value: 27 ms and 2 allocations for 5 MB of rows, where
// encoding/json took 61–80 ms and 443,000.
func structuredJSON(sc any) []byte {
	switch sc := sc.(type) {
	case nil:
		return nil
	case json.RawMessage:
		return bytes.TrimSpace(sc)
	}
	// As written, not HTML-safe: <, > and & count (maxResultBytes) and
	// read as the one byte each they are, not \u003c.
	// The encoder's buffer is pooled: the bytes are copied once, at their
	// size (appending to nil grew them twice over).
	var b bytes.Buffer
	e := segjson.NewEncoder(&b)
	e.SetEscapeHTML(false)
	e.SetAppendNewline(false)
	if e.Encode(sc) != nil {
		return nil
	}
	return b.Bytes()
}

// withJSONText is content with a text block of raw, a JSON value, added
// unless a text block already holds it: the same text, or JSON of the same
// value in another layout (a Python server's indent=2, other key order).
func withJSONText(content []mcp.Content, raw []byte) []mcp.Content {
	var want any
	decoded := false
	if slices.ContainsFunc(content, func(c mcp.Content) bool {
		tc, ok := c.(*mcp.TextContent)
		if !ok {
			return false
		}
		text := strings.TrimSpace(tc.Text)
		if text == string(raw) {
			return true
		}
		if text == "" || len(raw) == 0 || (text[0] != raw[0] && (text[0] == '{' || text[0] == '[' || text[0] == '"' || raw[0] == '{' || raw[0] == '[' || raw[0] == '"')) {
			return false // not JSON of the same kind: no need to decode it
		}
		if !decoded {
			decoded = true
			if json.Unmarshal(raw, &want) != nil {
				want = nil
			}
		}
		var got any
		return want != nil && json.Unmarshal([]byte(text), &got) == nil && reflect.DeepEqual(got, want)
	}) {
		return content
	}
	return append(slices.Clip(content), &mcp.TextContent{Text: string(raw)})
}

// directCalls adds to go-sdk's answer to a tools/call of a tool the
// server does not have (as a model may send for a tool search_tools
// found) how to run it: go-sdk said only `unknown tool
// "filesystem__read_file"`. It stays the protocol error go-sdk answers
// (invalid params); a tool registered besides the two (tests') is left
// alone. The refusal is audited (action "tools/call", the name as
// written), like execute_tool's of a tool it does not know: a client
// probing for tools by name shows in the audit log.
func (g *Gateway) directCalls(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method != "tools/call" {
			return next(ctx, method, req)
		}
		start := time.Now()
		res, err := next(ctx, method, req)
		var werr *jsonrpc.Error
		if !errors.As(err, &werr) || werr.Code != jsonrpc.CodeInvalidParams {
			return res, err
		}
		p, ok := req.GetParams().(*mcp.CallToolParamsRaw)
		if !ok || p.Name == SearchToolName || p.Name == ExecuteToolName {
			return res, err
		}
		name := oneline.Echo(p.Name)
		how := fmt.Sprintf(`run a tool search_tools found through execute_tool: {"name": %q, "arguments": {...}}`, name)
		c := policy.CallerFrom(ctx)
		switch _, t, ok := g.lookup(c, p.Name); {
		case ok && g.visible(c, t.ID()):
			how = fmt.Sprintf(`%s is a tool of server %q behind this gateway: run it through execute_tool, {"name": %q, "arguments": {...}}`, t.ID(), t.Server, t.ID())
		case slices.Contains(searchToolNames, squashed(p.Name)):
			how = `did you mean search_tools? {"query": "what you want to do"}`
		case slices.Contains(executeToolNames, squashed(p.Name)):
			how = `did you mean execute_tool? {"name": "server__tool", "arguments": {...}}`
		}
		werr = &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf(
			"unknown tool %q: this gateway has two tools, search_tools and execute_tool; %s", name, how)}
		if creq, ok := req.(*mcp.CallToolRequest); ok {
			g.auditRefusedCall(ctx, creq, start, werr.Message)
		}
		return nil, werr
	}
}

// The names a model may give the two tools, squashed: "search_tool",
// "Execute", "run-tool".
var (
	searchToolNames  = []string{"search", "searchtool", "searchtools", "findtool", "findtools", "toolsearch", "tools"}
	executeToolNames = []string{"execute", "executetool", "executetools", "exec", "run", "runtool", "call", "calltool", "invoke", "invoketool", "usetool"}
)

// squashed is name in lower case without "_", "-", "." and spaces.
func squashed(name string) string {
	return strings.Map(func(r rune) rune {
		if r == '_' || r == '-' || r == '.' || r == ' ' {
			return -1
		}
		return unicode.ToLower(r)
	}, name)
}

// lookup finds the tool name names in the catalog: name itself, or, when
// the catalog lacks it, name without what a model may write around a name
// (space and line ends, quotes or backticks around it, "()" after it), or
// in other case when only one tool's ID is that; the name found is
// returned. " fs__read" answered `there is no server named " fs"`, and
// "fs__read\n" `unknown tool "fs__read". Closest names: fs__read`. A
// tool found so must be one caller may see: a name refused as written
// reads the same whether the tool exists or not, and so must a name
// written otherwise.
func (g *Gateway) lookup(c *policy.Caller, name string) (string, catalog.Tool, bool) {
	if t, ok := g.searcher.Tool(name); ok {
		return name, t, true
	}
	n := trimmedName(name)
	t, ok := g.searcher.Tool(n)
	if !ok {
		// In other case ("GitHub__create_issue"), or with "_" for "-" or
		// the reverse ("everything__get_sum" for get-sum), when only one
		// ID is; several are named by unknownTool.
		meant := g.idsMeant(c, n)
		if len(meant) != 1 {
			return name, catalog.Tool{}, false
		}
		t, ok = g.searcher.Tool(meant[0])
	}
	if !ok || !g.visible(c, t.ID()) {
		return name, catalog.Tool{}, false
	}
	return t.ID(), t, true
}

// trimmedName is name without what a model may write around a name: space
// and line ends, quotes or backticks around it, "()" after it.
func trimmedName(name string) string {
	n := strings.TrimSpace(name)
	for _, q := range []string{"`", `"`, "'"} {
		if len(n) >= 2 && strings.HasPrefix(n, q) && strings.HasSuffix(n, q) {
			n = strings.TrimSpace(n[1 : len(n)-1])
			break
		}
	}
	return strings.TrimSuffix(n, "()")
}

// idsMeant is the IDs caller may see that n, none of them as written, may
// mean: in another case or with "_" for "-" (catalog.Meant, as a server's
// name is read), else with another separator between server and tool
// (otherSeparator), else the one tool caller may see whose own name n is
// (bareName; none when a tool of another server that caller's scope
// shows, disabled or quarantined, has that name too). Several when n
// cannot tell them apart: my-fs__read beside my_fs__read, written
// "My-fs__read" or "my.fs__read".
func (g *Gateway) idsMeant(c *policy.Caller, n string) []string {
	ids := g.searcher.IDs()
	meant := catalog.Meant(n, ids)
	if len(meant) == 0 {
		meant = otherSeparator(n, ids)
	}
	meant = slices.DeleteFunc(meant, func(id string) bool { return !g.visible(c, id) })
	if len(meant) == 0 {
		// Among the tools caller's own scope shows, whatever their state:
		// one of a server disabled at run time, or quarantined since, may
		// be the one the model found by search and means, and another
		// server's tool of its name must not run in its place.
		meant = bareName(n, slices.DeleteFunc(slices.Clone(ids), func(id string) bool { return !g.sees(c, id) }))
		meant = slices.DeleteFunc(meant, func(id string) bool { return !g.visible(c, id) })
	}
	return meant
}

// sees is whether caller's own rules (its profile, its key's scope) let it
// see the tool id, whatever the state of its server or definition.
func (g *Gateway) sees(c *policy.Caller, id string) bool {
	if g.opts.Policy == nil {
		return true
	}
	t, ok := g.searcher.Tool(id)
	return ok && g.opts.Policy.Sees(c, t)
}

// bareName is the ID of ids whose tool part is n, a name written without
// its server ("read_text_file", the slip a model makes most after a
// search showed filesystem__read_text_file), read as catalog.Meant reads
// a name; none when no tool or several have it (the answer then names
// them: a name two servers share says which). It answered `tool name
// "read_text_file" is not namespaced … Closest names:
// filesystem__read_text_file`, and the model had to call again.
func bareName(n string, ids []string) []string {
	if strings.Contains(n, catalog.Sep) || n == "" {
		return nil
	}
	tools := make([]string, 0, len(ids))
	for _, id := range ids {
		_, tool, _ := strings.Cut(id, catalog.Sep)
		tools = append(tools, tool)
	}
	want := n
	if !slices.Contains(tools, n) {
		meant := catalog.Meant(n, tools)
		if len(meant) != 1 {
			return nil
		}
		want = meant[0]
	}
	var found []string
	for i, tool := range tools {
		if tool == want {
			found = append(found, ids[i])
		}
	}
	if len(found) != 1 {
		return nil
	}
	return found
}

// otherSeparator is the IDs of ids that n names with another separator
// between server and tool than "__" ("filesystem.read_file",
// "filesystem/read_file", "filesystem:read_file", "everything_echo"), read
// as catalog.Meant reads a name: in another case when one ID is so, else
// caselessly when one is, else with "_" and "-" alike too.
func otherSeparator(n string, ids []string) []string {
	if strings.Contains(n, catalog.Sep) {
		return nil
	}
	// Each way of reading n is one byte longer than n: one longer than
	// every ID names none, and a name of megabytes, read at each of its
	// separators, took time and memory by its length squared (1.9 s for
	// 40 kB of "a.").
	longest := 0
	for _, id := range ids {
		longest = max(longest, len(id))
	}
	if len(n) >= longest {
		return nil
	}
	lower, caseless, folded := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, sep := range []string{".", "/", ":", "_"} {
		for i := strings.Index(n, sep); i > 0; {
			id := n[:i] + catalog.Sep + n[i+len(sep):]
			lower[strings.ToLower(id)], caseless[catalog.Caseless(id)], folded[catalog.FoldName(id)] = true, true, true
			j := strings.Index(n[i+len(sep):], sep)
			if j < 0 {
				break
			}
			i += len(sep) + j
		}
	}
	if len(folded) == 0 {
		return nil
	}
	var cased, same, found []string
	for _, id := range ids {
		if lower[strings.ToLower(id)] {
			cased = append(cased, id)
		}
		if caseless[catalog.Caseless(id)] {
			same = append(same, id)
		}
		if folded[catalog.FoldName(id)] {
			found = append(found, id)
		}
	}
	switch {
	case len(cased) == 1:
		return cased
	case len(same) == 1:
		return same
	}
	return found
}

// asWritten is execute_tool's arguments as their keys are written:
// Go's decoder also takes "NAME" or "Name" for "name" (and "Arguments" for
// "arguments"), the last it reads, so {"name": "a__x", "NAME": "b__y"},
// which is refused for its unknown key, was recorded as a call of b__y.
// A "name" that is no string is "".
func asWritten(raw json.RawMessage) executeArgs {
	var whole map[string]json.RawMessage
	if json.Unmarshal(raw, &whole) != nil {
		return executeArgs{}
	}
	var a executeArgs
	_ = json.Unmarshal(whole["name"], &a.Name)
	a.Arguments = whole["arguments"]
	return a
}

// unknownKeys are the keys of the JSON object raw that are not among
// known, in order (none when raw is not an object).
func unknownKeys(raw json.RawMessage, known ...string) []string {
	var extra []string
	gjson.ParseBytes(raw).ForEach(func(k, _ gjson.Result) bool {
		if k.Type == gjson.String && !slices.Contains(known, k.String()) {
			extra = append(extra, k.String())
		}
		return true
	})
	return extra
}

// misplacedArgs explains execute_tool's unknown keys extra when they are
// what a model writes beside "name" for a tool the caller may see: the
// tool's own arguments (instead of inside "arguments"), its server as
// "server" (instead of in the name, server__tool), or, with no "name", the
// tool's ID under a key of another gateway's ("tool", "tool_name"). It
// returns the call as it was meant, or "" when extra are not all so.
func (g *Gateway) misplacedArgs(c *policy.Caller, a executeArgs, raw json.RawMessage, extra []string) string {
	var whole map[string]json.RawMessage
	if json.Unmarshal(raw, &whole) != nil {
		return ""
	}
	var said []string
	if strings.TrimSpace(a.Name) == "" {
		for _, k := range extra {
			var id string
			if json.Unmarshal(whole[k], &id) != nil {
				continue
			}
			if _, t, ok := g.lookup(c, id); ok && g.visible(c, t.ID()) {
				a.Name = t.ID()
				extra = slices.DeleteFunc(slices.Clone(extra), func(x string) bool { return x == k })
				said = append(said, fmt.Sprintf(`%s is not an argument of execute_tool: the tool goes in "name"`, quoted([]string{k})))
				break
			}
		}
	}
	_, tool, ok := g.lookup(c, a.Name)
	var server string
	if json.Unmarshal(whole["server"], &server) == nil && server != "" {
		if !ok {
			_, tool, ok = g.lookup(c, server+catalog.Sep+a.Name)
		}
	}
	if !ok || !g.visible(c, tool.ID()) {
		return ""
	}
	var schema struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if json.Unmarshal(tool.InputSchema, &schema) != nil {
		return ""
	}
	if _, arg := schema.Properties["server"]; !arg && strings.EqualFold(tool.Server, server) {
		extra = slices.DeleteFunc(slices.Clone(extra), func(k string) bool { return k == "server" })
	} else {
		server = ""
	}
	for _, k := range extra {
		if _, ok := schema.Properties[k]; !ok {
			return ""
		}
	}
	meant, _, _, err := toolArgs(a.Arguments)
	if err != nil {
		return ""
	}
	for _, k := range extra {
		meant[k] = whole[k]
	}
	call := meantCall(tool.ID(), meant)
	if call == "" {
		return ""
	}
	if server != "" {
		said = append(said, fmt.Sprintf(`"server" goes in "name": a tool is named server__tool, %s`, tool.ID()))
	}
	if len(extra) > 0 {
		what := "is an argument"
		if len(extra) > 1 {
			what = "are arguments"
		}
		said = append(said, fmt.Sprintf(`%s %s of %s, not of execute_tool: the tool's own arguments go inside "arguments"`, quoted(extra), what, tool.ID()))
	}
	return fmt.Sprintf("execute_tool: %s. The call meant, which was not run:\n%s", strings.Join(said, "; "), strings.TrimSpace(call))
}

// meantCall is the call of id with args that a caller meant, as JSON, for
// an answer that shows it: past maxMeantCall, with each value as "…"
// (args is changed so), and "" when even that is longer.
func meantCall(id string, args map[string]any) string {
	call := exampleCall(id, args)
	if len(call) > maxMeantCall {
		for k := range args {
			args[k] = "…"
		}
		if call = exampleCall(id, args); len(call) > maxMeantCall {
			return ""
		}
	}
	return call
}

// maxMeantCall bounds the call meantCall shows with the arguments'
// values; a longer one shows their names only.
const maxMeantCall = 2000

// nestedArgs explains the tool's arguments nested one level too deep, as
// models write them: {"arguments": {"arguments": {...}}}, or the whole
// call again inside "arguments" ({"name": …, "arguments": {...}}). The
// schema's words said the required arguments were missing (they were sent,
// one level down), and a tool that requires none ran without its
// arguments. It returns the call meant, not run, or "" when args are not
// so: the tool takes an argument "arguments" (or "name"), its schema
// declares no properties (it takes anything), nothing is inside, the
// inner keys are not all the tool's, or the name inside is another
// tool's.
func (g *Gateway) nestedArgs(c *policy.Caller, tool catalog.Tool, args map[string]any) string {
	inner, ok := args["arguments"]
	if !ok || len(args) > 2 {
		return ""
	}
	var schema struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if json.Unmarshal(tool.InputSchema, &schema) != nil || schema.Properties == nil {
		return ""
	}
	if _, own := schema.Properties["arguments"]; own {
		return ""
	}
	again := `"arguments"`
	if name, ok := args["name"]; ok {
		n, _ := name.(string)
		if _, own := schema.Properties["name"]; own || n == "" {
			return ""
		}
		if _, t, ok := g.lookup(c, n); !ok || t.ID() != tool.ID() {
			return ""
		}
		again = `"name" and "arguments"`
	} else if len(args) > 1 {
		return ""
	}
	raw, err := json.Marshal(inner)
	if err != nil {
		return ""
	}
	meant, _, _, err := toolArgs(raw)
	if err != nil || len(meant) == 0 { // none: the call does what it meant
		return ""
	}
	for k := range meant {
		if _, own := schema.Properties[k]; !own {
			return ""
		}
	}
	call := meantCall(tool.ID(), meant)
	if call == "" {
		return ""
	}
	return fmt.Sprintf(`execute_tool %s: the tool's own arguments are nested one level too deep (inside "arguments" is %s again): they go directly in "arguments". The call meant, which was not run:`+"\n%s", tool.ID(), again, call)
}

// rawArgs decodes raw JSON arguments for the audit log (nil for none or
// for arguments that do not decode).
func rawArgs(raw json.RawMessage) any {
	var v any
	if t := bytes.TrimSpace(raw); len(t) == 0 || json.Unmarshal(t, &v) != nil {
		return nil
	}
	return v
}

// toolArgs turns the "arguments" value into the map the backend call takes
// and the one its input schema checks. Absent or null means no arguments.
//
// A number with 16 digits or more in a row is kept as the client wrote it
// (a json.Number, which encodes back unchanged): a float64 would round an
// integer past 2^53, a 64-bit ID that a Python server takes as an int,
// and the backend would get another number than the client sent; a number
// past float64's range would fail the call. The validator, which takes a
// json.Number for a string, checks a copy with float64s. Other arguments
// (nearly all) are decoded once, into float64s that encode back the same;
// plain says so (args is then what rawArgs gives for raw).
func toolArgs(raw json.RawMessage) (args, forSchema map[string]any, plain bool, err error) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || string(t) == "null" {
		m := map[string]any{}
		return m, m, false, nil
	}
	if t[0] == '"' {
		// An object sent as a string ("arguments": "{\"path\": \"a\"}"),
		// as a model that writes a function's arguments as text does:
		// the object it holds. So is one in a Markdown code fence, as a
		// model writes JSON in text, and one encoded twice (a framework
		// that encodes the model's text again): a string in the string.
		var s string
		if json.Unmarshal(t, &s) == nil {
			if inner := unfence(bytes.TrimSpace([]byte(s))); len(inner) > 0 && (inner[0] == '{' || inner[0] == '"') {
				args, forSchema, _, err := toolArgs(inner)
				if err == nil {
					return args, forSchema, false, nil
				}
				// An object cut short or mistyped in the text: "must be a
				// JSON object" told a model that wrote one nothing it
				// could fix.
				if why := unparsed(inner); why != "" && inner[0] == '{' {
					return nil, nil, false, fmt.Errorf(`"arguments" is a string whose JSON does not parse (%s): send "arguments" as an object (got %s)`, why, oneline.Cut(string(t), 60))
				}
			}
		}
	}
	if !jsonnum.Long(t) {
		var m map[string]any
		if err := json.Unmarshal(t, &m); err == nil {
			return m, m, true, nil
		}
	}
	dec := json.NewDecoder(bytes.NewReader(t))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil || m == nil || dec.InputOffset() != int64(len(t)) {
		return nil, nil, false, fmt.Errorf(`"arguments" must be a JSON object (got %s)`, oneline.Cut(string(t), 60))
	}
	f, _ := floatNumbers(m)
	return m, f.(map[string]any), false, nil
}

// unparsed says why t is not JSON, where it stops ("unexpected end of
// JSON input after byte 15"), or "" when it is.
func unparsed(t []byte) string {
	var v any
	err := json.Unmarshal(t, &v)
	var syn *json.SyntaxError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &syn) && syn.Offset >= int64(len(t)):
		return fmt.Sprintf("%v after byte %d", err, len(t))
	case errors.As(err, &syn):
		return fmt.Sprintf("%v at byte %d", err, syn.Offset)
	}
	return err.Error()
}

// unfence is t without a Markdown code fence around it ("```json\n…\n```"
// or "```\n…\n```"); t itself when it has none.
func unfence(t []byte) []byte {
	body, ok := bytes.CutPrefix(t, []byte("```"))
	if !ok {
		return t
	}
	info, rest, ok := bytes.Cut(body, []byte("\n"))
	if !ok || bytes.ContainsAny(info, "{[\"") {
		return t // "```{…}```" on one line: not a fence a model writes
	}
	rest, ok = bytes.CutSuffix(bytes.TrimSpace(rest), []byte("```"))
	if !ok {
		return t
	}
	return bytes.TrimSpace(rest)
}

// floatNumbers is v with every json.Number as a float64, for the schema
// validator (which takes a json.Number for a string), and whether it holds
// one; v itself is not changed, and what holds no number is shared, not
// copied.
func floatNumbers(v any) (any, bool) {
	switch x := v.(type) {
	case json.Number:
		if f, err := x.Float64(); err == nil {
			return f, true
		}
	case map[string]any:
		var out map[string]any
		for k, e := range x {
			f, changed := floatNumbers(e)
			if !changed {
				continue
			}
			if out == nil {
				out = maps.Clone(x)
			}
			out[k] = f
		}
		if out != nil {
			return out, true
		}
	case []any:
		var out []any
		for i, e := range x {
			f, changed := floatNumbers(e)
			if !changed {
				continue
			}
			if out == nil {
				out = slices.Clone(x)
			}
			out[i] = f
		}
		if out != nil {
			return out, true
		}
	}
	return v, false
}

func (g *Gateway) callError(ctx context.Context, name, server string, err error) *mcp.CallToolResult {
	var un *backend.UnavailableError
	var refused *backend.RefusedError
	note := noteOf(ctx)
	note.outcome, note.reason = auditOutcome(CallOutcome(nil, err)), err.Error()
	switch {
	case errors.Is(err, ErrDenied):
		note.decision, note.outcome = audit.Denied, ""
		var de *DeniedError
		if errors.As(err, &de) {
			note.reason = de.Reason
			if de.Rule == quarantine.RuleName {
				note.decision = audit.Quarantined
			}
		}
		// The name is the caller's, megabytes of it may be: echoed cut,
		// here and in the log (it wrote each request's body there).
		name := oneline.Echo(name)
		g.log.Info("tool call denied", "tool", name, "server", oneline.Echo(server), "err", oneline.Cut(err.Error(), audit.MaxReasonBytes), "caller", policy.CallerFrom(ctx).String())
		if de != nil {
			if none := g.reachesNoneScoped(policy.CallerFrom(ctx)); none != "" {
				// Not "call search_tools": it finds nothing this caller may
				// run. The reason once, when it is why it reaches none.
				if strings.Contains(none, de.Reason) {
					return toolError("execute_tool %s: %s.", name, none)
				}
				return toolError("execute_tool %s: %s; %s.", name, de.Reason, none)
			}
		}
		// Words that end their sentence (the management tools') end it once.
		return toolError("execute_tool %s: %s.", name, strings.TrimSuffix(err.Error(), "."))
	case errors.Is(err, limit.ErrBusy): // an UnavailableError too
		g.log.Warn("backend busy", "tool", name, "server", server, "err", err)
		return toolError("execute_tool %s: server %q is busy (%v). Retry in a moment; the other servers are not affected.", name, server, unavailableCause(err))
	case errors.As(err, &refused):
		g.log.Info("tool call refused by its server", "tool", name, "server", server, "err", err)
		why := backend.ErrText(refused.Err)
		if policy.CallerFrom(ctx).Scoped() {
			why = backend.ErrForKey(refused.Err)
		}
		return toolError("execute_tool %s: server %q refused this call: %s. The server and its other tools keep working; calling this one again will not help until that is done.", name, server, backend.ForModel(why))
	case backend.OverCap(err):
		// Not "answered with an error" nor "unavailable, retry later": the
		// server answered, too much for one message, and will again.
		g.log.Warn("tool result over the message size cap", "tool", name, "server", server, "err", err)
		why := backend.ErrText(err)
		if errors.As(err, &un) && policy.CallerFrom(ctx).Scoped() {
			why = backend.ErrForKey(un.Err)
		}
		ask := "narrower arguments (a range, a page, a filter)"
		if _, t, ok := g.lookup(policy.CallerFrom(ctx), name); ok {
			if n := narrowingArgs(t.InputSchema); len(n) > 0 {
				ask = "arguments that ask for less (it takes " + quoted(n) + ")"
			}
		}
		return toolError("execute_tool %s: the result was too big to read: %s. maxResultBytes trims only a result the gateway could read, and the cap is not a setting; server %q and its other tools keep working. Call %s again with %s.", name, backend.ForModel(why), server, name, ask)
	case errors.As(err, &un):
		g.log.Warn("backend unavailable", "tool", name, "server", server, "err", err)
		why := backend.ErrText(un.Err)
		if policy.CallerFrom(ctx).Scoped() { // the gateway's words, the server's hidden as GET /status does
			why = backend.ErrForKey(un.Err)
		}
		return toolError("execute_tool %s: server %q is unavailable: %s. The other servers keep working: retry later, or pick another tool with search_tools.", name, server, backend.ForModel(why))
	case errors.Is(err, backend.ErrCallTimeout):
		g.log.Warn("backend call timed out", "tool", name, "server", server, "err", err)
		return toolError("execute_tool %s: the call timed out and was cancelled on the server: %v. Retry with a smaller request, or later.", name, err)
	case errors.Is(context.Cause(ctx), ErrStopping):
		note.reason = "the gateway stopped while the call ran"
		g.log.Info("tool call cancelled", "tool", name, "server", server, "why", note.reason)
		return toolError("execute_tool %s: the gateway is stopping, so the call was cancelled on the server (it may have done part of its work). Retry once the gateway runs again.", name)
	case keyEnded(ctx):
		note.reason = ErrKeyRevoked.Error() + ": the call was cancelled" + mayHaveRun(err)
		g.log.Info("tool call cancelled", "tool", name, "server", server, "why", note.reason)
		return toolError("execute_tool %s: %s. Run it again with a valid API key.", name, note.reason)
	case ctx.Err() != nil:
		// Who ended it: its client cancelling (ErrClientCancelled), or
		// going away (ErrClientGone; stateless HTTP has no such thing:
		// a closed request is how its client cancels).
		note.reason = ErrClientCancelled.Error()
		if why := context.Cause(ctx); errors.Is(why, ErrClientGone) {
			note.reason = why.Error() + ": the call was cancelled"
		}
		note.reason += mayHaveRun(err)
		g.log.Info("tool call cancelled", "tool", name, "server", server, "why", note.reason)
		return toolError("execute_tool %s: %s.", name, note.reason)
	default:
		if pages, ok := pagesToOpen(err); ok {
			g.log.Info("backend asks the user to open a page first", "tool", name, "server", server, "pages", len(pages))
			return toolError("execute_tool %s: %s", name, openPagesText(server, pages))
		}
		g.log.Warn("backend call failed", "tool", name, "server", server, "err", err)
		return toolError("execute_tool %s: server %q answered with an error: %v", name, server, err)
	}
}

// mayHaveRun is ": " and backend.ErrMayHaveRun's warning when err says the
// call was sent before it was cancelled (the server may have run it, and
// the audit log says so), else "".
func mayHaveRun(err error) string {
	if errors.Is(err, backend.ErrMayHaveRun) {
		return ": " + backend.ErrMayHaveRun.Error()
	}
	return ""
}

// keyEnded reports whether the HTTP front ended the request of ctx because
// its API key was revoked or expired while it ran (keyWatch), rather than
// its client going away.
func keyEnded(ctx context.Context) bool {
	if errors.Is(context.Cause(ctx), ErrKeyRevoked) {
		return true
	}
	hc, ok := ctx.Value(httpRequestKey{}).(context.Context)
	return ok && errors.Is(context.Cause(hc), ErrKeyRevoked)
}

// Closest returns up to n IDs nearest to name by edit distance, preferring
// IDs that share the tool part or contain the name.
func Closest(name string, ids []string, n int) []string {
	type cand struct {
		id string
		d  int
	}
	lname := strings.ToLower(name)
	_, ltool, _ := strings.Cut(lname, catalog.Sep)
	cands := make([]cand, 0, len(ids))
	for _, id := range ids {
		lid := strings.ToLower(id)
		d := typo.Distance(lname, lid)
		_, tool, _ := strings.Cut(lid, catalog.Sep)
		if ltool != "" && tool == ltool || strings.Contains(lid, lname) {
			d /= 4 // same tool on another server, or a prefix of the name
		}
		cands = append(cands, cand{id, d})
	}
	slices.SortFunc(cands, func(a, b cand) int {
		if a.d != b.d {
			return a.d - b.d
		}
		return strings.Compare(a.id, b.id)
	})
	limit := max(len(lname)/2, 4)
	var out []string
	for _, c := range cands {
		if len(out) == n || c.d > limit {
			break
		}
		out = append(out, c.id)
	}
	return out
}

// schemaCache keeps each tool's resolved input schema, keyed by tool ID.
// An entry remembers the schema text it was resolved from: when a re-index
// swaps in a catalog where the tool's schema changed, the next call
// resolves the new text and replaces the entry, so the cache holds at most
// one entry per tool that was ever called (not one per schema version).
// Comparing the text (a few hundred bytes) costs far less than hashing it
// into a key did.
type schemaCache struct{ m sync.Map } // tool ID → *resolvedSchema

type resolvedSchema struct {
	// text is a copy of the schema it was resolved from: the catalog's
	// schemas may be slices of one buffer holding the whole catalog, which
	// the cache must not keep alive once that catalog is swapped out.
	text json.RawMessage
	rs   *jsonschema.Resolved
	err  error
	// warned is set once a result was logged as not fitting this
	// (output) schema (warnOutput).
	warned atomic.Bool
}

// resolved returns the resolved schema for the tool id with schema text,
// resolving it on first use or when the text changed.
func (c *schemaCache) resolved(id string, text json.RawMessage, log *slog.Logger, unresolved string) *resolvedSchema {
	if v, ok := c.m.Load(id); ok {
		if r := v.(*resolvedSchema); bytes.Equal(r.text, text) {
			return r
		}
	}
	r := &resolvedSchema{text: bytes.Clone(text)}
	r.rs, r.err = catalog.ResolveSchema(text)
	if r.err != nil {
		log.Debug(unresolved, "tool", id, "err", r.err)
	}
	// Two first calls may race; either result is right for this text.
	c.m.Store(id, r)
	return r
}

// validate checks args against the input schema of the tool id and returns
// "" when they pass. A schema the validator cannot handle (an unsupported
// draft, a remote $ref) is not the caller's fault: the call goes through and
// the backend validates.
func (g *Gateway) validate(id string, schema json.RawMessage, args map[string]any) string {
	if len(schema) == 0 {
		return ""
	}
	r := g.schemas.resolved(id, schema, g.log, "input schema not validated")
	if r.err != nil {
		return ""
	}
	if err := r.rs.Validate(args); err != nil {
		return err.Error()
	}
	return ""
}

// refusalKey carries the Policy's decision to the refuser.
type refusalKey struct{}

// refuser is the Caller the gateway calls instead of the backends when the
// Policy refuses a call: it runs nothing and says why.
type refuser struct{}

func (refuser) CallTool(ctx context.Context, server, tool string, _ map[string]any) (*mcp.CallToolResult, error) {
	d, _ := ctx.Value(refusalKey{}).(policy.Decision)
	return nil, &DeniedError{Server: server, Tool: tool, Rule: d.Rule, Reason: d.Reason}
}

// DeniedError is a call the Policy refused: its text is the reason (which
// names the profile, scope or state that refuses it). It wraps ErrDenied.
type DeniedError struct {
	Server, Tool string
	Rule, Reason string
}

func (e *DeniedError) Error() string {
	return e.Reason + ". Call search_tools to find a tool you can run"
}

func (e *DeniedError) Unwrap() error { return ErrDenied }

// unavailableCause is the cause inside an UnavailableError (err itself
// when it is none).
func unavailableCause(err error) error {
	var un *backend.UnavailableError
	if errors.As(err, &un) {
		return un.Err
	}
	return err
}
