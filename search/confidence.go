package search

import "math"

// Confidence. A hit's Score is relative to the query's best (the best
// always scores near 1), so it cannot say that nothing fits. Confidence is
// an absolute estimate that the hit is what the query asks for: a logistic
// (Platt) calibration of two signals that hardly depend on the other tools:
// the raw cosine of the query and the tool's document (not at all), and the
// share of the query's terms that the tool's text holds (through the IDF
// weights of the terms only):
//
//	confidence = 1 / (1 + e^−(6.31·cosine + 3.46·coverage − 4.06))
//
// fitted on the top hit of every dev query (azure-mcp 232, metatool 4,220:
// relevant or not) and of every query of one dev split asked of the other's
// catalog (never relevant), each of the four groups weighted equally. On
// the held-out half of the queries (2-fold) the top hits that score 0.1–0.2
// are relevant 29 % of the time, 0.5–0.6 78 %, 0.9–1 95 %. Without
// vectors (BM25 only) coverage alone decides:
// 1 / (1 + e^−(6.47·coverage − 2.24)). A hit the query names exactly has
// confidence 1.
//
// Result.NoMatch says that no hit reaches Options.MinConfidence. Measured
// with toolgate eval --no-answer (hybrid; a query of the other dev split
// counts as having no answer; a false abstain is an answerable query
// answered with NoMatch, "lost" one whose first tool was right):
//
//	minConfidence   azure-mcp catalog                  metatool catalog
//	                false abstain / lost / abstain     false abstain / lost / abstain
//	0.05            0.000 / 0.000 / 0.159              0.001 / 0.000 / 0.069
//	0.07            0.000 / 0.000 / 0.412              0.010 / 0.002 / 0.211
//	0.10            0.000 / 0.000 / 0.665              0.056 / 0.008 / 0.466
//	0.13 (default)  0.000 / 0.000 / 0.812              0.123 / 0.023 / 0.651
//	0.15            0.000 / 0.000 / 0.864              0.173 / 0.040 / 0.733
//	0.20            0.000 / 0.000 / 0.939              0.309 / 0.089 / 0.815
//	0.30            0.000 / 0.000 / 0.978              0.528 / 0.195 / 0.927
//
// With the calibration fitted on one half of the queries and measured on
// the other (2-fold), 0.12 gives 0.000 / 0.796 on azure-mcp and
// 0.121 / 0.616 on metatool. metatool's short, overlapping descriptions
// give many of its own queries a weaker best match than azure-mcp's
// queries get there, and those best matches are mostly wrong: of the
// 12.3 % the default answers with NoMatch, four in five had a wrong tool
// first. 0.07 keeps false abstains at 1 % on both catalogs but abstains on
// only 41 % and 21 % of the foreign queries. A NoMatch answer still lists
// the closest tools.
const (
	confCosine   = 6.31
	confCoverage = 3.46
	confBias     = -4.06

	confCoverageOnly = 6.47
	confBiasBM25     = -2.24
)

// DefaultMinConfidence is Options.MinConfidence's default.
const DefaultMinConfidence = 0.13

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
