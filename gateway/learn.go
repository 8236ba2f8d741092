package gateway

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/gateway/policy"
	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/search"
)

// Learner records that a search led to a call: the query of a recent
// search_tools in the session, and the tool (as the catalog has it) that
// the session then ran with execute_tool. The learned-pairs store (package
// learn) implements it. Record must not block for long: it runs on the
// execute_tool path.
type Learner interface {
	Record(query string, tool catalog.Tool)
}

// DefaultLearnFromKeys is Options.LearnFromKeys' default: every caller
// with a key teaches.
const DefaultLearnFromKeys = "all"

// teaches says whether the caller of ctx teaches the Learner
// (Options.LearnFromKeys): one without an API key always does; one with a
// key, as the option says. Where keys belong to people who do not trust
// each other, one key's calls would shape every other's answers.
func (g *Gateway) teaches(ctx context.Context) bool {
	c := policy.CallerFrom(ctx)
	if c == nil || c.Key == nil {
		return true
	}
	switch cmp.Or(g.opts.LearnFromKeys, DefaultLearnFromKeys) {
	case "admin":
		return c.Key.Admin
	case "none":
		return false
	}
	return true
}

// Limits of what the gateway remembers of each session's searches.
const (
	// recentSearches per session are matched against its calls.
	recentSearches = 8
	// recentFor is how long a search counts as recent.
	recentFor = 10 * time.Minute
	// maxSessions bounds the sessions remembered (the least recently
	// active is forgotten first).
	maxSessions = 1024
)

// recent remembers each session's last searches: the query and the tools
// it returned. It is the only per-session state of the gateway, and only
// exists when a Learner is set.
type recent struct {
	mu       sync.Mutex
	now      func() time.Time
	sessions map[string]*sessionSearches
}

type sessionSearches struct {
	last     time.Time
	searches []pastSearch // oldest first
}

type pastSearch struct {
	at    time.Time
	query string
	tools []string // IDs returned, not yet run
}

func newRecent(now func() time.Time) *recent {
	if now == nil {
		now = time.Now
	}
	return &recent{now: now, sessions: map[string]*sessionSearches{}}
}

// sessionKey names the client session of req: its MCP session ID; over
// the stateless HTTP front, the Mcp-Session-Id the client sends of itself
// (`toolgate connect` sends one for its client; the front issues none),
// scoped by the caller's API key; else (stdio) the session itself. A
// stateless HTTP client that sends none gets a new session per request, so
// its calls are never matched to its searches: nothing is recorded for it.
func sessionKey(ctx context.Context, req mcp.Request) string {
	ss, _ := req.GetSession().(*mcp.ServerSession)
	if ss != nil && ss.ID() != "" {
		return "id:" + ss.ID()
	}
	if ex := req.GetExtra(); ex != nil && ex.Header != nil {
		if id := ex.Header.Get("Mcp-Session-Id"); id != "" {
			key := ""
			if c := policy.CallerFrom(ctx); c != nil && c.Key != nil {
				key = c.Key.Name
			}
			return "client:" + key + "\x00" + id
		}
		// Over HTTP without one, each request is a session of its own,
		// whose pointer a later request's may reuse once it is collected:
		// keyed by it, a call could be matched to another client's search.
		return ""
	}
	if ss == nil {
		return ""
	}
	return "ptr:" + ptrString(ss)
}

// searched remembers that session key searched query and got tools. The
// key "" names no session (sessionKey: an HTTP request without an
// Mcp-Session-Id), so nothing is remembered under it: every such client
// would share it, and one's call be matched to another's search.
func (r *recent) searched(key, query string, tools []string) {
	if len(tools) == 0 || key == "" {
		return
	}
	// What the ranker reads of it, which holds what the learned-pairs
	// store keeps (its first 500 bytes, whitespace collapsed): the query
	// as sent may be megabytes, and 1,024 sessions × 8 of them were
	// remembered whole.
	query = strings.Join(strings.Fields(query), " ")
	if len(query) > search.MaxQueryBytes {
		// A copy: the cut alone would hold the whole query's memory.
		query = strings.Clone(strings.ToValidUTF8(query[:search.MaxQueryBytes], ""))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	s := r.sessions[key]
	if s == nil {
		if len(r.sessions) >= maxSessions {
			r.evictOldest()
		}
		s = &sessionSearches{}
		r.sessions[key] = s
	}
	s.last = now
	s.searches = append(s.searches, pastSearch{at: now, query: query, tools: slices.Clone(tools)})
	if len(s.searches) > recentSearches {
		s.searches = s.searches[len(s.searches)-recentSearches:]
	}
}

// ran returns the query of the latest recent search of session key that
// returned tool, and forgets that it did (a second call of the tool after
// the same search is not a second pair); "" when none did.
func (r *recent) ran(key, tool string) string {
	if key == "" {
		return ""
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.sessions[key]
	if s == nil {
		return ""
	}
	now := r.now()
	s.last = now
	for i := len(s.searches) - 1; i >= 0; i-- {
		p := &s.searches[i]
		if now.Sub(p.at) > recentFor {
			break
		}
		if j := slices.Index(p.tools, tool); j >= 0 {
			p.tools = slices.Delete(p.tools, j, j+1)
			return p.query
		}
	}
	return ""
}

func (r *recent) evictOldest() {
	var oldest string
	var at time.Time
	for k, s := range r.sessions {
		if oldest == "" || s.last.Before(at) {
			oldest, at = k, s.last
		}
	}
	delete(r.sessions, oldest)
}

func ptrString(p any) string { return fmt.Sprintf("%p", p) }
