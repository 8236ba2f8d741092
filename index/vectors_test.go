package index

import (
	"fmt"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Scan splits large catalogs among goroutines; the split must not show in
// the result, which equals Nearest's top k and CosineSum, before and after
// PrepareScan.
func TestScanSplitMatchesNearest(t *testing.T) {
	n := 3*scanChunk + 17
	ix, q := scanIndex(n)
	for i := range 400 { // equal rows: ties across chunk boundaries
		copy(ix.vecs[(n-1-i)*ix.dim:(n-i)*ix.dim], ix.vecs[i*ix.dim:(i+1)*ix.dim])
	}
	for _, pass := range []string{"exact", "8-bit first"} {
		if pass != "exact" {
			ix.PrepareScan()
		}
		for _, server := range []string{"", "server07"} {
			for _, k := range []int{1, 100, n} {
				t.Run(fmt.Sprintf("%s/server=%q/k=%d", pass, server, k), func(t *testing.T) {
					all := ix.Nearest(q, n, server)
					want := VectorScan{Top: all[:min(k, len(all))], Sum: ix.CosineSum(q, server), N: len(all)}
					if d := cmp.Diff(want, ix.Scan(q, k, server)); d != "" {
						t.Errorf("(-nearest +scan):\n%s", d)
					}
				})
			}
		}
	}
}

// The assembly kernel rounds exactly like dot, on ordinary values and on
// zeros, subnormals and large magnitudes.
func TestDotRows4MatchesDot(t *testing.T) {
	for _, dim := range []int{4, 8, 384} {
		ix, q := scanIndex(64)
		rows := make([]float32, 64*dim)
		for i := range rows {
			rows[i] = ix.vecs[i%len(ix.vecs)] * float32(1+i%7)
		}
		q = append(q, q...)[:dim]
		special := []float32{0, float32(math.Copysign(0, -1)), 1e-40, -1e-39, 3e38, -2e38, 1e-20, 1}
		for i, v := range special {
			rows[(i*13)%len(rows)] = v
			q[(i*5)%dim] = v
		}
		for r := 0; r+4 <= 64; r += 4 {
			var out [4]float32
			dotRows4(rows[r*dim:(r+4)*dim], dim, q, &out)
			for j := range 4 {
				want := dot(rows[(r+j)*dim:(r+j+1)*dim], q)
				if math.Float32bits(out[j]) != math.Float32bits(want) && !(want != want && out[j] != out[j]) {
					t.Fatalf("dim %d row %d: dotRows4 %v (%#x), dot %v (%#x)", dim, r+j, out[j], math.Float32bits(out[j]), want, math.Float32bits(want))
				}
			}
		}
	}
}

// slack bounds the 8-bit dot product's distance from dot's: on unit rows,
// rows of other lengths, values at rounding boundaries, zeros and
// subnormals; and on worst cases, where it must also be nearly reached
// (else this test could not tell a bound too small). The assembly kernel's
// integer sums equal dotI8's.
func TestSlackBoundsI8(t *testing.T) {
	const dim, n = 384, 256
	ix, q := scanIndex(n)
	for i := range ix.vecs {
		switch i % 11 {
		case 5:
			ix.vecs[i] *= float32(1 + i%5) // longer rows
		case 7:
			ix.vecs[i] = []float32{0, 1e-41, -3e-39, 1e-30}[i%4]
		}
	}
	// Worst cases: a power-of-two step s, one value of 127·s, the others
	// just under a half step above a multiple of s, with q's sign and
	// about q's magnitude, so that each rounds down by almost s/2 and
	// every error adds to the dot product's.
	worst := withIDs(&Index{tools: ix.tools[:8], dim: dim, vecs: make([]float32, 8*dim)})
	var big float64
	for _, v := range q {
		big = max(big, math.Abs(float64(v)))
	}
	for r := range 8 {
		row := worst.vecs[r*dim : (r+1)*dim]
		step := math.Ldexp(1, -9-r%3)
		for j := range row {
			m := 127.0
			if j > 0 {
				m = math.Round(math.Abs(float64(q[j]))/big*100) + 0.5 - 1.0/1024
			}
			row[j] = float32(math.Copysign(m*step, float64(q[j])))
		}
	}
	for _, c := range []struct {
		name  string
		ix    *Index
		reach float64 // the largest distance must be at least this share of the slack
	}{{"mixed", ix, 0}, {"worst", worst, 0.8}} {
		st := newVectorCopy(c.ix)
		if st == nil {
			t.Fatalf("%s: prefilter unusable on finite rows", c.name)
		}
		rows := len(c.ix.tools)
		for _, factor := range []float32{1, 1e-3, 40} {
			qs := make([]float32, dim)
			for j := range qs {
				qs[j] = q[j] * factor
			}
			q16, qscale := quantizeQuery(qs)
			slack := st.slack(qs, qscale)
			scores := make([]float32, rows)
			st.approxDots(q16, qscale, scope{}, c.ix.tools, scores, 0, rows)
			var most float64
			for r := 0; r+4 <= rows; r += 4 {
				var out [4]int32
				dotRows4I8(st.q8[r*dim:(r+4)*dim], dim, q16, &out)
				for j := range 4 {
					if want := dotI8(st.q8[(r+j)*dim:(r+j+1)*dim], q16); out[j] != want {
						t.Fatalf("%s row %d: dotRows4I8 %d, dotI8 %d", c.name, r+j, out[j], want)
					}
					exact := float64(dot(c.ix.vecs[(r+j)*dim:(r+j+1)*dim], qs))
					d := math.Abs(float64(scores[r+j]) - exact)
					if d > slack {
						t.Fatalf("%s, q×%v, row %d: approximation %v is %g from dot %v, over the slack %g", c.name, factor, r+j, scores[r+j], d, exact, slack)
					}
					most = max(most, d)
				}
			}
			if most < c.reach*slack {
				t.Fatalf("%s, q×%v: largest distance %g is under %v of the slack %g", c.name, factor, most, c.reach, slack)
			}
		}
	}
}

// Rows closer together than the 8-bit copy can tell apart, and exact ties, at the
// k-th place: Scan's first pass cannot order them, its exact pass must.
func TestScanNearTiesMatchesNearest(t *testing.T) {
	const dim = 384
	n := 2*scanChunk + 5
	ix, q := scanIndex(n)
	base := ix.vecs[:dim:dim]
	for i := 1; i < n; i += 3 { // a third of the rows: base nudged by < 2⁻⁹ of a value, far below a step
		row := ix.vecs[i*dim : (i+1)*dim]
		copy(row, base)
		row[i%dim] += base[i%dim] * float32(i%7) / 4096
		if i%5 == 0 {
			copy(row, base) // exact ties with row 0
		}
	}
	ix.PrepareScan()
	if ix.copy8.Load() == nil {
		t.Fatal("no 8-bit copy")
	}
	for _, server := range []string{"", "server03"} {
		for _, k := range []int{1, 7, 100, n / 3, n} {
			all := ix.Nearest(q, n, server)
			got := ix.Scan(q, k, server)
			if d := cmp.Diff(all[:min(k, len(all))], got.Top); d != "" {
				t.Fatalf("server %q k %d (-nearest +scan):\n%s", server, k, d)
			}
		}
	}
}

// Rows the 8-bit copy cannot hold (an infinity, or a width not a multiple
// of 16) leave Scan on the exact rows alone.
func TestScanWithoutPrefilter(t *testing.T) {
	ix, q := scanIndex(scanChunk + 3)
	ix.vecs[5*ix.dim+2] = float32(math.Inf(1))
	if ix.PrepareScan(); ix.copy8.Load() != nil {
		t.Fatal("prefilter made of a row holding +Inf")
	}
	small := withIDs(&Index{tools: ix.tools[:40], dim: 12, vecs: make([]float32, 40*12)})
	for i := range small.vecs {
		small.vecs[i] = ix.vecs[i+7*ix.dim]
	}
	q12 := q[:12]
	if small.PrepareScan(); small.copy8.Load() != nil {
		t.Fatal("prefilter made for 12-wide rows")
	}
	for _, k := range []int{1, 10, 40} {
		all := small.Nearest(q12, 40, "")
		if d := cmp.Diff(all[:k], small.Scan(q12, k, "").Top); d != "" {
			t.Fatalf("k %d (-nearest +scan):\n%s", k, d)
		}
	}
}

// PrepareScan may run in the background while the index is closed: Close
// waits for it or keeps it from starting, and a closed index scans nothing.
func TestPrepareScanClose(t *testing.T) {
	for range 20 {
		ix, q := scanIndex(2 * scanChunk)
		done := make(chan struct{})
		go func() {
			ix.PrepareScan()
			close(done)
		}()
		if err := ix.Close(); err != nil {
			t.Fatal(err)
		}
		<-done
		// Close either waited for PrepareScan or kept it from running.
		if got := ix.Scan(q, 10, ""); ix.sums == nil && (got.Top != nil || got.N != 0) {
			t.Fatalf("closed index without stats scanned %d rows", got.N)
		}
	}
	ix, q := scanIndex(100)
	ix.PrepareScan()
	if ix.copy8.Load() == nil {
		t.Fatal("PrepareScan made no 8-bit copy")
	}
	want := ix.Nearest(q, 5, "")
	if d := cmp.Diff(want, ix.Scan(q, 5, "").Top); d != "" {
		t.Fatalf("after PrepareScan (-nearest +scan):\n%s", d)
	}
}
