package models

import (
	"archive/zip"
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/toolgate/toolgate/internal/datafile"
	"github.com/toolgate/toolgate/internal/shellword"
	"github.com/toolgate/toolgate/internal/storage"
)

// Defaults for FetchOptions. An unreachable host fails within DialTimeout;
// a host that accepts but never answers within ResponseHeaderTimeout; a body
// that stalls within IdleTimeout; and no source takes longer than
// SourceTimeout in all.
const (
	DefaultDialTimeout           = 5 * time.Second
	DefaultResponseHeaderTimeout = 15 * time.Second
	DefaultIdleTimeout           = 20 * time.Second
	DefaultSourceTimeout         = 15 * time.Minute
)

// FetchOptions configures Fetch. Dir is required; with only Dir set, Fetch
// fetches the default variant from the sources in the embedded manifest.
type FetchOptions struct {
	// Dir is the models folder; files go to Dir/<model name>/. Required.
	Dir string
	// Variants to fetch ("fp32", "int8"); nil = the manifest's default.
	Variants []string
	// From is a local mirror folder tried first (air-gapped installs).
	From string
	// Kinds limits the kinds of source tried (KindMirror, KindHuggingFace,
	// KindMaven); nil = all, in manifest order.
	Kinds []string
	// Client is used for HTTP sources; nil = a client with short dial, TLS and
	// response-header timeouts.
	Client *http.Client
	// Progress receives progress: a bar when it is a terminal, plain lines
	// otherwise; nil = none.
	Progress io.Writer
	// Logger; nil = discard.
	Logger *slog.Logger
	// Manifest to fetch from; nil = Manifest().
	Manifest *ManifestFile
	// IdleTimeout fails a download whose body sends nothing for this long;
	// 0 = DefaultIdleTimeout.
	IdleTimeout time.Duration
	// SourceTimeout bounds one source in all; 0 = DefaultSourceTimeout.
	SourceTimeout time.Duration

	// For tests: the models folder's free space (nil = storage.FreeBytes),
	// and what stands between a file written there and its writes.
	freeBytes func(dir string) (uint64, error)
	wrapDest  func(io.Writer) io.Writer
}

// FetchReport says what Fetch did, file by file.
type FetchReport struct {
	Dir      string // the model folder, Dir/<model name>
	Files    []FetchedFile
	Duration time.Duration
}

// FetchedFile is the outcome for one file.
type FetchedFile struct {
	Name     string
	Path     string
	SHA256   string
	Size     int64
	Present  bool   // already there with an accepted sha256: kept as is
	Source   string // where it came from, when fetched
	Attempts []Attempt
	Duration time.Duration
	Err      error
}

// Attempt is one source tried for a file, and why it failed (nil = success).
type Attempt struct {
	Source string
	Kind   string // KindMirror, KindHuggingFace, KindMaven; "" for none
	Err    error
}

// FetchError is returned when every source of a file failed. Its message
// lists each source and why.
type FetchError struct {
	File     string
	Attempts []Attempt
}

func (e *FetchError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "fetch %s: every source failed:", e.File)
	// The fix is the network's only when a download was tried, and the
	// --from folder's when it was looked in (--source mirror tries no
	// download: "check the network" sent one to the wrong place).
	var network, mirror bool
	for _, a := range e.Attempts {
		switch {
		case errors.Is(a.Err, errSkipped):
		case a.Kind == KindMirror:
			mirror = true
		case a.Kind != "":
			network = true
		}
	}
	const pinned = "put the file, with a sha256 models/manifest.json pins, in the --from folder (by name, the Hugging Face layout or the Maven jars)"
	var fix string
	switch {
	case network && mirror:
		fix = "check the network to the sources above, or " + pinned
	case network:
		fix = "check the network to the sources above, or download the files elsewhere and pass the folder with --from DIR"
	case mirror:
		fix = pinned + ", or leave --source out to download it"
	default:
		fix = "give the folder of a local copy with --from DIR, or leave --source out to download the files"
	}
	for _, a := range e.Attempts {
		fmt.Fprintf(&b, "\n  - %s: %v", a.Source, a.Err)
		var de destError
		if errors.As(a.Err, &de) {
			// The models folder could not take the file: another source
			// would not help (and was not tried).
			fix = storage.CommandFix(de.error)
			if fix == "" {
				fix = "check the models folder and its file system (the error says what failed), then run the command again"
			}
			fix += ", or " + otherFolder
		}
	}
	b.WriteString("\n  fix: " + fix)
	return b.String()
}

// otherFolder is the way around a models folder that cannot take the files.
const otherFolder = "fetch into a folder on another file system with --dir (and give toolgate that folder with --model-dir or TOOLGATE_MODELS_DIR)"

// destError is a failure to write into the models folder (full, read-only,
// not writable): every source would meet it, so none other is tried.
type destError struct{ error }

func (e destError) Unwrap() error { return e.error }

// destWriter marks the errors of writing the models folder's file.
type destWriter struct{ w io.Writer }

func (d destWriter) Write(p []byte) (int, error) {
	n, err := d.w.Write(p)
	if err != nil {
		err = destError{err}
	}
	return n, err
}

// toDest marks err, when not nil, as the models folder's (destError).
func toDest(err error) error {
	if err == nil {
		return nil
	}
	return destError{err}
}

// Unwrap returns the attempts' errors.
func (e *FetchError) Unwrap() []error {
	var errs []error
	for _, a := range e.Attempts {
		errs = append(errs, a.Err)
	}
	return errs
}

// errSkipped marks a source that was not tried (e.g. no --from given).
var errSkipped = errors.New("skipped")

// Fetch downloads the files of the requested variants into the models folder.
// Per file, sources are tried in manifest order until one yields content whose
// sha256 is pinned in the manifest. Content is written to a temporary file in
// the target folder, checked, fsynced and renamed into place, so a partial
// download never takes the place of a good file. Files already present with an
// accepted sha256 (hashed again, their stamps not trusted) are kept. When every source of a file fails, the returned
// error (a *FetchError, joined per file) lists each source and why.
func Fetch(ctx context.Context, opts *FetchOptions) (*FetchReport, error) {
	if opts == nil {
		opts = &FetchOptions{}
	}
	start := time.Now()
	f, err := newFetcher(opts)
	if err != nil {
		return nil, err
	}
	defer f.close()
	names, err := f.m.filesFor(f.variants)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(f.modelDir, 0o755); err != nil {
		return nil, fmt.Errorf("create model folder: %w", err)
	}
	// Held for the whole fetch, so that another fetch into the folder
	// (run twice at once) does not take this one's temporary files for a
	// killed one's. Whoever gets it removes what killed fetches left.
	if unlock, ok, err := datafile.TryLockDir(f.modelDir); err == nil && ok {
		defer unlock()
		f.removeLeftovers()
	}
	if err := f.roomFor(names); err != nil {
		return nil, err
	}
	rep := &FetchReport{Dir: f.modelDir}
	var errs []error
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			errs = append(errs, err)
			break
		}
		ff := f.fetchFile(ctx, name)
		rep.Files = append(rep.Files, ff)
		if ff.Err != nil {
			errs = append(errs, ff.Err)
		}
	}
	rep.Duration = time.Since(start)
	return rep, errors.Join(errs...)
}

// removeLeftovers removes the temporary files of fetches that were killed
// (SIGKILL, a crash, a power cut) before they could: a model's .part file
// is up to its whole size, and each killed fetch left one more. Called
// with the folder's lock held, so no fetch that runs owns them.
func (f *fetcher) removeLeftovers() {
	ents, err := os.ReadDir(f.modelDir)
	if err != nil {
		return
	}
	for _, e := range ents {
		n := e.Name()
		if strings.HasPrefix(n, ".") && (strings.HasSuffix(n, ".part") || strings.HasSuffix(n, ".sha256.json.tmp") || strings.HasPrefix(n, ".jars-")) {
			p := filepath.Join(f.modelDir, n)
			if err := os.RemoveAll(p); err == nil {
				f.log.Info("removed what a fetch that was stopped left", "file", p)
			}
		}
	}
}

// roomFor checks, before anything is downloaded, that the models folder's
// file system has room for the files of names that are not there yet (at
// their pinned sizes): a full disk used to be found after the first
// source's download, and every other source was downloaded in vain. A file
// there at a pinned size counts as there without being hashed (fetchFile
// checks it): a damaged one of that size is found at its write.
func (f *fetcher) roomFor(names []string) error {
	var need int64
	for _, name := range names {
		spec := f.m.Model.Files[name]
		if fi, err := os.Stat(filepath.Join(f.modelDir, name)); err == nil && slices.ContainsFunc(spec.Accept, func(a Accepted) bool { return a.Size == fi.Size() }) {
			continue
		}
		need += spec.maxSize()
	}
	free, err := f.freeBytes(f.modelDir)
	if err != nil || need == 0 || uint64(need) <= free {
		return nil // what cannot be measured is found at the write
	}
	return fmt.Errorf("the models folder %s has %s free on its file system, and the files need %s: %w; fix: free space there, or %s",
		f.modelDir, HumanBytes(int64(free)), HumanBytes(need), syscall.ENOSPC, otherFolder)
}

type fetcher struct {
	m        *ManifestFile
	modelDir string
	variants []string
	from     string
	kinds    []string
	client   *http.Client
	idle     time.Duration
	perSrc   time.Duration
	log      *slog.Logger
	prog     *progress
	// freeBytes is storage.FreeBytes (tests replace it).
	freeBytes func(dir string) (uint64, error)

	// wrapDest, when set (FetchOptions.wrapDest), stands between a file
	// being written in the models folder and what is written to it.
	wrapDest func(io.Writer) io.Writer

	mu       sync.Mutex
	jars     map[string]string // jar id → verified temp jar, reused within one Fetch
	mirrorOK map[string]bool   // mirror jars whose sha256 was checked in this Fetch
	tmp      string            // folder for temp jars
}

func newFetcher(opts *FetchOptions) (*fetcher, error) {
	m := opts.Manifest
	if m == nil {
		m = Manifest()
	}
	variants := opts.Variants
	if len(variants) == 0 {
		variants = []string{m.Model.DefaultVariant}
	}
	for _, k := range opts.Kinds {
		if k != KindMirror && k != KindHuggingFace && k != KindMaven {
			return nil, fmt.Errorf("source kind %q: want mirror, huggingface or maven", k)
		}
	}
	dir := opts.Dir
	if dir == "" {
		return nil, errors.New("fetch: no models folder given (FetchOptions.Dir)")
	}
	if opts.From != "" {
		st, err := os.Stat(opts.From)
		if err != nil {
			return nil, fmt.Errorf("--from %s: %w", opts.From, err)
		}
		if !st.IsDir() {
			return nil, fmt.Errorf("--from %s: not a folder", opts.From)
		}
	}
	kinds := opts.Kinds
	if opts.From != "" && len(kinds) > 0 && !slices.Contains(kinds, KindMirror) {
		kinds = append([]string{KindMirror}, kinds...) // --from always counts
	}
	f := &fetcher{
		m:        m,
		modelDir: filepath.Join(dir, m.Model.Name),
		variants: variants,
		from:     opts.From,
		kinds:    kinds,
		client:   opts.Client,
		idle:     opts.IdleTimeout,
		perSrc:   opts.SourceTimeout,
		log:      opts.Logger,
		prog:     newProgress(opts.Progress),
		jars:     map[string]string{},
		mirrorOK: map[string]bool{},

		freeBytes: opts.freeBytes,
		wrapDest:  opts.wrapDest,
	}
	if f.freeBytes == nil {
		f.freeBytes = storage.FreeBytes
	}
	if f.client == nil {
		f.client = DefaultHTTPClient()
	}
	if f.idle <= 0 {
		f.idle = DefaultIdleTimeout
	}
	if f.perSrc <= 0 {
		f.perSrc = DefaultSourceTimeout
	}
	if f.log == nil {
		f.log = slog.New(slog.DiscardHandler)
	}
	return f, nil
}

// dest is what a file written into the models folder is written through:
// its write errors are the folder's (destError).
func (f *fetcher) dest(out *os.File) io.Writer {
	var w io.Writer = out
	if f.wrapDest != nil {
		w = f.wrapDest(w)
	}
	return destWriter{w}
}

// DefaultHTTPClient returns a client whose every phase before the body is
// bounded, so an unreachable source fails over within seconds.
func DefaultHTTPClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: DefaultDialTimeout, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout:   DefaultDialTimeout,
		ResponseHeaderTimeout: DefaultResponseHeaderTimeout,
		IdleConnTimeout:       30 * time.Second,
		ForceAttemptHTTP2:     true,
	}}
}

func (f *fetcher) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range f.jars {
		os.Remove(p)
	}
	f.jars = nil
	if f.tmp != "" {
		os.RemoveAll(f.tmp)
	}
}

func (f *fetcher) kindAllowed(kind string) bool {
	return len(f.kinds) == 0 || slices.Contains(f.kinds, kind)
}

func (f *fetcher) fetchFile(ctx context.Context, name string) FetchedFile {
	start := time.Now()
	spec := f.m.Model.Files[name]
	dst := filepath.Join(f.modelDir, name)
	ff := FetchedFile{Name: name, Path: dst}
	if fi, err := os.Stat(dst); err == nil && fi.IsDir() {
		// A container's volume mounted at a file that was not there makes
		// a folder in its place: no source could be renamed over it.
		ff.Err = fmt.Errorf("fetch %s: %s is a folder, not the file (a container's volume mounted at a file that was not there makes one)\n  fix: remove it (%s), then run the command again",
			path.Join(f.m.Model.Name, name), dst, shellword.Join("rmdir", dst))
		return ff
	}
	// Hashed again, the stamp not trusted: a file damaged in place that
	// kept its size and mtime (a copy with cp -p, bit rot) must not be
	// kept as present by the command every load error names as the fix.
	if st, err := checkFile(f.modelDir, name, spec, true); err == nil {
		ff.Present, ff.SHA256, ff.Size = true, st.SHA256, st.Size
		f.prog.linef("%s: present (sha256 %s)", name, short(st.SHA256))
		f.log.Debug("model file present", "file", dst, "sha256", st.SHA256)
		return ff
	} else if errors.Is(err, fs.ErrPermission) {
		// There, but this user may not read it (fetched by root with
		// umask 077, a chmod 600): the fix is its access; fetching it
		// again would download it in vain, or replace another user's file.
		ff.Err = fmt.Errorf("fetch %s: %s is there, but this user may not read it: %w\n  fix: %s, then run the command again",
			path.Join(f.m.Model.Name, name), dst, err, storage.ReadFix(dst))
		return ff
	} else if !errors.Is(err, fs.ErrNotExist) {
		f.log.Warn("model file fails its check; fetching again", "file", dst, "err", err)
	}
	for _, src := range f.ordered(spec.Sources) {
		label := f.describe(src)
		if !f.kindAllowed(src.Kind) {
			continue
		}
		sha, size, err := f.trySource(ctx, name, spec, src, dst)
		if errors.Is(err, errSkipped) {
			err = fmt.Errorf("no --from folder given: %w", err)
		}
		ff.Attempts = append(ff.Attempts, Attempt{Source: label, Kind: src.Kind, Err: err})
		if err == nil {
			ff.SHA256, ff.Size, ff.Source = sha, size, label
			ff.Duration = time.Since(start)
			f.prog.linef("%s: ok from %s (%s, sha256 %s, %s)", name, label, HumanBytes(size), short(sha), ff.Duration.Round(time.Millisecond))
			f.log.Debug("model file fetched", "file", dst, "source", label, "sha256", sha, "bytes", size, "duration", ff.Duration)
			return ff
		}
		if errors.Is(err, errSkipped) {
			continue
		}
		if ctx.Err() != nil {
			break // stopped: no failure of the source (the command says it stopped)
		}
		f.prog.linef("%s: %s failed: %v", name, label, err)
		f.log.Debug("model source failed", "file", name, "source", label, "err", err)
		if errors.As(err, new(destError)) {
			break
		}
	}
	ff.Duration = time.Since(start)
	tried := ff.Attempts
	if len(tried) == 0 {
		tried = append(tried, Attempt{Source: "(none)", Err: fmt.Errorf("no source of kind %s", strings.Join(f.kinds, ","))})
	}
	ff.Err = &FetchError{File: path.Join(f.m.Model.Name, name), Attempts: tried}
	return ff
}

// ordered returns sources in manifest order, except that among Maven sources
// those whose jar was already downloaded in this run come first (the
// tokenizer is in both jars: do not download a second jar for it).
func (f *fetcher) ordered(srcs []Source) []Source {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := slices.Clone(srcs)
	var idx []int
	var maven []Source
	for i, s := range out {
		if s.Kind == KindMaven {
			idx = append(idx, i)
			maven = append(maven, s)
		}
	}
	slices.SortStableFunc(maven, func(a, b Source) int {
		_, ha := f.jars[a.Jar]
		_, hb := f.jars[b.Jar]
		switch {
		case ha && !hb:
			return -1
		case hb && !ha:
			return 1
		}
		return 0
	})
	for k, i := range idx {
		out[i] = maven[k]
	}
	return out
}

func (f *fetcher) describe(s Source) string {
	switch s.Kind {
	case KindMirror:
		if f.from == "" {
			return KindMirror
		}
		return KindMirror + " " + f.from
	case KindHuggingFace:
		return KindHuggingFace + " " + s.URL
	case KindMaven:
		return KindMaven + " " + f.m.Jars[s.Jar].Coordinates + "!" + s.Entry
	}
	return s.Kind
}

func (f *fetcher) trySource(ctx context.Context, name string, spec FileSpec, src Source, dst string) (string, int64, error) {
	ctx, cancel := context.WithTimeout(ctx, f.perSrc)
	defer cancel()
	switch src.Kind {
	case KindMirror:
		return f.tryMirror(ctx, name, spec, src, dst)
	case KindHuggingFace:
		return f.tryHTTP(ctx, name, spec, src, dst)
	case KindMaven:
		return f.tryMaven(ctx, name, spec, src, dst)
	}
	return "", 0, fmt.Errorf("unknown source kind %q", src.Kind)
}

// tryMirror looks in the --from folder for the file under each listed path,
// then for any Maven jar that carries it (by file name or in the Maven
// repository layout).
func (f *fetcher) tryMirror(ctx context.Context, name string, spec FileSpec, src Source, dst string) (string, int64, error) {
	if f.from == "" {
		return "", 0, errSkipped
	}
	var problems []string
	var looked []string
	for _, rel := range src.Paths {
		p := filepath.Join(f.from, filepath.FromSlash(rel))
		looked = append(looked, rel)
		in, err := openCtx(ctx, p)
		if ctx.Err() != nil {
			return "", 0, context.Cause(ctx)
		}
		if err != nil {
			continue
		}
		sha, size, err := f.install(ctx, in, -1, name, spec, "", dst, "")
		in.Close()
		if err == nil {
			return sha, size, nil
		}
		if errors.As(err, new(destError)) {
			// The models folder cannot take it (full, read-only): no
			// other copy, and no other source, would fare better.
			return "", 0, fmt.Errorf("%s: %w", p, err)
		}
		problems = append(problems, fmt.Sprintf("%s: %v", p, err))
	}
	for _, s := range spec.Sources {
		if s.Kind != KindMaven {
			continue
		}
		j := f.m.Jars[s.Jar]
		for _, rel := range jarMirrorPaths(j) {
			p := filepath.Join(f.from, filepath.FromSlash(rel))
			looked = append(looked, rel)
			if _, err := os.Stat(p); err != nil {
				continue
			}
			if err := f.verifyMirrorJar(ctx, p, j); err != nil {
				problems = append(problems, fmt.Sprintf("%s: %v", p, err))
				continue
			}
			sha, size, err := f.extract(ctx, p, s, name, spec, dst)
			if err == nil {
				return sha, size, nil
			}
			if errors.As(err, new(destError)) {
				return "", 0, fmt.Errorf("%s: %w", p, err)
			}
			problems = append(problems, fmt.Sprintf("%s: %v", p, err))
		}
	}
	if len(problems) > 0 {
		return "", 0, errors.New(strings.Join(problems, "; "))
	}
	return "", 0, fmt.Errorf("not found under %s (looked for %s)", f.from, strings.Join(looked, ", "))
}

// jarMirrorPaths are where a mirror folder may hold a jar: flat, or in the
// Maven repository layout (as in ~/.m2/repository).
func jarMirrorPaths(j Jar) []string {
	u, err := url.Parse(j.URL)
	if err != nil {
		return nil
	}
	base := path.Base(u.Path)
	out := []string{base}
	if i := strings.Index(u.Path, "/maven2/"); i >= 0 {
		out = append(out, strings.TrimPrefix(u.Path[i:], "/maven2/"))
	}
	return out
}

func (f *fetcher) tryHTTP(ctx context.Context, name string, spec FileSpec, src Source, dst string) (string, int64, error) {
	var want int64 = -1
	if a := spec.accepted(src.SHA256); a != nil {
		want = a.Size
	}
	return f.httpGet(ctx, src.URL, want, func(body io.Reader, size int64) (string, int64, error) {
		return f.install(ctx, body, size, name, spec, src.SHA256, dst, name)
	})
}

// httpGet runs one GET and hands the body to consume. The body is read under
// an idle timeout: a stalled transfer fails instead of hanging.
func (f *fetcher) httpGet(ctx context.Context, rawURL string, wantSize int64, consume func(io.Reader, int64) (string, int64, error)) (string, int64, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return "", 0, err
	}
	req.Header.Set("User-Agent", "toolgate-models-fetch")
	resp, err := f.client.Do(req)
	if err != nil {
		return "", 0, cleanNetErr(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", 0, fmt.Errorf("HTTP %s", resp.Status)
	}
	size := resp.ContentLength
	if size < 0 {
		size = wantSize
	} else if wantSize > 0 && size != wantSize {
		return "", 0, fmt.Errorf("server announces %d bytes, want %d", size, wantSize)
	}
	errStalled := fmt.Errorf("stalled: no data for %s", f.idle)
	timer := time.AfterFunc(f.idle, func() { cancel(errStalled) })
	defer timer.Stop()
	body := &idleReader{r: resp.Body, timer: timer, idle: f.idle}
	sha, n, err := consume(body, size)
	if err != nil {
		if c := context.Cause(ctx); c != nil && errors.Is(c, errStalled) {
			return "", 0, errStalled
		}
		return "", 0, cleanNetErr(err)
	}
	return sha, n, nil
}

type idleReader struct {
	r     io.Reader
	timer *time.Timer
	idle  time.Duration
}

func (r *idleReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if n > 0 {
		r.timer.Reset(r.idle)
	}
	return n, err
}

// copyCtx is io.Copy that returns once ctx is done, even from a read that
// blocks: a --from mirror on a stalled network file system, or a pipe whose
// writer stalled, held a stop (Ctrl-C) for its whole budget, 10 s, then
// exit status 4 with the .part file left behind. A src that is an *os.File
// is closed at once (a pipe's or socket's read then returns); a read that
// nothing interrupts (a file on a hung mount) is left to the copy's
// goroutine, which ends with it, writing nowhere (dst's file is closed and
// removed by then). Without a blocked read the copy stops at its next read.
func copyCtx(ctx context.Context, dst io.Writer, src io.Reader) (int64, error) {
	if file, ok := src.(*os.File); ok {
		defer context.AfterFunc(ctx, func() { file.Close() })()
	}
	type copied struct {
		n   int64
		err error
	}
	done := make(chan copied, 1)
	go func() {
		n, err := io.Copy(dst, ctxReader{ctx, src})
		done <- copied{n, err}
	}()
	select {
	case c := <-done:
		return c.n, c.err
	case <-ctx.Done():
		return 0, context.Cause(ctx)
	}
}

// openCtx is os.Open that returns once ctx is done, even while the open
// blocks (a FIFO with no writer yet, a hung mount); a file opened after
// that is closed.
func openCtx(ctx context.Context, name string) (*os.File, error) {
	type opened struct {
		f   *os.File
		err error
	}
	done := make(chan opened, 1)
	go func() {
		f, err := os.Open(name)
		done <- opened{f, err}
	}()
	select {
	case o := <-done:
		return o.f, o.err
	case <-ctx.Done():
		go func() {
			if o := <-done; o.f != nil {
				o.f.Close()
			}
		}()
		return nil, context.Cause(ctx)
	}
}

// ctxReader stops a copy at its next read once ctx is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (r ctxReader) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, context.Cause(r.ctx)
	}
	return r.r.Read(p)
}

func cleanNetErr(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// tryMaven downloads the jar (once per Fetch), checks its sha256 (and sha1),
// then extracts the entry and checks that.
func (f *fetcher) tryMaven(ctx context.Context, name string, spec FileSpec, src Source, dst string) (string, int64, error) {
	jarPath, err := f.jar(ctx, src.Jar)
	if err != nil {
		return "", 0, err
	}
	return f.extract(ctx, jarPath, src, name, spec, dst)
}

func (f *fetcher) jar(ctx context.Context, id string) (string, error) {
	f.mu.Lock()
	p, ok := f.jars[id]
	f.mu.Unlock()
	if ok {
		return p, nil
	}
	j := f.m.Jars[id]
	f.mu.Lock()
	if f.tmp == "" {
		t, err := os.MkdirTemp(f.modelDir, ".jars-")
		if err != nil {
			f.mu.Unlock()
			return "", toDest(fmt.Errorf("temp folder: %w", err))
		}
		f.tmp = t
	}
	tmpDir := f.tmp
	f.mu.Unlock()
	label := path.Base(j.URL)
	_, _, err := f.httpGet(ctx, j.URL, j.Size, func(body io.Reader, size int64) (string, int64, error) {
		out, err := os.CreateTemp(tmpDir, "jar-*.part")
		if err != nil {
			return "", 0, toDest(err)
		}
		p = out.Name()
		h256, h1 := sha256.New(), sha1.New()
		n, err := io.Copy(io.MultiWriter(f.dest(out), h256, h1), f.prog.reader(ctx, body, label, size))
		f.prog.done(label)
		if cerr := out.Close(); err == nil {
			err = toDest(cerr)
		}
		if err != nil {
			os.Remove(p)
			return "", 0, fmt.Errorf("download %s: %w", label, err)
		}
		if got := hexSum(h256); got != j.SHA256 {
			os.Remove(p)
			return "", 0, fmt.Errorf("jar %s: sha256 %s (%d bytes), want pinned %s", label, got, n, j.SHA256)
		}
		if got := hexSum(h1); j.SHA1 != "" && got != j.SHA1 {
			os.Remove(p)
			return "", 0, fmt.Errorf("jar %s: sha1 %s, want pinned %s", label, got, j.SHA1)
		}
		return j.SHA256, n, nil
	})
	if err != nil {
		return "", err
	}
	f.mu.Lock()
	f.jars[id] = p
	f.mu.Unlock()
	return p, nil
}

// verifyMirrorJar is verifyJar, remembered for the rest of this Fetch (the
// tokenizer and the model come from the same jar).
func (f *fetcher) verifyMirrorJar(ctx context.Context, p string, j Jar) error {
	f.mu.Lock()
	ok := f.mirrorOK[p]
	f.mu.Unlock()
	if ok {
		return nil
	}
	if err := verifyJar(ctx, p, j); err != nil {
		return err
	}
	f.mu.Lock()
	f.mirrorOK[p] = true
	f.mu.Unlock()
	return nil
}

// verifyJar checks a local jar's sha256 (and sha1) against the pin.
func verifyJar(ctx context.Context, p string, j Jar) error {
	in, err := openCtx(ctx, p)
	if err != nil {
		return err
	}
	defer in.Close()
	h256, h1 := sha256.New(), sha1.New()
	if _, err := copyCtx(ctx, io.MultiWriter(h256, h1), in); err != nil {
		return err
	}
	if got := hexSum(h256); got != j.SHA256 {
		return fmt.Errorf("jar sha256 %s, want pinned %s", got, j.SHA256)
	}
	if got := hexSum(h1); j.SHA1 != "" && got != j.SHA1 {
		return fmt.Errorf("jar sha1 %s, want pinned %s", got, j.SHA1)
	}
	return nil
}

func (f *fetcher) extract(ctx context.Context, jarPath string, src Source, name string, spec FileSpec, dst string) (string, int64, error) {
	zr, err := zip.OpenReader(jarPath)
	if err != nil {
		return "", 0, fmt.Errorf("open jar: %w", err)
	}
	defer zr.Close()
	for _, e := range zr.File {
		if e.Name != src.Entry {
			continue
		}
		rc, err := e.Open()
		if err != nil {
			return "", 0, fmt.Errorf("jar entry %s: %w", e.Name, err)
		}
		defer rc.Close()
		return f.install(ctx, rc, int64(e.UncompressedSize64), name, spec, src.SHA256, dst, "")
	}
	return "", 0, fmt.Errorf("jar has no entry %s", src.Entry)
}

// install copies r into a temp file next to dst, checks the sha256 (against
// want if set, else any accepted value), fsyncs and renames it into place,
// and records a stamp so later checks need not re-hash. A non-empty label
// shows progress (downloads); local copies pass "".
func (f *fetcher) install(ctx context.Context, r io.Reader, size int64, name string, spec FileSpec, want, dst, label string) (string, int64, error) {
	dir := filepath.Dir(dst)
	out, err := os.CreateTemp(dir, "."+filepath.Base(dst)+".*.part")
	if err != nil {
		return "", 0, toDest(fmt.Errorf("temp file: %w", err))
	}
	tmp := out.Name()
	keep := false
	defer func() {
		if !keep {
			out.Close()
			os.Remove(tmp)
		}
	}()
	h := sha256.New()
	src := r // a file (a local copy) is closed at a stop: copyCtx
	if label != "" {
		src = f.prog.reader(ctx, r, label, size)
	}
	n, err := copyCtx(ctx, io.MultiWriter(f.dest(out), h), src)
	if label != "" {
		f.prog.done(label)
	}
	if err != nil {
		return "", 0, fmt.Errorf("copy after %d bytes: %w", n, err)
	}
	if size >= 0 && n != size {
		return "", 0, fmt.Errorf("truncated: got %d bytes, want %d", n, size)
	}
	got := hexSum(h)
	if want != "" && got != want {
		return "", 0, fmt.Errorf("sha256 %s (%d bytes), want pinned %s", got, n, want)
	}
	if spec.accepted(got) == nil {
		return "", 0, fmt.Errorf("sha256 %s (%d bytes) is not pinned in the manifest (accepted: %s)", got, n, strings.Join(spec.AcceptedSHA256(), ", "))
	}
	if err := out.Chmod(0o644); err != nil {
		return "", 0, toDest(err)
	}
	if err := out.Sync(); err != nil {
		return "", 0, toDest(fmt.Errorf("fsync: %w", err))
	}
	if err := out.Close(); err != nil {
		return "", 0, toDest(err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		return "", 0, toDest(fmt.Errorf("rename into place: %w", err))
	}
	keep = true
	syncDir(dir)
	if err := writeStamp(dst, got); err != nil {
		f.log.Debug("write stamp", "file", dst, "err", err)
	}
	return got, n, nil
}

func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}

func hexSum(h hash.Hash) string { return hex.EncodeToString(h.Sum(nil)) }

func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}
