package oauth

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestAskStepUp: the record takes the scopes a 403 asks for that the login
// lacks, once each (asking again adds nothing, so nothing is written), as
// a union over the 403s; drops what is no scope-token; and stops at
// MaxStepUpScope however much a server asks for. A login granted them
// clears it, one granted some keeps the rest.
func TestAskStepUp(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	l := &Credentials{Scopes: []string{"mcp:basic"}}
	if !askStepUp(l, []string{"mcp:basic", "mcp:write"}, now) || !slices.Equal(l.PendingScopes(), []string{"mcp:write"}) || !l.StepUp.Asked.Equal(now) {
		t.Fatalf("first 403: %+v", l.StepUp)
	}
	if askStepUp(l, []string{"mcp:basic", "mcp:write"}, now.Add(time.Minute)) || !l.StepUp.Asked.Equal(now) {
		t.Errorf("the same 403 again added to the record: %+v", l.StepUp)
	}
	if !askStepUp(l, []string{"mcp:write", "mcp:admin", `bad"scope`, "back\\slash", "ünï"}, now) {
		t.Fatal("a 403 asking for one more scope added nothing")
	}
	if want := []string{"mcp:write", "mcp:admin"}; !slices.Equal(l.PendingScopes(), want) {
		t.Errorf("pending %v, want the union %v without what is no scope-token", l.PendingScopes(), want)
	}

	var many []string
	for i := range 500 {
		many = append(many, fmt.Sprintf("scope:%04d", i))
	}
	askStepUp(l, many, now)
	if n := len(strings.Join(l.PendingScopes(), " ")); n > MaxStepUpScope || n < MaxStepUpScope-20 {
		t.Errorf("a hostile server's 500 scopes made a record of %d bytes, want at most %d (and near it)", n, MaxStepUpScope)
	}
	if askStepUp(l, []string{"scope:more"}, now) {
		t.Error("the record grew past its cap")
	}
	if askStepUp(l, []string{strings.Repeat("x", MaxStepUpScope+1)}, now) {
		t.Error("a scope longer than the cap was taken")
	}

	l.StepUp = &StepUp{Scopes: []string{"mcp:write", "mcp:admin"}, Asked: now}
	l.Scopes = []string{"mcp:basic", "mcp:write"}
	l.grant()
	if !slices.Equal(l.PendingScopes(), []string{"mcp:admin"}) {
		t.Errorf("a login granted mcp:write left %v pending, want mcp:admin", l.PendingScopes())
	}
	l.Scopes = append(l.Scopes, "mcp:admin")
	if l.grant(); l.StepUp != nil {
		t.Errorf("a login granted every scope left %+v", l.StepUp)
	}
}
