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

// dotRows4I8 writes the integer dot product of the 8-bit rows[r*dim:
// (r+1)*dim] with q to out[r] for r = 0..3, as dotI8 does. rows must hold
// 4·dim values and q dim; dim must be a positive multiple of 16 and at most
// q8MaxDim.
//
//go:noescape
func dotRows4I8(rows []int8, dim int, q []int16, out *[4]int32)
