package models

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/toolgate/toolgate/internal/shellword"
	"github.com/toolgate/toolgate/internal/storage"
	"golang.org/x/sys/unix"
)

// Installed describes a variant's files on disk after Verify.
type Installed struct {
	Variant         string
	ModelDir        string // <models dir>/<model name>
	ModelPath       string
	TokenizerPath   string
	ModelSHA256     string
	TokenizerSHA256 string
	Files           []FileStatus
}

// FileStatus is one verified file.
type FileStatus struct {
	Name   string
	Path   string
	SHA256 string
	Size   int64
	Stamp  bool  // the sha256 came from a stamp the file still matches (not re-hashed)
	Err    error // nil when the file is present with an accepted sha256
}

// Paths returns where a variant's model and tokenizer live under the models
// folder dir, without checking them.
func Paths(dir, variant string) (modelPath, tokenizerPath string, err error) {
	return Manifest().Paths(dir, variant)
}

// Paths is the package-level Paths for this manifest.
func (m *ManifestFile) Paths(dir, variant string) (modelPath, tokenizerPath string, err error) {
	if dir == "" {
		return "", "", errors.New("no models folder given")
	}
	if variant == "" {
		variant = m.Model.DefaultVariant
	}
	v, ok := m.Model.Variants[variant]
	if !ok {
		return "", "", fmt.Errorf("model variant %q: want %s", variant, strings.Join(m.VariantNames(), " or "))
	}
	md := filepath.Join(dir, m.Model.Name)
	return filepath.Join(md, v.Model), filepath.Join(md, v.Tokenizer), nil
}

// Verify checks a variant's files under the models folder dir (variant
// "" = default) against the manifest. A file that matches the stamp
// written when it was last hashed (see stamp) is not re-hashed; use
// VerifyFull to re-hash everything. The error names the missing or wrong file
// and the command that fixes it.
func Verify(dir, variant string) (*Installed, error) { return Manifest().Verify(dir, variant, false) }

// VerifyFull is Verify re-hashing every file.
func VerifyFull(dir, variant string) (*Installed, error) {
	return Manifest().Verify(dir, variant, true)
}

// Verify checks a variant's files against this manifest; full re-hashes
// files even when their stamp matches.
func (m *ManifestFile) Verify(dir, variant string, full bool) (*Installed, error) {
	if variant == "" {
		variant = m.Model.DefaultVariant
	}
	modelPath, tokPath, err := m.Paths(dir, variant)
	if err != nil {
		return nil, err
	}
	v := m.Model.Variants[variant]
	in := &Installed{
		Variant:       variant,
		ModelDir:      filepath.Dir(modelPath),
		ModelPath:     modelPath,
		TokenizerPath: tokPath,
	}
	var errs []error
	for _, name := range []string{v.Model, v.Tokenizer} {
		st, err := checkFile(in.ModelDir, name, m.Model.Files[name], full)
		in.Files = append(in.Files, st)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		switch name {
		case v.Model:
			in.ModelSHA256 = st.SHA256
		case v.Tokenizer:
			in.TokenizerSHA256 = st.SHA256
		}
	}
	if len(errs) > 0 {
		fix := "run `" + FetchCommand(variant, dir) + "`"
		if p := deniedFile(errs); p != "" {
			fix = storage.ReadFix(p) // there, but this user may not read it: a fetch would not help
		}
		return in, fmt.Errorf("model %s/%s: %w (fix: %s)", m.Model.Name, variant, errors.Join(errs...), fix)
	}
	return in, nil
}

// checkFile checks one file against its accepted sha256 values, trusting a
// matching stamp unless full. The error wraps fs.ErrNotExist when absent.
func checkFile(modelDir, name string, spec FileSpec, full bool) (FileStatus, error) {
	p := filepath.Join(modelDir, name)
	st := FileStatus{Name: name, Path: p}
	fi, err := os.Stat(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			st.Err = fmt.Errorf("%s missing: %w", p, fs.ErrNotExist)
		} else {
			st.Err = err
		}
		return st, st.Err
	}
	if !fi.Mode().IsRegular() {
		st.Err = fmt.Errorf("%s: not a regular file", p)
		return st, st.Err
	}
	st.Size = fi.Size()
	if !full {
		if s, ok := readStamp(p); ok && s.matches(p) && spec.accepted(s.SHA256) != nil {
			st.SHA256, st.Stamp = s.SHA256, true
			return st, nil
		}
	}
	sha, err := hashStamped(p)
	if err != nil {
		st.Err = err
		return st, err
	}
	st.SHA256 = sha
	if spec.accepted(sha) == nil {
		st.Err = fmt.Errorf("%s: sha256 %s (%d bytes) is not pinned in the manifest (accepted: %s)", p, sha, fi.Size(), strings.Join(spec.AcceptedSHA256(), ", "))
		return st, st.Err
	}
	return st, nil
}

// FileSHA256 is the hex sha256 of the file at p.
func FileSHA256(p string) (string, error) {
	in, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer in.Close()
	h := sha256.New()
	if _, err := io.Copy(h, in); err != nil {
		return "", fmt.Errorf("hash %s: %w", p, err)
	}
	return hexSum(h), nil
}

// StampedSHA256 is the hex sha256 of the file at p, taken from the stamp
// Verify (or a fetch) wrote beside it while the file still matches it,
// else computed (and the stamp written, where the folder lets it). The
// embedder names its model by it at every start: the stamp spares hashing
// 90 MB (about 0.1 s) each time.
func StampedSHA256(p string) (string, error) {
	if _, err := os.Stat(p); err != nil {
		return "", err
	}
	if s, ok := readStamp(p); ok && s.matches(p) && sha256Re.MatchString(s.SHA256) {
		return s.SHA256, nil
	}
	return hashStamped(p) // a read-only models folder: hashed at each start
}

// hashStamped is the hex sha256 of the file at p, with its stamp written
// (where the folder lets it) unless the file changed while it was read.
func hashStamped(p string) (string, error) {
	before, err := fileStamp(p)
	if err != nil {
		return "", err
	}
	sha, err := FileSHA256(p)
	if err != nil {
		return "", err
	}
	if before.matches(p) {
		before.SHA256 = sha
		_ = putStamp(p, before)
	}
	return sha, nil
}

// stamp records a hashed file's sha256 with what the file was then: its
// size, mtime, ctime and inode, so the next start does not re-hash 90 MB.
// Any write to the file voids it, even one that kept its size and put its
// mtime back (cp -p, rsync --inplace, touch -r): that moves the ctime,
// which no user can set. A copy of the folder (a new inode and ctime) is
// hashed once more. A stamp without ctime_ns (written by a toolgate before
// 2026-12-07) matches nothing. Damage that no write made (bit rot) keeps
// the stamp: models verify --full and models fetch hash every file.
type stamp struct {
	SHA256  string `json:"sha256"`
	Size    int64  `json:"size"`
	MtimeNS int64  `json:"mtime_ns"`
	CtimeNS int64  `json:"ctime_ns"`
	Ino     uint64 `json:"ino"`
}

// fileStamp is what the file at p is now (sha256 left empty).
func fileStamp(p string) (stamp, error) {
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		return stamp{}, &fs.PathError{Op: "stat", Path: p, Err: err}
	}
	return stamp{Size: st.Size, MtimeNS: st.Mtim.Nano(), CtimeNS: st.Ctim.Nano(), Ino: uint64(st.Ino)}, nil
}

// matches reports whether the file at p is still what s recorded.
func (s stamp) matches(p string) bool {
	now, err := fileStamp(p)
	if err != nil || s.CtimeNS == 0 {
		return false
	}
	now.SHA256 = s.SHA256
	return now == s
}

func stampPath(p string) string {
	return filepath.Join(filepath.Dir(p), "."+filepath.Base(p)+".sha256.json")
}

func readStamp(p string) (stamp, bool) {
	var s stamp
	data, err := os.ReadFile(stampPath(p))
	if err != nil || json.Unmarshal(data, &s) != nil {
		return s, false
	}
	return s, true
}

func writeStamp(p, sha string) error {
	s, err := fileStamp(p)
	if err != nil {
		return err
	}
	s.SHA256 = sha
	return putStamp(p, s)
}

func putStamp(p string, s stamp) error {
	data, _ := json.Marshal(s)
	tmp := stampPath(p) + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, stampPath(p))
}

// ModelDir is the folder holding the model's files under the models folder
// dir: <dir>/all-MiniLM-L6-v2.
func ModelDir(dir string) string {
	return filepath.Join(dir, Manifest().Model.Name)
}

// FetchCommand is the command that installs variant's files into the
// models folder dir, for error messages: it names the folder, so it fixes
// the install that was looked for whatever the data folder, flags or
// environment of the command that failed.
func FetchCommand(variant, dir string) string {
	if variant == "" {
		variant = Manifest().Model.DefaultVariant
	}
	return shellword.Join("toolgate", "models", "fetch", "--variant", variant, "--dir", dir)
}

// deniedFile is the file of the first error of errs that refused this user
// access, "" when none did.
func deniedFile(errs []error) string {
	for _, err := range errs {
		var pe *fs.PathError
		if errors.Is(err, fs.ErrPermission) && errors.As(err, &pe) {
			return pe.Path
		}
	}
	return ""
}
