// Package dirs owns where toolgate's files live on a user's machine, and is
// the one place that reads the environment variables naming them:
//
//	data folder    --data-dir   > $TOOLGATE_DATA_DIR   > config dataDir      > $XDG_DATA_HOME/toolgate (~/.local/share/toolgate)
//	models folder  --model-dir  > $TOOLGATE_MODELS_DIR > config embed.modelDir > <data folder>/models
//	ONNX Runtime   --ort-lib    > $TOOLGATE_ORT_LIB    > config embed.ortLib   > <cache>/onnxruntime/<version>/libonnxruntime.so.1
//	cache folder                  $TOOLGATE_CACHE                              > $XDG_CACHE_HOME/toolgate (~/.cache/toolgate)
//
// A flag beats the environment, the environment beats the config file, and
// the XDG default comes last. The scripts (scripts/native-env.sh,
// fetch-*.sh, build-tokenizers.sh) follow the same rules for the cache and
// models folders.
//
// Only commands (cmd/toolgate, cmd/toolgate-bench, scripts/fetchmodel) and
// tests import dirs. The libraries (embed, models, index, …) receive the
// resolved paths and never read the environment. dirs builds without cgo,
// so scripts/fetchmodel can use it before the tokenizer library exists.
package dirs

import (
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strings"

	"github.com/toolgate/toolgate/models"
)

// Environment variables read by this package (and by nothing else).
const (
	EnvData   = "TOOLGATE_DATA_DIR"
	EnvModels = "TOOLGATE_MODELS_DIR"
	EnvORTLib = "TOOLGATE_ORT_LIB"
	EnvCache  = "TOOLGATE_CACHE"
)

// first returns the first non-empty value.
func first(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

// Data is the per-user data folder (index, embedding cache, models):
// flag, else $TOOLGATE_DATA_DIR, else config (the config file's dataDir),
// else $XDG_DATA_HOME/toolgate, else ~/.local/share/toolgate. Deleting it
// is always safe: everything in it is rebuilt. A relative one is made
// absolute against the working folder (absolute): what names it (GET
// /status' storage.dataDir, the commands toolgate prints) then names it
// from any folder.
func Data(flag, config string) string {
	if d := first(flag, os.Getenv(EnvData)); d != "" {
		return absolute(ExpandHome(d))
	}
	return DefaultData(config)
}

// absolute is p made absolute against the working folder, or p when that
// cannot be known (removed under the process).
func absolute(p string) string {
	if abs, err := filepath.Abs(p); err == nil {
		return abs
	}
	return p
}

// DefaultData is the data folder when neither a flag nor $TOOLGATE_DATA_DIR
// names one: config, else $XDG_DATA_HOME/toolgate, else
// ~/.local/share/toolgate. (A command that prints another command for the
// user to run passes --data-dir when Data differs from it.)
func DefaultData(config string) string {
	if config != "" {
		return absolute(ExpandHome(config))
	}
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "toolgate")
	}
	return filepath.Join(homeDir(), ".local", "share", "toolgate")
}

// Models is the models folder (the one holding all-MiniLM-L6-v2/): flag,
// else $TOOLGATE_MODELS_DIR, else config, else <dataDir>/models.
func Models(flag, config, dataDir string) string {
	if d := first(flag, os.Getenv(EnvModels), config); d != "" {
		return ExpandHome(d)
	}
	return filepath.Join(dataDir, "models")
}

// ModelFolder is the folder holding the model's files (model.onnx,
// tokenizer.json). The folder given by flag, $TOOLGATE_MODELS_DIR or config
// is the models folder above it, as for Models; one that holds
// tokenizer.json itself is taken as the model folder, so both spellings of
// --model-dir work.
func ModelFolder(flag, config, dataDir string) string {
	d := Models(flag, config, dataDir)
	if _, tok, err := models.Paths(d, ""); err == nil {
		if _, err := os.Stat(filepath.Join(d, filepath.Base(tok))); err == nil {
			return d // d holds tokenizer.json: it is the model folder itself
		}
	}
	return models.ModelDir(d)
}

// Cache is where expensive native builds and downloads are cached, keyed by
// version: $TOOLGATE_CACHE, else $XDG_CACHE_HOME/toolgate, else
// ~/.cache/toolgate.
func Cache() string {
	if d := os.Getenv(EnvCache); d != "" {
		return d
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "toolgate")
	}
	return filepath.Join(homeDir(), ".cache", "toolgate")
}

// ORTLib is the ONNX Runtime shared library: flag, else $TOOLGATE_ORT_LIB,
// else config, else where scripts/fetch-onnxruntime.sh installs the pinned
// version (CachedORTLib).
func ORTLib(flag, config string) string {
	return ExpandHome(first(flag, os.Getenv(EnvORTLib), config, CachedORTLib()))
}

// CachedORTLib is where scripts/fetch-onnxruntime.sh installs the ONNX
// Runtime version pinned in models/manifest.json:
// <cache>/onnxruntime/<version>/<file>.
func CachedORTLib() string {
	p := models.Manifest().Runtime["onnxruntime"]
	return filepath.Join(Cache(), "onnxruntime", p.String("version"), p.String("file"))
}

// CachedTokenizersLib is where scripts/build-tokenizers.sh installs the
// libtokenizers.a pinned in models/manifest.json (linked at build time;
// doctor reports it): <cache>/tokenizers/<version>/<file>.
func CachedTokenizersLib() string {
	p := models.Manifest().Runtime["tokenizers"]
	return filepath.Join(Cache(), "tokenizers", p.String("version"), p.String("file"))
}

// EmbeddingCache is the Badger cache of embeddings in the data folder.
func EmbeddingCache(dataDir string) string { return filepath.Join(dataDir, "cache", "embeddings") }

// Keys is the data folder's file of API keys (`toolgate keys`).
func Keys(dataDir string) string { return filepath.Join(dataDir, "keys.jsonl") }

// Audit is the audit log in the data folder (rotated beside it as
// audit.jsonl.1 …).
func Audit(dataDir string) string { return filepath.Join(dataDir, "audit", "audit.jsonl") }

// Pins is the quarantine's file of tool-definition pins and approvals.
func Pins(dataDir string) string { return filepath.Join(dataDir, "quarantine", "pins.json") }

// homeDir is $HOME, else the user's home in the password database: a
// service started without HOME (a systemd unit, cron, `env -i`) used to get
// its data folder under /tmp (/tmp/.local/share/toolgate), shared with
// every user and cleaned at boot, with its API keys, logins and learned
// pairs. Only a user the database does not know (an arbitrary container
// uid) still gets the temp folder (homeUnknown says why).
func homeDir() string {
	if h, err := os.UserHomeDir(); err == nil {
		return h
	}
	if u, err := currentUser(); err == nil && u.HomeDir != "" {
		return u.HomeDir
	}
	return os.TempDir()
}

// currentUser is the running user in the password database (a test
// replaces it: it cannot become a uid the database does not know).
var currentUser = user.Current

// homeUnknown says why homeDir is the temp folder (no HOME, and a user the
// password database does not know), or "" when the home folder is known.
func homeUnknown() string {
	if _, err := os.UserHomeDir(); err == nil {
		return ""
	}
	u, err := currentUser()
	if err == nil && u.HomeDir != "" {
		return ""
	}
	why := "has no home folder in the password database"
	if err != nil {
		why = "has no entry in the password database"
	}
	return fmt.Sprintf("no HOME, and this user (uid %d) %s (an arbitrary uid, as containers run), so ~ is the temp folder %s", os.Getuid(), why, os.TempDir())
}

// DataInTemp says why the data folder that Data(flag, config) names is
// in the temp folder — shared with every user, cleaned at boot, gone with
// a container — because the home folder is not known (homeUnknown), or ""
// when a flag, $TOOLGATE_DATA_DIR, the config (other than ~/…) or
// $XDG_DATA_HOME names it, or the home folder is known.
func DataInTemp(flag, config string) string {
	if first(flag, os.Getenv(EnvData)) != "" {
		return ""
	}
	if config != "" && config != "~" && !strings.HasPrefix(config, "~/") {
		return ""
	}
	if config == "" && os.Getenv("XDG_DATA_HOME") != "" {
		return ""
	}
	return homeUnknown()
}

// ExpandHome is p with a leading "~" (alone, or before a "/") replaced by
// the user's home folder (homeDir). MCP clients start servers without a
// shell, so "~/servers.json" in a client's "args" reaches toolgate as
// written; it used to name a folder called "~" in whatever working
// directory the client chose. "~user/…" and a "~" further in are left.
func ExpandHome(p string) string {
	if p == "~" {
		return homeDir()
	}
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		return filepath.Join(homeDir(), rest)
	}
	return p
}

// Sockets is the data folder's folder of the running gateways' status
// sockets (package gateway/local), owner-only.
func Sockets(dataDir string) string { return filepath.Join(dataDir, "run") }
