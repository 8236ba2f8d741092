package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/gateway/backend/backendtest"
)

// TestBareNameDisabledServer, through the real gateway: servers a and b
// both have echo; with b disabled at run time, {"name": "echo"} ran
// a__echo, where the model may mean b__echo that a search showed it. It
// now runs nothing and names b__echo and why it cannot run.
func TestBareNameDisabledServer(t *testing.T) {
	data := t.TempDir()
	cfg := fakeConfig(t, map[string]string{"a": backendtest.ModeNormal, "b": backendtest.ModeNormal}, nil)
	addr, _ := startGateway(t, data, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := connectKey(ctx, t, addr, "/mcp", "", "bare")
	if err != nil {
		t.Fatal(err)
	}
	if res := executeTool(t, ctx, cs, "echo", map[string]any{"text": "hi"}); !res.IsError {
		t.Fatalf("echo of two servers ran: %s", resultText(res))
	}
	if res := executeTool(t, ctx, cs, "toolgate__disable_server", map[string]any{"name": "b"}); res.IsError {
		t.Fatalf("disable b: %s", resultText(res))
	}
	res := executeTool(t, ctx, cs, "echo", map[string]any{"text": "hi"})
	if txt := resultText(res); !res.IsError || !strings.Contains(txt, `b__echo has that name and cannot run now: server "b" is disabled`) {
		t.Errorf("echo with b disabled: isError=%v %s", res.IsError, txt)
	}
}
