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

// Shows reports whether profile p shows the tool id of server (the
// profile's own test, without the other rules).
func Shows(p config.Profile, server, id string) bool {
	return profileCheck("", p, server, id) == ""
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

func (r *Profiles) Check(c *Caller, t catalog.Tool) string {
	name := c.ProfileName()
	if name == "" {
		return ""
	}
	if t.Server == config.BuiltinServer && slices.Contains(ProfileTools, t.Name) && c.ProfileSwitchable() {
		return ""
	}
	p, ok := r.byName[name]
	if !ok {
		return fmt.Sprintf("profile %q is no longer in the config (toolgate.profiles), so it shows no tool", name)
	}
	return profileCheck(name, p, t.Server, t.ID())
}

// profileCheck is why profile p (named name) does not show the tool id of
// server, or "".
func profileCheck(name string, p config.Profile, server, id string) string {
	if p.Servers != nil && !slices.Contains(p.Servers, server) {
		return fmt.Sprintf("%s is outside profile %q: the profile shows only the servers %s", id, name, strings.Join(p.Servers, ", "))
	}
	// "servers" left out is every server of the config, not the built-in
	// one: a profile meant to narrow what a client sees (a read-only
	// reviewer's) gave it the management tools its globs matched.
	if p.Servers == nil && server == config.BuiltinServer {
		return fmt.Sprintf("%s is outside profile %q: the management tools (server %q) are shown only by a profile that lists %q in its servers", id, name, config.BuiltinServer, config.BuiltinServer)
	}
	if p.Tools.Allow != nil && !slices.ContainsFunc(p.Tools.Allow, func(g string) bool { return catalog.MatchID(g, id) }) {
		return fmt.Sprintf("%s is outside profile %q: it matches none of the profile's tools.allow globs (%s)", id, name, strings.Join(p.Tools.Allow, ", "))
	}
	for _, g := range p.Tools.Deny {
		if catalog.MatchID(g, id) {
			return fmt.Sprintf("%s is outside profile %q: the profile's tools.deny glob %q matches it", id, name, g)
		}
	}
	return ""
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
