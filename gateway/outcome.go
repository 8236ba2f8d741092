package gateway

import (
	"context"
	"errors"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/gateway/backend"
	"github.com/toolgate/toolgate/gateway/policy"
)

// Outcome names how one tool call ended, the same way everywhere it is
// counted or shown (the toolgate_tool_calls_total metric, the console's
// recent calls).
type Outcome string

const (
	OutcomeOK          Outcome = "ok"          // the tool answered without isError
	OutcomeError       Outcome = "error"       // the tool answered with isError, or the backend with a protocol error
	OutcomeTimeout     Outcome = "timeout"     // no answer within the call timeout
	OutcomeUnavailable Outcome = "unavailable" // the backend is down, connecting, removed or broke during the call
	OutcomeDenied      Outcome = "denied"      // a policy refused the call (an error wrapping ErrDenied)
)

// Outcomes lists every Outcome.
var Outcomes = []Outcome{OutcomeOK, OutcomeError, OutcomeTimeout, OutcomeUnavailable, OutcomeDenied}

// ErrDenied is wrapped by the error of a Caller that refuses a call the
// caller may not make (a policy around the backend pool, or the management
// tools refusing a config change): execute_tool answers it as an isError
// with the error's text, and it counts as OutcomeDenied. It is
// policy.ErrDenied, which Callers below the gateway wrap.
var ErrDenied = policy.ErrDenied

// CallOutcome classifies what a Caller returned.
func CallOutcome(res *mcp.CallToolResult, err error) Outcome {
	switch {
	case err == nil && res != nil && res.IsError:
		return OutcomeError
	case err == nil:
		return OutcomeOK
	case errors.Is(err, ErrDenied):
		return OutcomeDenied
	case errors.Is(err, backend.ErrCallTimeout):
		return OutcomeTimeout
	case errors.As(err, new(*backend.UnavailableError)): // allocated on this path only
		return OutcomeUnavailable
	}
	return OutcomeError
}

// Call is one finished tool call, as an observer of a Caller sees it.
type Call struct {
	Server, Tool string
	Start        time.Time
	Duration     time.Duration
	Result       *mcp.CallToolResult // nil when Err is set
	Err          error
	Outcome      Outcome
	// Caller is who made the call (its context's), nil when unknown.
	Caller *policy.Caller
}

// Observed returns c calling observe after each of its calls (the metrics
// and the console's recent calls are such observers). observe runs on the
// caller's goroutine: it must be quick.
func Observed(c Caller, observe func(Call)) Caller { return &observed{c, observe} }

type observed struct {
	Caller
	observe func(Call)
}

var _ Caller = (*observed)(nil)

func (o *observed) CallTool(ctx context.Context, server, tool string, args map[string]any) (*mcp.CallToolResult, error) {
	start := time.Now()
	res, err := o.Caller.CallTool(ctx, server, tool, args)
	o.observe(Call{Server: server, Tool: tool, Start: start, Duration: time.Since(start), Result: res, Err: err, Outcome: CallOutcome(res, err), Caller: policy.CallerFrom(ctx)})
	return res, err
}
