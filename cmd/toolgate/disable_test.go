package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/gateway/backend"
	"github.com/toolgate/toolgate/gateway/backend/backendtest"
	"github.com/toolgate/toolgate/internal/testenv"
)

// TestDisableDuringCall: a server disabled while a call to it is in
// flight fails the call saying it was disabled and by what (the command
// line, a management tool, the console), with the may-have-run warning.
// It said "it was removed from the config during the call": the disable
// went through the pool as a removal, and the reason was lost.
func TestDisableDuringCall(t *testing.T) {
	data := t.TempDir()
	cfg := fakeConfig(t, map[string]string{"slow": backendtest.ModeHang, "other": ""}, nil)
	admin := createKey(t, data, "--name", "admin", "--admin")
	addr, _ := startGateway(t, data, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cs, err := connectKey(ctx, t, addr, "/mcp", admin, "disabler")
	if err != nil {
		t.Fatal(err)
	}
	inFlight := func() int {
		rep := statusAs(t, addr, admin, "/status")
		for _, b := range rep.Backends {
			if b.Name == "slow" && b.State == "up" {
				return b.InFlight
			}
		}
		return -1
	}
	for _, tc := range []struct {
		by      string
		disable func()
	}{
		{"`toolgate servers disable` (the data folder's state.json)", func() {
			// Its name in capitals, checked against the running gateway's
			// servers (no --config): read as the management tools read it.
			if _, stderr, err := runToolgate(t, data, "servers", "disable", "SLOW"); err != nil {
				t.Fatalf("servers disable: %v\n%s", err, stderr)
			}
		}},
		{"toolgate__disable_server", func() {
			if res := executeTool(t, ctx, cs, "toolgate__disable_server", map[string]any{"name": "slow"}); res.IsError {
				t.Fatalf("toolgate__disable_server: %s", resultText(res))
			}
		}},
		{"the console", func() {
			req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/ui/api/disable", strings.NewReader(`{"server": "slow"}`))
			req.Header.Set("Authorization", "Bearer "+admin)
			req.Header.Set("Content-Type", "application/json")
			r, err := http.DefaultClient.Do(req)
			if err != nil || r.StatusCode != http.StatusOK {
				t.Fatalf("POST /ui/api/disable: %v %v", r, err)
			}
			r.Body.Close()
		}},
	} {
		t.Run(tc.by, func(t *testing.T) {
			if res := executeTool(t, ctx, cs, "toolgate__enable_server", map[string]any{"name": "slow"}); res.IsError {
				t.Fatalf("enable slow: %s", resultText(res))
			}
			testenv.Eventually(t, "slow up", func() bool { return inFlight() == 0 })
			done := make(chan string, 1)
			go func() {
				res := executeTool(t, ctx, cs, "slow__hang", nil)
				done <- resultText(res)
			}()
			testenv.Eventually(t, "the call in flight", func() bool { return inFlight() == 1 })
			tc.disable()
			got := <-done
			want := `server "slow" is unavailable: it was disabled by ` + tc.by + " during the call: " + backend.ErrMayHaveRun.Error()
			if !strings.Contains(got, want) {
				t.Errorf("the call in flight reads:\n%s\nwant in it:\n%s", got, want)
			}
		})
	}
}
