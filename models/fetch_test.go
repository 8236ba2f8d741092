package models

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toolgate/toolgate/internal/datafile"
	"github.com/toolgate/toolgate/internal/testenv"
)

// fake model contents: small, deterministic, distinct.
var (
	fakeFP32 = bytes.Repeat([]byte("fp32-weights "), 4000)
	fakeINT8 = bytes.Repeat([]byte("int8 "), 3000)
	fakeTok  = []byte(`{"model":{"type":"WordPiece"}}`)
	fakeTok2 = []byte(`{"model": {"type": "WordPiece"}}`) // a second accepted tokenizer (like HF vs Maven)
)

func sum256(b []byte) string { h := sha256.Sum256(b); return hex.EncodeToString(h[:]) }
func sum1(b []byte) string   { h := sha1.Sum(b); return hex.EncodeToString(h[:]) }

func makeJar(t *testing.T, entries map[string][]byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	names := make([]string, 0, len(entries))
	for name := range entries {
		names = append(names, name)
	}
	sort.Strings(names) // deterministic bytes: the manifest pins the jar's sha256
	for _, name := range names {
		w, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(entries[name])
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// fakeRepo serves a fake Hugging Face and a fake Maven repository.
type fakeRepo struct {
	t       *testing.T
	srv     *httptest.Server
	mu      sync.Mutex
	files   map[string]http.HandlerFunc
	hits    map[string]int
	jarFP32 []byte
	jarINT8 []byte
}

func newFakeRepo(t *testing.T) *fakeRepo {
	r := &fakeRepo{t: t, files: map[string]http.HandlerFunc{}, hits: map[string]int{}}
	r.jarFP32 = makeJar(t, map[string][]byte{"m.onnx": fakeFP32, "m-tokenizer.json": fakeTok, "README": []byte("x")})
	r.jarINT8 = makeJar(t, map[string][]byte{"m-q.onnx": fakeINT8, "m-q-tokenizer.json": fakeTok})
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.hits[req.URL.Path]++
		h := r.files[req.URL.Path]
		r.mu.Unlock()
		if h == nil {
			http.NotFound(w, req)
			return
		}
		h(w, req)
	}))
	t.Cleanup(r.srv.Close)
	r.serve("/maven2/g/m/1/m-1.jar", r.jarFP32)
	r.serve("/maven2/g/m-q/1/m-q-1.jar", r.jarINT8)
	return r
}

func (r *fakeRepo) handle(p string, h http.HandlerFunc) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.files[p] = h
}

func (r *fakeRepo) serve(p string, data []byte) {
	r.handle(p, func(w http.ResponseWriter, req *http.Request) {
		http.ServeContent(w, req, "", time.Time{}, bytes.NewReader(data))
	})
}

func (r *fakeRepo) hitCount(p string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.hits[p]
}

// closedURL returns an http URL on a port nothing listens on: connecting is
// refused at once.
func closedURL(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr
}

// testManifest builds a manifest shaped like the real one: fp32/int8 variants,
// a mirror, an HF-like source (hfBase) and two jars (mavenBase).
func testManifest(t *testing.T, hfBase, mavenBase string) *ManifestFile {
	t.Helper()
	jar := func(coord, p string, data []byte) Jar {
		return Jar{Coordinates: coord, URL: mavenBase + p, SHA256: sum256(data), SHA1: sum1(data), Size: int64(len(data))}
	}
	fp32Jar := makeJar(t, map[string][]byte{"m.onnx": fakeFP32, "m-tokenizer.json": fakeTok, "README": []byte("x")})
	int8Jar := makeJar(t, map[string][]byte{"m-q.onnx": fakeINT8, "m-q-tokenizer.json": fakeTok})
	m := ManifestFile{
		Schema: 1,
		Model: ModelSpec{
			Name: "mini", Dim: 4, MaxSeqLength: 8, DefaultVariant: "fp32",
			Variants: map[string]Variant{
				"fp32": {Model: "model.onnx", Tokenizer: "tokenizer.json"},
				"int8": {Model: "model_int8.onnx", Tokenizer: "tokenizer.json"},
			},
			Files: map[string]FileSpec{
				"model.onnx": {
					Accept: []Accepted{{SHA256: sum256(fakeFP32), Size: int64(len(fakeFP32))}},
					Sources: []Source{
						{Kind: KindMirror, Paths: []string{"model.onnx", "onnx/model.onnx"}},
						{Kind: KindHuggingFace, URL: hfBase + "/hf/onnx/model.onnx", SHA256: sum256(fakeFP32)},
						{Kind: KindMaven, Jar: "fp32", Entry: "m.onnx", SHA256: sum256(fakeFP32)},
					},
				},
				"model_int8.onnx": {
					Accept: []Accepted{{SHA256: sum256(fakeINT8), Size: int64(len(fakeINT8))}},
					Sources: []Source{
						{Kind: KindMirror, Paths: []string{"model_int8.onnx"}},
						{Kind: KindHuggingFace, URL: hfBase + "/hf/onnx/model_quantized.onnx", SHA256: sum256(fakeINT8)},
						{Kind: KindMaven, Jar: "int8", Entry: "m-q.onnx", SHA256: sum256(fakeINT8)},
					},
				},
				"tokenizer.json": {
					Accept: []Accepted{
						{SHA256: sum256(fakeTok), Size: int64(len(fakeTok))},
						{SHA256: sum256(fakeTok2), Size: int64(len(fakeTok2))},
					},
					Sources: []Source{
						{Kind: KindMirror, Paths: []string{"tokenizer.json"}},
						{Kind: KindHuggingFace, URL: hfBase + "/hf/tokenizer.json", SHA256: sum256(fakeTok2)},
						{Kind: KindMaven, Jar: "fp32", Entry: "m-tokenizer.json", SHA256: sum256(fakeTok)},
						{Kind: KindMaven, Jar: "int8", Entry: "m-q-tokenizer.json", SHA256: sum256(fakeTok)},
					},
				},
			},
		},
		Jars: map[string]Jar{
			"fp32": jar("g:m:1", "/maven2/g/m/1/m-1.jar", fp32Jar),
			"int8": jar("g:m-q:1", "/maven2/g/m-q/1/m-q-1.jar", int8Jar),
		},
	}
	data, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := ParseManifest(data)
	if err != nil {
		t.Fatalf("test manifest: %v", err)
	}
	return parsed
}

func testOptions(t *testing.T, m *ManifestFile) *FetchOptions {
	return &FetchOptions{
		Dir:         t.TempDir(),
		Manifest:    m,
		IdleTimeout: 300 * time.Millisecond,
		Client:      &http.Client{Transport: &http.Transport{ResponseHeaderTimeout: 2 * time.Second}},
	}
}

// leftovers lists temp files (and anything unexpected) in the model folder.
func leftovers(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		n := e.Name()
		if strings.HasSuffix(n, ".part") || strings.HasPrefix(n, ".jars-") || strings.HasSuffix(n, ".tmp") {
			out = append(out, n)
		}
	}
	return out
}

func mustContent(t *testing.T, p string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s: content differs (%d bytes, want %d)", p, len(got), len(want))
	}
}

func sources(ff FetchedFile) []string {
	var out []string
	for _, a := range ff.Attempts {
		if errors.Is(a.Err, errSkipped) {
			continue
		}
		s := strings.Fields(a.Source)[0]
		if a.Err != nil {
			s += " failed"
		}
		out = append(out, s)
	}
	return out
}

func TestFetchFailover(t *testing.T) {
	stall := make(chan struct{})
	tests := []struct {
		name    string
		hf      func(r *fakeRepo) string // returns the HF base URL
		wantErr string                   // substring of the HF attempt's error
	}{
		{"refused port", func(r *fakeRepo) string { return closedURL(t) }, "refused"},
		{"404", func(r *fakeRepo) string { return r.srv.URL }, "404"},
		{"wrong sha256, same size", func(r *fakeRepo) string {
			bad := bytes.ToUpper(fakeFP32)
			r.serve("/hf/onnx/model.onnx", bad)
			return r.srv.URL
		}, "want pinned"},
		{"truncated body", func(r *fakeRepo) string {
			r.handle("/hf/onnx/model.onnx", func(w http.ResponseWriter, req *http.Request) {
				w.Header().Set("Content-Length", fmt.Sprint(len(fakeFP32)))
				w.Write(fakeFP32[:len(fakeFP32)/2])
			})
			return r.srv.URL
		}, "EOF"},
		{"stalled body", func(r *fakeRepo) string {
			r.handle("/hf/onnx/model.onnx", func(w http.ResponseWriter, req *http.Request) {
				w.Header().Set("Content-Length", fmt.Sprint(len(fakeFP32)))
				w.Write(fakeFP32[:1000])
				w.(http.Flusher).Flush()
				select {
				case <-stall:
				case <-req.Context().Done():
				}
			})
			return r.srv.URL
		}, "stalled"},
	}
	t.Cleanup(func() { close(stall) })
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			repo := newFakeRepo(t)
			m := testManifest(t, tt.hf(repo), repo.srv.URL)
			opts := testOptions(t, m)
			rep, err := Fetch(context.Background(), opts)
			if err != nil {
				t.Fatalf("Fetch: %v", err)
			}
			ff := rep.Files[0]
			if diff := cmp.Diff([]string{"huggingface failed", "maven"}, sources(ff)); diff != "" {
				t.Errorf("attempts (-want +got):\n%s", diff)
			}
			var hfErr error
			for _, a := range ff.Attempts {
				if strings.HasPrefix(a.Source, KindHuggingFace) {
					hfErr = a.Err
				}
			}
			if err := hfErr; err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("HF attempt error = %v, want it to mention %q", err, tt.wantErr)
			}
			mustContent(t, filepath.Join(rep.Dir, "model.onnx"), fakeFP32)
			mustContent(t, filepath.Join(rep.Dir, "tokenizer.json"), fakeTok)
			if l := leftovers(t, rep.Dir); len(l) > 0 {
				t.Errorf("temp files left behind: %v", l)
			}
		})
	}
}

func TestFetchAllSourcesFail(t *testing.T) {
	repo := newFakeRepo(t)
	repo.handle("/maven2/g/m/1/m-1.jar", nil) // 404
	bad := bytes.Clone(repo.jarINT8)          // same size, one byte changed
	bad[len(bad)/2] ^= 0xff
	repo.serve("/maven2/g/m-q/1/m-q-1.jar", bad)
	m := testManifest(t, closedURL(t), repo.srv.URL)
	opts := testOptions(t, m)
	opts.Variants = []string{"fp32", "int8"}
	rep, err := Fetch(context.Background(), opts)
	if err == nil {
		t.Fatal("Fetch succeeded; want an error")
	}
	var fe *FetchError
	if !errors.As(err, &fe) {
		t.Fatalf("error %T is not a *FetchError: %v", err, err)
	}
	msg := err.Error()
	for _, want := range []string{
		"fetch mini/model.onnx: every source failed",
		"mirror: no --from folder given",
		"huggingface " + m.Model.Files["model.onnx"].Sources[1].URL + ": ",
		"refused",
		"maven g:m:1!m.onnx: HTTP 404",
		"fetch mini/model_int8.onnx: every source failed",
		"maven g:m-q:1!m-q.onnx: jar m-q-1.jar: sha256 " + sum256(bad),
		"fetch mini/tokenizer.json: every source failed",
		"--from DIR",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error does not contain %q:\n%s", want, msg)
		}
	}
	for _, name := range []string{"model.onnx", "model_int8.onnx", "tokenizer.json"} {
		if _, err := os.Stat(filepath.Join(rep.Dir, name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s exists after every source failed (stat err %v)", name, err)
		}
	}
	if l := leftovers(t, rep.Dir); len(l) > 0 {
		t.Errorf("temp files left behind: %v", l)
	}
}

// A fetch from the --from folder alone (--source mirror) that finds no
// pinned copy there says to fix the folder, not the network no source of
// which was tried; with the network tried too, the fix names both.
func TestFetchMirrorOnlyFix(t *testing.T) {
	from := t.TempDir()
	if err := os.WriteFile(filepath.Join(from, "model.onnx"), bytes.ToUpper(fakeFP32), 0o644); err != nil {
		t.Fatal(err)
	}
	dead := closedURL(t)
	for _, tt := range []struct {
		name  string
		kinds []string
		want  string
		not   string
	}{
		{"mirror only", []string{KindMirror}, "fix: put the file, with a sha256 models/manifest.json pins, in the --from folder (by name, the Hugging Face layout or the Maven jars), or leave --source out to download it", "network"},
		{"every source", nil, "fix: check the network to the sources above, or put the file, with a sha256 models/manifest.json pins, in the --from folder", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			opts := testOptions(t, testManifest(t, dead, dead))
			opts.From, opts.Kinds = from, tt.kinds
			_, err := Fetch(context.Background(), opts)
			if err == nil {
				t.Fatal("Fetch succeeded; want an error")
			}
			msg := err.Error()
			if !strings.Contains(msg, tt.want) || tt.not != "" && strings.Contains(msg, tt.not) {
				t.Errorf("error: want %q (and not %q):\n%s", tt.want, tt.not, msg)
			}
			if !strings.Contains(msg, "is not pinned in the manifest") {
				t.Errorf("error does not say the mirror's copy is not the pinned one:\n%s", msg)
			}
		})
	}
}

func TestFetchMirror(t *testing.T) {
	jar := makeJar(t, map[string][]byte{"m.onnx": fakeFP32, "m-tokenizer.json": fakeTok, "README": []byte("x")})
	tests := []struct {
		name  string
		files map[string][]byte
	}{
		{"flat names", map[string][]byte{"model.onnx": fakeFP32, "tokenizer.json": fakeTok}},
		{"upstream layout", map[string][]byte{"onnx/model.onnx": fakeFP32, "tokenizer.json": fakeTok2}},
		{"jar by name", map[string][]byte{"m-1.jar": jar}},
		{"jar in maven layout", map[string][]byte{"g/m/1/m-1.jar": jar}},
		{"bad flat file, good jar", map[string][]byte{"model.onnx": []byte("bad"), "m-1.jar": jar}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			from := t.TempDir()
			for p, data := range tt.files {
				full := filepath.Join(from, filepath.FromSlash(p))
				os.MkdirAll(filepath.Dir(full), 0o755)
				if err := os.WriteFile(full, data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			// No network source works: only the mirror can succeed.
			dead := closedURL(t)
			m := testManifest(t, dead, dead)
			opts := testOptions(t, m)
			opts.From = from
			rep, err := Fetch(context.Background(), opts)
			if err != nil {
				t.Fatalf("Fetch: %v", err)
			}
			for _, ff := range rep.Files {
				if !strings.HasPrefix(ff.Source, "mirror ") {
					t.Errorf("%s came from %q, want the mirror", ff.Name, ff.Source)
				}
			}
			mustContent(t, filepath.Join(rep.Dir, "model.onnx"), fakeFP32)
		})
	}
}

func TestFetchIdempotent(t *testing.T) {
	repo := newFakeRepo(t)
	m := testManifest(t, closedURL(t), repo.srv.URL)
	opts := testOptions(t, m)
	opts.Variants = []string{"fp32", "int8"}
	rep, err := Fetch(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	const fp32Jar = "/maven2/g/m/1/m-1.jar"
	if n := repo.hitCount(fp32Jar); n != 1 {
		t.Errorf("fp32 jar downloaded %d times, want 1 (model and tokenizer share it)", n)
	}

	t.Run("second run keeps everything", func(t *testing.T) {
		rep2, err := Fetch(context.Background(), opts)
		if err != nil {
			t.Fatal(err)
		}
		for _, ff := range rep2.Files {
			if !ff.Present {
				t.Errorf("%s: not kept as present", ff.Name)
			}
		}
		if n := repo.hitCount(fp32Jar); n != 1 {
			t.Errorf("fp32 jar downloaded %d times after a second run, want 1", n)
		}
	})

	t.Run("corrupt file is fetched again", func(t *testing.T) {
		p := filepath.Join(rep.Dir, "model.onnx")
		if err := os.WriteFile(p, bytes.ToUpper(fakeFP32), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Verify2(m, opts.Dir, "fp32", false); err == nil {
			t.Fatal("Verify accepted a corrupt file")
		}
		rep3, err := Fetch(context.Background(), opts)
		if err != nil {
			t.Fatal(err)
		}
		if rep3.Files[0].Present {
			t.Error("corrupt model.onnx reported present")
		}
		mustContent(t, p, fakeFP32)
	})

	t.Run("stamp avoids re-hashing; full verify re-hashes", func(t *testing.T) {
		in, err := Verify2(m, opts.Dir, "fp32", false)
		if err != nil {
			t.Fatal(err)
		}
		if !in.Files[0].Stamp {
			t.Error("Verify re-hashed a file with a matching stamp")
		}
		if in.ModelSHA256 != sum256(fakeFP32) || in.TokenizerSHA256 != sum256(fakeTok) {
			t.Errorf("Verify sha256 = %s, %s", in.ModelSHA256, in.TokenizerSHA256)
		}
		in, err = Verify2(m, opts.Dir, "fp32", true)
		if err != nil {
			t.Fatal(err)
		}
		if in.Files[0].Stamp {
			t.Error("full Verify used the stamp")
		}
	})
}

// Verify2 is Verify against a test manifest.
func Verify2(m *ManifestFile, dir, variant string, full bool) (*Installed, error) {
	return m.Verify(dir, variant, full)
}

func TestVerifyMissing(t *testing.T) {
	m := testManifest(t, "http://x.invalid", "http://x.invalid")
	dir := t.TempDir()
	_, err := m.Verify(dir, "int8", false)
	if err == nil {
		t.Fatal("Verify of an empty folder succeeded")
	}
	for _, want := range []string{"model_int8.onnx missing", "tokenizer.json missing", "toolgate models fetch --variant int8"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not contain %q: %v", want, err)
		}
	}
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("error does not wrap fs.ErrNotExist: %v", err)
	}
}

// hfRepo is a fake repository whose Hugging Face and Maven sources both
// serve the files, and the options of a fetch from it.
func hfRepo(t *testing.T) (*fakeRepo, *FetchOptions) {
	repo := newFakeRepo(t)
	repo.serve("/hf/onnx/model.onnx", fakeFP32)
	repo.serve("/hf/tokenizer.json", fakeTok2)
	return repo, testOptions(t, testManifest(t, repo.srv.URL, repo.srv.URL))
}

func TestFetchKinds(t *testing.T) {
	repo, opts := hfRepo(t)
	opts.Kinds = []string{KindMaven}
	rep, err := Fetch(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, ff := range rep.Files {
		if diff := cmp.Diff([]string{"maven"}, sources(ff)); diff != "" {
			t.Errorf("%s attempts (-want +got):\n%s", ff.Name, diff)
		}
	}
	if n := repo.hitCount("/hf/onnx/model.onnx"); n != 0 {
		t.Errorf("HF hit %d times with --source maven", n)
	}
}

func TestFetchCancelled(t *testing.T) {
	var started atomic.Bool
	repo := newFakeRepo(t)
	block := make(chan struct{})
	t.Cleanup(func() { close(block) })
	ctx, cancel := context.WithCancel(context.Background())
	repo.handle("/hf/onnx/model.onnx", func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Content-Length", fmt.Sprint(len(fakeFP32)))
		w.Write(fakeFP32[:100])
		w.(http.Flusher).Flush()
		started.Store(true)
		cancel()
		select {
		case <-block:
		case <-req.Context().Done():
		}
	})
	m := testManifest(t, repo.srv.URL, repo.srv.URL)
	opts := testOptions(t, m)
	opts.IdleTimeout = time.Minute
	var prog bytes.Buffer
	opts.Progress = &prog
	rep, err := Fetch(ctx, opts)
	if err == nil {
		t.Fatal("Fetch succeeded after cancel")
	}
	if !started.Load() {
		t.Fatal("download never started")
	}
	// A stop is no failure of the source it stopped.
	if strings.Contains(prog.String(), "failed") {
		t.Errorf("progress says a source failed at the stop:\n%s", prog.String())
	}
	if _, err := os.Stat(filepath.Join(rep.Dir, "model.onnx")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("model.onnx exists after a cancelled fetch")
	}
	if l := leftovers(t, rep.Dir); len(l) > 0 {
		t.Errorf("temp files left behind: %v", l)
	}
}

// StampedSHA256 takes a matching stamp's sha256 (what the embedder names
// its model by at every start) and hashes a file whose stamp no longer
// matches it.
func TestStampedSHA256(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "model.onnx")
	if err := os.WriteFile(p, fakeFP32, 0o644); err != nil {
		t.Fatal(err)
	}
	// No stamp: hashed.
	if got, err := StampedSHA256(p); err != nil || got != sum256(fakeFP32) {
		t.Fatalf("without a stamp: %q, %v", got, err)
	}
	// A stamp that matches size and mtime is trusted: this one names
	// another sum, which only the stamp can have given.
	const other = "0000000000000000000000000000000000000000000000000000000000000001"
	if err := writeStamp(p, other); err != nil {
		t.Fatal(err)
	}
	if got, err := StampedSHA256(p); err != nil || got != other {
		t.Errorf("with a matching stamp: %q, %v; want the stamp's %s", got, err, other)
	}
	// The file changes: the stamp no longer matches.
	if err := os.WriteFile(p, bytes.ToUpper(fakeFP32), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := StampedSHA256(p); err != nil || got != sum256(bytes.ToUpper(fakeFP32)) {
		t.Errorf("after a change: %q, %v; want the new content's sum", got, err)
	}
	if _, err := StampedSHA256(filepath.Join(dir, "missing.onnx")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

// A file altered in place that kept its size and had its mtime put back
// (cp -p over it, rsync --inplace, touch -r) no longer matches its stamp:
// models verify hashes it and finds it, and the embedder names its model
// by what the file now holds. The stamp matched on size and mtime alone,
// so verify said "ok" and the embedder gave the old sha256, whose cached
// vectors were then mixed with the altered model's.
func TestStampVoidedByWriteWithMtimeKept(t *testing.T) {
	_, opts := hfRepo(t)
	rep, err := Fetch(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(rep.Dir, "model.onnx")
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if in, err := Verify2(opts.Manifest, opts.Dir, "fp32", false); err != nil || !in.Files[0].Stamp {
		t.Fatalf("a fetched file does not match its stamp: %v", err)
	}
	altered := bytes.ToUpper(fakeFP32) // same size
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(altered, 0); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.Chtimes(p, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	if now, _ := os.Stat(p); now.Size() != fi.Size() || !now.ModTime().Equal(fi.ModTime()) {
		t.Fatalf("the test did not keep size and mtime: %d %v, was %d %v", now.Size(), now.ModTime(), fi.Size(), fi.ModTime())
	}
	in, err := Verify2(opts.Manifest, opts.Dir, "fp32", false)
	if err == nil || in.Files[0].Stamp || !strings.Contains(err.Error(), "is not pinned in the manifest") {
		t.Errorf("models verify of the altered file: stamp trusted %v, err %v; want it hashed and refused", in.Files[0].Stamp, err)
	}
	if got, err := StampedSHA256(p); err != nil || got != sum256(altered) {
		t.Errorf("StampedSHA256 = %s, %v; want the altered content's %s", got, err, sum256(altered))
	}
}

// A stamp of an older toolgate (size and mtime only) is not trusted: the
// file is hashed once and its stamp written anew, which later starts take.
func TestStampOldFormat(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "model.onnx")
	if err := os.WriteFile(p, fakeFP32, 0o644); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	const other = "0000000000000000000000000000000000000000000000000000000000000001"
	old := fmt.Sprintf(`{"sha256":%q,"size":%d,"mtime_ns":%d}`, other, fi.Size(), fi.ModTime().UnixNano())
	if err := os.WriteFile(stampPath(p), []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := StampedSHA256(p); err != nil || got != sum256(fakeFP32) {
		t.Fatalf("with an old stamp: %s, %v; want the file hashed", got, err)
	}
	s, ok := readStamp(p)
	if !ok || s.SHA256 != sum256(fakeFP32) || !s.matches(p) {
		t.Errorf("the stamp was not written anew: %+v", s)
	}
}

// A models folder without room for the files is said before anything is
// downloaded, with the space there is, the space needed and the fix; a full
// disk used to be found after a download, and the message asked to check
// the network.
func TestFetchNoRoom(t *testing.T) {
	repo, opts := hfRepo(t)
	opts.freeBytes = func(string) (uint64, error) { return 10, nil }
	_, err := Fetch(context.Background(), opts)
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Fetch with no room: %v, want ENOSPC", err)
	}
	need := HumanBytes(int64(len(fakeFP32) + len(fakeTok2)))
	for _, want := range []string{"has 10 B free", "need " + need, "fix: free space there", "--dir"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q: %v", want, err)
		}
	}
	if n := repo.hitCount("/hf/onnx/model.onnx") + repo.hitCount("/maven2/g/m/1/m-1.jar"); n != 0 {
		t.Errorf("%d downloads with no room for them", n)
	}
}

// A models folder that fills up during a download stops the fetch there:
// the other sources would write to the same folder (the Maven jar is not
// downloaded), nothing is left behind, and the fix is the folder's. So does
// one that cannot take the --from folder's copy: it used to read as a
// mirror without the file ("fix: put the file … in the --from folder",
// where it was), and every network source was tried.
func TestFetchDiskFullMidway(t *testing.T) {
	for _, tt := range []struct {
		name   string
		mirror bool
		kinds  []string
	}{
		{"download", false, nil},
		{"mirror copy", true, nil},
		{"mirror only", true, []string{KindMirror}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			repo, opts := hfRepo(t)
			if tt.mirror {
				opts.From, opts.Kinds = t.TempDir(), tt.kinds
				for name, data := range map[string][]byte{"model.onnx": fakeFP32, "tokenizer.json": fakeTok2} {
					if err := os.WriteFile(filepath.Join(opts.From, name), data, 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			opts.wrapDest = func(w io.Writer) io.Writer { return &fullAfter{w: w, path: w.(*os.File).Name(), left: 100} }
			rep, err := Fetch(context.Background(), opts)
			if err == nil {
				t.Fatal("Fetch onto a full disk succeeded")
			}
			msg := err.Error()
			for _, want := range []string{"no space left on device", "fix: free space on the file system of " + rep.Dir, "--dir"} {
				if !strings.Contains(msg, want) {
					t.Errorf("error does not say %q:\n%s", want, msg)
				}
			}
			if strings.Contains(msg, "check the network") || strings.Contains(msg, "put the file") {
				t.Errorf("the fix is not the models folder's:\n%s", msg)
			}
			if n := repo.hitCount("/maven2/g/m/1/m-1.jar"); n != 0 {
				t.Errorf("the jar was downloaded %d times after the folder filled up", n)
			}
			if n := repo.hitCount("/hf/onnx/model.onnx"); tt.mirror && n != 0 {
				t.Errorf("model.onnx downloaded %d times after the models folder refused the mirror's copy", n)
			}
			if l := leftovers(t, rep.Dir); len(l) > 0 {
				t.Errorf("temp files left behind: %v", l)
			}
		})
	}
}

// fullAfter takes left bytes, then fails as a full file system does
// writing the file at path.
type fullAfter struct {
	w    io.Writer
	path string
	left int
}

func (f *fullAfter) Write(p []byte) (int, error) {
	if len(p) > f.left {
		n, _ := f.w.Write(p[:f.left])
		f.left = 0
		return n, &fs.PathError{Op: "write", Path: f.path, Err: syscall.ENOSPC}
	}
	f.left -= len(p)
	return f.w.Write(p)
}

// A file damaged where no write shows (bit rot: size, mtime, ctime and
// inode as they were) still matches the stamp written when it was
// fetched. `toolgate models fetch`, the fix every load error names, hashes
// it again and fetches it; it used to keep it as "present".
func TestFetchRehashesStampedFile(t *testing.T) {
	repo, opts := hfRepo(t)
	rep, err := Fetch(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(rep.Dir, "model.onnx")
	damaged := bytes.ToUpper(fakeFP32) // same size
	if err := os.WriteFile(p, damaged, 0o644); err != nil {
		t.Fatal(err)
	}
	// The stamp of the good file, with what the file now is: as bit rot
	// leaves it (no write a user can make does).
	if err := writeStamp(p, sum256(fakeFP32)); err != nil {
		t.Fatal(err)
	}
	if in, err := Verify2(opts.Manifest, opts.Dir, "fp32", false); err != nil || !in.Files[0].Stamp {
		t.Fatalf("the damaged file does not match its stamp (Verify: %v): the test damaged it wrongly", err)
	}
	rep2, err := Fetch(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if rep2.Files[0].Present {
		t.Error("the damaged model.onnx was kept as present")
	}
	if n := repo.hitCount("/hf/onnx/model.onnx"); n != 2 {
		t.Errorf("model.onnx downloaded %d times, want 2 (again once damaged)", n)
	}
	mustContent(t, p, fakeFP32)
}

// A folder in a file's place (a container's volume mounted at a model file
// that was not there) is said at once, with the fix; no source is tried
// (each download was in vain: the rename into place failed, and the fix
// given was to check the network).
func TestFetchFolderInFilesPlace(t *testing.T) {
	repo, opts := hfRepo(t)
	dst := filepath.Join(opts.Dir, opts.Manifest.Model.Name, "model.onnx")
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	rep, err := Fetch(context.Background(), opts)
	if err == nil {
		t.Fatal("Fetch succeeded with a folder in model.onnx's place")
	}
	for _, want := range []string{dst + " is a folder, not the file", "fix: remove it (rmdir " + dst + ")"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if n := repo.hitCount("/hf/onnx/model.onnx"); n != 0 {
		t.Errorf("model.onnx downloaded %d times into a folder that cannot take it", n)
	}
	mustContent(t, filepath.Join(rep.Dir, "tokenizer.json"), fakeTok2)
}

// What a fetch killed half-way left (its .part file, up to the model's
// whole size; a jar's temporary folder; a stamp's temporary file) is
// removed by the next fetch, unless another fetch into the folder runs:
// those may be its own.
func TestFetchRemovesKilledFetchLeftovers(t *testing.T) {
	_, opts := hfRepo(t)
	modelDir := filepath.Join(opts.Dir, opts.Manifest.Model.Name)
	litter := func() {
		t.Helper()
		for _, p := range []string{".model.onnx.123456.part", ".model_int8.onnx.sha256.json.tmp", ".jars-99/jar-1.part"} {
			p = filepath.Join(modelDir, p)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte("half"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	litter()
	unlock, err := datafile.LockDir(modelDir) // another fetch runs
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Fetch(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	if got := leftovers(t, modelDir); len(got) != 3 {
		t.Errorf("with another fetch running, left %v, want its 3 files kept", got)
	}
	unlock()
	if _, err := Fetch(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	if got := leftovers(t, modelDir); len(got) > 0 {
		t.Errorf("left behind: %v", got)
	}
	mustContent(t, filepath.Join(modelDir, "model.onnx"), fakeFP32)
}

// TestFetchMirrorStoppedMidRead: a --from mirror whose read blocks (a pipe
// whose writer stalled; a stalled network file system alike) used to hold
// a stop until the read returned: Ctrl-C waited the whole 10 s budget, then
// exit status 4 with the .part file left behind. The fetch now returns at
// once, its .part file removed.
func TestFetchMirrorStoppedMidRead(t *testing.T) {
	from := t.TempDir()
	if err := os.WriteFile(filepath.Join(from, "tokenizer.json"), fakeTok, 0o644); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(from, "model.onnx")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	dead := closedURL(t)
	opts := testOptions(t, testManifest(t, dead, dead))
	opts.From = from
	var prog bytes.Buffer // read once Fetch returned
	opts.Progress = &prog
	modelDir := filepath.Join(opts.Dir, "mini")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Opened for writing (it waits for the fetch to open it for reading),
	// 100 bytes written, then held open: the next read blocks.
	stall := make(chan struct{})
	defer close(stall)
	go func() {
		w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err != nil {
			return
		}
		defer w.Close()
		w.Write(fakeFP32[:100])
		<-stall
	}()
	type result struct {
		rep *FetchReport
		err error
	}
	done := make(chan result, 1)
	go func() {
		rep, err := Fetch(ctx, opts)
		done <- result{rep, err}
	}()
	testenv.Eventually(t, "the first 100 bytes in the .part file", func() bool {
		ents, _ := os.ReadDir(modelDir)
		for _, e := range ents {
			if fi, err := e.Info(); err == nil && strings.HasSuffix(e.Name(), ".part") && fi.Size() == 100 {
				return true
			}
		}
		return false
	})
	cancel()
	var r result
	select {
	case r = <-done:
	case <-time.After(testenv.Timeout):
		t.Fatal("Fetch did not return after its context was cancelled, a read of the mirror blocked")
	}
	if !errors.Is(r.err, context.Canceled) {
		t.Errorf("Fetch = %v, want context.Canceled", r.err)
	}
	if strings.Contains(prog.String(), "failed") {
		t.Errorf("progress says the mirror failed at the stop:\n%s", prog.String())
	}
	if _, err := os.Stat(filepath.Join(modelDir, "model.onnx")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("model.onnx exists after a cancelled fetch")
	}
	if l := leftovers(t, modelDir); len(l) > 0 {
		t.Errorf("temp files left behind: %v", l)
	}
}

// openCtx and copyCtx return at a stop even while their open or read
// blocks and nothing interrupts it: a FIFO with no writer (as a hung
// mount's open); a read of a pipe that is not a file, so not closed (as a
// file's on a hung mount).
func TestStopLeavesBlockedIO(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "model.onnx")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	defer pw.Close()
	for _, tc := range []struct {
		name  string
		run   func(ctx context.Context) error
		start func() // once run runs, before the stop
		then  func() // once the stop returned
	}{
		{"open", func(ctx context.Context) error { _, err := openCtx(ctx, fifo); return err }, func() {}, func() {
			// The abandoned open returns once a writer comes, and its file is closed.
			if w, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
				w.Close()
			}
		}},
		{"read", func(ctx context.Context) error { _, err := copyCtx(ctx, io.Discard, pr); return err }, func() {
			pw.Write([]byte("first")) // returns once the copy read it: the next read blocks
		}, func() {}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- tc.run(ctx) }()
			tc.start()
			cancel()
			select {
			case err := <-done:
				if !errors.Is(err, context.Canceled) {
					t.Errorf("%s = %v, want context.Canceled", tc.name, err)
				}
			case <-time.After(testenv.Timeout):
				t.Fatalf("the %s did not return at its context's end while it blocked", tc.name)
			}
			tc.then()
		})
	}
}
