package gateway

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// sameJSON reports whether got and want are the same JSON value.
func sameJSON(t *testing.T, got json.RawMessage, want string) bool {
	t.Helper()
	var a, b any
	if err := json.Unmarshal(got, &a); err != nil {
		t.Fatalf("%s: %v", got, err)
	}
	if err := json.Unmarshal([]byte(want), &b); err != nil {
		t.Fatalf("%s: %v", want, err)
	}
	return cmp.Equal(a, b)
}
