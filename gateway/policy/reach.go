package policy

import (
	"slices"
	"strconv"

	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/index/catalog"
)

// Classer is a Rule's optional class of refusal, for the answer that says
// why a caller reaches no tool of a catalog (Set.Reach): Class(c, t) is 0
// when the rule lets c see and run t, and otherwise a number that two
// tools share only when Check gives them the same words for c. The key
// scope's refusals are a few sentences whatever the tool: built for each
// of 50,000 tools, for a key that shares none with its route's profile,
// they cost each of its searches 67–90 ms (keys.BenchmarkReach).
//
// The words of a rule that is not a Classer are kept per caller scope
// (Set.Reach), so they may name only what its Scope reads of the caller;
// a rule whose words name more (the key scope's name the key) is a
// Classer, whose words are built for each caller.
type Classer interface {
	Class(c *Caller, t catalog.Tool) int
}

// maxReachWords is how many distinct refusals of the rules that are not
// Classers Set.Reach keeps; it counts the others.
const maxReachWords = 4

// reached is Set.Reach's look over a catalog for one caller scope.
type reached struct {
	gen     uint64 // the catalog's (CatalogNumberer)
	some    bool   // a tool is let through
	refused []refusal
	more    int // distinct refusals past maxReachWords
}

// refusal is one distinct refusal Set.Reach met: a Classer's first tool
// of a class (its words are the caller's), or another rule's words.
type refusal struct {
	rule Rule
	t    catalog.Tool
	why  string
}

// Reach says whether c may see and run a tool of tools (the tools a
// session that switches profiles keeps under any profile aside:
// ProfileTools) and, when it may not, why: each distinct refusal once,
// in the order met, those of the rules that are not Classers up to
// maxReachWords, counting the others (more). What c's scope reaches is
// kept, as a Sight is, until the catalog (CatalogNumberer) or the rules
// change: search_tools asks it of every search that finds nothing, and
// each tools/list of a scoped caller (search_tools' description); it
// looked over the catalog each time, building the words of every
// refusal.
func (s *Set) Reach(c *Caller, tools Tools) (ok bool, refused []Decision, more int) {
	if s == nil || tools == nil {
		return true, nil, 0
	}
	c = orAnonymous(c)
	var gen uint64
	if num, ok := tools.(CatalogNumberer); ok {
		gen = num.CatalogGeneration() // before the look: a catalog swapped meanwhile is newer, never older
	}
	sn := s.cur.Load()
	key := sn.scopeKey(c) + strconv.FormatBool(c.ProfileSwitchable())
	r, kept := sn.reaches.load(key)
	if !kept || gen == 0 || r.gen != gen {
		r = sn.reach(c, tools)
		r.gen = gen
		if gen != 0 {
			sn.reaches.put(key, r)
		}
	}
	if r.some {
		return true, nil, 0
	}
	for _, f := range r.refused {
		d := Decision{Rule: f.rule.Name(), Reason: f.why}
		if d.Reason == "" {
			d.Reason = f.rule.Check(c, f.t)
		}
		if !slices.Contains(refused, d) {
			refused = append(refused, d)
		}
	}
	return false, refused, r.more
}

// maxReaches bounds the looks a snapshot keeps (Set.Reach): one per
// caller scope, as Sights.
const maxReaches = maxSights

// reach looks over tools as c until a tool is let through, with the
// rules' yes or no (Allower); words are built once for each class of a
// Classer's refusals, and for the others' until maxReachWords distinct.
func (sn *snapshot) reach(c *Caller, tools Tools) *reached {
	r := &reached{}
	classes := map[[2]int]bool{}
	words := map[string]bool{}
	switchable := c.ProfileSwitchable()
	for _, id := range tools.IDs() {
		t, ok := tools.Tool(id)
		if !ok {
			continue
		}
		if switchable && t.Server == config.BuiltinServer && slices.Contains(ProfileTools, t.Name) {
			continue
		}
		i := -1
		for j, rule := range sn.rules {
			if !allows(rule, c, t) {
				i = j
				break
			}
		}
		if i < 0 {
			return &reached{some: true}
		}
		rule := sn.rules[i]
		if cl, ok := rule.(Classer); ok {
			if k := [2]int{i, cl.Class(c, t)}; !classes[k] {
				classes[k] = true
				r.refused = append(r.refused, refusal{rule: rule, t: t})
			}
			continue
		}
		why := rule.Check(c, t)
		k := rule.Name() + "\x00" + why
		if words[k] {
			continue
		}
		words[k] = true
		if len(words) > maxReachWords {
			r.more++
			continue
		}
		r.refused = append(r.refused, refusal{rule: rule, why: why})
	}
	return r
}
