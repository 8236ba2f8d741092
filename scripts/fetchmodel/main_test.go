package main

import (
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// scripts/fetch-model.sh exits with the command's own status and words: a
// usage error is 2, as `toolgate models fetch` gives it, with nothing
// added. Through `go run` it was 1, after a line "exit status 2".
func TestScriptExitStatus(t *testing.T) {
	cmd := exec.Command(filepath.Join("..", "fetch-model.sh"), "--from", filepath.Join(t.TempDir(), "missing"), "--dir", t.TempDir())
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 {
		t.Errorf("exit: %v, want status 2\n%s", err, out)
	}
	if !strings.Contains(string(out), "fetch-model: --from ") || strings.Contains(string(out), "exit status") {
		t.Errorf("output: want the error alone, from fetch-model:\n%s", out)
	}
}
