package keys

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/gateway/policy"
	"github.com/toolgate/toolgate/index/catalog"
)

// RuleName is the name of the key scope rule in a policy.Set.
const RuleName = "key"

// Caller is the policy's view of the key e (for policy.Caller.Key).
func (e Entry) Caller() *policy.Key {
	return &policy.Key{Name: e.Name, Admin: e.Admin, Profile: e.Profile, Allow: e.Allow, Deny: e.Deny}
}

// Scope is the policy rule of API key scopes: a caller with a key sees and
// runs only the tools of the key's profile (if it has one) that its globs
// let through, and the tools only an admin may run only with an admin key.
// It denies with the same words whatever the tool, existing or not, so a
// key learns nothing of what lies outside its scope. Put it first in the
// set, before the rules whose reasons name servers.
type Scope struct {
	// profiles returns the profiles in effect (the set's profile rule),
	// read when a filter is built, so a reload's profiles count.
	profiles func() *policy.Profiles
	// adminOnly reports whether only an admin key may see and run t
	// (nil = none).
	adminOnly func(t catalog.Tool) bool
}

var _ policy.Rule = (*Scope)(nil)

// NewScope returns the key scope rule; profiles gives the profiles in
// effect (policy.Set.Profiles), adminOnly the tools only an admin key may
// see and run (the management tools that change the config:
// mgmt.ChangesConfig; nil = none).
func NewScope(profiles func() *policy.Profiles, adminOnly func(catalog.Tool) bool) *Scope {
	return &Scope{profiles: profiles, adminOnly: adminOnly}
}

func (*Scope) Name() string { return RuleName }

// Scope is what of the caller the rule reads: the key's scope, not its
// name, which only the words of a refusal read. Keys of the same profile
// and globs share their search filter and Sight (the policy keeps one per
// scope): 200 keys each with a scope key of its own outnumbered the
// filters a snapshot keeps, and every search rebuilt its key's.
func (*Scope) Scope(c *policy.Caller) string {
	if c.Key == nil {
		return ""
	}
	k := c.Key
	return strconv.FormatBool(k.Admin) + "\x01" + k.Profile + "\x01" + strings.Join(k.Allow, "\x02") + "\x01" + strings.Join(k.Deny, "\x02")
}

// LacksAccess is the rule's refusal of a tool outside key name's scope:
// the same words whatever the tool. The refusals of a tool outside the
// key's profile or globs start with them, then say why and the fix
// (OutsideProfile, outsideGlobs).
func LacksAccess(name string) string {
	return fmt.Sprintf("the API key %q lacks access to this tool", name)
}

// IsLacksAccess reports whether reason is the rule's refusal of a tool
// outside key name's scope, with or without why.
func IsLacksAccess(reason, name string) bool {
	return strings.HasPrefix(reason, LacksAccess(name))
}

// OutsideProfile is the refusal of a tool outside the profile key name is
// limited to: why and what an admin can do, naming only the key's own
// profile (none of the others, nor a server), the same whatever the tool.
// It said only that the key lacks access, which left its user to guess,
// and then to create a key with another profile, whose new secret had to
// reach the key's holder: keys update keeps it.
func OutsideProfile(name, profile string) string {
	return fmt.Sprintf("%s: the key is limited to profile %q, which does not show it; an admin can add it to that profile "+
		"(toolgate.profiles.%s in the config) or give the key another profile, its secret kept (toolgate keys update %s --profile PROFILE)",
		LacksAccess(name), profile, profile, name)
}

// outsideProfileManagement is the refusal of a management tool
// (toolgate__…) to key name, whose profile does not list the built-in
// server: the fix is that server in the profile's "servers", which
// OutsideProfile's "add it to that profile" left to guess (a profile
// without "servers" shows every server of the config but that one). The
// management tools are the gateway's own, documented: naming them tells
// the key nothing of what lies outside its scope.
func outsideProfileManagement(name, profile string) string {
	return fmt.Sprintf("%s: the key is limited to profile %q, which does not show the management tools (%s__…): they are shown only by a profile that lists %q in its servers; "+
		"an admin can add %q to toolgate.profiles.%s.servers in the config (a profile without servers must then list the other servers it shows too) "+
		"or give the key another profile, its secret kept (toolgate keys update %s --profile PROFILE)",
		LacksAccess(name), profile, config.BuiltinServer, config.BuiltinServer, config.BuiltinServer, profile, name)
}

// outsideGlobs is the refusal of a tool the key's --allow or --deny
// globs leave out.
func outsideGlobs(name string) string {
	return fmt.Sprintf("%s: the key's --allow or --deny globs leave it out; an admin can change them to cover it, its secret kept "+
		"(toolgate keys update %s --allow GLOB or --deny GLOB, which replace the key's; toolgate keys list shows them)", LacksAccess(name), name)
}

// adminOnly is the refusal of a tool only an admin key may run (the
// management tools that change the config) to key name, which is not
// admin: what is needed and the fix. It said only that the key lacks
// access, as if its profile or globs left the tool out.
func adminOnly(name string) string {
	return fmt.Sprintf("%s: it changes the gateway's config, which only an admin API key may do; an admin can create one "+
		"(toolgate keys create --name NAME --admin; toolgate keys list shows which keys are admin)", LacksAccess(name))
}

// ProfileGone is the rule's refusal of every tool to key name, limited to
// a profile the config does not have.
func ProfileGone(name, profile string) string {
	return fmt.Sprintf("the API key %q is limited to profile %q, which the config no longer has, so it reaches no tool", name, profile)
}

// scopeMiss is which of a key's tests a tool fails (inScope: none).
type scopeMiss int

const (
	inScope scopeMiss = iota
	missAdminOnly
	missProfileGone
	missProfile
	missProfileManagement // a management tool, the profile not listing their server
	missGlobs
)

// miss is the first test of key k that t fails: Check's words without
// building them (a search filter, SeenTools ask it of every tool of the
// catalog, and a key limited to a server is refused most of them).
func (r *Scope) miss(k *policy.Key, t catalog.Tool) scopeMiss {
	if !k.Admin && r.adminOnly != nil && r.adminOnly(t) {
		return missAdminOnly
	}
	if k.Profile != "" {
		ps := r.profiles()
		p, ok := ps.Get(k.Profile)
		if !ok {
			return missProfileGone
		}
		if !ps.Shows(p, t) {
			if t.Server == config.BuiltinServer && !slices.Contains(p.Servers, config.BuiltinServer) {
				return missProfileManagement
			}
			return missProfile
		}
	}
	if len(k.Allow) == 0 && len(k.Deny) == 0 {
		return inScope
	}
	id := t.ID()
	if len(k.Allow) > 0 && !slices.ContainsFunc(k.Allow, func(g string) bool { return catalog.MatchID(g, id) }) {
		return missGlobs
	}
	if slices.ContainsFunc(k.Deny, func(g string) bool { return catalog.MatchID(g, id) }) {
		return missGlobs
	}
	return inScope
}

var (
	_ policy.Allower = (*Scope)(nil)
	_ policy.Classer = (*Scope)(nil)
)

// Class is which of the rule's refusals Check gives t (0: none): the
// words of one are the same whatever the tool.
func (r *Scope) Class(c *policy.Caller, t catalog.Tool) int {
	if c.Key == nil {
		return int(inScope)
	}
	return int(r.miss(c.Key, t))
}

// Allows is Check(c, t) == "" without building its words.
func (r *Scope) Allows(c *policy.Caller, t catalog.Tool) bool {
	return c.Key == nil || r.miss(c.Key, t) == inScope
}

func (r *Scope) Check(c *policy.Caller, t catalog.Tool) string {
	k := c.Key
	if k == nil {
		return ""
	}
	switch r.miss(k, t) {
	case missAdminOnly:
		return adminOnly(k.Name)
	case missProfileGone:
		return ProfileGone(k.Name, k.Profile)
	case missProfile:
		return OutsideProfile(k.Name, k.Profile)
	case missProfileManagement:
		return outsideProfileManagement(k.Name, k.Profile)
	case missGlobs:
		return outsideGlobs(k.Name)
	}
	return ""
}
