//go:build !amd64

package index

const haveDotRows4 = false

func dotRows4(rows []float32, dim int, q []float32, out *[4]float32) {
	for r := range 4 {
		out[r] = dot(rows[r*dim:(r+1)*dim], q)
	}
}

func dotRows4I8(rows []int8, dim int, q []int16, out *[4]int32) {
	for r := range 4 {
		out[r] = dotI8(rows[r*dim:(r+1)*dim], q)
	}
}
