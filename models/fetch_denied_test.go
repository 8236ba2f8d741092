//go:build linux

package models

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/testenv"
)

// A model file that is there but that this user may not read (a shared
// models folder fetched by root with umask 077, a chmod 600) is not
// fetched again: the fix is its access, said with its owner and mode. The
// fetch used to take it for a damaged file and download it from every
// source ("model file fails its check; fetching again"), in vain when the
// folder was not this user's either. As root, the fetch runs with nobody's
// file-system uid (root reads anything); another user is refused by the
// mode alone (0000).
func TestFetchUnreadableFile(t *testing.T) {
	repo, opts := hfRepo(t)
	modelDir := filepath.Join(opts.Dir, opts.Manifest.Model.Name)
	dst := filepath.Join(modelDir, "model.onnx")
	if err := os.MkdirAll(modelDir, 0o777); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{filepath.Dir(opts.Dir), opts.Dir, modelDir} { // reachable by nobody
		if err := os.Chmod(d, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	refused := os.FileMode(0o000)
	if os.Geteuid() == 0 {
		refused = 0o600
	}
	if err := os.WriteFile(dst, []byte(fakeFP32), refused); err != nil {
		t.Fatal(err)
	}
	var err error
	testenv.AsAnotherUser(func() { _, err = Fetch(context.Background(), opts) })
	if err == nil {
		t.Fatal("Fetch succeeded over a model file this user may not read")
	}
	for _, want := range []string{dst + " is there, but this user may not read it", "mode 0", "chown ", "then run the command again"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if n := repo.hitCount("/hf/onnx/model.onnx"); n != 0 {
		t.Errorf("model.onnx downloaded %d times over a file that was there", n)
	}
}
