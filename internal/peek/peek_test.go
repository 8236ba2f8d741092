package peek

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

type closer struct {
	io.Reader
	closed *bool
}

func (c closer) Close() error { *c.closed = true; return nil }

// The bytes read come back first, then the rest; closing the body closes
// the original; a short body is read whole.
func TestBody(t *testing.T) {
	for _, tc := range []struct {
		body string
		n    int64
		head string
	}{{"hello, world", 5, "hello"}, {"hi", 5, "hi"}, {"", 5, ""}} {
		var closed bool
		resp := &http.Response{Body: closer{strings.NewReader(tc.body), &closed}}
		head, err := Body(resp, tc.n)
		if err != nil || string(head) != tc.head {
			t.Errorf("Body(%q, %d) = %q, %v; want %q", tc.body, tc.n, head, err, tc.head)
		}
		all, err := io.ReadAll(resp.Body)
		if err != nil || string(all) != tc.body {
			t.Errorf("the body read after Body(%q, %d): %q, %v; want it whole", tc.body, tc.n, all, err)
		}
		if resp.Body.Close(); !closed {
			t.Errorf("closing the body after Body(%q) left the original open", tc.body)
		}
	}
}

type failing struct{}

func (failing) Read([]byte) (int, error) { return 0, errors.New("connection reset") }

// A read error is returned, and reading the body again says it too.
func TestBodyError(t *testing.T) {
	var closed bool
	resp := &http.Response{Body: closer{io.MultiReader(strings.NewReader("ab"), failing{}), &closed}}
	head, err := Body(resp, 10)
	if err == nil || string(head) != "ab" {
		t.Errorf("Body of a body that fails after 2 bytes: %q, %v; want them and the error", head, err)
	}
	if all, err := io.ReadAll(resp.Body); err == nil || string(all) != "ab" {
		t.Errorf("reading it again: %q, %v; want the 2 bytes and the error", all, err)
	}
}
