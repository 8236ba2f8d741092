package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/embed"
	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/internal/dirs"
	"github.com/toolgate/toolgate/internal/storage"
	"github.com/toolgate/toolgate/internal/termtext"
	"github.com/toolgate/toolgate/models"
)

func init() { register(newDoctorCmd) }

// doctorCheck is one line of `toolgate doctor`.
type doctorCheck struct {
	Name    string `json:"name"`
	Status  string `json:"status"` // ok | missing | bad | optional | warning
	Path    string `json:"path,omitempty"`
	Version string `json:"version,omitempty"`
	SHA256  string `json:"sha256,omitempty"`
	// Pinned is the sha256 the manifest pins ("" when it pins none).
	Pinned string `json:"pinnedSha256,omitempty"`
	Loads  *bool  `json:"loads,omitempty"`
	Detail string `json:"detail,omitempty"`
	Fix    string `json:"fix,omitempty"`
	// Indexes are the index check's: every index the data folder keeps,
	// the current one first, then those kept for other configs (see
	// doctorIndexes).
	Indexes []doctorIndexEntry `json:"indexes,omitempty"`
}

// Doctor statuses. optional is a missing piece nothing needs right now (the
// int8 model while fp32 is selected); it does not fail doctor.
const (
	statusOK       = "ok"
	statusMissing  = "missing"
	statusBad      = "bad"
	statusOptional = "optional"
	// statusWarning is a piece that works but wants a change (its fix):
	// it does not fail doctor.
	statusWarning = "warning"
)

type doctorReport struct {
	OK      bool          `json:"ok"`
	DataDir string        `json:"dataDir"`
	Checks  []doctorCheck `json:"checks"`
}

// doctorHooks add lines for other packages' state (the index engineer adds
// the index state with registerDoctorCheck from their own file's init).
var (
	doctorHooksMu sync.Mutex
	doctorHooks   []func(ctx context.Context, g *globals, cfg *config.File) doctorCheck
)

// registerDoctorCheck adds a check to `toolgate doctor`, run after the
// native pieces; cfg is the --config given (nil: none).
func registerDoctorCheck(f func(ctx context.Context, g *globals, cfg *config.File) doctorCheck) {
	doctorHooksMu.Lock()
	defer doctorHooksMu.Unlock()
	doctorHooks = append(doctorHooks, f)
}

func newDoctorCmd(g *globals) *cobra.Command {
	var asJSON bool
	var configs []string
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Report each native piece (ONNX Runtime, tokenizer library, model files): path, version, sha256, whether it loads",
		Long: `doctor checks what semantic ranking needs and says how to fix what is missing:
the ONNX Runtime shared library, the tokenizer library linked into this binary,
the model files against the sha256 pinned in models/manifest.json, whether the
embedder loads, and where the data folder and embedding cache are.
With --config (or $TOOLGATE_CONFIG), the config's dataDir and toolgate.embed
settings apply as serve reads them, so the pieces checked are the ones the
gateway of that config uses.
It exits 1 when a needed piece is missing or broken.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var cfg *config.File
			if len(configs) > 0 {
				var err error
				if cfg, _, err = g.readConfigs(configs); err != nil {
					return err
				}
			}
			rep, err := runDoctor(cmd.Context(), g, cfg)
			if err != nil {
				return err
			}
			out := bufio.NewWriter(cmd.OutOrStdout())
			defer out.Flush()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				if err := enc.Encode(rep); err != nil {
					return err
				}
			} else {
				printDoctor(out, rep)
			}
			if !rep.OK {
				out.Flush()
				// The fetch quoted reaches this config's models folder
				// (and this data folder), as auth's quoted login does.
				fetch := g.commandWith(g.configDataDir, append([]string{"toolgate", "models", "fetch"}, configArgs(configs)...)...)
				return fmt.Errorf("doctor: some pieces are missing or broken (see above): run the fix of each; `%s` installs the model files with this binary (in a source checkout, `make deps` installs every piece)", fetch)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	configsFlag(cmd, &configs)
	g.addEmbedFlags(cmd)
	return cmd
}

func runDoctor(ctx context.Context, g *globals, cfg *config.File) (*doctorReport, error) {
	opts, err := g.embedOptions()
	if err != nil {
		return nil, err
	}
	rep := &doctorReport{DataDir: g.DataDir()}
	add := func(c doctorCheck) { rep.Checks = append(rep.Checks, c) }

	add(dataDirCheck(g.DataDir(), g.health()))

	ortCheck, ortOK := doctorORT(opts.ORTLib, g.embedFlags.ORTLibFix())
	add(ortCheck)
	add(doctorTokenizers())

	modelsDir := filepath.Dir(opts.ModelDir)
	for _, v := range []embed.Variant{embed.FP32, embed.INT8} {
		add(doctorModel(modelsDir, opts.ModelDir, v, v == opts.Variant))
	}

	// Does the selected variant load end to end (tokenizer + session)?
	// One session shows it as well as serve's layout does. The load's own
	// log line would only repeat, before the report, what the report says.
	opts.Sessions = 1
	opts.Logger = nil
	ec := doctorCheck{Name: "embedder " + string(opts.Variant), Path: opts.ModelDir}
	if !ortOK {
		ec.Status, ec.Detail, ec.Fix = statusMissing, "needs the ONNX Runtime library", ortCheck.Fix
	} else if e, err := embed.New(opts); err != nil {
		ec.Status, ec.Detail = statusBad, err.Error()
		ec.Loads = ptr(false)
		var me *embed.MissingError
		if errors.As(err, &me) {
			ec.Status, ec.Fix = statusMissing, me.Fix
		}
	} else {
		ec.Status, ec.Version, ec.Loads = statusOK, e.ModelID(), ptr(true)
		if _, err := e.Embed(ctx, []string{"doctor"}); err != nil {
			ec.Status, ec.Detail, ec.Loads = statusBad, "embedding a test string: "+err.Error(), ptr(false)
		}
		e.Close()
	}
	add(ec)
	add(dirCheck("embedding cache", g.embeddingCacheDir(), "created on first use"))

	doctorHooksMu.Lock()
	hooks := append([]func(context.Context, *globals, *config.File) doctorCheck(nil), doctorHooks...)
	doctorHooksMu.Unlock()
	for _, h := range hooks {
		add(h(ctx, g, cfg))
	}

	rep.OK = true
	for _, c := range rep.Checks {
		if c.Status == statusMissing || c.Status == statusBad {
			rep.OK = false
		}
	}
	return rep, nil
}

func ptr[T any](v T) *T { return &v }

// dataDirCheck is the data folder's line: bad when this user may not use
// what is in it (copied or restored by another user: storage.Unusable,
// what serve warns of at start), a warning when its stores are open to
// every user.
func dataDirCheck(dir string, health *storage.Health) doctorCheck {
	dc := dirCheck("data dir", dir, "created on first use")
	if dc.Status != statusOK {
		return dc
	}
	if names, fix := storage.Unusable(dir); names != "" {
		dc.Status, dc.Detail, dc.Fix = statusBad, "this user may not use: "+names, fix
	} else if open, fix := health.Exposed(); open != "" {
		dc.Status, dc.Detail, dc.Fix = statusWarning, "open to every user of this machine: "+open, fix
	}
	return dc
}

func dirCheck(name, dir, absent string) doctorCheck {
	c := doctorCheck{Name: name, Path: dir, Status: statusOK}
	if fi, err := os.Stat(dir); err != nil {
		c.Detail = "does not exist yet (" + absent + ")"
	} else if !fi.IsDir() {
		c.Status, c.Detail = statusBad, "not a directory"
	}
	return c
}

// doctorORT checks the ONNX Runtime library: present, sha256 against the
// pin, and that it loads (its version string).
func doctorORT(path, fix string) (doctorCheck, bool) {
	c := doctorCheck{Name: "onnxruntime", Path: path, Pinned: embed.ORTLibSHA256, Fix: fix}
	sum, err := regularFileSHA256(path)
	if err != nil {
		c.Status, c.Detail = statusMissing, err.Error()
		return c, false
	}
	c.SHA256 = sum
	v, err := embed.ORTVersionLoaded(path)
	if err != nil {
		c.Status, c.Detail, c.Loads = statusBad, err.Error(), ptr(false)
		return c, false
	}
	c.Version, c.Loads, c.Status, c.Fix = v, ptr(true), statusOK, ""
	switch {
	case sum != embed.ORTLibSHA256:
		c.Detail = fmt.Sprintf("loads, but is not the pinned onnxruntime %s build (a --ort-lib / $TOOLGATE_ORT_LIB override?)", embed.ORTVersion)
	case v != embed.ORTVersion:
		c.Detail = fmt.Sprintf("version %s, pinned %s", v, embed.ORTVersion)
	default:
		c.Detail = "pinned build"
	}
	return c, true
}

// doctorTokenizers reports the tokenizer library: embed reports the version
// linked into this binary (the library refused to start on a mismatch);
// the cached build is reported with its stamp.
func doctorTokenizers() doctorCheck {
	lib := dirs.CachedTokenizersLib()
	c := doctorCheck{Name: "tokenizers", Path: lib, Version: embed.TokenizersVersion, Status: statusOK,
		Loads: ptr(true), Detail: "libtokenizers " + embed.TokenizersVersion + " linked into this binary"}
	if sum, err := regularFileSHA256(lib); err == nil {
		c.SHA256 = sum
		if stamp, err := os.ReadFile(filepath.Join(filepath.Dir(lib), "STAMP")); err == nil {
			for _, line := range strings.Split(string(stamp), "\n") {
				if r, ok := strings.CutPrefix(line, "rustc="); ok {
					c.Detail += "; cached build by " + r
				}
			}
		}
	} else {
		c.Detail += "; the cached static library is gone (only needed to rebuild: scripts/build-tokenizers.sh)"
	}
	return c
}

// doctorModel verifies one variant's model file against the manifest.
func doctorModel(modelsDir, modelDir string, v embed.Variant, selected bool) doctorCheck {
	c := doctorCheck{Name: "model " + string(v), Path: filepath.Join(modelDir, v.ModelFile())}
	fix := models.FetchCommand(string(v), modelsDir)
	inst, err := models.Verify(modelsDir, string(v))
	if inst != nil {
		var notes []string
		for _, f := range inst.Files {
			if f.Name == v.ModelFile() {
				c.Path, c.SHA256 = f.Path, f.SHA256
			}
			if f.Err != nil {
				notes = append(notes, f.Name+": "+f.Err.Error())
			} else if f.Name == embed.TokenizerFile {
				notes = append(notes, "tokenizer.json sha256 "+short(f.SHA256)+" accepted")
			}
		}
		c.Detail = strings.Join(notes, "; ")
	}
	switch {
	case err == nil:
		c.Status = statusOK
		c.Pinned = c.SHA256 // Verify accepted it: it is one of the pinned values
		c.Detail = strings.TrimSuffix("sha256 accepted by models/manifest.json; "+c.Detail, "; ")
	case !selected:
		c.Status, c.Detail, c.Fix = statusOptional, "not usable (variant not selected): "+err.Error(), fix
	default:
		c.Status, c.Detail, c.Fix = statusBad, err.Error(), fix
		if pe := (*fs.PathError)(nil); errors.Is(err, fs.ErrPermission) && errors.As(err, &pe) {
			c.Fix = storage.ReadFix(pe.Path) // there, but not this user's to read: a fetch would not help
		}
		if _, serr := os.Stat(c.Path); serr != nil {
			c.Status = statusMissing
		}
	}
	return c
}

func short(sum string) string {
	if len(sum) > 12 {
		return sum[:12]
	}
	return sum
}

func printDoctor(w io.Writer, rep *doctorReport) {
	tw := termtext.NewTable(w)
	for _, c := range rep.Checks {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", c.Name, c.Status, c.Path)
		var facts []string
		if c.Version != "" {
			facts = append(facts, "version "+c.Version)
		}
		if c.SHA256 != "" {
			s := "sha256 " + c.SHA256
			if c.Pinned != "" && c.Pinned == c.SHA256 {
				s += " (pinned)"
			} else if c.Pinned != "" {
				s += " (pinned " + short(c.Pinned) + ")"
			}
			facts = append(facts, s)
		}
		if c.Loads != nil {
			facts = append(facts, map[bool]string{true: "loads", false: "does not load"}[*c.Loads])
		}
		if len(facts) > 0 {
			fmt.Fprintf(tw, "\t\t%s\n", strings.Join(facts, ", "))
		}
		// A detail of several lines (errors.Join's) keeps to its column.
		for _, line := range strings.Split(c.Detail, "\n") {
			if line != "" {
				fmt.Fprintf(tw, "\t\t%s\n", line)
			}
		}
		if c.Fix != "" && c.Status != statusOK {
			fmt.Fprintf(tw, "\t\tfix: %s\n", c.Fix)
		}
		for _, ix := range c.Indexes {
			fmt.Fprintf(tw, "\t\t%s\n", ix)
		}
	}
	tw.Flush()
	if rep.OK {
		fmt.Fprintln(w, "all needed pieces present")
	}
}

// regularFileSHA256 hashes path, refusing anything but a regular file (a
// folder or device given by mistake).
func regularFileSHA256(path string) (string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%s is not a regular file", path)
	}
	return models.FileSHA256(path)
}
