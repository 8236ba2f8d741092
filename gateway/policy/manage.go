package policy

import (
	"cmp"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/index/catalog"
)

// Tools is a catalog's tools by ID (live.Loop, a search.Engine): the tools
// of every server, those the rules hide included.
type Tools interface {
	Tool(id string) (catalog.Tool, bool)
	IDs() []string
}

// ManagesAll reports whether c may manage every server with the management
// tools that name one (toolgate__server_status, restart_server,
// disable_server, enable_server) and the console's restart button: the
// callers that may change the config (MayChangeConfig), a local client
// over stdio or one with an admin API key. Any other caller manages only
// the servers it may see (Set.MayManage).
func (c *Caller) ManagesAll() bool { return c.MayChangeConfig() }

// Scoped reports whether c holds an API key that does not manage all: it
// learns nothing of what lies outside its key's scope (the servers, their
// profiles, the tools) nor paths on the gateway's machine
// (backend.Status.ForKey). Stdio, an admin key and the HTTP front without
// keys are not scoped.
func (c *Caller) Scoped() bool { return c != nil && c.Key != nil && !c.ManagesAll() }

// Sees reports whether c's own rules (its profile, its key's scope: the
// rules that read the caller, as MayManage judges them) let it see t,
// whatever the state of t's server.
func (s *Set) Sees(c *Caller, t catalog.Tool) bool {
	if s == nil {
		return true
	}
	c = orAnonymous(c)
	sn := s.cur.Load()
	return sn.allowed(sn.callerRules(c), c, t)
}

// SeenTools counts, by server, the tools in tools that c sees (Sees):
// what a key that is not admin is told of each server's tools (GET
// /status, the console, toolgate__list_servers), as search shows them to
// it.
func (s *Set) SeenTools(c *Caller, tools Tools) map[string]int {
	return s.Sight(c, tools).Counts()
}

// Sight is what c's own rules let it see of a catalog, server by server,
// from one pass over it: SeenTools, and MayManage of every server, for the
// reports that list them all (GET /status, the console's state,
// toolgate__list_servers). MayManage of each server read the whole
// catalog again: at 100 servers and 50,000 tools a key's GET /status took
// 0.4–0.8 s (keys.BenchmarkScopedView).
type Sight struct {
	seen   map[string]int  // tools c sees, by server
	listed map[string]bool // servers with a tool catalogued
	all    bool            // c manages every server (or no rules)
	sn     *snapshot
	c      *Caller
}

// CatalogNumberer is a Tools that numbers the catalogs it serves
// (live.Loop): CatalogGeneration changes whenever its tools do, and is 0
// while it has none settled (a cold start's first listings).
type CatalogNumberer interface {
	CatalogGeneration() uint64
}

// keptSight is a Sight made of catalog generation gen.
type keptSight struct {
	gen uint64
	v   *Sight
}

// maxSights bounds the Sights a snapshot keeps: one per caller scope (the
// keys of one profile and globs share one) and route, 200 keys at the
// largest gateway measured; past this many one is evicted for each new
// one (scopeCache).
const maxSights = 512

// Sight looks over tools once as c. When tools numbers its catalogs
// (CatalogNumberer), the Sight is kept for the next caller of the same
// scope (what the rules read of it, and whether it manages all) until the
// catalog or the rules change: a key's GET /status, which the console
// polls, looked over 50,000 tools each time (some 35 ms of CPU). Rules
// are immutable and a change of one makes a new snapshot, which starts
// with no Sight kept; a key whose scope changed has a new scope key.
func (s *Set) Sight(c *Caller, tools Tools) *Sight {
	num, ok := tools.(CatalogNumberer)
	if s == nil || !ok {
		return s.look(nil, c, tools)
	}
	gen := num.CatalogGeneration() // before the look: a catalog swapped meanwhile is newer, never older
	if gen == 0 {
		return s.look(nil, c, tools)
	}
	sn := s.cur.Load()
	key := sn.scopeKey(orAnonymous(c)) + strconv.FormatBool(c.ManagesAll())
	if k, ok := sn.sights.load(key); ok && k.gen == gen {
		return k.v
	}
	v := s.look(sn, c, tools)
	sn.sights.put(key, &keptSight{gen, v})
	return v
}

// look makes the Sight of tools as c under the rules of sn (nil: the
// Set's current ones).
func (s *Set) look(sn *snapshot, c *Caller, tools Tools) *Sight {
	v := &Sight{seen: map[string]int{}, listed: map[string]bool{}, all: s == nil || c.ManagesAll(), c: orAnonymous(c)}
	var rules []Rule
	if s != nil {
		v.sn = sn
		if v.sn == nil {
			v.sn = s.cur.Load()
		}
		rules = v.sn.callerRules(v.c)
	}
	if tools == nil {
		return v
	}
	for _, id := range tools.IDs() {
		t, ok := tools.Tool(id)
		if !ok {
			continue
		}
		v.listed[t.Server] = true
		if v.sn == nil || v.sn.allowed(rules, v.c, t) {
			v.seen[t.Server]++
		}
	}
	return v
}

// Counts are the tools c sees, by server (the Sight's own map: not to be
// changed).
func (v *Sight) Counts() map[string]int { return v.seen }

// Tools is how many of server's tools c sees.
func (v *Sight) Tools(server string) int { return v.seen[server] }

// MayManage is Set.MayManage of server, from the pass Sight made.
func (v *Sight) MayManage(server string) bool {
	if v.all || v.seen[server] > 0 {
		return true
	}
	return !v.listed[server] && v.sn.callerCheck(v.c, AnyTool(server)) == ""
}

// MayManage reports whether c may inspect, restart, disable or enable
// server: a caller that manages all (ManagesAll), or one whose own rules
// (its profile, its key's scope: the rules that read the caller) let it
// see one of the server's tools in tools, whatever the server's state (a
// disabled server's tools stay in the catalog, hidden from all). A server
// with no tool catalogued (one that never listed its tools, or none by
// that name) is judged by a tool of any name, "server__*": a profile or key
// that names the server, or whose globs cover all its tools, lets it
// through; narrower globs do not.
//
// When c may not, why is the refusal to give it, in the words of the rule
// that denies "server__*" (the key's scope says the same whatever the
// server), or "" when that rule lets it through: then the caller is to be
// answered as for a server that does not exist. Either way the answer
// for a server that exists outside c's view is the answer for one that
// does not, so a caller learns nothing of the servers it may not manage.
func (s *Set) MayManage(c *Caller, tools Tools, server string) (ok bool, why string) {
	if s == nil || c.ManagesAll() {
		return true, ""
	}
	c = orAnonymous(c)
	sn := s.cur.Load()
	rules := sn.callerRules(c)
	found := false
	if tools != nil {
		prefix := server + catalog.Sep
		for _, id := range tools.IDs() {
			if !strings.HasPrefix(id, prefix) {
				continue
			}
			t, ok := tools.Tool(id)
			if !ok || t.Server != server {
				continue
			}
			found = true
			if sn.allowed(rules, c, t) {
				return true, ""
			}
		}
	}
	why = sn.callerCheck(c, AnyTool(server))
	return !found && why == "", why
}

// AnyTool is the tool that stands for a server with no tool catalogued,
// "server__*", when a caller's own rules judge it (MayManage, Sees): a
// profile or key that names the server, or whose globs cover all its
// tools, sees it; narrower globs do not.
func AnyTool(server string) catalog.Tool { return catalog.Tool{Server: server, Name: "*"} }

// StatusTool is the management tool that says why a server is down or
// still connecting: toolgate__server_status, with the hint it declares
// (package mgmt's test holds the two the same), so that a readOnly
// profile that lists toolgate is sent there.
var StatusTool = catalog.Tool{Server: config.BuiltinServer, Name: "server_status", Annotations: json.RawMessage(`{"readOnlyHint":true}`)}

// Seer is what StatusHint needs of the rules: Set.Sees.
type Seer interface {
	Sees(c *Caller, t catalog.Tool) bool
}

// MayAskStatus reports whether c's own rules (its profile, its key's
// scope) let it run toolgate__server_status; rules nil: no rule limits c.
// The one rule for the answers that point there (StatusHint).
func MayAskStatus(rules Seer, c *Caller) bool { return rules == nil || rules.Sees(c, StatusTool) }

// StatusHint is where an answer that names a server c may see, down or
// still connecting, sends c to learn why (server "" for "NAME", several
// servers), as a sentence without its full stop: toolgate__server_status
// when c may run it (MayAskStatus), else the gateway's operator, whose
// `toolgate status` shows each server's state and last error. A key or
// profile without the management tools was told to run
// toolgate__server_status, which it cannot even find.
func StatusHint(rules Seer, c *Caller, server string) string {
	if MayAskStatus(rules, c) {
		return StatusTool.ID() + " " + cmp.Or(server, "NAME") + " says more"
	}
	return "Ask the gateway's operator: `toolgate status` shows why"
}

// callerRules are the rules that read c (their Scope of c is not "").
func (sn *snapshot) callerRules(c *Caller) []Rule {
	var out []Rule
	for _, r := range sn.rules {
		if r.Scope(c) != "" {
			out = append(out, r)
		}
	}
	return out
}

// callerCheck is the first reason a rule that reads c (its Scope of c is
// not "") gives against t, or "": the rules of who c is, not of the
// state of the servers.
func (sn *snapshot) callerCheck(c *Caller, t catalog.Tool) string {
	for _, r := range sn.rules {
		if r.Scope(c) == "" {
			continue
		}
		if why := r.Check(c, t); why != "" {
			return why
		}
	}
	return ""
}
