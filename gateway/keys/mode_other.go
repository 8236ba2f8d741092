//go:build !unix

package keys

// othersMayWrite does nothing where files have no Unix mode bits.
func othersMayWrite(string) error { return nil }
