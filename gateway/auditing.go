package gateway

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/gateway/audit"
	"github.com/toolgate/toolgate/gateway/backend"
	"github.com/toolgate/toolgate/gateway/policy"
)

// callNote is what a tool handler tells the audit record of its call: the
// tool it ran, the arguments, and how the gateway decided and the call
// ended. The handler fills it in through the context (noteOf).
type callNote struct {
	tool string
	// raw is the arguments as the client sent them, decoded only for an
	// audit record (arguments); args is them decoded already, when the
	// handler has them as rawArgs decodes them.
	raw      json.RawMessage
	args     any
	decision string // "" = allowed
	outcome  string // "" = from the result: ok or isError
	reason   string
	// server and what are what the call acts on, as the code it ran said
	// (audit.Note: a management tool's server): the record's server, and
	// its reason when it has none.
	server, what string
	// trimmed is the bytes of text execute_tool left out of the result
	// (its bound, Options.MaxResultBytes), 0 when it went whole.
	trimmed int
	// output is what is wrong with the result against its tool's output
	// schema ("" when it fits or the tool declares none): the record's
	// outputMismatch.
	output string
	// refused says the call ran nothing though it was not denied (a tool
	// the gateway does not have): its record is coalesced as a refusal's
	// (audit.Record.Refused).
	refused bool
	// unlisted says the call named a tool the gateway does not have (a
	// name the client chose): audit.Record.Unlisted.
	unlisted bool
}

// Note is audit.Noter's: the management tools say through it what they act on.
func (n *callNote) Note(server, what string) { n.server, n.what = server, what }

// arguments is the call's arguments decoded (nil for none).
func (n *callNote) arguments() any {
	if n.args != nil {
		return n.args
	}
	return rawArgs(n.raw)
}

// noteOf returns the note of the call ctx belongs to (a scratch one when
// the call is not audited).
func noteOf(ctx context.Context) *callNote {
	if n, ok := audit.NoterFrom(ctx).(*callNote); ok {
		return n
	}
	return &callNote{}
}

// audited wraps a tool handler: every call ends in one audit record (when
// Options.Audit is set) with who called (key, transport, session, client),
// what (the tool, a SHA-256 of its arguments, the masked arguments when
// Options.AuditArguments is set), the decision, the outcome, how long it
// took and the size of the result.
func (g *Gateway) audited(action string, h mcp.ToolHandler) mcp.ToolHandler {
	if g.opts.Audit == nil {
		return h
	}
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		start := time.Now()
		n := &callNote{}
		res, err := h(audit.WithNoter(ctx, n), req)
		args := n.arguments()
		r := audit.Record{
			Time:            start,
			Action:          action,
			Tool:            n.tool,
			Server:          n.server,
			Decision:        n.decision,
			Outcome:         n.outcome,
			Reason:          n.reason,
			DurationMs:      float64(time.Since(start).Microseconds()) / 1000,
			ResultBytes:     resultBytes(res),
			TrimmedBytes:    n.trimmed,
			ArgumentsSHA256: audit.HashArguments(args),
			OutputMismatch:  n.output,
			Refused:         n.refused,
			Unlisted:        n.unlisted,
		}
		if r.Decision == "" {
			r.Decision = audit.Allowed
		}
		if r.Reason == "" {
			r.Reason = n.what
		}
		switch {
		case r.Decision != audit.Allowed:
			r.Outcome = ""
		case err != nil:
			r.Outcome, r.Reason = audit.IsError, err.Error()
		case r.Outcome == "" && res != nil && res.IsError:
			r.Outcome = audit.IsError
		case r.Outcome == "":
			r.Outcome = audit.OK
		}
		if g.opts.AuditArguments != nil && args != nil {
			r.Arguments = g.opts.AuditArguments(args)
		}
		who(ctx, req, &r)
		g.opts.Audit.Write(r)
		return res, err
	}
}

// auditRefusedCall writes the record of a tools/call that go-sdk refused
// before any tool handler ran (a tool the gateway does not have): action
// "tools/call", the tool as the client named it, outcome isError and why.
func (g *Gateway) auditRefusedCall(ctx context.Context, req *mcp.CallToolRequest, start time.Time, reason string) {
	if g.opts.Audit == nil {
		return
	}
	r := audit.Record{
		Time:       start,
		Action:     audit.ToolsCall,
		Tool:       req.Params.Name,
		Unlisted:   true,
		Decision:   audit.Allowed,
		Outcome:    audit.IsError,
		Reason:     reason,
		DurationMs: float64(time.Since(start).Microseconds()) / 1000,
	}
	who(ctx, req, &r)
	g.opts.Audit.Write(r)
}

// auditOutcome names an Outcome (CallOutcome, the one classification of a
// call's end) in the audit log's words.
func auditOutcome(o Outcome) string {
	switch o {
	case OutcomeOK:
		return audit.OK
	case OutcomeTimeout:
		return audit.Timeout
	case OutcomeUnavailable:
		return audit.Down
	}
	return audit.IsError
}

// who fills in the caller of req: its API key, transport, session (the
// Mcp-Session-Id when the client sends one; over stdio the process) and
// client (clientOf).
func who(ctx context.Context, req *mcp.CallToolRequest, r *audit.Record) {
	r.Transport = policy.TransportStdio
	var agent string
	if req.Extra != nil && req.Extra.Header != nil {
		r.Transport = policy.TransportHTTP
		r.Session = req.Extra.Header.Get("Mcp-Session-Id")
		agent = req.Extra.Header.Get("User-Agent")
	}
	if c := policy.CallerFrom(ctx); c != nil {
		r.Transport, r.Remote, r.Route, r.Profile = c.Transport, c.Remote, c.Route, c.ProfileName()
		if c.Key != nil {
			r.Key, r.KeyProfile = c.Key.Name, c.Key.Profile
		}
	}
	if req.Session != nil && req.Session.ID() != "" {
		r.Session = req.Session.ID()
	}
	r.Client = clientOf(req, agent)
	if r.Session == "" && r.Transport == policy.TransportStdio {
		r.Session = stdioSession
	}
}

// clientOf names the client of req for its audit record: the MCP
// client's own name and version ("claude-ai/0.1.0", clientInfo) followed
// by the HTTP User-Agent agent in parentheses when there is one that does
// not already start with them ("claude-ai/0.1.0 (node)"); the User-Agent
// alone when the request has no clientInfo. Over HTTP only a 2026-07-28
// request carries its clientInfo: the front is stateless, so an older
// client's initialize is not seen by its later calls, and its record
// names the User-Agent.
func clientOf(req *mcp.CallToolRequest, agent string) string {
	name, version := clientInfo(req)
	if name == "" {
		return agent
	}
	client := name
	if version != "" {
		client += "/" + version
	}
	if agent == "" || agent == client || strings.HasPrefix(agent, client+" ") {
		return cmp.Or(agent, client)
	}
	return client + " (" + agent + ")"
}

// clientInfo is the name and version of req.ClientInfo() ("" for none).
// A request of protocol 2026-07-28 or later names its client in its
// _meta, decoded as a JSON object, and ClientInfo would encode that object
// and decode it again, through a 32 KiB buffer, at every call: its "name"
// and "version" are read from the object instead. go-sdk has decoded that
// same object into an mcp.Implementation before the handler runs (it
// refuses the request when it cannot), so what is read is what ClientInfo
// gives (TestClientNameIsClientInfos holds them equal). Other requests ask
// ClientInfo.
func clientInfo(req *mcp.CallToolRequest) (name, version string) {
	if req.Params != nil {
		m := req.Params.Meta
		if v, ok := m[mcp.MetaKeyProtocolVersion].(string); ok && v >= backend.StatelessProtocolVersion {
			if ci, ok := m[mcp.MetaKeyClientInfo].(map[string]any); ok {
				name, _ = ci["name"].(string)
				version, _ = ci["version"].(string)
				return name, version
			}
		}
	}
	if ci := req.ClientInfo(); ci != nil {
		return ci.Name, ci.Version
	}
	return "", ""
}

// stdioSession names the stdio session in audit records: the client that
// started this process (several gateways may share one audit log).
var stdioSession = fmt.Sprintf("stdio-%d", os.Getpid())

// resultBytes is about how many bytes the result holds: its texts and
// binary data, and its structured content as JSON.
func resultBytes(res *mcp.CallToolResult) int {
	if res == nil {
		return 0
	}
	n := 0
	for _, c := range res.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			n += len(c.Text)
		case *mcp.ImageContent:
			n += len(c.Data)
		case *mcp.AudioContent:
			n += len(c.Data)
		case *mcp.EmbeddedResource:
			if c.Resource != nil {
				n += len(c.Resource.Text) + len(c.Resource.Blob)
			}
		}
	}
	if res.StructuredContent != nil {
		// Its length as json.Marshal encodes it, without a copy of it.
		var c byteCounter
		if err := json.NewEncoder(&c).Encode(res.StructuredContent); err == nil {
			n += c.n - 1 // Encode's newline
		}
	}
	return n
}

// byteCounter counts the bytes written to it.
type byteCounter struct{ n int }

func (c *byteCounter) Write(p []byte) (int, error) {
	c.n += len(p)
	return len(p), nil
}
