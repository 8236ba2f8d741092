package backend

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/tidwall/gjson"

	"github.com/toolgate/toolgate/gateway/backend/oauth"
	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/internal/mask"
	"github.com/toolgate/toolgate/internal/oneline"
	"github.com/toolgate/toolgate/internal/peek"
	"github.com/toolgate/toolgate/internal/proxyenv"
)

// headerTransport adds the configured headers to every request of a remote
// backend, caps plain (non-streaming) response bodies, and hands the
// messages of event streams to observe (observeEvents).
type headerTransport struct {
	base    http.RoundTripper
	headers http.Header
	// host is the server's host name: the headers go to it alone, not to
	// another host a redirect names (Go's client drops its own
	// Authorization there, but keeps what a transport sets).
	host    string
	maxBody int64
	observe func(jsonrpc.Message)
	// exact, for streamable HTTP, gives the answer to a POST made with an
	// exactResult in its context (a tools/call) to it (exact.go).
	exact bool
	// notMCP is the last 200 OK response that was neither JSON nor an
	// event stream (see notMCPAnswer), for connect and call errors;
	// notMCPs counts them.
	notMCP  atomic.Pointer[notMCP]
	notMCPs atomic.Uint64
	// sse says the server speaks the SSE transport, whose connection is
	// a GET; a streamable HTTP server's GET opens an optional stream,
	// which go-sdk goes without when it is refused.
	sse bool
	// dropped: a ping found the network to the server gone
	// (keepAliveLoop); the run's requests after it (the session's DELETE
	// at its close) fail at once rather than wait on that network.
	dropped atomic.Bool
	// refused is the last answer with an error status (see refusalOf),
	// for connect and call errors; refusals counts them.
	refused  atomic.Pointer[refusal]
	refusals atomic.Uint64
	// streamRefused is the last refusal of the GET that opens a
	// streamable HTTP server's stream of its own (which refusalOf leaves
	// out: most are a server without one), for the error of a session
	// that ended when go-sdk opened it again and was refused
	// (streamRefusalOf).
	streamRefused atomic.Pointer[refusal]
	// answers counts the answers with a status under 400: a refusal
	// answered before one of them was got past (go-sdk's server/discover,
	// which a server of the 2025 protocol refuses, before initialize).
	answers atomic.Uint64
	// oversized counts the events over maxBody seen in the event streams
	// it observes (observeEvents.oversize), for call errors.
	oversized atomic.Uint64
	// login says an Authorizer may give the requests their token (from a
	// stored login, when there is one), not the headers.
	login bool
	// handshake is true until the session is up: its JSON answers are
	// read whole and checked (notJSONAnswer), which calls are not.
	handshake atomic.Bool
	// connected and sent say a request of the handshake got a connection
	// (to the server, or to the proxy of the environment) and was written
	// through it, for the error of a handshake that got no answer at all
	// (silence).
	connected, sent atomic.Bool
}

// refusal describes an answer with an error status (400 or more).
type refusal struct {
	code   int
	status string // "404 Not Found"
	method string
	url    string // redacted
	said   string // what its body says, on one line ("" for nothing)
	// rpc says the body is a JSON-RPC error response: the server's own
	// answer to the request, which go-sdk hands on as such.
	rpc bool
	// session says the request named a session (Mcp-Session-Id).
	session bool
	// answersBefore is headerTransport.answers when it came.
	answersBefore uint64
	// scope is what a 403 with a Bearer challenge (insufficient_scope, or
	// none and a scope) asks for ("" for none). The request's token, which
	// the fix of a 403 names: login says a stored login (OAuth) made it;
	// noToken that it had none (no "Authorization" in the entry's headers
	// and no stored login: a server keyed by another header, or none).
	scope   string
	login   bool
	noToken bool
	// call is the call whose request it answered (its exactResult, the
	// mark withExact puts in the call's context), or nil for a request
	// made for none (the session's stream, a notification).
	call *exactResult
	// callOnly says the refusal ended the one call and not the session
	// (scopeRefusalAnswer, noteScopeRefusal): the server is up, its other
	// tools work.
	callOnly bool
	// proxyAuth is the fix of a 407: a proxy of plain HTTP answered the
	// request (proxyenv.AuthFix).
	proxyAuth string
	// proxy is the refusal of the proxy of plain HTTP that made the
	// answer itself (proxyenv.OwnAnswer), nil for the server's.
	proxy *proxyenv.RefusedError
}

// whoOrWhen says the status is about who may call (401, 403, 407) or
// when (408, 429), not the request: another request, on another transport
// or protocol, meets the same answer.
func (r *refusal) whoOrWhen() bool {
	return slices.Contains([]int{http.StatusUnauthorized, http.StatusForbidden, http.StatusProxyAuthRequired, http.StatusRequestTimeout, http.StatusTooManyRequests}, r.code)
}

// sessionGone says the server no longer knows the session the request
// named (it ended it, or restarted): it did not run the request.
func (r *refusal) sessionGone() bool {
	return r.code == http.StatusNotFound && r.session
}

// mayHaveRun says the refusal answered the request of call (or one made
// for no call in particular) with a status that does not say the server
// left it alone: a 5xx that a server gives when it failed with the request
// in hand (500), or a proxy when its upstream failed or took too long
// after it got it (502, 504). Not 501, 503 or 505, which say the server
// could not handle the request at all (RFC 9110: not implemented, down
// for maintenance or overloaded, another HTTP version), nor a 4xx (who
// may call, when, a wrong request). It read "the server, or a proxy
// before it, failed" with no warning, and an agent ran a write again.
func (r *refusal) mayHaveRun(call *exactResult) bool {
	return r.code >= 500 && !slices.Contains([]int{http.StatusNotImplemented, http.StatusServiceUnavailable, http.StatusHTTPVersionNotSupported}, r.code) &&
		(r.call == nil || r.call == call)
}

// in is "a POST with 404 Not Found ("no route")", with the URL when it is
// not endpoint ("a POST to URL with …").
func (r *refusal) in(endpoint string) string {
	s := answered(r.method, r.url, endpoint, r.status)
	if r.said != "" {
		s += fmt.Sprintf(" (%q)", r.said)
	}
	return s
}

// answered is "a POST with 404 Not Found", with the (redacted) URL the
// request went to when it is not endpoint ("a POST to URL with …").
func answered(method, to, endpoint, status string) string {
	if !sameURL(to, endpoint) {
		method += " to " + to
	}
	return fmt.Sprintf("a %s with %s", method, status)
}

// sameURL says whether the redacted URL to is endpoint's.
func sameURL(to, endpoint string) bool {
	u, err := url.Parse(endpoint)
	return err == nil && u.Redacted() == to
}

// ownWords is "the server answered " + in(endpoint) + ": " + the fix for
// the server of type typ that login logs in to (fix), cause wrapped, with what the
// server said kept apart from the gateway's words (OwnWords): its body's
// words, the URL the request went to when it is not endpoint, and the
// scopes a 403 asked for. A key that is not admin reads "the server
// answered a POST with 401 Unauthorized (hidden …): " and the fix.
func (r *refusal) ownWords(endpoint string, login loginCmd, typ string, cause error) *OwnWords {
	if r.proxy != nil {
		// The proxy's own answer: the server never got the request.
		return &OwnWords{Before: "the proxy ", Said: quietCause{r.proxy.Proxy, cause}, After: r.proxy.Tail()}
	}
	fix := r.fix(login, typ)
	if !sameURL(r.url, endpoint) {
		return &OwnWords{Before: "the server answered ", Said: quietCause{r.in(endpoint), cause}, After: ": ", Then: fix}
	}
	w := &OwnWords{Before: "the server answered " + answered(r.method, r.url, endpoint, r.status), Said: quietCause{"", cause}, After: ": ", Then: fix}
	if r.said != "" {
		w.Before, w.Said, w.After = w.Before+" (", quietCause{fmt.Sprintf("%q", r.said), cause}, "): "
	}
	return w
}

// fix says what to check for the status, for the server of type typ
// that login logs in to: the gateway's words, and the scopes a 403 asked
// for (its WWW-Authenticate header's) and the login command kept apart.
func (r *refusal) fix(login loginCmd, typ string) *OwnWords {
	var fix string
	switch {
	case r.sessionGone():
		fix = "the server no longer knows the session (it ended it, or restarted): toolgate opens a new one"
	case r.code == http.StatusNotFound:
		fix = "check the url's path: a server's MCP endpoint often ends in /mcp (or /sse, with \"type\": \"sse\")"
	case r.code == http.StatusMethodNotAllowed && r.method == http.MethodPost && typ != config.TypeSSE:
		fix = "the url does not take POST: a server of the older SSE transport needs \"type\": \"sse\"; else check the url's path"
	case r.code == http.StatusUnauthorized:
		return &OwnWords{Before: "the server wants credentials: set them in the entry's \"headers\" (\"Authorization\": \"Bearer ${TOKEN}\"); `", Said: login,
			After: "` logs in where the server offers OAuth"}
	case r.code == http.StatusForbidden && r.scope != "" && r.login && login.unrecorded(r.scope):
		// A step-up the data folder would not take: the login alone asks
		// for the old scopes again. It said to run it all the same.
		return &OwnWords{Before: "the server wants the scopes ", Said: errors.New(strconv.Quote(r.scope)),
			After: ", which the login was not given, and the gateway could not record them for the next login (", Then: &OwnWords{Said: login.unrec.Why,
				After: "): " + notRecordedFix + " `", Then: login.then("` (the entry's \"oauth\": {\"scopes\": [...]}, with those the login has, asks for them without the record)")}}
	case r.code == http.StatusForbidden && r.scope != "" && r.login:
		// A step-up (MCP 2025-11-25): the Authorizer recorded the scopes
		// in the login file, and the login asks for them with those it
		// has. It said to list them in the config first.
		return &OwnWords{Before: "the server wants the scopes ", Said: errors.New(strconv.Quote(r.scope)),
			After: ", which the login was not given: run `", Then: login.then(stepUpThen)}
	case r.code == http.StatusForbidden && r.scope != "" && r.noToken:
		// Told "which the login was not given" (an Authorizer stood by
		// with no stored login) or "which the token in the entry's
		// headers lacks", where neither was.
		return &OwnWords{Before: "the server wants the scopes ", Said: errors.New(strconv.Quote(r.scope)),
			After: ", and the requests carry no token: set one with them in the entry's \"headers\" (\"Authorization\": \"Bearer ${TOKEN}\"), or, where the server offers OAuth, list them in the entry's \"oauth\": {\"scopes\": [...]} and run `", Then: login.then("`")}
	case r.code == http.StatusForbidden && r.scope != "":
		return &OwnWords{Before: "the server wants the scopes ", Said: errors.New(strconv.Quote(r.scope)),
			After: ", which the token in the entry's \"headers\" lacks: give it a token with them"}
	case r.code == http.StatusForbidden && r.login:
		return &OwnWords{Before: "the server refused the stored login's token or this client: the login may lack a scope the server wants (list it in the entry's \"oauth\": {\"scopes\": [...]} and run `", Said: login,
			After: "`), or the server does not let this address in"}
	case r.code == http.StatusForbidden:
		fix = "the server refused these credentials or this client: check the entry's \"headers\" (the token and its scopes) and whether the server lets this address in"
	case r.code == http.StatusProxyAuthRequired:
		fix = r.proxyAuth
	case r.code == http.StatusTooManyRequests:
		fix = "the server limits how often it is called: call again later"
	case r.code >= 500 && r.login:
		// A token check that fails on a token the server no longer takes
		// (its authorization server restarted, or revoked it) and does not
		// say so with a 401 answers 500, as go-sdk's and the TypeScript
		// SDK's middleware do for a check that fails another way: the
		// login is all that can be fixed from here, and `auth status`
		// still says "logged in".
		return &OwnWords{Before: "the server, or a proxy before it, failed: its own log says why; the request carried the stored login's token," +
			" which a server may fail on once it no longer takes it (its authorization server restarted, or revoked it): `", Said: login,
			After: "` logs in again"}
	case r.code >= 500:
		fix = "the server, or a proxy before it, failed: its own log says why"
	default:
		fix = fmt.Sprintf("check url, type (%s) and headers", typ)
	}
	return own(fix, nil)
}

// maxScopeSaid bounds the scopes a 403 asked for that its error quotes, in
// bytes.
const maxScopeSaid = 4 << 10

// stepUpThen follows the login command in the fix of a 403 that asks a
// logged-in server's login for more scopes.
const stepUpThen = "`, which asks for them with those the login has, for you to approve (the entry's \"oauth\": {\"scopes\": [...]} still pins the scopes every login asks for)"

// loginCmd is the command that logs in to a server, as a refusal's fix
// quotes it: in full for the gateway's operator, with the config and data
// folder the gateway runs on (LoginCommander: `toolgate auth login demo
// --config /etc/toolgate.json --data-dir /srv/tg`), bare to an API key
// that is not admin, which learns no path on the gateway's machine
// (ErrForKey). The fixes said the bare command to all: run as printed for a
// gateway on another data folder, it logged in to the default one, or
// failed with no gateway there to take the config from.
type loginCmd struct {
	full, bare string
	// unrec is the step-up the Authorizer could not record for the next
	// login (StepUpKeeper), nil for none: a pointer, as errors compare.
	unrec *oauth.Unrecorded
}

// unrecorded says whether a scope of the 403's scope string is one of a
// step-up the next login would not ask for, its record refused.
func (c loginCmd) unrecorded(scope string) bool {
	return c.unrec != nil && slices.ContainsFunc(strings.Fields(scope), func(s string) bool { return slices.Contains(c.unrec.Scopes, s) })
}

// notRecordedFix is what to do about a step-up the data folder would not
// take: the login alone would ask for the old scopes again.
const notRecordedFix = "make the login folder writable (the error says what refused) and call again, which records them, then run"

// notRecorded is StepUp.NotRecorded of scopes, which could not be
// recorded for why.
func notRecorded(scopes []string, why error) string {
	return fmt.Sprintf("the gateway could not record %s for the next login (%v): %s the login; or list them, with those the login has, in the entry's \"oauth\": {\"scopes\": [...]} and run it",
		strings.Join(scopes, " "), why, notRecordedFix)
}

func (c loginCmd) Error() string  { return c.full }
func (c loginCmd) forKey() string { return c.bare }

// then is the words of c, then after.
func (c loginCmd) then(after string) *OwnWords { return &OwnWords{Said: c, After: after} }

// refusalOf describes resp when its status is an error (400 or more) that
// go-sdk would report with the status text alone ("calling "initialize":
// sending "initialize": Not Found"), with what its body says; nil for any
// other response. The answer to a DELETE (the end of a session) is none,
// nor, unless sse, is the answer to a GET: a streamable HTTP server without
// a stream of its own answers it 405 or 404, and go-sdk goes on without.
func refusalOf(resp *http.Response, sse, login bool) *refusal {
	m := resp.Request.Method
	if resp.StatusCode < 400 || m == http.MethodDelete || m == http.MethodGet && !sse {
		return nil
	}
	rf := describeRefusal(resp, login)
	// go-sdk's SSE client reads no answer of a POST (a server of that
	// transport answers on its stream): a JSON-RPC error in one reaches
	// no call, which read "connection lost during the call … may or may
	// not have run".
	rf.rpc = rf.rpc && !sse
	return rf
}

// streamRefusalOf describes resp when it refuses the GET that opens a
// streamable HTTP server's stream of its own with a status that is not the
// 404 or 405 of a server without one (go-sdk goes on without it then); nil
// for any other response. go-sdk ends the session when the GET it sends
// again, after the stream broke, is refused so, and says the status text
// alone ("standalone SSE stream: Internal Server Error").
func streamRefusalOf(resp *http.Response, sse, login bool) *refusal {
	if sse || resp.Request.Method != http.MethodGet || resp.StatusCode < 400 ||
		resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusMethodNotAllowed {
		return nil
	}
	return describeRefusal(resp, login)
}

// describeRefusal is the refusal resp, an answer with an error status.
func describeRefusal(resp *http.Response, login bool) *refusal {
	m := resp.Request.Method
	body, _ := peek.Body(resp, 4<<10)
	said := bodySays(resp.Header.Get("Content-Type"), body)
	if strings.EqualFold(said, http.StatusText(resp.StatusCode)) || strings.EqualFold(said, resp.Status) {
		said = "" // "Unauthorized" says nothing the status does not
	}
	if a := resp.Request.Header.Get("Authorization"); a != "" {
		// A server's error may quote the request (a debug page, a check
		// that names the token it refused): the token a login gave is
		// no configured secret, which the backend's masks hide.
		said = mask.New([]string{a}).Configured(said)
	}
	rpc := gjson.GetBytes(body, "jsonrpc").Type == gjson.String && gjson.GetBytes(body, "error.code").Type == gjson.Number
	// The request as sent, the Authorizer's token in it: an Authorizer
	// stands by for every remote server without an "Authorization"
	// header, and adds one only from a stored login.
	token := resp.Request.Header.Get("Authorization") != ""
	rf := &refusal{code: resp.StatusCode, status: resp.Status, method: m, url: resp.Request.URL.Redacted(), said: said, rpc: rpc,
		session: resp.Request.Header.Get("Mcp-Session-Id") != "", login: login && token, noToken: !token}
	if resp.StatusCode == http.StatusProxyAuthRequired {
		rf.proxyAuth = proxyenv.AuthFix(resp.Request.URL, resp.Header)
	} else {
		rf.proxy = proxyenv.OwnAnswer(resp)
	}
	if resp.StatusCode == http.StatusForbidden {
		// Cut: a server may ask for megabytes of scopes, which the error
		// (a model's tool result, /status) said whole.
		rf.scope = oneline.Clip(oauth.InsufficientScope(resp.Header), maxScopeSaid)
	}
	return rf
}

// bodySays is what an error answer's body says, on one line: a JSON
// body's message (error.message, error_description, message, detail, a
// string error, title), an HTML page's title, or a text's start.
func bodySays(contentType string, body []byte) string {
	media, _, _ := mime.ParseMediaType(contentType)
	switch {
	case media == "application/json" || strings.HasSuffix(media, "+json") || gjson.ValidBytes(body) && bytes.HasPrefix(bytes.TrimSpace(body), []byte("{")):
		for _, path := range []string{"error.message", "error_description", "message", "detail", "error", "title"} {
			if v := gjson.GetBytes(body, path); v.Type == gjson.String && strings.TrimSpace(v.Str) != "" {
				return oneline.Cut(strings.TrimSpace(v.Str), 120)
			}
		}
		return ""
	case media == "text/html":
		return htmlTitle(body)
	}
	return oneline.Cut(strings.TrimSpace(string(body)), 120)
}

// notMCP describes an answer that was not MCP's.
type notMCP struct {
	what   string // "an HTML page ("Sign in")", "a text/plain answer"
	status string // "200 OK"
	method string
	url    string // redacted
	// fix replaces the fix of a page in place of the answer (check the
	// url, and what stands in between), when another one fits.
	fix string
}

// in is "a POST with 200 OK and an HTML page ("Sign in")", with the URL
// when it is not endpoint ("a POST to URL with …").
func (n *notMCP) in(endpoint string) string {
	return answered(n.method, n.url, endpoint, n.status) + " and " + n.what
}

func (t *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.dropped.Load() {
		return nil, errDropped
	}
	req = req.Clone(req.Context())
	for k, vs := range t.headers {
		if !strings.EqualFold(req.URL.Hostname(), t.host) {
			break // the configured secrets never leave the server
		}
		// The protocol's own headers (Accept, Content-Type, Mcp-Session-Id,
		// Mcp-Protocol-Version, Last-Event-ID) stay as go-sdk set them.
		if _, set := req.Header[k]; !set {
			req.Header[k] = vs
		}
	}
	if t.handshake.Load() {
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
			GotConn: func(httptrace.GotConnInfo) { t.connected.Store(true) },
			ConnectDone: func(_, _ string, err error) {
				if err == nil {
					t.connected.Store(true)
				}
			},
			WroteRequest: func(i httptrace.WroteRequestInfo) {
				if i.Err == nil {
					t.sent.Store(true)
				}
			},
		}))
	}
	resp, err := t.base.RoundTrip(withCancelReasonBody(req))
	if err != nil || resp.Body == nil {
		return resp, err
	}
	n := notMCPAnswer(resp)
	if n == nil && t.handshake.Load() {
		n = notJSONAnswer(resp, t.maxBody)
	}
	if n != nil {
		t.notMCP.Store(n)
		t.notMCPs.Add(1)
	}
	if rf := refusalOf(resp, t.sse, t.login); rf != nil {
		rf.answersBefore = t.answers.Load()
		rf.call = exactFrom(req.Context())
		rf.callOnly = rf.scope != "" && !rf.rpc && !t.handshake.Load() &&
			(t.sse && noteScopeRefusal(req, resp, rf.scope) || !t.sse && scopeRefusalAnswer(req, resp, rf.scope))
		if rf.callOnly && rf.call != nil {
			// Kept with the call it refused alone: in the transport's, it
			// took the place of another call's refusal before that call
			// read it (calls refused at once).
			rf.call.refused.Store(rf)
			return resp, nil
		}
		t.refused.Store(rf)
		t.refusals.Add(1)
		if rf.callOnly {
			return resp, nil
		}
	} else if rf := streamRefusalOf(resp, t.sse, t.login); rf != nil {
		rf.answersBefore = t.answers.Load()
		t.streamRefused.Store(rf)
	} else if resp.StatusCode < 400 {
		t.answers.Add(1)
	}
	// A call's POST, or the GET by which go-sdk resumes its stream (with
	// the call's context) after the POST's ended before the result: a
	// result that came on it was not kept (a 64-bit ID rounded).
	var exact *exactResult
	if t.exact && (req.Method == http.MethodPost || req.Method == http.MethodGet && req.Header.Get("Last-Event-ID") != "") {
		exact = exactFrom(req.Context())
	}
	var cb *callBody // watches a call's answer for its end (JSON or an event stream)
	if exact != nil && req.Method == http.MethodPost && resp.StatusCode == http.StatusOK {
		cb = &callBody{e: exact, in: "a POST with " + resp.Status}
	}
	// Event streams are capped per event by MaxEventSize; a JSON body is
	// one message, so cap it as a whole.
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		resp.Body = &cappedBody{rc: resp.Body, left: t.maxBody, max: t.maxBody}
		if exact != nil && strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
			resp.Body = &keptBody{rc: resp.Body, e: exact, size: resp.ContentLength, max: t.maxBody}
		}
	} else if exact != nil {
		observe := func(msg jsonrpc.Message) {
			if t.observe != nil {
				t.observe(msg)
			}
			if _, ok := msg.(*jsonrpc.Response); ok && cb != nil {
				cb.answered.Store(true)
			}
		}
		resp.Body = &keptEvents{rc: resp.Body, observe: observe, keep: exact.keepMessage, max: int(t.maxBody), oversize: func() { t.oversized.Add(1) }}
		if cb != nil {
			cb.events = true
		}
	} else if t.observe != nil {
		resp.Body = &observeEvents{rc: resp.Body, observe: t.observe, max: int(t.maxBody), oversize: func() { t.oversized.Add(1) }}
	}
	if cb != nil && (cb.events || strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json")) {
		cb.rc = resp.Body
		resp.Body = cb
	}
	return resp, nil
}

// codeInsufficientScope is the code of the JSON-RPC error that
// scopeRefusalAnswer puts in place of a 403 insufficient_scope answer: in
// the implementation-defined range, clear of the codes MCP and its SDKs
// give a meaning and of toolgate's own (bridge.CodeUnreachable,
// bridge.CodeRefused, linerpc.CodeBusy). It stays inside the gateway: the
// call's error is a RefusedError.
const codeInsufficientScope = -32053

// scopeRefusalAnswer turns resp, a 403 whose Bearer challenge asks for
// scope (a step-up, MCP 2025-11-25) answering req, a POST of a JSON-RPC
// request of a streamable HTTP session, into a JSON-RPC error response to
// that request (same status and headers), and reports whether it did. go-sdk
// takes such a body as the one request's failure; a 403 with any other body
// ended the session, so the backend was down after each refused call, and
// every other call to it failed until it connected again, while the server
// refused that one call for want of a scope. The refusal (headerTransport.refused)
// is recorded before, and is what the call's error says; the Authorizer
// recorded the step-up before too. Notifications and responses have no
// answer to give: their 403 goes on as it is. (An SSE server's answers
// come on its stream, not in the POST's answer: noteScopeRefusal.)
func scopeRefusalAnswer(req *http.Request, resp *http.Response, scope string) bool {
	if req.Method != http.MethodPost || resp.StatusCode != http.StatusForbidden || req.GetBody == nil {
		return false
	}
	body, err := req.GetBody() // go-sdk's request is in memory: a copy of it
	if err != nil {
		return false
	}
	data, err := io.ReadAll(body)
	body.Close()
	if err != nil {
		return false
	}
	msg, err := jsonrpc.DecodeMessage(data)
	call, ok := msg.(*jsonrpc.Request)
	if err != nil || !ok || !call.IsCall() {
		return false
	}
	out, err := jsonrpc.EncodeMessage(scopeRefusalError(call.ID, resp.Status, scope))
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // lets the connection be used again
	resp.Body.Close()
	resp.Header = resp.Header.Clone()
	resp.Header.Set("Content-Type", "application/json")
	resp.Header.Del("Content-Length")
	resp.ContentLength = int64(len(out))
	resp.Body = io.NopCloser(bytes.NewReader(out))
	return true
}

// scopeRefusalError is the JSON-RPC error to the request id that a
// server answered status (403), its Bearer challenge asking for scope.
// The call's error says the refusal (headerTransport.refused) in full:
// this is what go-sdk reads.
func scopeRefusalError(id jsonrpc.ID, status, scope string) *jsonrpc.Response {
	return &jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: codeInsufficientScope,
		Message: fmt.Sprintf("the server answered %s: it wants the scopes %q (insufficient_scope)", status, scope)}}
}

// callBody watches the body of the answer to a call's POST (streamable
// HTTP), an event stream or a JSON body: when it ends before the call's
// response came (an event stream that broke off or ended without it, a
// JSON body cut short: the server crashed, a proxy's read timeout), the
// call is told (exactResult.cut), to say so with the status and the bytes
// read. go-sdk's words for it were "request terminated without response"
// or "failed to decode event: unmarshaling jsonrpc message: unexpected
// EOF", under "connection lost during the call".
type callBody struct {
	rc       io.ReadCloser
	e        *exactResult
	in       string // "a POST with 200 OK"
	events   bool
	answered atomic.Bool // an event stream's response came
	read     int64
}

func (b *callBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	b.read += int64(n)
	if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, errBodyTooLarge) &&
		(b.events && !b.answered.Load() || !b.events && !errors.Is(err, io.EOF)) {
		c := &cutAnswer{before: "the server answered " + b.in + " and an event stream that ended before the call's result (", err: err}
		if !b.events {
			c.before = "the server answered " + b.in + " and a JSON body that ended before the call's result ("
		}
		c.how = fmt.Sprintf("after %d bytes", b.read)
		if !errors.Is(err, io.EOF) {
			c.how = fmt.Sprintf("broken off after %d bytes: %v", b.read, err)
		}
		b.e.cut.CompareAndSwap(nil, c)
	}
	return n, err
}

func (b *callBody) Close() error { return b.rc.Close() }

// cutAnswer says how the answer to a call's POST ended before its result:
// before, the gateway's words, then how (the bytes read, the read's
// error), which the connection's error err says.
type cutAnswer struct {
	before, how string
	err         error
}

// words are the gateway's words of c, the read's error kept apart
// (OwnWords), with cause (the call's error) wrapped, and the warning that
// the call may have run: the server had it.
func (c *cutAnswer) words(cause error) *OwnWords {
	return noAnswer(true, c.before, quietCause{c.how, errors.Join(c.err, cause)},
		"): the server, or a proxy before it, cut the answer short (a crash, a proxy's read timeout): its own log says why")
}

// notMCPAnswer describes a 200 OK response whose content is not MCP's
// (JSON or an event stream), reading the start of its body again for an
// HTML page's title; nil for any other response. go-sdk's own error names
// only the content type, under layers of its calls ("connection closed:
// calling "initialize": client is closing: sending "server/discover":
// unsupported content type "text/html""), where the usual causes are a
// URL that is not the MCP endpoint (a web app that answers every path with
// its page) or a proxy's or portal's sign-in page in between.
func notMCPAnswer(resp *http.Response) *notMCP {
	ct := resp.Header.Get("Content-Type")
	media, _, _ := mime.ParseMediaType(ct)
	// 202 and 204 acknowledge notifications and carry no message, and
	// neither does the answer to a DELETE (the end of a session).
	if resp.StatusCode != http.StatusOK || ct == "" || media == "application/json" || media == "text/event-stream" || resp.Request.Method == http.MethodDelete {
		return nil
	}
	head, _ := peek.Body(resp, 4<<10)
	what := fmt.Sprintf("a %s answer", oneline.Cut(cmp.Or(media, ct), 60))
	if media == "text/html" {
		what = "an HTML page"
		if title := htmlTitle(head); title != "" {
			what += fmt.Sprintf(" (%q)", title)
		}
	}
	return &notMCP{what: what, status: resp.Status, method: resp.Request.Method, url: resp.Request.URL.Redacted()}
}

// notJSONAnswer describes a 200 OK JSON answer to a POST whose body is not
// JSON (empty, or cut short), reading it whole and putting it back; nil
// for any other response, and for a body over max (the cap says so).
// go-sdk's words for it are "failed to decode response: unmarshaling
// jsonrpc message: unexpected EOF", under its calls.
func notJSONAnswer(resp *http.Response, max int64) *notMCP {
	media, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if resp.StatusCode != http.StatusOK || media != "application/json" || resp.Request.Method != http.MethodPost {
		return nil
	}
	body, err := peek.Body(resp, max+1)
	if err != nil || int64(len(body)) > max || json.Valid(body) {
		return nil
	}
	n := &notMCP{what: "an empty application/json body", status: resp.Status, method: resp.Request.Method, url: resp.Request.URL.Redacted()}
	if t := bytes.TrimSpace(body); len(t) > 0 {
		n.what = fmt.Sprintf("an application/json body that is not JSON (%d bytes, cut short or malformed: %q)", len(body), oneline.Cut(string(t), 80))
		n.fix = "the server, or a proxy before it, broke off or garbled its answer: its own log says why"
	}
	return n
}

// htmlTitle is the text of the <title> element in the start of a page, or
// "".
func htmlTitle(page []byte) string {
	// Byte by byte, ASCII only: Unicode's lower case (and bytes.Map's
	// mending of invalid UTF-8) may change a text's length, and the
	// offsets found in lower are page's.
	lower := make([]byte, len(page))
	for i, c := range page {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		lower[i] = c
	}
	i := bytes.Index(lower, []byte("<title"))
	if i < 0 {
		return ""
	}
	start := bytes.IndexByte(lower[i:], '>')
	if start < 0 {
		return ""
	}
	start += i + 1
	end := bytes.Index(lower[start:], []byte("</title"))
	if end < 0 {
		return ""
	}
	return oneline.Cut(html.UnescapeString(strings.TrimSpace(string(page[start:start+end]))), 80)
}

// errBodyTooLarge is returned when a response body exceeds the cap.
var errBodyTooLarge = errors.New("response body " + capWords)

// capWords say that an answer is over the message size cap (MaxMessageBytes).
const capWords = "exceeds toolgate's message size cap"

// cappedBody is a body of at most max bytes, as a stdio line or an SSE
// event may be: a longer one ends in errBodyTooLarge.
type cappedBody struct {
	rc        io.ReadCloser
	left, max int64
	over      bool // a byte came after the max-th
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.left <= 0 && !b.over {
		// max bytes were read: the body ends here (a chunked one says so
		// by a read of its own), or it is over the cap.
		var one [1]byte
		n, err := b.rc.Read(one[:])
		if n == 0 {
			return 0, err
		}
		b.over = true
	}
	if b.over {
		return 0, fmt.Errorf("%w of %d bytes", errBodyTooLarge, b.max)
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *cappedBody) Close() error { return b.rc.Close() }

// httpClient builds the client of one run of a remote backend: the
// configured headers, the OAuth access token (Options.Auth, unless a
// static Authorization header is configured), a body cap, and
// dial/TLS/response-header timeouts (no overall timeout: streams are
// long-lived; calls have their own deadlines).
func (b *backend) httpClient(r *run, tc *tls.Config, sse bool) *http.Client {
	h := http.Header{}
	for k, v := range b.cfg.Headers {
		h.Set(k, v)
	}
	base := proxyenv.Transport()
	base.ResponseHeaderTimeout = 0 // a POST answered by an event stream may take the whole call
	base.TLSHandshakeTimeout = 10 * time.Second
	base.TLSClientConfig = tc // nil: the system's trust store
	var rt http.RoundTripper = base
	a := b.auth()
	if a != nil {
		rt = a.Transport(b.cfg.Name, b.cfg.URL, base, r.loginRequired)
	}
	var host string
	if u, err := url.Parse(b.cfg.URL); err == nil {
		host = u.Hostname()
	}
	ht := &headerTransport{base: rt, headers: h, host: host, login: a != nil, maxBody: int64(b.p.opts.MaxMessageBytes), observe: r.calls.observe, sse: sse}
	if sse {
		// The legacy SSE transport's stream is read by go-sdk from its
		// connection, which can be wrapped (the event stream is a GET).
		ht.observe = nil
	} else {
		ht.exact = true
	}
	ht.handshake.Store(true)
	return &http.Client{Transport: ht}
}

// transport is the transport b speaks: its config's type, or sse for an
// "http" server that took the older HTTP+SSE transport (legacySSE).
func (b *backend) transport() string {
	if u := b.legacySSE.Load(); b.cfg.Type == config.TypeHTTP && u != nil && *u == b.cfg.URL {
		return config.TypeSSE
	}
	return b.cfg.Type
}

// auth is the Authorizer of a remote backend without a static
// Authorization header, else nil.
func (b *backend) auth() Authorizer {
	if b.p.opts.Auth == nil || b.cfg.Type == config.TypeStdio {
		return nil
	}
	for k := range b.cfg.Headers {
		if http.CanonicalHeaderKey(k) == "Authorization" {
			return nil
		}
	}
	return b.p.opts.Auth
}

// bareLogin is the command that logs in to server, without the config
// and data folder: what an API key that is not admin reads.
func bareLogin(server string) string { return "toolgate auth login " + server }

// stepUp is the step-up the server asked for that its login lacks, from
// the Authorizer (StepUpKeeper); nil for none.
func (b *backend) stepUp() *StepUp {
	c, scopes := b.login()
	if len(scopes) == 0 {
		return nil
	}
	su := &StepUp{Scopes: scopes, Login: c.full}
	if c.unrec != nil {
		su.NotRecorded = notRecorded(c.unrec.Scopes, c.unrec.Why)
	}
	return su
}

// loginExpiry is when the access token of the server's login expires,
// when it cannot be refreshed (ExpiryKeeper); nil otherwise.
func (b *backend) loginExpiry() *LoginExpiry {
	k, ok := b.auth().(ExpiryKeeper)
	if !ok {
		return nil
	}
	exp, ok := k.LoginExpiry(b.cfg.Name, b.cfg.URL)
	if !ok {
		return nil
	}
	return &LoginExpiry{Expires: exp, Login: b.loginCommand().full}
}

// forgetLogin stops the warning due before the server's login expires
// (ExpiryKeeper.Forget), once the backend is stopped for good: the
// warning, logged after a reload removed the server, told to log in to a
// server the config no longer had.
func (b *backend) forgetLogin() {
	if k, ok := b.auth().(ExpiryKeeper); ok {
		k.Forget(b.cfg.Name)
	}
}

// loginCommand is the command that logs in to the server, for its
// refusals' fixes: the Authorizer's (LoginCommander) when it names one.
func (b *backend) loginCommand() loginCmd {
	c, _ := b.login()
	return c
}

// login is loginCommand, and the scopes of the step-up the server asked
// for that its login lacks (StepUpKeeper), read together.
func (b *backend) login() (loginCmd, []string) {
	bare := bareLogin(b.cfg.Name)
	c := loginCmd{full: bare, bare: bare}
	if lc, ok := b.p.opts.Auth.(LoginCommander); ok {
		c.full = lc.LoginCommand(b.cfg.Name)
	}
	var scopes []string
	if k, ok := b.auth().(StepUpKeeper); ok {
		var u oauth.Unrecorded
		if scopes, u.Scopes, u.Why = k.StepUp(b.cfg.Name, b.cfg.URL); len(u.Scopes) > 0 {
			c.unrec = &u
		}
	}
	return c, scopes
}

// connectRemote connects over streamable HTTP or SSE. ctx is the session's
// lifetime context (cancelled on timeout while dialing).
//
// The discover probe: SSE connections are wrapped by probeTransport like
// stdio. A streamable HTTP connection cannot be wrapped (go-sdk type-asserts
// it), so the first Connect gets ProbeTimeout; if that passes with no answer
// at all, a second Connect with the legacy protocol (initialize) gets the
// rest of the connect budget, and when the server refuses it, a third
// waits for the discover answer. Reconnecting costs one HTTP round trip,
// not a process start.
func (b *backend) connectRemote(ctx context.Context, r *run, client *mcp.Client) (*mcp.ClientSession, error) {
	sess, err := b.handshakeRemote(ctx, r, client)
	if err == nil {
		if t := r.headers(); t != nil {
			t.handshake.Store(false)
			if !t.sse {
				b.legacySSE.Store(nil) // streamable HTTP took it (again)
			}
		}
	}
	return sess, err
}

// handshakeRemote is connectRemote's connection and handshake.
func (b *backend) handshakeRemote(ctx context.Context, r *run, client *mcp.Client) (*mcp.ClientSession, error) {
	u, err := url.Parse(b.cfg.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, configError{fmt.Errorf("url %q is not an http(s) URL: check url", b.cfg.URL)}
	}
	// The files of "tls" are read at each connect: a renewed CA applies at
	// the next one, a renewed client certificate at the next handshake.
	tc, err := b.cfg.TLS.Client()
	if err != nil {
		return nil, err
	}
	maxEvent := b.p.opts.MaxMessageBytes
	// An "http" server that took SSE before (legacySSE) is tried with
	// streamable HTTP first all the same, as the protocol advises: one that
	// speaks both at the URL and refused the POST once (a route not ready
	// while it started, a proxy's 404 during a deploy) stayed on SSE until
	// the gateway restarted. A server of SSE alone costs one refused POST.
	if b.cfg.Type == config.TypeSSE {
		return b.connectSSE(ctx, r, client, tc)
	}
	hc := b.httpClient(r, tc, false)
	r.http = hc
	newT := func() *mcp.StreamableClientTransport {
		return &mcp.StreamableClientTransport{Endpoint: b.cfg.URL, HTTPClient: hc, MaxEventSize: maxEvent}
	}
	pctx, cancel := context.WithTimeout(ctx, b.p.opts.ProbeTimeout)
	sess, err := client.Connect(pctx, newT(), nil)
	probeExpired := pctx.Err() != nil
	cancel()
	if err == nil || ctx.Err() != nil {
		return sess, err
	}
	if !probeExpired {
		return b.trySSE(ctx, r, client, tc, hc, err)
	}
	b.log.Info("no answer to the first handshake within the probe timeout; retrying with the legacy initialize handshake",
		keyTimeout, b.p.opts.ProbeTimeout, keyErr, maskErr(err, b.errMask))
	sess, err = client.Connect(ctx, newT(), &mcp.ClientSessionOptions{ProtocolVersion: LegacyProtocolVersion})
	if err == nil || ctx.Err() != nil || r.lostLogin() != nil {
		return sess, err
	}
	if rf := hc.Transport.(*headerTransport).refused.Load(); rf != nil && rf.whoOrWhen() {
		return nil, err // the credentials, or a rate: no other handshake gets further
	}
	if n, _ := r.notMCP(); n != nil {
		return nil, err // a page in the server's place
	}
	// The server refused the legacy initialize: it was slow to answer
	// server/discover, not legacy (one that speaks 2026-07-28 alone says
	// "Unsupported protocol version"). Once more, with the rest of the
	// budget for its discover answer, as connectProbed does over stdio and
	// SSE: such a server was down, every restart failing the same way.
	b.log.Info(msgWaitDiscover, keyErr, maskErr(err, b.errMask))
	return client.Connect(ctx, newT(), nil)
}

// connectSSE connects with the older HTTP+SSE transport.
func (b *backend) connectSSE(ctx context.Context, r *run, client *mcp.Client, tc *tls.Config) (*mcp.ClientSession, error) {
	hc := b.httpClient(r, tc, true)
	r.http = hc
	return b.connectProbed(ctx, r, client, func(patient bool) (*probeTransport, error) {
		return &probeTransport{
			inner:   scopeRefusals(&mcp.SSEClientTransport{Endpoint: b.cfg.URL, HTTPClient: hc, MaxEventSize: b.p.opts.MaxMessageBytes}),
			timeout: b.p.opts.ProbeTimeout,
			ceiling: b.connectTO() / 2,
			log:     b.log,
			late:    &b.discoverLate,
			patient: patient,
		}, nil
	})
}

// trySSE follows the protocol's advice for a server that may speak the
// older HTTP+SSE transport (2025-03-26, "Backwards compatibility"): when
// the streamable handshake's POST, made with hc, was refused with a 4xx
// status (405 from a stream that takes GET only, 404 from a server whose
// POSTs go elsewhere, 400 from go-sdk's, which wants a session ID), the
// same URL is opened as an SSE stream. Not for the statuses that say who
// may call (401, 403, 407) or when (408, 429). A server that takes it is
// remembered as one (legacySSE); otherwise the streamable handshake's
// error (err), whose fix names the URL's path and "type": "sse", stands.
func (b *backend) trySSE(ctx context.Context, r *run, client *mcp.Client, tc *tls.Config, hc *http.Client, err error) (*mcp.ClientSession, error) {
	ht := hc.Transport.(*headerTransport)
	rf := ht.refused.Load()
	// A refusal the server answered past (the 400 a 2025 server gives
	// go-sdk's server/discover before it takes initialize) says nothing
	// of the transport.
	if b.cfg.Type != config.TypeHTTP || rf == nil || rf.answersBefore != ht.answers.Load() || rf.method != http.MethodPost || rf.code < 400 || rf.code >= 500 || rf.rpc || rf.whoOrWhen() {
		return nil, err
	}
	sess, serr := b.connectSSE(ctx, r, client, tc)
	if serr != nil {
		b.log.Debug("the url is no HTTP+SSE endpoint either", keyErr, maskErr(serr, b.errMask))
		r.http = hc // the errors say what the streamable handshake met
		b.legacySSE.Store(nil)
		return nil, err
	}
	u := b.cfg.URL
	level := slog.LevelInfo
	if was := b.legacySSE.Swap(&u); was != nil && *was == u {
		level = slog.LevelDebug // said at the first connect that fell back
	}
	b.log.Log(ctx, level, "the server speaks the older HTTP+SSE transport: connected with it (\"type\": \"sse\" in its entry skips the first try)",
		"refused", rf.in(b.cfg.URL))
	return sess, nil
}

// unreachable says why a remote server could not be reached at all, for
// the failures whose fix is plain: nothing listens at the address
// (connection refused), or the host name does not resolve; nil for any
// other error. The address and the host name are kept apart from the
// gateway's words (OwnWords), err wrapped with them.
//
// When the proxy of toolgate's environment (proxyenv) stands between, the
// proxy is said, with the variable that names it for the url's scheme:
// one that refused the CONNECT (RefusedError), or that cannot be reached
// itself (Go's "proxyconnect" error), which read as the server's own
// address or host name.
func unreachable(err error, rawURL string) *OwnWords {
	u, perr := url.Parse(rawURL)
	if perr != nil {
		u = &url.URL{}
	}
	scheme := u.Scheme
	var re *proxyenv.RefusedError
	if errors.As(err, &re) {
		return &OwnWords{Before: "the proxy ", Said: quietCause{re.Proxy, err}, After: re.Tail()}
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "proxyconnect" {
		return proxyUnreachable(op.Err, proxyenv.Var(scheme), err)
	}
	var dns *net.DNSError
	if errors.As(err, &dns) && dns.IsNotFound {
		return &OwnWords{Before: "the host name ", Said: quietCause{strconv.Quote(dns.Name), err},
			After: fmt.Sprintf(" does not resolve (%s): check the url's host", dns.Err) + proxyenv.ResolveNote(u)}
	}
	if r, ok := proxyenv.Refused(err); ok {
		return &OwnWords{Before: r.Before(), Said: quietCause{r.Addr, err}, After: proxyenv.RefusedAfter}
	}
	return nil
}

// proxyUnreachable says why the proxy that variable names cannot be
// reached (dial, its dial error), err wrapped.
func proxyUnreachable(dial error, variable string, err error) *OwnWords {
	fix := proxyenv.CheckFix(variable)
	env := variable + " in toolgate's environment"
	var dns *net.DNSError
	if errors.As(dial, &dns) && dns.IsNotFound {
		return &OwnWords{Before: "the proxy's host name ", Said: quietCause{strconv.Quote(dns.Name), err},
			After: fmt.Sprintf(" (%s) does not resolve (%s): %s", env, dns.Err, fix)}
	}
	var op *net.OpError
	if errors.Is(dial, syscall.ECONNREFUSED) && errors.As(dial, &op) && op.Addr != nil {
		return &OwnWords{Before: "nothing listens at the proxy ", Said: quietCause{op.Addr.String(), err},
			After: fmt.Sprintf(" (%s; connection refused): %s", env, fix)}
	}
	return &OwnWords{Before: "the proxy (" + env + ") cannot be reached (", Said: quietCause{dial.Error(), err}, After: "): " + fix}
}

// silence says how far the handshake's requests got, for a connect
// timeout that came with no answer at all: written and unanswered (a
// server or proxy that takes connections and says nothing: stuck, or a
// firewall that swallows the request), connected and never written (a TLS
// handshake, or a proxy's CONNECT, with no answer), or no connection made.
func (b *backend) silence(t *headerTransport) string {
	via := "the url's address, which took the connection,"
	if u, err := url.Parse(b.cfg.URL); err == nil {
		if p := proxyenv.For(u); p != nil {
			via = fmt.Sprintf("the proxy %s (%s), which took the connection,", p.Host, proxyenv.Var(u.Scheme))
		}
	}
	switch {
	case t.sent.Load():
		return "the request was sent to " + via + " and nothing came back, not even a status: the server (or a proxy or firewall in between) takes connections and does not answer: check that it runs and is not stuck (its own log), and the url's port"
	case t.connected.Load():
		return "a connection was made to " + strings.TrimSuffix(via, ", which took the connection,") + ", and the request could not be sent through it (a TLS handshake, or a proxy's CONNECT, that got no answer): check the url's scheme and port"
	}
	return "no connection to the url's address was made (a firewall that drops the packets, or a host that is down): check the url's host and port"
}

// atURL is "backend "name" at URL: " and words, the URL kept apart from
// the gateway's words (OwnWords): a connect's failure, as /status shows it.
func (b *backend) atURL(words *OwnWords) *OwnWords {
	return &OwnWords{Before: fmt.Sprintf("backend %q at ", b.cfg.Name), Said: errors.New(b.cfg.URL), After: ": ", Then: words}
}
