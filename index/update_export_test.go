package index

// Hooks for the external tests and benchmarks of incremental updates
// (update_test.go, update_bench_test.go), which use indextest and so live in
// package index_test.

// SetUpdateFault makes every incremental update call f at each stage
// ("clone", "open", "batch", "close"); an error fails the update there. It
// returns the function that removes f.
func SetUpdateFault(f func(stage string) error) (restore func()) {
	prev := updateFault
	updateFault = f
	return func() { updateFault = prev }
}

// SetUpdateLimits overrides the share of the catalog above which an update
// is a full build, and the dead-document share; it returns the function that
// restores them.
func SetUpdateLimits(fraction, dead float64) (restore func()) {
	pf, pd := maxUpdateFraction, maxDeadFraction
	maxUpdateFraction, maxDeadFraction = fraction, dead
	return func() { maxUpdateFraction, maxDeadFraction = pf, pd }
}

// MaxSegments is how many segments an incrementally updated generation may
// have before the next update is a full build.
const MaxSegments = maxSegments

// BleveSegments counts the segments of an index's Bleve half and the
// documents they store (live and deleted).
func BleveSegments(ix *Index) (segments int, stored, live uint64, err error) {
	return segmentStats(ix.bi)
}

// KeywordTerms is what Bleve's BM25 counts as the terms of each keyword
// field of ix: for a full build, the distinct terms of its documents.
func KeywordTerms(ix *Index) (map[string]int, error) { return fieldCardinalities(ix.bi) }
