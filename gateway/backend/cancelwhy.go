package backend

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// go-sdk writes the reason of the notifications/cancelled it sends when a
// call's context ends as ctx.Err(): a backend read "context canceled"
// whoever ended the call and why. Each call carries in its context what
// to say instead (withCancelWhy), and the connection puts it in the
// notification as it is written (stdio, SSE: exactConn; streamable HTTP:
// headerTransport, whose requests carry the context of the call).

// methodCancelled is the notification that cancels a call.
const methodCancelled = "notifications/cancelled"

// CancelReasonPrefix starts the reason of each notifications/cancelled
// the gateway sends a backend: the backend's client is the gateway, and
// "the client" in what follows is the gateway's own.
const CancelReasonPrefix = "toolgate: "

type cancelWhyKey struct{}

// withCancelWhy returns ctx carrying why, which says why a call of ctx was
// cancelled once it is.
func withCancelWhy(ctx context.Context, why func() string) context.Context {
	return context.WithValue(ctx, cancelWhyKey{}, why)
}

func cancelWhyFrom(ctx context.Context) func() string {
	why, _ := ctx.Value(cancelWhyKey{}).(func() string)
	return why
}

// cancelWhy says why the call of cctx was cancelled: the cause cctx ended
// with first, which is the caller's (the gateway's words: its client
// cancelled, its client disconnected, the gateway stopping, an API key
// revoked), the call's timeout, or the backend stopping. It is read when
// the notification is written, after the call returned (and the caller
// may have cancelled its own context since): the cause of cctx is set
// once, by what ended it first.
func (b *backend) cancelWhy(cctx context.Context, timeout time.Duration) string {
	why := context.Cause(cctx)
	switch {
	case why == nil:
		return ""
	case errors.Is(why, ErrCallTimeout):
		why = fmt.Errorf("no answer within %s (callTimeout)", timeout)
	case errors.Is(why, errStopping) && b.p.ctx.Err() != nil:
		why = errors.New("the gateway is stopping")
	case errors.Is(why, errStopping) && b.ctx.Err() != nil:
		why = context.Cause(b.ctx) // removed, replaced, disabled
	}
	return CancelReasonPrefix + why.Error()
}

// withCancelReason returns msg with the reason of ctx's call when msg is
// the notifications/cancelled of that call, else msg.
func withCancelReason(ctx context.Context, msg jsonrpc.Message) jsonrpc.Message {
	req, ok := msg.(*jsonrpc.Request)
	if !ok || req.IsCall() || req.Method != methodCancelled {
		return msg
	}
	why := cancelWhyFrom(ctx)
	if why == nil {
		return msg
	}
	reason := why()
	if reason == "" {
		return msg
	}
	var params map[string]any
	if json.Unmarshal(req.Params, &params) != nil || params == nil {
		return msg
	}
	params["reason"] = reason
	raw, err := json.Marshal(params)
	if err != nil {
		return msg
	}
	out := *req
	out.Params = raw
	return &out
}

// maxCancelBody is the largest POST body that may be a call's
// notifications/cancelled (one is about 100 bytes); larger ones are not read.
const maxCancelBody = 4 << 10

// withCancelReasonBody is withCancelReason for a POST of streamable HTTP:
// req itself, or a copy whose body is the notification with its reason.
func withCancelReasonBody(req *http.Request) *http.Request {
	if req.Method != http.MethodPost || req.GetBody == nil || req.ContentLength <= 0 || req.ContentLength > maxCancelBody || cancelWhyFrom(req.Context()) == nil {
		return req
	}
	body, err := req.GetBody()
	if err != nil {
		return req
	}
	data, err := io.ReadAll(body)
	body.Close()
	if err != nil || !bytes.Contains(data, []byte(methodCancelled)) {
		return req
	}
	msg, err := jsonrpc.DecodeMessage(data)
	if err != nil {
		return req
	}
	out := withCancelReason(req.Context(), msg)
	if out == msg {
		return req
	}
	data, err = jsonrpc.EncodeMessage(out)
	if err != nil {
		return req
	}
	req = req.Clone(req.Context())
	req.Body = io.NopCloser(bytes.NewReader(data))
	req.ContentLength = int64(len(data))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }
	return req
}
