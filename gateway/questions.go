package gateway

//lint:file-ignore SA1019 roots and sampling are deprecated from protocol 2026-07-28 on (SEP-2577) but stay functional in the deprecation window; execute_tool relays them

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/gateway/audit"
	"github.com/toolgate/toolgate/gateway/backend"
	"github.com/toolgate/toolgate/internal/oneline"
	"github.com/toolgate/toolgate/internal/termtext"
)

// This file carries the questions a backend asks during an execute_tool
// call (elicitation, sampling, roots) to the client that made it, for
// backends on protocol 2026-07-28, which ask with an input-required result
// (SEP-2322) that the pool hands back (backend/questions.go).
//
// execute_tool answers with its own input-required result: the backend's
// questions and request state, unchanged. The client answers them and calls
// execute_tool again with the same name and arguments, its inputResponses
// and that requestState, which go on to the same backend tool. Each round
// is a call of its own: the key, scopes and policy are checked, and it is
// audited, counted and timed (callTimeout) like any other. The gateway adds
// nothing to the state, so there is nothing of its own to check when it
// comes back: a client can send any state to any tool it may call, as it
// could to the backend itself, and the backend checks its own (go-sdk asks
// an unauthenticated server to sign it).
//
// A client on an older protocol cannot take an input-required result: over
// a session (stdio), go-sdk's server asks it itself (elicitation/create,
// sampling/createMessage, roots/list) and calls the handler again, once,
// with its answers. Over the stateless HTTP front such a client has no
// session to be asked on: the call ends in an isError that says so.

// callInput is what the backend call of req passes on: the capabilities of
// the client that made it (from the request's _meta at 2026-07-28, from
// its initialize before; none for an HTTP client of an older protocol,
// which has no session) and its answers to the previous round.
func callInput(req *mcp.CallToolRequest) *backend.CallInput {
	return &backend.CallInput{
		Capabilities:   func() map[string]any { return relayedCapabilities(req) },
		InputResponses: req.Params.InputResponses,
		RequestState:   req.Params.RequestState,
	}
}

// relayedCapabilities is what of the capabilities of req's client a backend
// may see, in wire form: a 2026-07-28 request's own from its _meta as they
// came (req.ClientCapabilities would encode and decode them again, 33 KB
// and 55 µs a call), an older client's from its initialize.
func relayedCapabilities(req *mcp.CallToolRequest) map[string]any {
	if raw, ok := req.Params.GetMeta()[mcp.MetaKeyClientCapabilities].(map[string]any); ok {
		return backend.RelayedMeta(raw)
	}
	return backend.RelayedCapabilities(req.ClientCapabilities())
}

// multiRoundTrip reports whether the client of req takes input-required
// results itself (protocol 2026-07-28 or later; the way go-sdk's server
// decides, clientSupportsMultiRoundTrip).
func multiRoundTrip(req *mcp.CallToolRequest) bool {
	ip := req.Session.InitializeParams()
	return ip == nil || ip.ProtocolVersion >= backend.StatelessProtocolVersion
}

// inputRequired is execute_tool's answer to res, a backend's input-required
// result for the tool name on server: the same questions and state, or an
// isError when the client of req cannot be asked them.
func (g *Gateway) inputRequired(ctx context.Context, req *mcp.CallToolRequest, name, server string, res *mcp.CallToolResult) *mcp.CallToolResult {
	mrtr := multiRoundTrip(req)
	_, overHTTP := ctx.Value(httpRequestKey{}).(context.Context)
	kinds := questionKinds(res.InputRequests)
	switch {
	case len(res.InputRequests) == 0 && mrtr:
		// Load shedding: the client retries (SEP-2322).
		return &mcp.CallToolResult{Meta: res.Meta, InputRequests: mcp.InputRequestMap{}, RequestState: res.RequestState}
	case len(res.InputRequests) == 0:
		return toolError("execute_tool %s: server %q is busy (it asked for nothing and to retry). Retry in a moment.", name, server)
	case !mrtr && overHTTP:
		return toolError("execute_tool %s: server %q asks the client a question mid-call (%s), and a client of protocol %s over toolgate's HTTP front cannot be asked one: the front is stateless, so there is no session to ask it on. "+
			"Connect over HTTP with protocol %s (its questions come back as an input-required result), or over stdio.",
			name, server, strings.Join(kinds, ", "), req.Session.InitializeParams().ProtocolVersion, backend.StatelessProtocolVersion)
	case !mrtr && len(req.Params.InputResponses) > 0:
		// go-sdk's server asks an older client once, then returns what
		// the second round gives, questions and all, as a result.
		return toolError("execute_tool %s: server %q asks the client more questions (%s) after its answers, and toolgate relays one round of questions to a client of protocol %s. "+
			"Connect with protocol %s to answer them all.",
			name, server, strings.Join(kinds, ", "), req.Session.InitializeParams().ProtocolVersion, backend.StatelessProtocolVersion)
	}
	if missing := unanswerable(relayedCapabilities(req), res.InputRequests); len(missing) > 0 {
		return toolError("execute_tool %s: server %q asks the client a question mid-call that this client did not declare it can answer (no %s capability). "+
			"Use a client that supports %s, or another tool.",
			name, server, strings.Join(missing, ", "), strings.Join(missing, ", "))
	}
	asked, err := askedBy(server, res.InputRequests)
	if err == nil && !mrtr {
		// go-sdk's server asks the client itself, at the client's version.
		asked = definedQuestions(req.Session.InitializeParams().ProtocolVersion, asked)
	}
	if err != nil {
		return toolError("execute_tool %s: server %q asks the client a question it cannot be shown safely: %v. "+
			"Report it to the server's maintainers, or use another tool.", name, server, err)
	}
	g.log.Debug("backend asks the client", "tool", name, "server", server, "questions", strings.Join(kinds, ", "))
	return &mcp.CallToolResult{Meta: res.Meta, InputRequests: asked, RequestState: res.RequestState}
}

// askedBy is reqs as the client of a call to server gets them: each
// elicitation's message, and each sampling request's system prompt and
// first text, say which server asks (`server "evil" asks: …`), with their
// control characters escaped (termtext.Escape), and the backend's _meta
// left out; an elicitation's form (its requestedSchema) as relayedForm
// makes it; roots unchanged. A client shows the user who asks by the
// server it is connected to, the gateway: a backend could ask in
// toolgate's name ("toolgate needs your GitHub token to go on"), and the
// user, or the client's model, could not tell which of the servers behind
// it asked. The error says what in a form cannot be relayed.
func askedBy(server string, reqs mcp.InputRequestMap) (mcp.InputRequestMap, error) {
	out := make(mcp.InputRequestMap, len(reqs))
	for k, r := range reqs {
		switch e := r.(type) {
		case *mcp.ElicitParams:
			named := *e
			named.Meta = nil
			named.Message = asks(server, e.Message)
			form, err := relayedForm(e.RequestedSchema)
			if err != nil {
				return nil, err
			}
			named.RequestedSchema = form
			r = &named
		case *mcp.CreateMessageParams:
			r = sampledBy(server, e)
		case *mcp.CreateMessageWithToolsParams:
			r = sampledWithToolsBy(server, e)
		}
		out[k] = r
	}
	return out, nil
}

// relayedForm is an elicitation's requestedSchema, the form a client
// renders for its user, as relayed: a copy with each text the client shows
// (the form's and each field's title and description, a string field's
// default, legacy enumNames, a titled option's title) escaped
// (termtext.Escape), the rest as it came, so a schema of the spec's
// restricted kind (flat object, primitive fields, enums) stays one. What
// the answer sends back (a property name, an enum value, an option's
// const) cannot be escaped without changing the answer the backend gets:
// one with a character termtext escapes is an error that names its
// property. A form that is not a JSON object goes as it came; the client
// checks a form's shape (go-sdk's refuses one of another kind).
func relayedForm(schema any) (any, error) {
	if schema == nil {
		return nil, nil
	}
	raw, err := json.Marshal(schema)
	if err != nil {
		return nil, fmt.Errorf("its form (requestedSchema) does not encode: %w", err)
	}
	var form map[string]any
	if json.Unmarshal(raw, &form) != nil || form == nil {
		return schema, nil
	}
	escapeTexts(form, "title", "description")
	props, _ := form["properties"].(map[string]any)
	for name, p := range props {
		if strings.ContainsFunc(name, termtext.Unsafe) {
			return nil, fmt.Errorf("its form's property %q has a control or format character in its name", name)
		}
		field, ok := p.(map[string]any)
		if !ok {
			continue
		}
		escapeTexts(field, "title", "description", "default")
		if names, ok := field["enumNames"].([]any); ok {
			field["enumNames"] = termtext.Value(names)
		}
		items, _ := field["items"].(map[string]any)
		for _, values := range []any{field["enum"], items["enum"]} {
			if v, ok := values.([]any); ok && slices.ContainsFunc(v, unsafeValue) {
				return nil, fmt.Errorf("its form's property %q has an enum value with a control or format character", name)
			}
		}
		for _, options := range []any{field["oneOf"], items["anyOf"]} {
			opts, _ := options.([]any)
			for _, o := range opts {
				if o, ok := o.(map[string]any); ok {
					if unsafeValue(o["const"]) {
						return nil, fmt.Errorf("its form's property %q has an option (const) with a control or format character", name)
					}
					escapeTexts(o, "title")
				}
			}
		}
	}
	return form, nil
}

// escapeTexts escapes (termtext.Escape) the strings of m under keys.
func escapeTexts(m map[string]any, keys ...string) {
	for _, k := range keys {
		if s, ok := m[k].(string); ok {
			m[k] = termtext.Escape(s)
		}
	}
}

// unsafeValue reports whether v is a string that termtext.Escape changes.
func unsafeValue(v any) bool {
	s, ok := v.(string)
	return ok && termtext.Escape(s) != s
}

// asks is text, a backend's words to the client, escaped (again: escaping
// is idempotent) and said to be server's.
func asks(server, text string) string {
	return fmt.Sprintf("server %q asks: %s", server, termtext.Escape(text))
}

// sampledBy is p, a sampling request of server, as its client gets it:
// the spec lets a client change or leave out the system prompt and ignore
// includeContext, and lets its user edit the prompts, so a relay may too.
//   - The system prompt says which server asks (asks), also when the
//     backend gave none, and so does the first message's text (a client
//     may leave the system prompt out): a model told "You are toolgate's
//     assistant" saw no sign that a backend wrote it.
//   - Every text is escaped (termtext.Escape): a client may print the
//     request for its user to approve.
//   - includeContext is left out ("none"): the context of "thisServer" is,
//     for the client, the gateway's, all its servers', and "allServers"
//     adds the client's other servers': a backend asks for neither (the
//     spec deprecates both).
//   - _meta is left out: it names things of the backend's session (its
//     progress token) that the client's session does not have.
//
// The rest (maxTokens, stopSequences, modelPreferences, temperature,
// metadata, tools) goes as it came; the request keeps its shape, messages
// and roles.
func sampledBy(server string, p *mcp.CreateMessageParams) *mcp.CreateMessageParams {
	out := *p
	out.Meta, out.IncludeContext = nil, ""
	out.SystemPrompt = samplingSystemPrompt(server, p.SystemPrompt)
	out.Messages = relayedMessages(p.Messages, func(i int, m mcp.SamplingMessage) mcp.SamplingMessage {
		m.Content = escapedContent(m.Content)
		if t, ok := m.Content.(*mcp.TextContent); ok && i == 0 {
			t.Text = asks(server, t.Text)
		}
		return m
	})
	return &out
}

// sampledWithToolsBy is sampledBy for a request that offers tools: its
// messages hold lists of content, a tool result's content among them.
func sampledWithToolsBy(server string, p *mcp.CreateMessageWithToolsParams) *mcp.CreateMessageWithToolsParams {
	out := *p
	out.Meta, out.IncludeContext = nil, ""
	out.SystemPrompt = samplingSystemPrompt(server, p.SystemPrompt)
	out.Messages = relayedMessages(p.Messages, func(i int, m mcp.SamplingMessageV2) mcp.SamplingMessageV2 {
		m.Content = slices.Clone(m.Content)
		for j, x := range m.Content {
			m.Content[j] = escapedContent(x)
		}
		if len(m.Content) > 0 && i == 0 {
			if t, ok := m.Content[0].(*mcp.TextContent); ok {
				t.Text = asks(server, t.Text)
			}
		}
		return m
	})
	return &out
}

// definedQuestions is reqs (as askedBy made them: copies) with each
// sampling message's content block of a type that protocol version pv
// lacks written as text that says what it was (definedAt), as
// execute_tool's results are: a client of protocol 2024-11-05 (the Python
// SDK 1.2.1) refused a sampling request with audio in it, and the call
// failed. A tool result's content in a message likewise.
func definedQuestions(pv string, reqs mcp.InputRequestMap) mcp.InputRequestMap {
	defined := func(c mcp.Content) mcp.Content {
		if t, ok := c.(*mcp.ToolResultContent); ok {
			r := *t
			r.Content = make([]mcp.Content, len(t.Content))
			for i, x := range t.Content {
				r.Content[i] = definedAt(pv, x)
			}
			return &r
		}
		return definedAt(pv, c)
	}
	for _, r := range reqs {
		switch p := r.(type) {
		case *mcp.CreateMessageParams:
			for _, m := range p.Messages {
				if m != nil {
					m.Content = defined(m.Content)
				}
			}
		case *mcp.CreateMessageWithToolsParams:
			for _, m := range p.Messages {
				if m != nil {
					for i, c := range m.Content {
						m.Content[i] = defined(c)
					}
				}
			}
		}
	}
	return reqs
}

// relayedMessages is a copy of msgs, each message as relay makes it of a
// copy of it and its index (nil kept).
func relayedMessages[M any](msgs []*M, relay func(int, M) M) []*M {
	out := make([]*M, len(msgs))
	for i, m := range msgs {
		if m != nil {
			r := relay(i, *m)
			out[i] = &r
		}
	}
	return out
}

// samplingSystemPrompt is a sampling request's system prompt as relayed:
// said to be server's, escaped; without one, a line that says whose the
// messages are.
func samplingSystemPrompt(server, prompt string) string {
	if prompt == "" {
		return fmt.Sprintf("server %q asks for the messages below to be answered.", server)
	}
	return asks(server, prompt)
}

// escapedContent is c with its text escaped (termtext.Escape), a copy
// when that changes it or it is text; a tool result's content likewise.
func escapedContent(c mcp.Content) mcp.Content {
	switch x := c.(type) {
	case *mcp.TextContent:
		t := *x
		t.Text = termtext.Escape(x.Text)
		return &t
	case *mcp.ToolResultContent:
		t := *x
		t.Content = make([]mcp.Content, len(x.Content))
		for i, y := range x.Content {
			t.Content[i] = escapedContent(y)
		}
		return &t
	}
	return c
}

// Kinds of question, named as their capability is.
const (
	kindElicitation = "elicitation"
	kindSampling    = "sampling"
	kindRoots       = "roots"
)

func questionKind(r mcp.InputRequest) string {
	switch r.(type) {
	case *mcp.ElicitParams:
		return kindElicitation
	case *mcp.CreateMessageParams, *mcp.CreateMessageWithToolsParams:
		return kindSampling
	case *mcp.ListRootsParams:
		return kindRoots
	}
	return fmt.Sprintf("%T", r)
}

// questionKinds names the kinds of question reqs holds, sorted, once each.
func questionKinds(reqs mcp.InputRequestMap) []string {
	var kinds []string
	for _, r := range reqs {
		if k := questionKind(r); !slices.Contains(kinds, k) {
			kinds = append(kinds, k)
		}
	}
	slices.Sort(kinds)
	return kinds
}

// unanswerable names the kinds of question in reqs that a client with the
// relayed capabilities caps did not declare it answers (the backend saw the
// same capabilities, so it asks one only when it ignores them).
func unanswerable(caps map[string]any, reqs mcp.InputRequestMap) []string {
	var missing []string
	for _, k := range questionKinds(reqs) {
		if _, ok := caps[k]; !ok {
			missing = append(missing, k)
		}
	}
	return missing
}

// maxPagesShown bounds how many pages of a URLElicitationRequiredError
// openPagesText lists, and maxPageRunes each message and URL: a backend
// writes them, and may write megabytes.
const (
	maxPagesShown = 10
	maxPageRunes  = 2000
)

// pagesToOpen returns the URL elicitations of err when it is a backend's
// URLElicitationRequiredError (-32042, protocol 2025-11-25: the tool cannot
// run until the user opens a page, to log in to a third party or confirm a
// payment), each of them in URL mode; ok is false for any other error.
func pagesToOpen(err error) (pages []*mcp.ElicitParams, ok bool) {
	var rpcErr *jsonrpc.Error
	if !errors.As(err, &rpcErr) || rpcErr.Code != mcp.CodeURLElicitationRequired || len(rpcErr.Data) == 0 {
		return nil, false
	}
	var data struct {
		Elicitations []*mcp.ElicitParams `json:"elicitations"`
	}
	if json.Unmarshal(rpcErr.Data, &data) != nil || len(data.Elicitations) == 0 {
		return nil, false
	}
	for _, e := range data.Elicitations {
		if e == nil || e.Mode != "url" || e.URL == "" {
			return nil, false // not what the spec allows: the error as it came
		}
	}
	return data.Elicitations, true
}

// openPagesText is what execute_tool answers (an isError) for pages a
// backend needs the user to open first: which server asks, each page's
// message and URL (escaped, on one line, cut at maxPageRunes), and what
// to do. The spec's path, the -32042 error itself, would reach a client
// that declared URL elicitation and then waits for the backend's
// notifications/elicitation/complete, which names the backend's session
// and is not relayed; and it would reach no other client at all. A text
// works with every client: the model shows the user the pages and calls
// again.
func openPagesText(server string, pages []*mcp.ElicitParams) string {
	var b strings.Builder
	fmt.Fprintf(&b, "server %q cannot run the tool until the user opens ", server)
	if len(pages) == 1 {
		b.WriteString("a page in a browser")
	} else {
		fmt.Fprintf(&b, "%d pages in a browser", len(pages))
	}
	b.WriteString(" (to log in, authorize or confirm there: MCP's URL elicitation); the user does this, not you:")
	for i, p := range pages {
		if i == maxPagesShown {
			fmt.Fprintf(&b, "\n(and %d more)", len(pages)-i)
			break
		}
		fmt.Fprintf(&b, "\n%d. %s — %s", i+1, termtext.Escape(oneline.Cut(p.URL, maxPageRunes)), termtext.Escape(oneline.Cut(p.Message, maxPageRunes)))
	}
	b.WriteString("\nShow the user each message and its page; once the user says it is done, call execute_tool again with the same name and arguments.")
	return b.String()
}

// unansweredQuestions makes execute_tool's answer an isError when go-sdk's
// server, asking a client of an older protocol a backend's questions
// itself (its serverMultiRoundTripMiddleware, inside this one), got an
// error back from the client (its elicitation, sampling or roots handler
// failed): go-sdk returns that as the call's error, which reached the
// client as a -32603 protocol error in go-sdk's words with the backend's
// key of the question (`multi-round-trip: fulfilling input request
// "confirm": calling "elicitation/create": …`), which a model does not
// read. A client that cancelled the call while it was asked waits for no
// answer. Either way the call is audited: the audit log held only the
// round that asked, "ok".
func (g *Gateway) unansweredQuestions(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method != "tools/call" {
			return next(ctx, method, req)
		}
		start := time.Now()
		res, err := next(ctx, method, req)
		creq, ok := req.(*mcp.CallToolRequest)
		// The client's error is wrapped in go-sdk's (a *jsonrpc.Error
		// when it answered one): only go-sdk's own is matched.
		if _, wire := err.(*jsonrpc.Error); err == nil || wire || !ok || creq.Params.Name != ExecuteToolName {
			return res, err
		}
		m := unansweredQuestion.FindStringSubmatch(err.Error())
		if m == nil {
			return res, err
		}
		var a struct {
			Name      string         `json:"name"`
			Arguments map[string]any `json:"arguments"`
		}
		_ = json.Unmarshal(creq.Params.Arguments, &a) // it ran: its arguments decoded
		name := oneline.Echo(a.Name)
		server, _, _ := strings.Cut(a.Name, "__")
		kind := " (" + cmp.Or(askMethodKind[m[1]], m[1]) + ")"
		if m[1] == "" {
			kind = ""
		}
		audited := func(why string) {
			if g.opts.Audit == nil {
				return
			}
			r := audit.Record{
				Time: start, Action: ExecuteToolName, Tool: a.Name, Server: server,
				Decision: audit.Allowed, Outcome: audit.IsError, Reason: why,
				DurationMs:      float64(time.Since(start).Microseconds()) / 1000,
				ArgumentsSHA256: audit.HashArguments(a.Arguments),
			}
			who(ctx, creq, &r)
			g.opts.Audit.Write(r)
		}
		if ctx.Err() != nil {
			why := fmt.Sprintf("%v while it was asked the server's question%s", context.Cause(ctx), kind)
			g.log.Info("tool call cancelled", "tool", name, "server", server, "why", why)
			audited(why)
			return res, err
		}
		why := fmt.Sprintf("server %q asked the client a question mid-call%s, and the client answered with an error: %s", server, kind, oneline.Echo(m[2]))
		g.log.Info("the client did not answer a server's question", "tool", name, "server", server, "question", m[1], "err", m[2])
		audited(why)
		return toolError("execute_tool %s: %s. The tool did not run past its question: call it again once the client can answer such questions, or pick another tool with search_tools.", name, why), nil
	}
}

// unansweredQuestion reads the error go-sdk v1.8.0's server returns when
// a client it asked a backend's question answered with an error: the
// method it called (absent when the call ended before it was asked), and
// the client's error.
var unansweredQuestion = regexp.MustCompile(`(?s)^multi-round-trip: fulfilling input request "(?:[^"\\]|\\.)*": (?:calling "([^"]+)": )?(.*)$`)

// askMethodKind names the questions go-sdk's server asks a client, by
// method, as questionKind names a backend's.
var askMethodKind = map[string]string{
	"elicitation/create":     kindElicitation,
	"sampling/createMessage": kindSampling,
	"roots/list":             kindRoots,
}
