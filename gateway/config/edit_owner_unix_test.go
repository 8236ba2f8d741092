//go:build unix

package config

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/toolgate/toolgate/internal/testenv"
)

// A config that root edits (`sudo toolgate servers add --config
// /etc/toolgate/servers.json`) stays its owner's: the gateway running as
// that user still reads it. It became root's and 0600 before, so the
// gateway's next reload failed ("permission denied").
func TestWriteFileKeepsOwner(t *testing.T) {
	path := filepath.Join(t.TempDir(), "servers.json") // in root's folder when root
	if err := os.WriteFile(path, []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	owner := testenv.GatewayOwner(t, path)
	if err := WriteFile(path, []byte(`{"mcpServers": {}}`)); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != owner {
		t.Errorf("owned by %d after the edit, want %d as before", st.Uid, owner)
	}
}
