// Package models owns the model files: the committed manifest of every file
// the project accepts (sources and sha256 checksums, and the pins of the
// native runtime pieces), verifying files on disk against it, and fetching
// them (local mirror, Hugging Face, Maven Central) with verification.
// Weights are never committed; only the manifest is. It is told which
// folder to work in: where folders are is decided by the commands
// (internal/dirs), and the `toolgate models` commands live in
// internal/modelscmd.
package models

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"net/url"
	"path"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
)

//go:embed manifest.json
var manifestJSON []byte

// Source kinds, in the order Fetch tries them by default.
const (
	KindMirror      = "mirror"      // a local folder given with --from (air-gapped installs)
	KindHuggingFace = "huggingface" // the canonical repository, pinned to a commit
	KindMaven       = "maven"       // a Maven Central jar that carries the file as an entry
)

// ManifestFile is the parsed models/manifest.json: every file the project
// downloads, the sha256 values it accepts for each, and where to get them.
type ManifestFile struct {
	Schema int            `json:"schema"`
	Model  ModelSpec      `json:"model"`
	Jars   map[string]Jar `json:"jars"`
	// Runtime holds the native runtime pins (ONNX Runtime, tokenizers), owned
	// by the embed scripts: one object per piece, values kept as raw JSON.
	Runtime map[string]RuntimePiece `json:"runtime,omitempty"`
}

// ModelSpec describes one model: its variants and files.
type ModelSpec struct {
	Name         string `json:"name"`
	Dim          int    `json:"dim"`
	MaxSeqLength int    `json:"max_seq_length"`
	// Pooling turns the model's token vectors into one text vector:
	// "mean" (the mask-weighted mean, sentence-transformers' default; also
	// when empty) or "cls" (the first token's). The vector is then scaled
	// to unit length.
	Pooling string `json:"pooling"`
	// QueryPrefix and DocumentPrefix are prepended to a search query and
	// to a tool's document text before embedding, for models trained with
	// them (bge's "Represent this sentence for searching relevant
	// passages: "). all-MiniLM-L6-v2 has none of its own; its
	// query_prefix "I need a tool to " puts queries in the register of the
	// tools' request-style lead view (catalog.RequestView), measured in the
	// README's "Ranking quality" (issue 12, round 7).
	QueryPrefix    string `json:"query_prefix,omitempty"`
	DocumentPrefix string `json:"document_prefix,omitempty"`
	// Inputs are the graph's input names, and Output the output read
	// (the token vectors), of every model file Files accepts: the embedder
	// trusts them for a file whose sha256 is accepted, and asks ONNX
	// Runtime for any other file (loading the whole model once more, about
	// 0.3 s). Empty: always ask.
	Inputs         []string            `json:"inputs,omitempty"`
	Output         string              `json:"output,omitempty"`
	DefaultVariant string              `json:"default_variant"`
	Variants       map[string]Variant  `json:"variants"`
	Files          map[string]FileSpec `json:"files"`
}

// Poolings of ModelSpec.Pooling.
const (
	PoolingMean = "mean"
	PoolingCLS  = "cls"
)

// Variant names the files one variant of the model needs (keys of Files).
type Variant struct {
	Model     string `json:"model"`
	Tokenizer string `json:"tokenizer"`
}

// FileSpec is one target file: the contents accepted (each pinned by sha256)
// and the sources to try, in order.
type FileSpec struct {
	Accept  []Accepted `json:"accept"`
	Sources []Source   `json:"sources"`
}

// Accepted is one exact file content that is accepted.
type Accepted struct {
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
	Origin string `json:"origin,omitempty"`
}

// Source is one place a file can come from.
type Source struct {
	Kind string `json:"kind"`
	// Paths (mirror): file names tried under the --from folder, relative.
	Paths []string `json:"paths,omitempty"`
	// URL (huggingface): direct download URL, pinned to a commit.
	URL string `json:"url,omitempty"`
	// Jar and Entry (maven): key into ManifestFile.Jars and the entry inside.
	Jar   string `json:"jar,omitempty"`
	Entry string `json:"entry,omitempty"`
	// SHA256 the source serves (one of the file's accepted values).
	SHA256 string `json:"sha256,omitempty"`
}

// Jar is a pinned Maven Central artifact.
type Jar struct {
	Coordinates string `json:"coordinates"`
	URL         string `json:"url"`
	SHA256      string `json:"sha256"`
	SHA1        string `json:"sha1,omitempty"`
	Size        int64  `json:"size"`
}

// RuntimePiece is one native runtime pin (e.g. "onnxruntime", "tokenizers").
type RuntimePiece map[string]json.RawMessage

// String returns the string value of key, or "" when absent or not a string.
func (p RuntimePiece) String(key string) string {
	var s string
	if raw, ok := p[key]; ok && json.Unmarshal(raw, &s) == nil {
		return s
	}
	return ""
}

var (
	embeddedOnce sync.Once
	embedded     *ManifestFile
	embeddedErr  error
)

// Manifest returns the manifest embedded in the binary. It panics if the
// committed manifest is invalid, which a test rules out.
func Manifest() *ManifestFile {
	embeddedOnce.Do(func() { embedded, embeddedErr = ParseManifest(manifestJSON) })
	if embeddedErr != nil {
		panic("models: embedded manifest.json: " + embeddedErr.Error())
	}
	return embedded
}

// ManifestJSON returns the embedded manifest bytes (for scripts and doctor).
func ManifestJSON() []byte { return slices.Clone(manifestJSON) }

var sha256Re = regexp.MustCompile(`^[0-9a-f]{64}$`)
var sha1Re = regexp.MustCompile(`^[0-9a-f]{40}$`)

// ParseManifest parses and validates a manifest. Errors name the field.
func ParseManifest(data []byte) (*ManifestFile, error) {
	var m ManifestFile
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("parse manifest: %w", err)
	}
	if err := m.validate(); err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	return &m, nil
}

func (m *ManifestFile) validate() error {
	if m.Schema != 1 {
		return fmt.Errorf("schema %d: want 1", m.Schema)
	}
	if !safeName(m.Model.Name) {
		return fmt.Errorf("model.name %q: want a plain folder name", m.Model.Name)
	}
	if len(m.Model.Variants) == 0 {
		return fmt.Errorf("model.variants: none")
	}
	if p := m.Model.Pooling; p != "" && p != PoolingMean && p != PoolingCLS {
		return fmt.Errorf("model.pooling %q: want %q or %q", p, PoolingMean, PoolingCLS)
	}
	if _, ok := m.Model.Variants[m.Model.DefaultVariant]; !ok {
		return fmt.Errorf("model.default_variant %q: not in model.variants", m.Model.DefaultVariant)
	}
	for name, v := range m.Model.Variants {
		for _, f := range []string{v.Model, v.Tokenizer} {
			if _, ok := m.Model.Files[f]; !ok {
				return fmt.Errorf("model.variants.%s: file %q not in model.files", name, f)
			}
		}
	}
	for id, j := range m.Jars {
		if !sha256Re.MatchString(j.SHA256) {
			return fmt.Errorf("jars.%s.sha256 %q: want 64 lowercase hex digits", id, j.SHA256)
		}
		if j.SHA1 != "" && !sha1Re.MatchString(j.SHA1) {
			return fmt.Errorf("jars.%s.sha1 %q: want 40 lowercase hex digits", id, j.SHA1)
		}
		if err := checkURL(j.URL); err != nil {
			return fmt.Errorf("jars.%s.url: %w", id, err)
		}
		if j.Size <= 0 {
			return fmt.Errorf("jars.%s.size %d: want > 0", id, j.Size)
		}
	}
	for name, f := range m.Model.Files {
		at := "model.files." + name
		if !safeName(name) {
			return fmt.Errorf("%s: want a plain file name", at)
		}
		if len(f.Accept) == 0 {
			return fmt.Errorf("%s.accept: no sha256 pinned", at)
		}
		for i, a := range f.Accept {
			if !sha256Re.MatchString(a.SHA256) {
				return fmt.Errorf("%s.accept[%d].sha256 %q: want 64 lowercase hex digits", at, i, a.SHA256)
			}
			if a.Size <= 0 {
				return fmt.Errorf("%s.accept[%d].size %d: want > 0", at, i, a.Size)
			}
		}
		if len(f.Sources) == 0 {
			return fmt.Errorf("%s.sources: none", at)
		}
		for i, s := range f.Sources {
			sat := fmt.Sprintf("%s.sources[%d]", at, i)
			if s.SHA256 != "" && f.accepted(s.SHA256) == nil {
				return fmt.Errorf("%s.sha256 %q: not one of %s.accept", sat, s.SHA256, at)
			}
			switch s.Kind {
			case KindMirror:
				if len(s.Paths) == 0 {
					return fmt.Errorf("%s.paths: none", sat)
				}
				for _, p := range s.Paths {
					if p == "" || path.IsAbs(p) || strings.Contains(p, "\\") || slices.Contains(strings.Split(p, "/"), "..") {
						return fmt.Errorf("%s.paths %q: want a relative slash path", sat, p)
					}
				}
			case KindHuggingFace:
				if err := checkURL(s.URL); err != nil {
					return fmt.Errorf("%s.url: %w", sat, err)
				}
				if s.SHA256 == "" {
					return fmt.Errorf("%s.sha256: required", sat)
				}
			case KindMaven:
				if _, ok := m.Jars[s.Jar]; !ok {
					return fmt.Errorf("%s.jar %q: not in jars", sat, s.Jar)
				}
				if s.Entry == "" {
					return fmt.Errorf("%s.entry: required", sat)
				}
				if s.SHA256 == "" {
					return fmt.Errorf("%s.sha256: required", sat)
				}
			default:
				return fmt.Errorf("%s.kind %q: want mirror, huggingface or maven", sat, s.Kind)
			}
		}
	}
	return nil
}

func checkURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return err
	}
	if (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return fmt.Errorf("%q: want an http(s) URL", s)
	}
	return nil
}

func safeName(s string) bool {
	return s != "" && s != "." && s != ".." && !strings.ContainsAny(s, `/\`) && !strings.HasPrefix(s, ".")
}

// accepted returns the accepted entry with this sha256, or nil.
func (f FileSpec) accepted(sha string) *Accepted {
	for i := range f.Accept {
		if f.Accept[i].SHA256 == sha {
			return &f.Accept[i]
		}
	}
	return nil
}

// Accepts reports whether sha is the sha256 of a model file (not a
// tokenizer) of one of the model's variants.
func (m *ModelSpec) Accepts(sha string) bool {
	for _, v := range m.Variants {
		if m.Files[v.Model].accepted(sha) != nil {
			return true
		}
	}
	return false
}

// maxSize is the largest pinned size of the file (0 when none is pinned).
func (f FileSpec) maxSize() int64 {
	var n int64
	for _, a := range f.Accept {
		n = max(n, a.Size)
	}
	return n
}

// AcceptedSHA256 lists the sha256 values accepted for a file.
func (f FileSpec) AcceptedSHA256() []string {
	out := make([]string, len(f.Accept))
	for i, a := range f.Accept {
		out[i] = a.SHA256
	}
	return out
}

// VariantNames lists the model's variants, default first.
func (m *ManifestFile) VariantNames() []string {
	names := make([]string, 0, len(m.Model.Variants))
	for n := range m.Model.Variants {
		if n != m.Model.DefaultVariant {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return append([]string{m.Model.DefaultVariant}, names...)
}

// ParseVariants maps a --variant value ("fp32", "int8", "all", "fp32,int8",
// "" for the default) to variant names, or an error that lists valid values.
func (m *ManifestFile) ParseVariants(s string) ([]string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return []string{m.Model.DefaultVariant}, nil
	}
	if s == "all" {
		return m.VariantNames(), nil
	}
	var out []string
	for _, v := range strings.Split(s, ",") {
		v = strings.TrimSpace(v)
		if _, ok := m.Model.Variants[v]; !ok {
			return nil, fmt.Errorf("variant %q: want %s or all", v, strings.Join(m.VariantNames(), ", "))
		}
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out, nil
}

// filesFor returns the file names the variants need: model files first, then
// tokenizers, without duplicates.
func (m *ManifestFile) filesFor(variants []string) ([]string, error) {
	var models, toks []string
	for _, name := range variants {
		v, ok := m.Model.Variants[name]
		if !ok {
			return nil, fmt.Errorf("variant %q: want %s", name, strings.Join(m.VariantNames(), ", "))
		}
		if !slices.Contains(models, v.Model) {
			models = append(models, v.Model)
		}
		if !slices.Contains(toks, v.Tokenizer) && !slices.Contains(models, v.Tokenizer) {
			toks = append(toks, v.Tokenizer)
		}
	}
	return append(models, toks...), nil
}
