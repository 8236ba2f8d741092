package search

import "math"

// Confidence. A hit's Score is relative to the query's best (the best
// always scores near 1), so it cannot say that nothing fits. Confidence is
// an absolute estimate that the hit is what the query asks for: a logistic
// (Platt) calibration of two signals that hardly depend on the other tools:
// the raw cosine of the query and the tool's vector (the normalised sum of
// its views' vectors, see catalog.Views), or of the query part (parts.go)
// whose cosine with it is highest, and the share of the query's terms that
// the tool's text holds (through the IDF weights of the terms only):
//
//	confidence = 1 / (1 + e^−(11.58·cosine + 3.51·coverage − 7.42))
//
// fitted on the top hit of every dev query (azure-mcp 232, metatool 4,220:
// relevant or not) and of every query of one dev split asked of the other's
// catalog (never relevant), each of the four groups weighted equally, with
// the best cosine of the query or any of its parts (round 8; before, the
// whole query's alone: 12.01·cosine + 2.68·coverage − 7.16). Fitted on one
// half of the queries (scripts/split-queries.py) and measured on the
// other, both ways, the top hits that score 0.1–0.2 are relevant 31 / 34 %
// of the time, 0.4–0.5 60 / 65 %, 0.9–1 93 / 95 %. A query of two parts or
// more has them embedded anyway, for the steps (steps.go); otherwise its
// one part is embedded only when the whole query leaves every hit below
// MinConfidence (a part can only raise a confidence), so the hits of such
// a query that passes carry the whole query's confidence. Without vectors (BM25 only) coverage alone
// decides: 1 / (1 + e^−(6.47·coverage − 2.24)). A hit the query names
// exactly has confidence 1.
//
// Result.NoMatch says that no hit reaches Options.MinConfidence. Measured
// with toolgate eval --no-answer (hybrid; a query of the other dev split
// counts as having no answer; a false abstain is an answerable query
// answered with NoMatch, "lost" one whose first tool was right):
//
//	minConfidence   azure-mcp catalog                  metatool catalog
//	                false abstain / lost / abstain     false abstain / lost / abstain
//	0.05            0.000 / 0.000 / 0.651              0.013 / 0.002 / 0.513
//	0.07            0.000 / 0.000 / 0.769              0.029 / 0.005 / 0.638
//	0.09 (default)  0.000 / 0.000 / 0.842              0.046 / 0.011 / 0.716
//	0.10            0.000 / 0.000 / 0.864              0.056 / 0.015 / 0.746
//	0.12            0.000 / 0.000 / 0.900              0.074 / 0.020 / 0.789
//	0.15            0.000 / 0.000 / 0.929              0.105 / 0.033 / 0.828
//	0.20            0.000 / 0.000 / 0.956              0.164 / 0.059 / 0.862
//
// (With the steps, whose parts' tools join the hits; before them the
// default gave 0.000 / 0.000 / 0.847 and 0.049 / 0.011 / 0.716; before
// round 8, the default 0.10 gave 0.000 / 0.000 / 0.892 and
// 0.098 / 0.024 / 0.642.) No single threshold gives both catalogs an
// abstain rate of 0.8 with at most 2 % false abstains: metatool's own
// queries include many vague ones ("Can you tell me about the theory of
// relativity according to Einstein?" for a course-notes tool) whose best
// cosine is as low as a foreign query's, and some azure-mcp queries do fit
// a metatool tool ("Send an email with BCC recipients"). As separators of
// a catalog's own queries from the other split's (area under the ROC curve
// on the metatool catalog; share of foreign queries abstained on at 2 %
// false abstains), the best cosine of the whole query scores 0.875 (25 %),
// the best of the query and its clauses 0.934 (60 %); signals that adapt
// to the catalog did worse: the mean of the top five cosines 0.83, the
// distance from the catalog's principal subspace or its Mahalanobis
// distance 0.81, the height above the catalog's mean cosine 0.85, a
// z-score 0.82, the share of the query's terms the catalog knows 0.54
// (before round 7, a logistic regression over such signals, fitted on
// half the queries of both pairings, did no better on the other half, and
// a gradient-boosted classifier fitted to the metatool pairing alone
// reached 35 %; after round 8, logistic regressions and gradient-boosted
// trees over the best cosine, coverage, raw BM25, whether BM25 and the
// cosine agree on the first tool, the known share, the top-1 to top-2 gap
// and the query's length, fitted on one half and scored on the other,
// reached 71 / 55 % at most; round 9 (README, "Ranking quality"): a hubness
// correction by each tool's mean cosine to its nearest tools, the query
// without its conversational opening, token-level MaxSim from the same
// MiniLM run, the query's rank among the tool's neighbours, 63–66 / 47–55 %
// each and 67 / 56 % together, 68 / 67 % with trees, against 61 / 52 % for
// this fit); round 10, usage-tuned: the nearest learned query's cosine
// beside this confidence, 76.3 / 79.7 % against 75.9 / 75.4 % alone, for
// a scan of every learned query's vector at every search; zero-shot, the
// query vector's length before normalising, 61.3 / 50.4 %; round 12,
// nearness to background domains the catalog does not cover: 73.0 / 69.1 %,
// but the bundled fixture lost right answers to it, 2 → 5 / 8 of 67;
// round 15, refitted per half as this fit is, scored b / a as AUC and
// abstain at 2 %, today 0.928 / 0.932, 61.3 / 50.4 %: coverage per clause
// 0.934 / 0.942, 63.1 / 53.7 %, but clauses that say nothing ("Can you
// provide") hold all their terms in long Azure descriptions, so keeping
// the azure-mcp catalog at 80 % costs metatool 6.7 % false abstains and
// the bundled fixture 5 right answers; BM25 over the query's IDF sum
// 62.2 / 52.1 %; content-word coverage 58.6 / 51.2 %; the best view's
// cosine 55.9 / 43.0 %; second-best over best cosine 51.4 / 43.8 %; the
// cosine less the tool's lead sentence's own 48.6 / 33.1 %; the first hit
// alone instead of the top 10, 43.2 / 42.1 %; round 16, how rankings
// relate: BM25's top against the cosines' (rank-biased overlap
// 57.7 / 44.6 %), the clauses' first tools against the whole query's
// (61.3 / 54.5 %, azure-mcp's catalog losing), the top cosine's z-score
// over the catalog (58.6 / 42.1 %), the query's first tool with and
// without the prefix (61.3 / 47.1 %; fitted to whether the query has an
// answer, 62.2 / 56.2 %, a gain that resampling and the thresholds near
// the default do not confirm); round 17, soft coverage by MiniLM's
// single-word vectors: against the hit's words 60.4 / 51.2 % at best,
// against the catalog's vocabulary 66.7 / 62.0 %, but with a negative
// weight that learns the splits' styles (a third catalog abstains less:
// 71.5 → 45.8 %) and +6–14 ms a search. The default
// keeps azure-mcp above 0.8 with margin
// and halves round 7's false abstains on metatool. A NoMatch answer still
// lists the closest tools.
const (
	confCosine   = 11.58
	confCoverage = 3.51
	confBias     = -7.42

	confCoverageOnly = 6.47
	confBiasBM25     = -2.24
)

// DefaultMinConfidence is Options.MinConfidence's default.
const DefaultMinConfidence = 0.09

// EffectiveMinConfidence is the threshold Options.MinConfidence v means:
// DefaultMinConfidence for 0, else v (negative: never NoMatch).
func EffectiveMinConfidence(v float64) float64 {
	if v == 0 {
		return DefaultMinConfidence
	}
	return v
}

// confidence of a hit with the given raw cosine and coverage; vectors says
// whether the cosine exists.
func confidence(cosine, coverage float64, vectors, exact bool) float64 {
	if exact {
		return 1
	}
	z := confCoverageOnly*coverage + confBiasBM25
	if vectors {
		z = confCosine*cosine + confCoverage*coverage + confBias
	}
	return 1 / (1 + math.Exp(-z))
}
