package policy

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/internal/oneline"
)

// Names of the rules of this package.
const (
	RuleConfig   = "config"
	RuleDisabled = "disabled"
	RuleProfile  = "profile"
)

// Configured is the rule of the config in effect: a tool is shown only
// when its server is configured (or built in). The index may still hold
// the tools of a server a reload removed until the re-index that drops
// them; this rule hides them from the moment the reload is applied, before
// the server is stopped.
type Configured struct {
	servers map[string]bool
	removed map[string]bool // left the config and did not come back
}

var _ Rule = (*Configured)(nil)

// NewConfigured returns the rule for the servers configured.
func NewConfigured(servers []string) *Configured {
	return &Configured{servers: set(servers), removed: map[string]bool{}}
}

// With returns the rule after a reload to servers: those that leave are
// remembered as removed (their tools' denial says so), those added (back)
// are shown.
func (r *Configured) With(servers []string) *Configured {
	next := &Configured{servers: set(servers), removed: maps.Clone(r.removed)}
	for name := range r.servers {
		if !next.servers[name] {
			next.removed[name] = true
		}
	}
	for name := range next.servers {
		delete(next.removed, name)
	}
	return next
}

// Has reports whether server is configured.
func (r *Configured) Has(server string) bool { return r.servers[server] }

func (r *Configured) Name() string         { return RuleConfig }
func (r *Configured) Scope(*Caller) string { return "" }

func (r *Configured) Check(_ *Caller, t catalog.Tool) string {
	switch {
	case r.servers[t.Server]:
		return ""
	case r.removed[t.Server]:
		return fmt.Sprintf("server %q was removed from the config", t.Server)
	}
	return fmt.Sprintf("there is no server named %q", oneline.Echo(t.Server)) // the caller's words
}

// Disabled is the rule of the servers disabled at run time
// (toolgate__disable_server, `toolgate servers disable`): their tools are
// hidden from everyone until they are enabled again.
type Disabled struct {
	servers map[string]bool
}

var _ Rule = (*Disabled)(nil)

// NewDisabled returns the rule for the servers disabled.
func NewDisabled(servers []string) *Disabled { return &Disabled{servers: set(servers)} }

// Has reports whether server is disabled.
func (r *Disabled) Has(server string) bool { return r.servers[server] }

// Servers lists the disabled servers, sorted.
func (r *Disabled) Servers() []string { return slices.Sorted(maps.Keys(r.servers)) }

func (r *Disabled) Name() string         { return RuleDisabled }
func (r *Disabled) Scope(*Caller) string { return "" }

func (r *Disabled) Check(_ *Caller, t catalog.Tool) string {
	if !r.servers[t.Server] {
		return ""
	}
	return fmt.Sprintf("server %q is disabled; toolgate__enable_server (or `toolgate servers enable %s`) turns it back on", t.Server, t.Server)
}

// Profiles is the rule of toolgate.profiles: a caller with a profile in
// effect sees only the profile's tools.
type Profiles struct {
	byName map[string]config.Profile
	// notReadOnly are the tools, by server and name, that their server's
	// latest listing does not declare readOnlyHint: true (Set.ToolsListed).
	// A readOnly profile hides them from that listing on, although the
	// catalog the gateway looks tools up in keeps the annotations it
	// indexed until the re-index: a tool whose hint went from true to
	// false leaves the profile at once. Never changed once in a rule.
	notReadOnly map[string]map[string]bool
}

var _ Rule = (*Profiles)(nil)

// NewProfiles returns the rule for the profiles of a config.
func NewProfiles(profiles map[string]config.Profile) *Profiles {
	return &Profiles{byName: maps.Clone(profiles)}
}

// Names lists the profiles, sorted.
func (r *Profiles) Names() []string { return slices.Sorted(maps.Keys(r.byName)) }

// Get returns the profile named name.
func (r *Profiles) Get(name string) (config.Profile, bool) {
	p, ok := r.byName[name]
	return p, ok
}

// Shows reports whether profile p shows t (the profile's own test,
// without the other rules).
func (r *Profiles) Shows(p config.Profile, t catalog.Tool) bool {
	m, _ := r.miss(p, t)
	return m == shown
}

// ProfileTools are the management tools a session keeps under a profile it
// activated itself, so that it can switch again (a profile chosen by the
// route or serve --profile shows them only if it includes them).
var ProfileTools = []string{"list_profiles", "activate_profile"}

func (r *Profiles) Name() string { return RuleProfile }

func (r *Profiles) Scope(c *Caller) string {
	if c.ProfileSwitchable() {
		return c.ProfileName() + "\x00switchable"
	}
	return c.ProfileName()
}

var _ Allower = (*Profiles)(nil)

// Allows is Check(c, t) == "" without building its words.
func (r *Profiles) Allows(c *Caller, t catalog.Tool) bool {
	name, ok := r.profileFor(c, t)
	if name == "" || ok {
		return true
	}
	p, found := r.byName[name]
	if !found {
		return false
	}
	m, _ := r.miss(p, t)
	return m == shown
}

// profileFor is the profile in effect for c ("" for none) and whether t
// is shown whatever it says (a profile switcher's own tools).
func (r *Profiles) profileFor(c *Caller, t catalog.Tool) (string, bool) {
	name := c.ProfileName()
	if name == "" {
		return "", true
	}
	return name, t.Server == config.BuiltinServer && slices.Contains(ProfileTools, t.Name) && c.ProfileSwitchable()
}

func (r *Profiles) Check(c *Caller, t catalog.Tool) string {
	name, shownAnyway := r.profileFor(c, t)
	if name == "" || shownAnyway {
		return ""
	}
	p, ok := r.byName[name]
	if !ok {
		return fmt.Sprintf("profile %q is no longer in the config (toolgate.profiles), so it shows no tool", name)
	}
	return r.check(name, p, t)
}

// profileMiss is which of a profile's tests a tool fails (shown: none).
type profileMiss int

const (
	shown profileMiss = iota
	missServers
	missBuiltin
	missAllow
	missDeny
	missReadOnly
)

// miss is the first test of profile p that t fails, with the deny glob
// that matched (missDeny): check's words without building them (Shows, a
// search filter, SeenTools ask it of every tool of the catalog).
func (r *Profiles) miss(p config.Profile, t catalog.Tool) (profileMiss, string) {
	server := t.Server
	if p.Servers != nil && !slices.Contains(p.Servers, server) {
		return missServers, ""
	}
	// "servers" left out is every server of the config, not the built-in
	// one: a profile meant to narrow what a client sees (a read-only
	// reviewer's) gave it the management tools its globs matched.
	if p.Servers == nil && server == config.BuiltinServer {
		return missBuiltin, ""
	}
	if p.Tools.Allow != nil || p.Tools.Deny != nil {
		id := t.ID()
		if p.Tools.Allow != nil && !slices.ContainsFunc(p.Tools.Allow, func(g string) bool { return catalog.MatchID(g, id) }) {
			return missAllow, ""
		}
		for _, g := range p.Tools.Deny {
			if catalog.MatchID(g, id) {
				return missDeny, g
			}
		}
	}
	if p.ReadOnly && (!t.ReadOnly() || r.notReadOnly[server][t.Name]) {
		return missReadOnly, ""
	}
	return shown, ""
}

// check is why profile p (named name) does not show t, or "".
func (r *Profiles) check(name string, p config.Profile, t catalog.Tool) string {
	m, glob := r.miss(p, t)
	id := t.ID()
	switch m {
	case missServers:
		return fmt.Sprintf("%s is outside profile %q: the profile shows only the servers %s", id, name, strings.Join(p.Servers, ", "))
	case missBuiltin:
		return fmt.Sprintf("%s is outside profile %q: the management tools (server %q) are shown only by a profile that lists %q in its servers", id, name, config.BuiltinServer, config.BuiltinServer)
	case missAllow:
		return fmt.Sprintf("%s is outside profile %q: it matches none of the profile's tools.allow globs (%s)", id, name, strings.Join(p.Tools.Allow, ", "))
	case missDeny:
		return fmt.Sprintf("%s is outside profile %q: the profile's tools.deny glob %q matches it", id, name, glob)
	case missReadOnly:
		return fmt.Sprintf("%s is outside profile %q: the profile shows only tools that declare readOnlyHint: true, and this one does not", id, name)
	}
	return ""
}

// withConfig is r with the profiles of a reloaded config, what the
// servers listed kept.
func (r *Profiles) withConfig(profiles map[string]config.Profile) *Profiles {
	next := NewProfiles(profiles)
	next.notReadOnly = r.notReadOnly
	return next
}

// withListing is r after server listed tools, of which the names
// notReadOnly do not declare readOnlyHint: true, and whether that changed
// anything.
func (r *Profiles) withListing(server string, notReadOnly []string) (*Profiles, bool) {
	var names map[string]bool
	if len(notReadOnly) > 0 {
		names = set(notReadOnly)
	}
	if maps.Equal(names, r.notReadOnly[server]) {
		return r, false
	}
	next := &Profiles{byName: r.byName, notReadOnly: maps.Clone(r.notReadOnly)}
	if next.notReadOnly == nil {
		next.notReadOnly = map[string]map[string]bool{}
	}
	if names == nil {
		delete(next.notReadOnly, server)
	} else {
		next.notReadOnly[server] = names
	}
	return next, true
}

func set(names []string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// Profiles returns the set's profile rule (an empty one when it has none).
func (s *Set) Profiles() *Profiles {
	if r, ok := s.Rule(RuleProfile).(*Profiles); ok {
		return r
	}
	return NewProfiles(nil)
}

// PutProfiles puts the rule of profiles (a config loaded or reloaded),
// keeping what the servers listed (ToolsListed).
func (s *Set) PutProfiles(profiles map[string]config.Profile) {
	s.update(RuleProfile, func(old Rule) Rule {
		if p, ok := old.(*Profiles); ok {
			return p.withConfig(profiles)
		}
		return NewProfiles(profiles)
	})
}

// ToolsListed records a listing of server's tools (its first listing,
// tools/list_changed, a restart) before the re-index that brings it to the
// catalog: notReadOnly names the tools of the listing that do not declare
// readOnlyHint: true, which leave the readOnly profiles at once. The rules
// change only when those names do.
func (s *Set) ToolsListed(server string, notReadOnly []string) {
	s.update(RuleProfile, func(old Rule) Rule {
		p, ok := old.(*Profiles)
		if !ok {
			p = NewProfiles(nil)
		}
		if next, changed := p.withListing(server, notReadOnly); changed {
			return next
		}
		return nil
	})
}

// HasProfile reports whether a profile named name is in effect.
func (s *Set) HasProfile(name string) bool {
	_, ok := s.Profiles().Get(name)
	return ok
}

// Disabled returns the set's disabled rule (an empty one when it has none).
func (s *Set) Disabled() *Disabled {
	if r, ok := s.Rule(RuleDisabled).(*Disabled); ok {
		return r
	}
	return NewDisabled(nil)
}

// Configured returns the set's config rule, or nil.
func (s *Set) Configured() *Configured {
	r, _ := s.Rule(RuleConfig).(*Configured)
	return r
}
