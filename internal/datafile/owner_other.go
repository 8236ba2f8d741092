//go:build !unix

package datafile

import "os"

// GiveToOwner does nothing where files have no Unix owner.
func GiveToOwner(*os.File, string) {}

func giveFolderToOwner(string) {}

// GiveTreesToOwner does nothing where files have no Unix owner.
func GiveTreesToOwner(string, []string) {}
