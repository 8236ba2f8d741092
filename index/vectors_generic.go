//go:build !amd64

package index

const haveDotRows4 = false

func dotRows4(rows []float32, dim int, q []float32, out *[4]float32) {
	for r := range 4 {
		out[r] = dot(rows[r*dim:(r+1)*dim], q)
	}
}
