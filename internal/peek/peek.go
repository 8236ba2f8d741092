// Package peek reads the start of an HTTP body and puts it back, for a
// check of what an answer holds before its reader (go-sdk's) reads it.
package peek

import (
	"bytes"
	"io"
	"net/http"
)

// Body reads up to n bytes of resp's body and puts them back in front of
// the rest, for whoever reads the body next (closing it closes the
// original). The error is the read's, if any (what was read is put back
// all the same).
func Body(resp *http.Response, n int64) ([]byte, error) {
	head, err := io.ReadAll(io.LimitReader(resp.Body, n))
	rest := resp.Body
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(head), rest), rest}
	return head, err
}
