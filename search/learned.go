package search

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/mat"

	"github.com/toolgate/toolgate/index"
)

// Learning from use. The (query, tool) pairs of past searches that led to
// a call change the ranking in three ways, each measured on the dev splits
// by learning from one half of the queries and evaluating on the other:
//
//   - the tool's vector becomes a blend of its own vector and the centroid
//     of the queries that led to it, λ = n/(n+10) of the way (n: the tool's
//     decayed count of distinct queries; at most 0.8);
//   - its keyword document gains those queries' words in an extra BM25F
//     field of weight 0.5·λ;
//   - every query vector goes through a linear map fitted to all the pairs
//     (an adapter): the ridge regression from the learned queries' vectors
//     to their tools' vectors, pulled toward the identity,
//     W = (XᵀX + αI)⁻¹(XᵀY + αI) with α = 2 + 0.005·N (N the pairs' total
//     weight): the identity with no pairs, and never far from it. Queries
//     are written unlike tool descriptions ("can you show me my …" against
//     "Lists …"), and the map learns how from every pair at once: it
//     carries over to the catalog's tools no one has used yet and favours
//     no tool. It does not carry over to another catalog: fitted on one
//     dev catalog's queries and applied zero-shot to another's (azure-mcp,
//     metatool, the bundled servers, every direction), it lost up to 3.4
//     points of Hit@1 onto azure-mcp and metatool at this α, and α picked
//     on other directions made it the identity; a mean shift alike lost
//     (the query-minus-tool direction of two catalogs has cosine 0.23–0.52).
//     So a zero-shot ranking ships no fitted map.
//
// Learned from half of each dev split through the learned-pairs store (64
// queries a tool at most), evaluated on the other half (hash halves of
// scripts/split-queries.py, both directions averaged; hybrid at the default
// weights; azure-mcp Hit@1 / metatool nDCG@10):
//
//	                                          azure-mcp   metatool
//	zero-shot                                 90.5        71.2
//	query shift alone (catalog mean minus
//	learned queries' mean; issue 12, round 1) 92.6        73.5
//	blend, field and shift (round 1)          92.2        84.4
//	adapter alone                             95.7        80.2
//	blend, field and adapter (default)        96.2        85.0
//	  α fixed at 1 / 2 / 4                    95.3 / 95.3 / 93.5   84.4 / 84.6 / 84.9
//	  α = 0.01·N / 1 + 0.01·N / 1 + 0.02·N    95.7 / 95.3 / 94.0   84.8 / 84.8 / 84.9
//
// Those rows are before round 7 (queries prefixed "I need a tool to ",
// the lead-sentence view written as a request: catalog.RequestView). With
// them, zero-shot is 91.8 / 73.6 and the round-1 settings (κ 16, α 1 +
// 0.005·N) give 96.2 / 84.7; re-chosen over κ 8–16 × α's prior 0.5–4
// (and the per-pair 0.0025–0.02) the default is κ 10, α = 2 + 0.005·N:
// 96.6 / 85.2 (κ 12: 96.6 / 85.0; κ 8: 95.8 / 85.3; κ 10 with prior 1:
// 94.9 / 85.2). 2-fold cross-validated as below: learning from half b
// (evaluated on half a) picks it, and learning from half a then scores
// 97.3 and 85.3 on half b; learning from half a picks κ 8 with prior 2,
// and learning from half b then scores 94.2 (one query under 95) and 85.1
// on half a.
//
// Before round 7:
// α = 1 + 0.005·N was chosen by 2-fold cross-validation: each direction
// (learn half a, evaluate half b, and the reverse) picks it from the eight
// variants above by the sum of its margins over issue 12's targets (95,
// 85), and the other direction then scores azure-mcp 97.3 / 95.0 and
// metatool 85.1 / 84.9. A fixed α fits metatool's 2,100 pairs too closely;
// α = 0.01·N alone fits a handful too closely (5 learned azure-mcp queries:
// 89.7, below zero-shot; 91.0 with the 1 added). With the adapter, the
// tools no learned query led to gain most: on azure-mcp, where 57 % of a
// half's queries ask for one, learning from 100 queries lifts Hit@1 from
// 90.5 to 95.3 (blend and field alone: 90.5). Blending the tools with the
// adapted queries instead of the raw ones, a stronger blend (κ 4, 8) or a
// heavier field (0.75, 1) help metatool and cost azure-mcp, where a
// sibling with learned queries ("get certificate" learned, "list
// certificates" not) takes the other's queries; adapter and shift together
// cost metatool 1.3; a usage-count prior added to the score cost azure-mcp
// 1–5 points and gave metatool nothing. Round 13 (2026-12-05): a learned
// tool scored also by its nearest learned query (the best cosine of the
// adapted query with its learned queries, adapted too), mixed into the
// blended cosine at β 0.2 / 0.35 / 0.5 or taken when higher (scaled by
// 0.9 / 1), gave metatool 85.2–85.4 against 85.1 and cost azure-mcp
// 0.5–6.4 points of Hit@1 (96.6 → 90.2–96.2), the same sibling effect.
const (
	learnKappa     = 10  // λ = n/(n+κ)
	learnMaxLambda = 0.8 // no tool's vector becomes only its queries
	learnFieldW    = 0.5 // the learned field's BM25F weight, times λ
	// The adapter's pull toward the identity: α = prior + perPair·N.
	learnAdapterPrior   = 2
	learnAdapterPerPair = 0.005
	// learnAdapterMax bounds the queries the adapter is fitted on (the
	// heaviest first): fitting costs dim² a query.
	learnAdapterMax = 4096
)

// UsagePair is one learned (query, tool) pair and its weight (decayed
// count; 1 for a pair just recorded).
type UsagePair struct {
	Query  string
	Tool   string // server__tool
	Weight float64
}

// Usage is what the ranker learns from. The learned-pairs store implements
// it; Generation changes whenever the pairs do.
type Usage interface {
	Generation() uint64
	Pairs() []UsagePair
}

// learnedModel is what one generation of pairs makes of one index.
type learnedModel struct {
	ix      *index.Index
	gen     uint64
	adapter [][]float32          // row e: what query component e is made of; nil = identity
	vecs    map[string][]float32 // tool ID → blended unit vector
	// confVecs are the blended vectors made of the learned queries as
	// written (without the model's query prefix), which the confidence
	// reads; nil when there is no prefix (then vecs serve).
	confVecs map[string][]float32
	extra    *index.ExtraField // the learned queries' words
	tools    int               // tools with learned queries
	pairs    int

	// For the scan, in ID order: the learned tools, their servers and
	// blended vectors; and per server ("" for all) the sum of blended
	// minus description vectors, which turns the catalog's cosine sum into
	// the learned catalog's with one dot product.
	ids     []string
	servers []string
	blended [][]float32
	delta   map[string][]float32
}

// buildLearned makes the learned model of pairs over ix, embedding the
// distinct query texts with emb (nil: keyword field only).
func buildLearned(ctx context.Context, ix *index.Index, emb index.Embedder, gen uint64, pairs []UsagePair) (*learnedModel, error) {
	m := &learnedModel{ix: ix, gen: gen}
	byTool := map[string]*toolPairs{}
	var texts []string
	seen := map[string]bool{}
	for _, p := range pairs {
		if _, ok := ix.Tool(p.Tool); !ok || p.Weight <= 0 || strings.TrimSpace(p.Query) == "" {
			continue
		}
		tp := byTool[p.Tool]
		if tp == nil {
			tp = &toolPairs{}
			byTool[p.Tool] = tp
		}
		q := strings.TrimSpace(p.Query)
		tp.queries = append(tp.queries, q)
		tp.weights = append(tp.weights, p.Weight)
		tp.n += p.Weight
		if !seen[q] {
			seen[q] = true
			texts = append(texts, q)
		}
	}
	if len(byTool) == 0 {
		return nil, nil
	}
	ids := make([]string, 0, len(byTool))
	for id := range byTool {
		ids = append(ids, id)
	}
	slices.Sort(ids) // fixed order: reproducible sums
	m.tools, m.pairs = len(ids), len(pairs)

	lambda := func(tp *toolPairs) float64 { return min(tp.n/(tp.n+learnKappa), learnMaxLambda) }
	fieldTexts := make(map[string]string, len(ids))
	fieldWeights := make(map[string]float64, len(ids))
	fieldCovers := make(map[string]float64, len(ids))
	for _, id := range ids {
		tp := byTool[id]
		fieldTexts[id] = strings.Join(tp.queries, "\n")
		fieldWeights[id] = learnFieldW * lambda(tp)
		fieldCovers[id] = lambda(tp) / learnMaxLambda
	}
	extra, err := ix.NewExtraField(fieldTexts, fieldWeights, fieldCovers)
	if err != nil {
		return nil, err
	}
	m.extra = extra

	if emb == nil || !ix.HasVectors() {
		return m, nil
	}
	prefix := index.QueryPrefix(emb)
	qv, err := embedQueries(ctx, emb, prefix, texts)
	if err != nil {
		return nil, err
	}
	dim := ix.Dim()
	m.adapter = fitAdapter(ix, ids, byTool, qv)
	blend := func(qv map[string][]float32) map[string][]float32 {
		out := make(map[string][]float32, len(ids))
		for _, id := range ids {
			tp := byTool[id]
			sum := make([]float64, dim)
			for i, q := range tp.queries {
				w := tp.weights[i]
				for d, x := range qv[q] {
					sum[d] += w * float64(x)
				}
			}
			normalise64(sum)
			lam := lambda(tp)
			desc, _ := ix.Vector(id)
			b := make([]float64, dim)
			for d := range b {
				b[d] = (1-lam)*float64(desc[d]) + lam*sum[d]
			}
			normalise64(b)
			out[id] = to32(b)
		}
		return out
	}
	m.vecs = blend(qv)
	if prefix != "" {
		// The prefix is in every query, so a centroid of prefixed queries
		// leans toward it and its tool toward every query: ranked among
		// each other that is no matter (all queries carry it), but the
		// confidence is absolute. It reads the centroid of the queries as
		// written.
		raw, err := embedQueries(ctx, emb, "", texts)
		if err != nil {
			return nil, err
		}
		m.confVecs = blend(raw)
	}
	m.delta = map[string][]float32{}
	deltas := map[string][]float64{"": make([]float64, dim)}
	for _, id := range ids {
		t, _ := ix.Tool(id)
		desc, _ := ix.Vector(id)
		b := m.vecs[id]
		m.ids = append(m.ids, id)
		m.servers = append(m.servers, t.Server)
		m.blended = append(m.blended, b)
		if deltas[t.Server] == nil {
			deltas[t.Server] = make([]float64, dim)
		}
		for d := range dim {
			x := float64(b[d]) - float64(desc[d])
			deltas[""][d] += x
			deltas[t.Server][d] += x
		}
	}
	for srv, v := range deltas {
		m.delta[srv] = to32(v)
	}
	return m, nil
}

// toolPairs are one tool's learned queries and their weights; n is the
// weights' sum.
type toolPairs struct {
	queries []string
	weights []float64
	n       float64
}

// fitAdapter fits the query adapter to the learned pairs (see the top of
// this file): the ridge regression from each learned query's vector to the
// vectors of the tools it led to, pulled toward the identity. Its rows are
// the learnAdapterMax heaviest distinct queries. It returns the map's rows:
// component e of an adapted query is the dot product of row e and the
// query.
//
// With X's rows √w·q (w the query's pairs' total weight) and Y's rows
// y/√w (y its tools' vectors, each times its pair's weight):
// XᵀX = Σ w·q·qᵀ, summed adapterChunk queries at a time, and
// XᵀY = Σ_pairs w·q·tᵀ = Σ_tools s·tᵀ (s the weighted sum of the tool's
// queries' vectors), adapterChunk tools at a time. X and Y themselves
// (queries × dim each, and y per query: 38 MB at 4,096 queries) were the
// most of a rebuild's garbage, which a gateway's heap held as the pairs
// grew (74 MiB in use at 5,470 pairs on the soak, 18 at none).
func fitAdapter(ix *index.Index, ids []string, byTool map[string]*toolPairs, qv map[string][]float32) [][]float32 {
	dim := ix.Dim()
	weight := map[string]float64{}
	for _, id := range ids {
		tp := byTool[id]
		for i, q := range tp.queries {
			weight[q] += tp.weights[i]
		}
	}
	list := slices.Collect(maps.Keys(weight))
	slices.SortFunc(list, func(a, b string) int {
		if c := cmp.Compare(weight[b], weight[a]); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	list = list[:min(len(list), learnAdapterMax)]
	kept := make(map[string]bool, len(list))
	for _, q := range list {
		kept[q] = true
	}

	xtx := blas64.Symmetric{Uplo: blas.Upper, N: dim, Stride: dim, Data: make([]float64, dim*dim)}
	xty := blas64.General{Rows: dim, Cols: dim, Stride: dim, Data: make([]float64, dim*dim)}
	chunk := func(rows int) blas64.General {
		return blas64.General{Rows: rows, Cols: dim, Stride: dim, Data: make([]float64, rows*dim)}
	}
	x := chunk(min(adapterChunk, len(list)))
	var total float64
	for start := 0; start < len(list); start += adapterChunk {
		rows := list[start:min(start+adapterChunk, len(list))]
		x.Rows = len(rows)
		for k, q := range rows {
			sw := math.Sqrt(weight[q])
			for d, v := range qv[q] {
				x.Data[k*dim+d] = sw * float64(v)
			}
			total += weight[q]
		}
		blas64.Syrk(blas.Trans, 1, x, 1, xtx)
	}
	sums, tools := chunk(min(adapterChunk, len(ids))), chunk(min(adapterChunk, len(ids)))
	for start := 0; start < len(ids); start += adapterChunk {
		part := ids[start:min(start+adapterChunk, len(ids))]
		sums.Rows, tools.Rows = len(part), len(part)
		clear(sums.Data)
		for k, id := range part {
			tv, _ := ix.Vector(id)
			for d, v := range tv {
				tools.Data[k*dim+d] = float64(v)
			}
			tp := byTool[id]
			for i, q := range tp.queries {
				if !kept[q] {
					continue
				}
				w := tp.weights[i]
				for d, v := range qv[q] {
					sums.Data[k*dim+d] += w * float64(v)
				}
			}
		}
		blas64.Gemm(blas.Trans, blas.NoTrans, 1, sums, tools, 1, xty)
	}
	return solveAdapter(mat.NewSymDense(dim, xtx.Data), mat.NewDense(dim, dim, xty.Data), total)
}

// solveAdapter returns the rows of W = (XᵀX + αI)⁻¹(XᵀY + αI), given
// a = XᵀX and b = XᵀY (both changed) and the pairs' total weight.
func solveAdapter(a *mat.SymDense, b *mat.Dense, total float64) [][]float32 {
	dim, _ := b.Dims()
	alpha := learnAdapterPrior + learnAdapterPerPair*total
	for d := range dim {
		a.SetSym(d, d, a.At(d, d)+alpha)
		b.Set(d, d, b.At(d, d)+alpha)
	}
	var ch mat.Cholesky
	if !ch.Factorize(a) {
		return nil // cannot happen: α > 0 makes a positive definite
	}
	var w mat.Dense
	if err := ch.SolveTo(&w, b); err != nil {
		return nil
	}
	out := make([][]float32, dim)
	for e := range out {
		out[e] = make([]float32, dim)
		for d := range dim {
			out[e][d] = float32(w.At(d, e))
		}
	}
	return out
}

// adapterChunk is how many queries (and tools) fitAdapter sums at a time.
const adapterChunk = 256

// embedQueries embeds the query texts after prefix, by text.
func embedQueries(ctx context.Context, emb index.Embedder, prefix string, texts []string) (map[string][]float32, error) {
	vecs, err := embedBatched(ctx, emb, prefix, texts, nil)
	if err != nil {
		return nil, fmt.Errorf("embed learned queries: %w", err)
	}
	qv := make(map[string][]float32, len(texts))
	for i, t := range texts {
		qv[t] = vecs[i]
	}
	return qv, nil
}

// embedBatched embeds texts after prefix as known queries (learned pairs',
// eval's: index.EmbedKnownQueries),
// in batches of 64 (a long list at once would hold one model run's memory
// for all of them). As queries, the embedding cache keeps their vectors as
// long as a search's, not for good as a tool text's: learned queries went
// in as tool texts, and the cache grew by a vector for every query ever
// learned (pairs the cap or decay dropped long since included); now one
// whose vector expired is embedded again at the next rebuild, once a week
// at most.
// embedBatched embeds prefix+text for each text, 64 at a time; done, when
// not nil, is called after each batch with the number of texts embedded.
func embedBatched(ctx context.Context, emb index.Embedder, prefix string, texts []string, done func(int)) ([][]float32, error) {
	out := make([][]float32, 0, len(texts))
	for start := 0; start < len(texts); start += 64 {
		batch := slices.Clone(texts[start:min(start+64, len(texts))])
		for i := range batch {
			batch[i] = prefix + batch[i]
		}
		vs, err := index.EmbedKnownQueries(ctx, emb, batch)
		if err != nil {
			return nil, err
		}
		out = append(out, vs...)
		if done != nil {
			done(len(out))
		}
	}
	if len(out) != len(texts) {
		return nil, fmt.Errorf("embedder returned %d vectors for %d texts", len(out), len(texts))
	}
	return out, nil
}

// query returns the query vector the learned model ranks with: q through
// the adapter, unit length again. Without an adapter it is q itself.
func (m *learnedModel) query(q []float32) []float32 {
	if m == nil || m.adapter == nil {
		return q
	}
	v := make([]float64, len(q))
	for e, row := range m.adapter {
		v[e] = index.Dot(row, q)
	}
	normalise64(v)
	return to32(v)
}

// confCosine is the cosine the confidence reads: q's with the tool's
// blended vector made of its learned queries as written (see confVecs).
func (m *learnedModel) confCosine(ix *index.Index, q []float32, id string) (float64, bool) {
	if m != nil && m.confVecs != nil {
		return cosineIn(m.confVecs, ix, q, id)
	}
	return m.cosine(ix, q, id)
}

// cosine is q's cosine with tool id as the learned model sees it: with the
// blended vector of a tool that has learned queries.
func (m *learnedModel) cosine(ix *index.Index, q []float32, id string) (float64, bool) {
	var vecs map[string][]float32
	if m != nil {
		vecs = m.vecs
	}
	return cosineIn(vecs, ix, q, id)
}

// cosineIn is q's cosine with tool id's vector in vecs (blended vectors,
// keyed by tool ID), or with its index vector when vecs has none.
func cosineIn(vecs map[string][]float32, ix *index.Index, q []float32, id string) (float64, bool) {
	if b, ok := vecs[id]; ok && len(b) == len(q) {
		return index.Dot(b, q), true
	}
	return ix.Cosine(q, id)
}

func normalise64(v []float64) {
	var n float64
	for _, x := range v {
		n += x * x
	}
	if n == 0 {
		return
	}
	n = math.Sqrt(n)
	for i := range v {
		v[i] /= n
	}
}

func to32(v []float64) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}

// scanLearned is ix.Scan with the learned tools' blended vectors: the
// exact top k of the catalog (of server) for q, and the sum of all its
// cosines. The plain scan is asked deep enough that, once the learned
// tools are taken out of it, k others remain; every learned tool is then
// scored with its blended vector and merged in. The cosine sum moves by
// q's dot product with the server's summed difference of blended and
// description vectors.
//
// Over a filtered subset the learned tools it drops are left out too, and
// the sum moves by the kept learned tools' differences, added one by one.
func (m *learnedModel) scanLearned(sub index.Subset, q []float32, k int, server string) index.VectorScan {
	if m == nil || len(m.ids) == 0 {
		return sub.Scan(q, k, server)
	}
	// Deep enough at once for up to k learned tools in the top: one scan
	// in almost every case.
	depth := k + min(len(m.ids), k)
	var vs index.VectorScan
	for {
		vs = sub.Scan(q, depth, server)
		in := 0
		for _, s := range vs.Top {
			if _, ok := m.vecs[s.ID]; ok {
				in++
			}
		}
		if len(vs.Top) < depth || depth >= k+in {
			break
		}
		depth = k + in
	}
	top := make([]index.Scored, 0, 2*k)
	for _, s := range vs.Top {
		if _, ok := m.vecs[s.ID]; !ok && len(top) < k {
			top = append(top, s)
		}
	}
	// The best k learned tools, kept in a small sorted list: the learned
	// tools are few next to the catalog, and most score below its k-th.
	var best []index.Scored
	var moved float64 // the kept learned tools' blended minus description cosines
	for i, id := range m.ids {
		if server != "" && m.servers[i] != server || !sub.Has(id) {
			continue
		}
		c := index.Dot(m.blended[i], q)
		if sub.Filtered() {
			d, _ := sub.Cosine(q, id)
			moved += c - d
		}
		if len(best) == k && !better(index.Scored{ID: id, Score: c}, best[k-1]) {
			continue
		}
		j, _ := slices.BinarySearchFunc(best, index.Scored{ID: id, Score: c}, func(a, b index.Scored) int {
			if better(a, b) {
				return -1
			}
			if better(b, a) {
				return 1
			}
			return 0
		})
		best = slices.Insert(best, j, index.Scored{ID: id, Score: c})
		if len(best) > k {
			best = best[:k]
		}
	}
	top = append(top, best...)
	slices.SortFunc(top, func(a, b index.Scored) int {
		if better(a, b) {
			return -1
		}
		if better(b, a) {
			return 1
		}
		return 0
	})
	vs.Top = top[:min(k, len(top))]
	if sub.Filtered() {
		vs.Sum += moved
	} else if d := m.delta[server]; d != nil {
		vs.Sum += index.Dot(d, q)
	}
	return vs
}

// better orders scored tools best first, equal scores by ID (as Scan).
func better(a, b index.Scored) bool {
	if a.Score != b.Score {
		return a.Score > b.Score
	}
	return a.ID < b.ID
}

// empty reports a model of no pairs: the ranking is then zero-shot, by
// the very same code path.
func (m *learnedModel) empty() bool {
	return m == nil || (m.extra == nil && m.vecs == nil && m.adapter == nil)
}

// learnedFor returns the learned model to rank ix with, or nil (zero-shot).
// A model made from older pairs keeps serving while a new one is built off
// the search path; searches never wait for it.
func (e *Engine) learnedFor(ctx context.Context, ix *index.Index) *learnedModel {
	u := e.options().Usage
	if u == nil {
		return nil
	}
	m := e.learned.Load()
	if m == nil || m.ix != ix {
		m = e.awaitFirstLearned(ctx, ix)
	}
	if m == nil || m.ix != ix || m.gen != u.Generation() {
		e.startRefresh()
	}
	if m == nil || m.ix != ix || m.empty() {
		return nil
	}
	return m
}

// firstLearnedWait bounds how long the first searches of an index wait for
// its learned model. The model of a new index (a gateway's start, a
// re-index) is built in the background from its start (learnAhead), from
// the cached vectors of the learned queries: tens of milliseconds for a
// few hundred pairs, 0.5 s for 3,000 on this project's machine. Without the
// wait, a stdio client's first search, asked as soon as the gateway
// answered its handshake, ranked zero-shot and the same query a moment
// later with the pairs (persona8: get_file_info 0.710 above
// list_directory 0.700, then the learned order). Once an index has a
// model, searches never wait: new pairs are rebuilt in the background
// and searches rank with the previous pairs meanwhile.
var firstLearnedWait = time.Second

// firstWait is the index whose first searches wait, and until when.
type firstWait struct {
	ix    *index.Index
	until time.Time
}

// awaitFirstLearned waits, for the first searches of ix (those within
// firstLearnedWait of the first), until ix's learned model is built, and
// returns the model then current.
func (e *Engine) awaitFirstLearned(ctx context.Context, ix *index.Index) *learnedModel {
	fw := e.firstWait.Load()
	if fw == nil || fw.ix != ix {
		next := &firstWait{ix: ix, until: time.Now().Add(firstLearnedWait)}
		if e.firstWait.CompareAndSwap(fw, next) {
			fw = next
		} else if fw = e.firstWait.Load(); fw == nil || fw.ix != ix {
			return e.learned.Load() // the index changed meanwhile
		}
	}
	wctx, cancel := context.WithDeadline(ctx, fw.until)
	defer cancel()
	if wctx.Err() == nil {
		select {
		case <-e.startRefresh():
		case <-wctx.Done():
		}
	}
	return e.learned.Load()
}

// learnAhead starts building the learned model of a new index ix in the
// background, so that the first searches of a gateway (a stdio client's
// every session starts one) or after a re-index rank with the pairs, not
// only those after a search noticed them missing.
func (e *Engine) learnAhead(ix *index.Index) {
	if ix != nil && e.options().Usage != nil {
		e.startRefresh()
	}
}

// startRefresh rebuilds the learned model in the background unless a
// rebuild is running; the goroutine rebuilds again while the pairs or the
// index moved on during a rebuild (each time after waitRebuild), and Close
// waits for it. The channel it returns is closed when that rebuild ends.
func (e *Engine) startRefresh() <-chan struct{} {
	e.refreshMu.Lock()
	defer e.refreshMu.Unlock()
	if e.refreshDone != nil {
		return e.refreshDone
	}
	done := make(chan struct{})
	if e.stop.Err() != nil {
		e.refreshErr = errors.New("search engine is closed")
		close(done)
		return done
	}
	e.refreshDone = done
	e.refreshWG.Add(1)
	go func() {
		defer e.refreshWG.Done()
		for {
			e.waitRebuild()
			start := time.Now()
			err := e.refreshLearned(e.stop)
			e.builtAt, e.buildTook = time.Now(), time.Since(start)
			if err != nil && e.stop.Err() == nil {
				e.log.Warn("learned ranking not updated; searching with the previous one", "err", err)
			}
			e.refreshMu.Lock()
			m, s := e.learned.Load(), e.cur.Load()
			if err != nil || e.stop.Err() != nil || s == nil || (m != nil && m.ix == s.ix && m.gen == e.options().Usage.Generation()) {
				e.refreshErr, e.refreshDone = err, nil
				close(done)
				e.refreshMu.Unlock()
				return
			}
			e.refreshMu.Unlock()
		}
	}()
	return done
}

// Rebuilds of new pairs are spaced (waitRebuild): one ends at least
// learnRebuildMin, and learnRebuildRatio times its own length (up to
// learnRebuildMax), before the next starts, so they take at most a tenth
// of a core however fast pairs come. Back to back, one after each new pair
// of a steady stream, they were most of a gateway's CPU: on the soak (one
// session after another, each a search and a call that teaches a pair)
// serve spent 46–55 ms a session with learning on, 17 with it off. The
// cap bounds how long new pairs wait after a long rebuild (one that
// embedded many queries whose cached vectors had expired).
var (
	learnRebuildMin   = time.Second
	learnRebuildRatio = 9
	learnRebuildMax   = time.Minute
)

// waitRebuild waits, in the rebuilding goroutine, until the next rebuild
// of the learned model may start: at once for a new index (it is ranked
// zero-shot until its model is built), a first model, or a RefreshLearned
// call; otherwise until the spacing above has passed since the last
// rebuild ended. Searches meanwhile rank with the model of the previous
// pairs; no pair is lost, as the rebuild reads them all.
func (e *Engine) waitRebuild() {
	m, s := e.learned.Load(), e.cur.Load()
	if m == nil || s == nil || m.ix != s.ix {
		return
	}
	wait := time.Until(e.builtAt.Add(max(learnRebuildMin, min(time.Duration(learnRebuildRatio)*e.buildTook, learnRebuildMax))))
	if wait <= 0 {
		return
	}
	e.refreshMu.Lock()
	if e.urgent > 0 {
		e.refreshMu.Unlock()
		return
	}
	woken := make(chan struct{})
	e.waiting = woken
	e.refreshMu.Unlock()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
	case <-woken:
	case <-e.stop.Done():
	}
	e.refreshMu.Lock()
	if e.waiting == woken {
		e.waiting = nil
	}
	e.refreshMu.Unlock()
}

// RefreshLearned makes searches rank with the current index and pairs
// now, and returns once they do (Search rebuilds the learned model in the
// background when they change, and New and Swap start it; eval and tests
// call this to rank with every pair). It shares a rebuild running already.
func (e *Engine) RefreshLearned(ctx context.Context) error {
	if e.options().Usage == nil {
		return nil
	}
	e.refreshMu.Lock()
	e.urgent++
	if e.waiting != nil { // a rebuild waiting for its turn starts now
		close(e.waiting)
		e.waiting = nil
	}
	e.refreshMu.Unlock()
	defer func() {
		e.refreshMu.Lock()
		e.urgent--
		e.refreshMu.Unlock()
	}()
	done := e.startRefresh()
	select {
	case <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	e.refreshMu.Lock()
	defer e.refreshMu.Unlock()
	return e.refreshErr
}

// refreshLearned builds the learned model of the current index and pairs.
func (e *Engine) refreshLearned(ctx context.Context) error {
	if e.options().Usage == nil {
		return nil
	}
	s := e.acquire()
	if s == nil {
		return errors.New("search engine is closed")
	}
	defer s.release(e.log)
	if s.ix == nil {
		return nil
	}
	gen := e.options().Usage.Generation()
	pairs := e.options().Usage.Pairs()
	// In bm25 mode no search reads the learned vectors: the learned
	// queries are not embedded (serve loads no model in that mode until
	// one is read; they loaded it at a warm start on an index with
	// vectors). A reconfigure to a mode that reads them rebuilds with
	// them (Reconfigure).
	var emb index.Embedder
	if e.emb != nil && s.ix.HasVectors() && e.options().Mode.NeedsVectors() {
		emb = e.emb
	}
	m, err := buildLearned(ctx, s.ix, emb, gen, pairs)
	if err != nil {
		return err
	}
	if m == nil {
		m = &learnedModel{ix: s.ix, gen: gen}
	}
	e.learned.Store(m)
	return nil
}
