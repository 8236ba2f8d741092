//go:build !amd64

package index

const haveDotRows4 = false

func dotRows4(rows []float32, dim int, q []float32, out *[4]float32) {
	for r := range 4 {
		out[r] = dot(rows[r*dim:(r+1)*dim], q)
	}
}

func dotRows4BF16(rows []uint16, dim int, q []float32, out *[4]float32) {
	for r := range 4 {
		out[r] = dotBF16(rows[r*dim:(r+1)*dim], q)
	}
}
