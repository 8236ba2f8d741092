package backend

//lint:file-ignore SA1019 roots and sampling are deprecated from protocol 2026-07-28 on (SEP-2577) but stay functional in the deprecation window; execute_tool relays them

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Questions a backend asks mid-call (elicitation, sampling, roots) reach the
// client of the call through multi-round-trip requests (protocol
// 2026-07-28, SEP-2322): the backend answers tools/call with an
// input-required result (its questions, and a state to echo), and the
// client calls again with its answers and that state. The pool's client
// does not answer them itself (ClientOptions.MultiRoundTrip is disabled):
// CallTool returns the input-required result, whose NeedsInput is true, and
// the caller's next call carries the answers in a CallInput. Each round is
// a call of its own. A backend on an older protocol is sent no capability
// and no answers: it asks over its session, where the pool declares nothing
// it could answer, as before.

// CallInput is the client's side of a multi-round-trip call, for a backend
// speaking protocol 2026-07-28 or later. Give it to CallTool with
// WithCallInput.
type CallInput struct {
	// Capabilities returns what the client of the call can be asked, in
	// the wire form of a request's _meta: of its capabilities, only
	// elicitation, sampling and roots (RelayedCapabilities); nil passes on
	// none. The backend sees them instead of the pool's own (none): a
	// backend that adapts to a client that cannot answer keeps working. It
	// is called only for a backend on protocol 2026-07-28 or later.
	Capabilities func() map[string]any
	// InputResponses and RequestState are the client's answers to the
	// backend's previous input-required result and the state it echoes,
	// passed on unchanged (empty on a first round).
	InputResponses mcp.InputResponseMap
	RequestState   string
}

type callInputKey struct{}

// WithCallInput returns a context that makes Pool.CallTool pass in on.
func WithCallInput(ctx context.Context, in *CallInput) context.Context {
	return context.WithValue(ctx, callInputKey{}, in)
}

func callInputFrom(ctx context.Context) *CallInput {
	in, _ := ctx.Value(callInputKey{}).(*CallInput)
	return in
}

// relayedKinds are the capabilities the gateway can relay, named as a
// request's _meta names them.
var relayedKinds = []string{"elicitation", "sampling", "roots"}

// RelayedMeta is the part of raw, a client's capabilities as its request's
// _meta carried them, that a backend may see (relayedKinds), taken as they
// came: go-sdk's ClientCapabilities would encode and decode them again.
func RelayedMeta(raw map[string]any) map[string]any {
	out := make(map[string]any, len(relayedKinds))
	for _, k := range relayedKinds {
		if v, ok := raw[k]; ok && v != nil {
			out[k] = v
		}
	}
	return out
}

// RelayedCapabilities is RelayedMeta for capabilities already decoded (an
// initialize's), in the same wire form (go-sdk's ClientCapabilities would
// always write "roots"). Nil c is none: {}.
func RelayedCapabilities(c *mcp.ClientCapabilities) map[string]any {
	out := map[string]any{}
	if c == nil {
		return out
	}
	if c.Elicitation != nil {
		out["elicitation"] = c.Elicitation
	}
	if c.Sampling != nil {
		out["sampling"] = c.Sampling
	}
	if c.RootsV2 != nil {
		out["roots"] = c.RootsV2
	}
	return out
}

// withCallInput puts in into params, a call to a backend on protocol
// protocol; nothing for an older one.
func withCallInput(params *mcp.CallToolParams, in *CallInput, protocol string) {
	if in == nil || protocol < StatelessProtocolVersion {
		return
	}
	m := params.GetMeta()
	if m == nil {
		m = map[string]any{}
	}
	// go-sdk keeps a capability already in _meta (injectRequestMeta).
	caps := map[string]any{}
	if in.Capabilities != nil {
		caps = in.Capabilities()
	}
	m[mcp.MetaKeyClientCapabilities] = caps
	params.SetMeta(m)
	params.InputResponses = in.InputResponses
	params.RequestState = in.RequestState
}
