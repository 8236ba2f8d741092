// Package models owns where model files and native runtime pieces live on
// disk, the committed manifest of their sources and sha256 checksums, and
// fetching them (local mirror, Hugging Face, Maven Central) with
// verification. Weights are never committed; only the manifest is.
package models

import (
	"os"
	"path/filepath"
)

// DataDir is the per-user data folder: $TOOLGATE_DATA_DIR, else
// $XDG_DATA_HOME/toolgate, else ~/.local/share/toolgate. Deleting it is always
// safe: everything in it is rebuilt.
func DataDir() string {
	if d := os.Getenv("TOOLGATE_DATA_DIR"); d != "" {
		return d
	}
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "toolgate")
	}
	return filepath.Join(homeDir(), ".local", "share", "toolgate")
}

// Dir is the folder holding model files: $TOOLGATE_MODELS_DIR, else
// <dataDir>/models. An empty dataDir means DataDir().
func Dir(dataDir string) string {
	if d := os.Getenv("TOOLGATE_MODELS_DIR"); d != "" {
		return d
	}
	if dataDir == "" {
		dataDir = DataDir()
	}
	return filepath.Join(dataDir, "models")
}

// CacheDir is where expensive native builds and downloads are cached, keyed
// by version and checksum: $TOOLGATE_CACHE, else $XDG_CACHE_HOME/toolgate,
// else ~/.cache/toolgate. scripts/ use the same rule.
func CacheDir() string {
	if d := os.Getenv("TOOLGATE_CACHE"); d != "" {
		return d
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "toolgate")
	}
	return filepath.Join(homeDir(), ".cache", "toolgate")
}

func homeDir() string {
	if h, err := os.UserHomeDir(); err == nil {
		return h
	}
	return os.TempDir()
}
