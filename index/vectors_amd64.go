package index

// haveDotRows4 says dotRows4 is the assembly kernel (vectors_amd64.s).
const haveDotRows4 = true

// dotRows4 writes dot(rows[r*dim:(r+1)*dim], q) to out[r] for r = 0..3,
// bit-identical to dot. rows must hold 4·dim values and q dim; dim must be
// a positive multiple of 4. (Go does not fuse a*b+c on amd64 at GOAMD64 v1
// or v2, so dot rounds the product and the sum apart, as MULPS/ADDPS do.)
//
//go:noescape
func dotRows4(rows []float32, dim int, q []float32, out *[4]float32)

// dotRows4BF16 writes the dot product of bfloat16 rows[r*dim:(r+1)*dim]
// with q to out[r] for r = 0..3, widening each value to float32 (a 16-bit
// shift: bfloat16 is float32's high half). rows must hold 4·dim values and
// q dim; dim must be a positive multiple of 8. The additions are in another
// order than dotBF16's; vectorStats.slack bounds either.
//
//go:noescape
func dotRows4BF16(rows []uint16, dim int, q []float32, out *[4]float32)
