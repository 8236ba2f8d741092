package backend

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

var (
	// errPingTimeout ends a keepalive ping that got no answer in time.
	errPingTimeout = errors.New("ping timed out")
	// errDropped fails the requests of a run whose network a ping found
	// gone (headerTransport.dropped).
	errDropped = errors.New("not sent: the network to the server dropped the connection")
)

// keepAliveLoop pings the server of a remote run every keepAlive while the
// run lives. A network that drops the connection without a word (a Wi-Fi
// gone, a VPN that reconnected, a NAT or firewall that forgot the
// connection, a laptop that slept) sends no RST and no FIN: the session
// stayed "up", its event stream waiting, until a call timed out. A ping
// that gets no answer within PingTimeout ends the run as unreachable
// (r.broke), with why; the supervisor marks it down and connects again
// with the restart policy, and calls under way fail as unavailable with
// those words.
//
// go-sdk's own ClientOptions.KeepAlive closes the session on a failed
// ping and says why only in its log: the backend read "connection closed
// by the server". Its ping waits half the interval, counted on a clock
// that runs while the gateway is stopped (SIGSTOP), where a ping here
// counts the time the gateway ran (cancelAfterRunning), as a call does.
//
// An answer of any kind, an error too (a server that does not know
// "ping"), shows the network carries the session. A server of the
// stateless protocol (2026-07-28) refuses "ping" (go-sdk's logs each as
// an error) and is asked server/discover instead (discover).
func (b *backend) keepAliveLoop(r *run, woke <-chan struct{}) {
	t := time.NewTimer(time.Duration(b.keepAlive.Load()))
	defer t.Stop()
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-r.done:
			return
		case <-t.C:
		case <-woke:
			// The machine slept: the connection is most likely dead, and
			// the timer counted on where it stopped.
			woke = b.p.woken()
			t.Stop()
		}
		if why := b.ping(r); why != nil {
			b.log.Warn("remote server did not answer a ping: connecting again", keyErr, why)
			b.dropped(r, why) // a server unreachable: the same
			// Closing the session waits for the calls under way, which
			// wait for an answer that will not come (and a streamable
			// session's DELETE for one): they end now, said with why.
			r.cancel(errStopping)
			return
		}
		t.Reset(time.Duration(b.keepAlive.Load()))
	}
}

// dropped ends r as one whose network is gone, said with why (run.end).
func (b *backend) dropped(r *run, why *OwnWords) { r.end(b.atURL(why), true) }

// ping sends one ping on r's session and returns why the session is taken
// for dropped, or nil: it was answered, or failed for another reason
// (the session ending, which the supervisor sees by itself; an error
// status, which a call says better).
func (b *backend) ping(r *run) *OwnWords {
	timeout := b.p.opts.PingTimeout
	ctx, cancel := context.WithCancelCause(r.ctx)
	defer cancel(nil)
	what, ping := "a ping", func(ctx context.Context) error { return r.sess.Ping(ctx, nil) }
	if r.protocol >= StatelessProtocolVersion {
		what, ping = "a server/discover request (the stateless protocol's ping)", func(ctx context.Context) error { return b.discover(ctx, r) }
	}
	timedOut := &OwnWords{Before: fmt.Sprintf("no answer to %s within %s: the network to the server dropped the connection without a word "+
		"(a Wi-Fi or VPN that changed, a NAT or firewall that timed it out, this machine asleep) or the server hangs: connecting again", what, timeout)}
	// The run's requests fail at once from the timeout on (dropped): go-sdk
	// sends the ping's notifications/cancelled, and the session's close
	// its DELETE, and waits up to 5 s for each over the network gone.
	stop := cancelAfterRunning(ctx, func(cause error) {
		b.dropped(r, timedOut)
		cancel(cause)
	}, timeout, errPingTimeout)
	err := ping(ctx)
	stop()
	switch {
	case err == nil:
		return nil
	case errors.Is(context.Cause(ctx), errPingTimeout):
		return timedOut
	case r.ctx.Err() != nil || errors.Is(err, mcp.ErrConnectionClosed):
		return nil
	}
	// go-sdk says a request that could not be sent as a JSON-RPC error
	// ("rejected by transport"), which is no answer of the server's.
	ue := ownRequestError(err)
	if why := unreachable(ue, b.cfg.URL); why != nil {
		return why
	}
	// A new connection that could not be made (the network is
	// unreachable, a host that does not answer the dial: a Wi-Fi gone, a
	// VPN down) is the network gone too. Not a kept-alive connection the
	// server closed (EOF; a server's idle timeout, Node's 5 s among them),
	// which the next request makes anew.
	var op *net.OpError
	if ue != nil && errors.As(ue, &op) && op.Op == "dial" {
		return &OwnWords{Before: what + " could not reach the server (", Said: quietCause{op.Error(), err},
			After: "): the network to it is down or changed: connecting again"}
	}
	// An answer of the server's, an error too (a server that does not
	// know "ping"), says the network carries the session.
	if werr := (*jsonrpc.Error)(nil); ue == nil && errors.As(err, &werr) {
		return nil
	}
	b.log.Debug("ping failed", keyErr, err)
	return nil
}

// discover asks the server of a stateless run (protocol 2026-07-28)
// server/discover, on the run's HTTP client (the connections its calls
// use, its headers and login): the one request every server of that
// protocol answers, cheap (no listing) and with no effect. go-sdk's
// session sends it only at Connect, so it is posted here; its answer,
// whatever it is (an error status too), is read whole and dropped: it
// came over the network. An error is the client's (no answer).
func (b *backend) discover(ctx context.Context, r *run) error {
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": "toolgate-keepalive", "method": methodDiscover,
		"params": map[string]any{"_meta": map[string]any{
			mcp.MetaKeyProtocolVersion:    r.protocol,
			mcp.MetaKeyClientInfo:         b.p.opts.ClientInfo,
			mcp.MetaKeyClientCapabilities: map[string]any{},
		}}})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", r.protocol)
	req.Header.Set("Mcp-Method", methodDiscover)
	resp, err := r.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	return err
}
