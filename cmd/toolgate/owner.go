package main

import (
	"path/filepath"

	"github.com/toolgate/toolgate/gateway/backend/oauth"
	"github.com/toolgate/toolgate/gateway/live"
	"github.com/toolgate/toolgate/index"
	"github.com/toolgate/toolgate/internal/datafile"
	"github.com/toolgate/toolgate/internal/dirs"
)

// giveDataFolderBack leaves what a command run by root wrote in the data
// folder of a gateway that runs as its own user (`sudo toolgate index`)
// that user's: the folder's owner's (datafile.GiveTreesToOwner). Only
// toolgate's own files and folders there are looked at.
func (g *globals) giveDataFolderBack() {
	d := g.DataDir()
	datafile.GiveTreesToOwner(d, []string{
		index.Dir(d), filepath.Dir(dirs.EmbeddingCache(d)), learnDir(g), filepath.Join(d, oauth.StoreDir),
		filepath.Dir(dirs.Audit(d)), filepath.Dir(dirs.Pins(d)), dirs.Sockets(d), dirs.Models("", "", d),
		dirs.Keys(d), dirs.Keys(d) + ".lock", live.StateFile(d), live.StateFile(d) + ".lock",
	})
}
