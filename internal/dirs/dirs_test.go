package dirs_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/dirs"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/models"
)

// clearEnv unsets every variable dirs reads, with HOME set to a temp dir.
func clearEnv(t *testing.T) (home string) {
	t.Helper()
	for _, k := range []string{dirs.EnvData, dirs.EnvModels, dirs.EnvORTLib, dirs.EnvCache, "XDG_DATA_HOME", "XDG_CACHE_HOME"} {
		t.Setenv(k, "")
	}
	home = t.TempDir()
	t.Setenv("HOME", home)
	return home
}

func TestDataPrecedence(t *testing.T) {
	home := clearEnv(t)
	check := func(what, got, want string) {
		t.Helper()
		if got != want {
			t.Errorf("%s: %q, want %q", what, got, want)
		}
	}
	check("default", dirs.Data("", ""), filepath.Join(home, ".local", "share", "toolgate"))
	t.Setenv("XDG_DATA_HOME", "/xdg")
	check("XDG_DATA_HOME", dirs.Data("", ""), "/xdg/toolgate")
	check("config beats XDG", dirs.Data("", "/cfg"), "/cfg")
	t.Setenv(dirs.EnvData, "/env")
	check("env beats config", dirs.Data("", "/cfg"), "/env")
	check("flag beats env", dirs.Data("/flag", "/cfg"), "/flag")
	// What a command finds with neither flag nor environment.
	check("DefaultData ignores the environment", dirs.DefaultData("/cfg"), "/cfg")
	check("DefaultData without config", dirs.DefaultData(""), "/xdg/toolgate")
}

func TestModelsPrecedence(t *testing.T) {
	clearEnv(t)
	if got := dirs.Models("", "", "/data"); got != "/data/models" {
		t.Errorf("default: %q", got)
	}
	if got := dirs.Models("", "/cfg", "/data"); got != "/cfg" {
		t.Errorf("config: %q", got)
	}
	t.Setenv(dirs.EnvModels, "/env")
	if got := dirs.Models("", "/cfg", "/data"); got != "/env" {
		t.Errorf("env beats config: %q", got)
	}
	if got := dirs.Models("/flag", "/cfg", "/data"); got != "/flag" {
		t.Errorf("flag beats env: %q", got)
	}
}

// A models folder gives its all-MiniLM-L6-v2/ subfolder; a folder that holds
// tokenizer.json itself is the model folder.
func TestModelFolderBothSpellings(t *testing.T) {
	clearEnv(t)
	modelsDir := t.TempDir()
	if got, want := dirs.ModelFolder(modelsDir, "", "/data"), models.ModelDir(modelsDir); got != want {
		t.Errorf("models folder: %q, want %q", got, want)
	}
	modelDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(modelDir, "tokenizer.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := dirs.ModelFolder(modelDir, "", "/data"); got != modelDir {
		t.Errorf("model folder itself: %q, want %q", got, modelDir)
	}
}

func TestORTLibPrecedence(t *testing.T) {
	home := clearEnv(t)
	p := models.Manifest().Runtime["onnxruntime"]
	want := filepath.Join(home, ".cache", "toolgate", "onnxruntime", p.String("version"), p.String("file"))
	if got := dirs.ORTLib("", ""); got != want {
		t.Errorf("default: %q, want %q", got, want)
	}
	t.Setenv("XDG_CACHE_HOME", "/xdgc")
	if got := dirs.Cache(); got != "/xdgc/toolgate" {
		t.Errorf("XDG_CACHE_HOME: cache %q", got)
	}
	t.Setenv(dirs.EnvCache, "/tc")
	if got := dirs.CachedTokenizersLib(); !strings.HasPrefix(got, "/tc/tokenizers/") || !strings.HasSuffix(got, "/libtokenizers.a") {
		t.Errorf("TOOLGATE_CACHE: tokenizers lib %q", got)
	}
	if got := dirs.ORTLib("", "/cfg.so"); got != "/cfg.so" {
		t.Errorf("config: %q", got)
	}
	t.Setenv(dirs.EnvORTLib, "/env.so")
	if got := dirs.ORTLib("", "/cfg.so"); got != "/env.so" {
		t.Errorf("env beats config: %q", got)
	}
	if got := dirs.ORTLib("/flag.so", "/cfg.so"); got != "/flag.so" {
		t.Errorf("flag beats env: %q", got)
	}
}

// scripts/native-env.sh (what `make` and `source` use) and dirs agree on
// where the cached ONNX Runtime library is.
func TestNativeEnvScriptAgrees(t *testing.T) {
	clearEnv(t)
	cache := t.TempDir()
	t.Setenv(dirs.EnvCache, cache)
	out, err := exec.Command("bash", "../../scripts/native-env.sh", "--print").Output()
	if err != nil {
		t.Fatalf("native-env.sh --print: %v", err)
	}
	var got string
	for l := range strings.SplitSeq(string(out), "\n") {
		if v, ok := strings.CutPrefix(l, dirs.EnvORTLib+"="); ok {
			got = v
		}
	}
	if want := dirs.CachedORTLib(); got != want {
		t.Errorf("native-env.sh says %s=%q, dirs says %q", dirs.EnvORTLib, got, want)
	}
}

// The libraries are given paths; none reads the environment or the home
// folder (that is this package's job, for the commands).
func TestLibrariesReadNoEnvironment(t *testing.T) {
	banned := map[string]bool{"Getenv": true, "LookupEnv": true, "Environ": true, "UserHomeDir": true, "UserCacheDir": true, "UserConfigDir": true}
	for _, pkg := range []string{"embed", "models", "index", "index/catalog", "search"} {
		files, err := filepath.Glob(filepath.Join("..", "..", pkg, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: no Go files (%v)", pkg, err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			file, err := parser.ParseFile(token.NewFileSet(), f, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(file, func(n ast.Node) bool {
				if sel, ok := n.(*ast.SelectorExpr); ok {
					if id, ok := sel.X.(*ast.Ident); ok && id.Name == "os" && banned[sel.Sel.Name] {
						t.Errorf("%s calls os.%s: libraries take paths and options; resolve them in internal/dirs", f, sel.Sel.Name)
					}
				}
				return true
			})
		}
	}
}

// Without HOME (a systemd unit, cron, env -i) the folders are under the
// user's home from the password database, not under /tmp.
func TestNoHome(t *testing.T) {
	clearEnv(t)
	t.Setenv("HOME", "")
	u, err := user.Current()
	if err != nil || u.HomeDir == "" {
		testenv.Missing(t, "this user has no home in the password database (%v)", err)
	}
	if got, want := dirs.Data("", ""), filepath.Join(u.HomeDir, ".local", "share", "toolgate"); got != want {
		t.Errorf("data folder without HOME = %q, want %q", got, want)
	}
	if got, want := dirs.Cache(), filepath.Join(u.HomeDir, ".cache", "toolgate"); got != want {
		t.Errorf("cache folder without HOME = %q, want %q", got, want)
	}
}

// A leading "~" is the home folder, in a flag, $TOOLGATE_DATA_DIR,
// $TOOLGATE_MODELS_DIR and a config's dataDir alike; others are left.
func TestExpandHome(t *testing.T) {
	home := clearEnv(t)
	for in, want := range map[string]string{
		"~":            home,
		"~/":           home,
		"~/a/b":        filepath.Join(home, "a", "b"),
		"~user/a":      "~user/a",
		"a/~/b":        "a/~/b",
		"/abs":         "/abs",
		"":             "",
		"relative/dir": "relative/dir",
	} {
		if got := dirs.ExpandHome(in); got != want {
			t.Errorf("ExpandHome(%q) = %q, want %q", in, got, want)
		}
	}
	if got, want := dirs.Data("~/flag", ""), filepath.Join(home, "flag"); got != want {
		t.Errorf("Data(~/flag) = %q, want %q", got, want)
	}
	if got, want := dirs.Data("", "~/cfg"), filepath.Join(home, "cfg"); got != want {
		t.Errorf("Data with the config's ~/cfg = %q, want %q", got, want)
	}
	t.Setenv(dirs.EnvModels, "~/models")
	if got, want := dirs.Models("", "", "/data"), filepath.Join(home, "models"); got != want {
		t.Errorf("Models with $%s=~/models = %q, want %q", dirs.EnvModels, got, want)
	}
}

// An arbitrary container uid (no HOME, no entry in the password database)
// gets its data folder in the temp folder, shared and cleaned at boot;
// serve warns about it with DataInTemp. It said nothing: the keys, logins
// and learned pairs of a container's gateway went to /tmp/.local/share.
func TestDataInTemp(t *testing.T) {
	clearEnv(t)
	t.Setenv("HOME", "")
	defer dirs.SetCurrentUser(func() (*user.User, error) { return nil, user.UnknownUserIdError(12345) })()
	if got, want := dirs.Data("", ""), filepath.Join(os.TempDir(), ".local", "share", "toolgate"); got != want {
		t.Errorf("data folder of an unknown user without HOME = %q, want %q", got, want)
	}
	why := dirs.DataInTemp("", "")
	if !strings.Contains(why, "no HOME") || !strings.Contains(why, "has no entry in the password database") {
		t.Errorf("DataInTemp without HOME of an unknown user = %q, want why", why)
	}
	if why := dirs.DataInTemp("", "~/tg"); why == "" {
		t.Errorf("DataInTemp with the config's ~/tg = \"\", want why (~ is the temp folder)")
	}
	for what, f := range map[string]func() string{
		"the flag":   func() string { return dirs.DataInTemp("/srv/tg", "") },
		"the config": func() string { return dirs.DataInTemp("", "/srv/tg") },
		"$" + dirs.EnvData: func() string {
			t.Setenv(dirs.EnvData, "/srv/tg")
			defer t.Setenv(dirs.EnvData, "")
			return dirs.DataInTemp("", "")
		},
		"$XDG_DATA_HOME": func() string {
			t.Setenv("XDG_DATA_HOME", "/srv")
			defer t.Setenv("XDG_DATA_HOME", "")
			return dirs.DataInTemp("", "")
		},
		"HOME": func() string {
			t.Setenv("HOME", "/srv/home")
			defer t.Setenv("HOME", "")
			return dirs.DataInTemp("", "")
		},
	} {
		if why := f(); why != "" {
			t.Errorf("DataInTemp with a data folder from %s = %q, want \"\"", what, why)
		}
	}
}

// TestDataRelative: a relative data folder (--data-dir data,
// $TOOLGATE_DATA_DIR=data) is made absolute against the working folder
// when it is read, so that what the gateway says of it (GET /status'
// storage.dataDir, toolgate status, the commands it prints) names that
// folder from any other: it said "data", another folder from elsewhere.
func TestDataRelative(t *testing.T) {
	clearEnv(t)
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := dirs.Data("data", ""), filepath.Join(wd, "data"); got != want {
		t.Errorf("--data-dir data: %q, want %q", got, want)
	}
	t.Setenv(dirs.EnvData, "./env/../d2")
	if got, want := dirs.Data("", ""), filepath.Join(wd, "d2"); got != want {
		t.Errorf("$TOOLGATE_DATA_DIR=./env/../d2: %q, want %q", got, want)
	}
}
