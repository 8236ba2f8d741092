// Package policy owns what each caller of the gateway may see and run. It
// sits between the gateway and everything the gateway returns or runs:
//
//   - the caller's identity, carried in each request's context (Caller:
//     the transport, the session when there is one, the profile in effect,
//     and the API key the request authenticated with);
//   - the rules that hide tools from a caller (Rule): the config in effect
//     (servers removed by a reload), the servers disabled at run time, the
//     caller's profile, and whatever joins later (API key scopes, the
//     quarantine of changed tool definitions), each a value put into a Set;
//   - one decision (Set.Decide) that search_tools and execute_tool both go
//     through: search_tools as a search filter built from it (Set.Filter:
//     the best of the tools the caller may run, never a tool it may not),
//     execute_tool per call, with a reason that names the profile, scope or
//     state that denies it.
//
// Rules are immutable: a change of state (a reload, a server disabled, a
// key revoked) puts a new rule in the Set, which swaps its snapshot
// atomically, so a search or a call sees one consistent set of rules and
// never waits for a change.
package policy

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/search"
)

// Transports a Caller can come over.
const (
	TransportStdio = "stdio"
	TransportHTTP  = "http"
)

// Caller is who a request comes from. It is immutable once in a context;
// what a session may change (its profile) lives in its Session.
type Caller struct {
	// Transport is TransportStdio or TransportHTTP.
	Transport string
	// Profile is the profile chosen for the caller by where it connected:
	// the HTTP route /profiles/NAME/mcp ("" = none). Over stdio the
	// Session holds the profile instead (serve --profile, then
	// toolgate__activate_profile).
	Profile string
	// Session is the caller's session when the transport has one: stdio
	// (one client per process). nil over streamable HTTP, which toolgate
	// serves stateless (protocol 2026-07-28 has no sessions): such a
	// caller cannot change its profile for later requests.
	Session *Session
	// Key is the API key the request authenticated with; nil without one.
	Key *Key
	// Remote is the HTTP client's address (for the audit log); "" over
	// stdio. No rule reads it.
	Remote string
	// Origin is the gateway as the HTTP client reached it
	// ("https://gw.example:8931"): the Host it asked for, else the
	// listener's address, https under TLS; "" over stdio. Answers that
	// name another of the gateway's endpoints use it. No rule reads it.
	Origin string
	// Route is the HTTP route the caller came through ("POST /mcp",
	// "POST /profiles/kg/mcp"), for the audit log; "" over stdio. No rule
	// reads it.
	Route string
}

// Key is an API key as the policy sees it: its name, whether it is an
// admin key, and the globs over server__tool IDs it is scoped to.
type Key struct {
	Name  string
	Admin bool
	// Profile limits the key to a profile's tools ("" = none), whatever
	// profile the caller has in effect besides.
	Profile string
	// Allow and Deny scope the key: nil Allow = every tool.
	Allow, Deny []string
}

// ProfileSwitchable reports whether c may change its profile itself: it
// has a session whose profile the operator did not fix.
func (c *Caller) ProfileSwitchable() bool {
	return c != nil && c.Session != nil && !c.Session.Fixed()
}

// ProfileName is the profile in effect for c: its session's, else the
// one its route chose; "" for none (every enabled server).
func (c *Caller) ProfileName() string {
	if c == nil {
		return ""
	}
	if c.Session != nil {
		return c.Session.Profile()
	}
	return c.Profile
}

// Admin reports whether c authenticated with an admin key.
func (c *Caller) Admin() bool { return c != nil && c.Key != nil && c.Key.Admin }

// MayChangeConfig reports whether c may have the gateway write its config
// file (toolgate__add_server, toolgate__remove_server), given that the
// config allows it at all: a local client over stdio, or a caller with an
// admin key. A remote caller without one could otherwise make the gateway
// start any program.
func (c *Caller) MayChangeConfig() bool {
	return c != nil && (c.Transport == TransportStdio || c.Admin())
}

// String describes c for logs and messages ("stdio", "http profile kg").
func (c *Caller) String() string {
	if c == nil {
		return "unknown caller"
	}
	parts := []string{c.Transport}
	if p := c.ProfileName(); p != "" {
		parts = append(parts, "profile "+p)
	}
	if c.Key != nil {
		parts = append(parts, "key "+c.Key.Name)
	}
	return strings.Join(parts, " ")
}

// Session is the state one client session keeps across its requests.
type Session struct {
	fixed   string // the profile serve --profile chose: it cannot be changed
	profile atomic.Pointer[string]
}

// NewSession returns a session whose profile is profile; fixed means it was
// chosen by the operator (serve --profile) and Activate may not change it.
func NewSession(profile string, fixed bool) *Session {
	s := &Session{}
	if fixed {
		s.fixed = profile
	}
	s.profile.Store(&profile)
	return s
}

// Profile is the profile the session has active ("" = none).
func (s *Session) Profile() string { return *s.profile.Load() }

// Fixed reports whether the operator chose the session's profile (serve
// --profile): the session cannot change it.
func (s *Session) Fixed() bool { return s.fixed != "" }

// ErrDenied is wrapped by the error of a call the caller may not make,
// whoever refuses it: the gateway on a Set's decision, or a Caller that
// decides itself (the management tools refuse config changes). It is the
// gateway's ErrDenied: such a call counts and is audited as denied.
var ErrDenied = errors.New("not allowed")

// ErrProfileFixed is returned by Activate on a session whose profile the
// operator chose.
var ErrProfileFixed = errors.New("the profile was chosen with serve --profile and cannot be changed from the client")

// Activate makes name the session's profile ("" = none). It does not check
// that the profile exists: the caller does (see Set.Profiles).
func (s *Session) Activate(name string) error {
	if s.fixed != "" && name != s.fixed {
		return fmt.Errorf("%w (profile %q)", ErrProfileFixed, s.fixed)
	}
	s.profile.Store(&name)
	return nil
}

type callerKey struct{}

// WithCaller returns ctx carrying c.
func WithCaller(ctx context.Context, c *Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// CallerFrom returns the caller ctx carries, or nil.
func CallerFrom(ctx context.Context) *Caller {
	c, _ := ctx.Value(callerKey{}).(*Caller)
	return c
}

// Rule is one reason a tool may be hidden from a caller. A Rule is
// immutable: a change of what it knows is a new Rule put into the Set.
type Rule interface {
	// Name identifies the rule in a Set (Put replaces the rule of the same
	// name) and in decisions: "config", "disabled", "profile", "key",
	// "quarantine".
	Name() string
	// Scope is what of c the rule reads, as a string: callers with equal
	// scopes are let through and refused the same tools by Check (the
	// words of a refusal may name the caller: its key), so search filters
	// and Sights are kept per scope. A rule that does not look at the
	// caller returns "".
	Scope(c *Caller) string
	// Check returns "" when the rule lets c see and run t, otherwise why
	// not, in words a model can act on (what denies it and what would
	// allow it). It must be safe for concurrent use, and fast: search
	// filters call it once per tool of the catalog and scope.
	Check(c *Caller, t catalog.Tool) string
}

// Allower is a Rule's optional yes or no: Allows(c, t) is Check(c, t) ==
// "" without the words of a refusal, which a search filter, SeenTools and
// MayManage throw away. Built for every tool a key or profile leaves out,
// they made a key's first search at 50,000 tools cost 40–80 ms of CPU and
// 200,000–500,000 allocations (keys.BenchmarkScopedView).
type Allower interface {
	Allows(c *Caller, t catalog.Tool) bool
}

// allows is r's yes or no for c and t: Allower's when r has one.
func allows(r Rule, c *Caller, t catalog.Tool) bool {
	if a, ok := r.(Allower); ok {
		return a.Allows(c, t)
	}
	return r.Check(c, t) == ""
}

// Decision is the Set's answer for one caller and tool.
type Decision struct {
	Allowed bool
	// Rule names the rule that denied the tool ("" when allowed).
	Rule string
	// Reason says why, in words for the caller ("" when allowed).
	Reason string
}

// Set holds the rules in effect. Its snapshot of rules is swapped whole by
// Put and Remove, so readers never lock.
type Set struct {
	mu  sync.Mutex // serializes changes
	cur atomic.Pointer[snapshot]
	gen atomic.Uint64
}

// snapshot is the rules at one moment, with the search filters made for
// them, by caller scope.
type snapshot struct {
	rules   []Rule
	filters scopeCache[*search.Filter]
	sights  scopeCache[*keptSight]
	reaches scopeCache[*reached]
}

func newSnapshot(rules []Rule) *snapshot {
	sn := &snapshot{rules: rules}
	sn.filters.max, sn.sights.max, sn.reaches.max = maxFilters, maxSights, maxReaches
	return sn
}

// maxFilters bounds the search filters a snapshot keeps: one per caller
// scope (keys with the same profile and globs share one, whatever their
// names) and route (/mcp, each /profiles/NAME/mcp). 200 keys of distinct
// scopes on /mcp and two profiles' routes are 600. A filter evaluated
// over an index of 50,000 tools and 100 servers holds its row bitmap (6.1
// KiB) and its rows per server: 7.1–10.3 KiB in all
// (keys.BenchmarkFilterMemory), so 1024 take 7–11 MiB at that size. In
// hybrid mode a filter adds, on first use, the vector sums of the
// servers it keeps part of (3 KiB each): a scope that cuts into few
// servers, as keys' and profiles' globs do, adds a few KiB.
const maxFilters = 1024

// NewSet returns a set of rules, checked in the order given.
func NewSet(rules ...Rule) *Set {
	s := &Set{}
	s.cur.Store(newSnapshot(rules))
	return s
}

// Put adds r, or replaces the rule of the same name in its place (rules
// are checked in the order they were first put; the first that denies a
// tool gives the reason).
func (s *Set) Put(r Rule) {
	s.update(r.Name(), func(Rule) Rule { return r })
}

// update replaces the rule named name (nil when there is none) with
// next(it), atomically with the other changes: a rule derived from the
// one in effect. A nil next leaves the rules as they are.
func (s *Set) update(name string, next func(Rule) Rule) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.cur.Load().rules
	var cur Rule
	at := len(old)
	for i, o := range old {
		if o.Name() == name {
			cur, at = o, i
		}
	}
	r := next(cur)
	if r == nil {
		return
	}
	rules := slices.Clone(old)
	if at == len(old) {
		rules = append(rules, r)
	} else {
		rules[at] = r
	}
	s.store(rules)
}

// Remove drops the rule named name, if any.
func (s *Set) Remove(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.cur.Load().rules
	next := make([]Rule, 0, len(old))
	for _, o := range old {
		if o.Name() != name {
			next = append(next, o)
		}
	}
	s.store(next)
}

func (s *Set) store(rules []Rule) {
	s.cur.Store(newSnapshot(rules))
	s.gen.Add(1)
}

// Rule returns the rule named name, or nil.
func (s *Set) Rule(name string) Rule {
	for _, r := range s.cur.Load().rules {
		if r.Name() == name {
			return r
		}
	}
	return nil
}

// Generation counts the changes of the rules (each Put and Remove): a
// client-facing list that depends on them (e.g. the servers a caller can
// see) is stale when it moved.
func (s *Set) Generation() uint64 { return s.gen.Load() }

// Decide says whether c may see and run t. A nil Set allows everything;
// a nil Caller is one without profile, session or key (rules never see
// nil).
func (s *Set) Decide(c *Caller, t catalog.Tool) Decision {
	if s == nil {
		return Decision{Allowed: true}
	}
	return s.cur.Load().decide(orAnonymous(c), t)
}

// Allowed is Decide's Allowed without its reason: what the search filter
// keeps, and what the lists of the tools a caller sees ask of each tool.
func (s *Set) Allowed(c *Caller, t catalog.Tool) bool {
	if s == nil {
		return true
	}
	sn := s.cur.Load()
	return sn.allowed(sn.rules, orAnonymous(c), t)
}

var anonymous = &Caller{}

func orAnonymous(c *Caller) *Caller {
	if c == nil {
		return anonymous
	}
	return c
}

// allowed is whether each of rules lets c see and run t (decide's
// Allowed, without the reason).
func (*snapshot) allowed(rules []Rule, c *Caller, t catalog.Tool) bool {
	for _, r := range rules {
		if !allows(r, c, t) {
			return false
		}
	}
	return true
}

func (sn *snapshot) decide(c *Caller, t catalog.Tool) Decision {
	for _, r := range sn.rules {
		if why := r.Check(c, t); why != "" {
			return Decision{Rule: r.Name(), Reason: why}
		}
	}
	return Decision{Allowed: true}
}

// Filter is the search filter for c: the tools Decide allows it, made once
// per caller scope and set of rules (and evaluated by the index once per
// catalog). A nil Set gives a nil filter (no restriction).
func (s *Set) Filter(c *Caller) *search.Filter {
	if s == nil {
		return nil
	}
	c = orAnonymous(c)
	sn := s.cur.Load()
	key := sn.scopeKey(c)
	if f, ok := sn.filters.load(key); ok {
		return f
	}
	return sn.filters.add(key, search.NewFilter(func(t catalog.Tool) bool { return sn.allowed(sn.rules, c, t) }))
}

// scopeKey is what the rules read of c (each Rule's Scope): callers with
// equal keys get equal answers.
func (sn *snapshot) scopeKey(c *Caller) string {
	var key strings.Builder
	for _, r := range sn.rules {
		key.WriteString(r.Scope(c))
		key.WriteByte(0)
	}
	return key.String()
}
