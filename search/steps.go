package search

import (
	"regexp"
	"slices"

	"github.com/toolgate/toolgate/index"
)

// Steps. A request that asks for several things ("list the storage
// accounts in my subscription, then send an email to the owner") has one
// vector, the average of them all, and its keyword half favours the tools
// that share words with the longest clause: the tools for the other steps
// fall below the first few. A hybrid search of a query with at least
// minStepParts parts (QueryParts) therefore also ranks each part on its
// own, and a tool's score is the best of its score for the whole query and
// Options.StepWeight times its score for any part: the whole query's best
// tool stays first, and each step's best tools come next.
//
// Measured on the dev splits (README, "Requests of several steps"): on
// requests made of two or three of their queries (scripts/compose-queries.py)
// GroupRecall@5 and @10 rise by 2–11 points, on MetaTool's own two-tool
// questions by 0–3; its single-need queries lose 0.2 of nDCG@10. StepWeight
// 0.7 was chosen by 2-fold cross-validation over the hash halves.

// DefaultStepWeight is Options.StepWeight's default.
const DefaultStepWeight = 0.7

// minStepParts: a query with a single part is ranked as a whole (its one
// part is most of it).
const minStepParts = 2

// rankSteps ranks each part (parts, with their keyword results kws and
// their vectors vecs) over sub and merges the rankings into whole, the
// whole query's: each tool scores the best of its whole-query score and
// StepWeight times its score for a part; the tools the query names stay
// first. It returns the top limit.
func (e *Engine) rankSteps(ix *index.Index, sub index.Subset, lm *learnedModel, server string, mode Mode, limit, kwDepth, vecDepth int, whole []ranked, parts []string, kws []*index.KeywordResult, vecs [][]float32) []ranked {
	byID := make(map[string]int, len(whole)*(1+len(parts)))
	out := slices.Clone(whole)
	for i, r := range out {
		byID[r.id] = i
	}
	var steps []string // the best tool of each part the query marks a step
	for i, part := range parts {
		kwRes := kws[i]
		kw := keywordSignal(kwRes, kwDepth)
		qvec := lm.query(vecs[i])
		vec := e.vectorSignal(lm, sub, qvec, vecDepth, server, &kw)
		e.fillMissing(ix, lm, kwRes, qvec, mode, &kw, &vec)
		for k, r := range e.rank(mode, kw, vec, limit) {
			if k == 0 && stepMarker.MatchString(part) {
				steps = append(steps, r.id)
			}
			r.score *= e.options().StepWeight
			r.clause = part
			j, ok := byID[r.id]
			switch {
			case !ok:
				byID[r.id] = len(out)
				out = append(out, r)
			case r.score > out[j].score:
				r.exact = out[j].exact
				out[j] = r
			}
		}
	}
	slices.SortStableFunc(out, compareRanked)
	return keepSteps(out, limit, steps)
}

// stepMarker starts a part that the query marks as a step of its own
// ("then …", "after that …", "finally …"), as an agent writes a task of
// several steps: "read ideas.md, then save a summary of it to memory, then
// add 2 and 3" ranked five file tools first, the memory and sum tools
// seventh and ninth.
var stepMarker = regexp.MustCompile(`(?i)^(?:and\s+)?(?:then|after\s+that|afterwards|finally|lastly|also)\b`)

// keepSteps is the top limit of all (ranked best first), where the best
// tool of each marked step (steps, by ID) has a place: one the top lacks
// replaces the last tool that is neither named by the query nor another
// step's, the best tool the query does not name always kept.
func keepSteps(all []ranked, limit int, steps []string) []ranked {
	top := slices.Clone(all[:min(limit, len(all))])
	kept := func(id string) bool { return slices.ContainsFunc(top, func(r ranked) bool { return r.id == id }) }
	for _, id := range steps {
		if kept(id) {
			continue
		}
		i := slices.IndexFunc(all, func(r ranked) bool { return r.id == id })
		first := slices.IndexFunc(top, func(r ranked) bool { return !r.exact })
		for k := len(top) - 1; k > first && i >= 0; k-- {
			if !top[k].exact && !slices.Contains(steps, top[k].id) {
				top[k] = all[i]
				break
			}
		}
	}
	slices.SortStableFunc(top, compareRanked)
	return top
}
