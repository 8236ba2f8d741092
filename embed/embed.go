// Package embed owns turning text into unit-length vectors: the Hugging Face
// tokenizer (github.com/daulet/tokenizers, cgo over libtokenizers.a), the
// all-MiniLM-L6-v2 ONNX model run in-process by ONNX Runtime
// (github.com/yalue/onnxruntime_go), attention-masked mean pooling and L2
// normalisation, and a Badger cache of vectors keyed by hash(model id, text).
//
// Only this package touches ONNX Runtime and the tokenizer library; doctor
// asks it for their versions (ORTVersionLoaded, TokenizersVersion). It is
// given the paths of the native pieces (Options) and never reads the
// environment; checking that they exist (Locate) and reporting what is
// missing, with the command that installs it (MissingError), lives here so
// the CLI and doctor say the same thing.
package embed

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	ort "github.com/yalue/onnxruntime_go"
	"golang.org/x/sync/errgroup"

	"github.com/toolgate/toolgate/internal/cgroupmem"
	"github.com/toolgate/toolgate/internal/storage"
	"github.com/toolgate/toolgate/models"
)

// Options configure an Embedder. ORTLib and ModelDir are required; every
// other zero field means its default. This package never reads the
// environment: commands resolve the paths (internal/dirs).
type Options struct {
	// ORTLib is the ONNX Runtime shared library (libonnxruntime.so.1).
	ORTLib string
	// ModelDir holds model.onnx / model_int8.onnx and tokenizer.json
	// (<models dir>/all-MiniLM-L6-v2).
	ModelDir string
	// InstalledModelDir is another model folder that holds the files (the
	// default data folder's, which make deps and a bare `toolgate models
	// fetch` fill), named in the fix when ModelDir lacks them: a gateway
	// given a --data-dir of its own looks in that folder's models/, and
	// was told to download the model again there. "" names none.
	InstalledModelDir string
	// Variant is fp32 (default) or int8.
	Variant Variant
	// Threads is ONNX Runtime's intra-op thread count per session.
	// Default: the CPUs shared out over the sessions (at least 1), so the
	// sessions together use each core once. serve runs one session on
	// every core: a search embeds one short query, and a session using
	// both cores of a 2-core machine does it in about 7 ms instead of 10
	// (BenchmarkEmbedQuery sessions2/threads2 vs threads1, load 1.5).
	// Indexing runs two sessions: two of one thread each embedded the
	// synthetic 10,000-tool catalog in 59 s where two of two threads
	// (four threads on two cores) took 65 s (`toolgate index --tools`,
	// idle machine, twice each). The vectors do not depend on it
	// (TestThreadsSameVectors).
	Threads int
	// Sessions is how many ONNX sessions run at once, shared by concurrent
	// callers and by the batches of one large call. Default 2 (1 on a
	// single CPU): on 2 cores a pool of 2 one-thread sessions beat one
	// 2-thread session for one caller with 32 texts and for 4 concurrent
	// callers (BenchmarkSessions). Each fp32 session holds its own copy of
	// the weights and its own arena: about 110 MiB more RSS each
	// (BenchmarkLoadRSS), which is why `toolgate serve` runs one.
	Sessions int
	// Background makes New return once the model is known (ModelID, Dim):
	// the tokenizer and the ONNX sessions then load in the background,
	// Embed waits for them, and Ready says how the load went. `toolgate
	// serve` sets it, so that its index opens and the MCP handshake is
	// answered while the model loads. With Background, model or tokenizer
	// files that are not installed yet are not an error either: New
	// returns an embedder whose Ready and Embed say what is missing (and
	// whose ModelID is "") until the files are there; it looks for them
	// every 10 s and loads them as soon as they are (a first start before
	// `toolgate models fetch`: the gateway used to stay BM25-only until a
	// restart).
	Background bool
	// Lazy makes New return once the model is known (ModelID, Dim), as
	// Background does, and load the tokenizer and the ONNX sessions at the
	// first Embed or Ready, in that call: `toolgate eval` sets it, so that
	// a run whose vectors are all in the embedding cache loads no model
	// (metatool, --mode all, cache warm: peak RSS 395 MB, now 135 MB). A
	// model that fails to load says so there, not at New. The ONNX
	// Runtime library loads then too, not at New (a model the manifest
	// does not pin excepted: New reads its graph's inputs with it).
	//
	// With Background, it defers Background's work (the load, its retries,
	// the look for files not installed yet, and what it logs) to the first
	// Embed, Ready or Start, and runs it in the background as Background
	// does: `toolgate serve` in bm25 mode sets both, so that a gateway
	// whose searches read no vectors holds no model (about 155 MiB of
	// RSS with its tokenizer) until a search or a reload asks for one.
	Lazy bool
	// MaxTokens truncates each text (special tokens included). Default 256,
	// the model's max_seq_length.
	MaxTokens int
	// BatchSize is the most texts per model run. Default 8 for fp32 and 1
	// for int8. Small fp32 batches keep a run's activations in cache: 8
	// embeds about 7 % more texts/s than 32 (BenchmarkEmbedCatalog, 500
	// catalog texts, default sessions and threads: 87-91 vs 77-84 texts/s,
	// load 2.0-2.5), and 4 is no faster. The int8 model quantises
	// activations with one scale per tensor, computed over the whole batch,
	// so a text's vector would depend on the other texts in its batch
	// (cosine down to 0.965 measured); run alone it is deterministic, which
	// the cache and eval rely on.
	BatchSize int
	// Logger receives load information; nil discards.
	Logger *slog.Logger
}

// Dim is the embedding width of all-MiniLM-L6-v2.
const Dim = 384

// Embedder embeds text with all-MiniLM-L6-v2. It is safe for concurrent use.
type Embedder struct {
	paths Paths
	// ident is the model's sha256 and ID, set once its file is read: at
	// New, or when files that were missing at New arrive (awaitFiles).
	ident atomic.Pointer[identity]
	// From the manifest's model entry: how token vectors become a text
	// vector, and the prefixes of queries and documents.
	pooling          string
	qPrefix, dPrefix string
	tok              *tokenizer
	batch            int
	useTypes         bool // the model has a token_type_ids input
	inputs           []string
	output           string
	pool             chan *ort.DynamicAdvancedSession
	counter          struct {
		once sync.Once
		tok  *tokenizer
		err  error
	}
	sessions []*ort.DynamicAdvancedSession
	log      *slog.Logger

	// loaded is closed once the tokenizer and sessions are loaded, or
	// failed to (loadErr); tok, pool and sessions are set before.
	loaded  chan struct{}
	loadErr error // written under mu once loaded is closed (a retry)
	// installed is closed when a model is installed after New returned
	// without one (Installed).
	installed chan struct{}
	// stop is closed by Close: a background load that retries gives up.
	stop     chan struct{}
	stopOnce sync.Once
	// lazy runs lazyLoad, Options.Lazy's load (with Background: the start
	// of Background's work), once: at the first Embed, Ready or Start, or
	// at Close, as no load.
	lazy     *sync.Once
	lazyLoad func()
	// bg is the background load or wait for files (Options.Background),
	// which Close waits for: it reads the package's test hooks and must
	// not outlive its Embedder.
	bg sync.WaitGroup

	// mu is held shared by each Embed and exclusively by Close, so Close
	// waits for calls in flight and later calls see closed.
	mu     sync.RWMutex
	closed bool
}

// Process-wide ONNX Runtime environment: the library can be loaded once.
// A load that failed is tried again once the file changes (a copy being
// replaced, a damaged one re-installed): nothing of it stays loaded.
var (
	ortMu     sync.Mutex
	ortLoaded bool
	ortPath   string // the library loaded, or the one that failed
	ortFailed string // fileVersion of the library that failed
	ortErr    error
)

// ortTelemetryOptOut are the environment variables that keep ONNX Runtime's
// own telemetry off. Since 1.29 the Linux library ships Microsoft's 1DS
// telemetry: at start it writes a device identifier and an offline event
// store under $XDG_CACHE_HOME/Microsoft/DeveloperTools/.onnxruntime, a
// debug log mat-debug-<pid>.log and a .ses file in $TMPDIR (/tmp), and
// uploads a ProcessInfo event. Only the variable, set before the library
// starts, stops all of it;
// ort.DisableTelemetry acts later and only on later events. The library
// reads ORT_DISABLE_TELEMETRY (1.30); ORT_TELEMETRY_DISABLED is the name a
// later upstream change (onnxruntime PR 29843) reads, so both are set. Stdio
// backends do not inherit them (backend.DefaultEnvAllow).
// TestNoTelemetry fails the day the library writes them anyway.
var ortTelemetryOptOut = []string{"ORT_DISABLE_TELEMETRY", "ORT_TELEMETRY_DISABLED"}

// The environment the native libraries read is set here, before main, and
// never while they run: Go's os.Setenv calls C's setenv, which may move
// the process's environment array while another thread's getenv walks it.
// That was a crash, seldom (twice in some twenty CI runs, never on its own
// in 600 tries): SIGSEGV inside ONNX Runtime's CreateSessionFromFile at the
// first load of a process, while the tokenizer, loading beside the
// sessions, set TOKENIZERS_PARALLELISM (and the tokenizers library reads
// it at every encoding, so a Setenv while another embedder encodes was
// the same race). TestEnvironmentSetBeforeMain holds it.
func init() {
	for _, name := range ortTelemetryOptOut {
		_ = os.Setenv(name, "1")
	}
	_ = os.Setenv(tokenizersParallelism, "false")
}

// limitFix is the fix for err, a failure to load ONNX Runtime or the model:
// fix (re-install the piece) unless err says the process was refused
// memory or descriptors (storage.Shortage, which reads ONNX Runtime's
// messages too), which a re-install does not mend.
func limitFix(err error, fix string) string {
	if e := storage.Shortage(err); e != 0 {
		return storage.ShortageFix(e)
	}
	return fix
}

// initORT loads the ONNX Runtime library at path once per process. A later
// call with a different path fails once one is loaded: the runtime cannot be
// reloaded. A failed load is said again without trying while the file is as
// it was.
func initORT(path string) error {
	ortMu.Lock()
	defer ortMu.Unlock()
	if initHook != nil {
		initHook()
	}
	if ortLoaded {
		if path != ortPath {
			return fmt.Errorf("ONNX Runtime already loaded from %s in this process; cannot load %s", ortPath, path)
		}
		return nil
	}
	v := fileVersion(path)
	if ortErr != nil && path == ortPath && v == ortFailed {
		return ortErr
	}
	ort.SetSharedLibraryPath(path)
	if err := ort.InitializeEnvironment(ort.WithLogLevelError()); err != nil {
		ortPath, ortFailed = path, v
		ortErr = fmt.Errorf("load ONNX Runtime %s: %w (%s)", path, err, limitFix(err, "install a working copy with "+FixORT))
		return ortErr
	}
	_ = ort.DisableTelemetry()
	ortLoaded, ortPath, ortErr = true, path, nil
	return nil
}

// ORTVersionLoaded reports the version string of the loaded ONNX Runtime
// library, loading it from path first if needed (for doctor).
func ORTVersionLoaded(path string) (string, error) {
	if err := initORT(path); err != nil {
		return "", err
	}
	return ort.GetVersion(), nil
}

// New loads the tokenizer and model (or, with Options.Background, starts
// loading them). Errors name the missing or broken piece and the command
// that installs it (errors.Is(err, ErrMissing) for absent files).
func New(opts *Options) (*Embedder, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Sessions <= 0 {
		o.Sessions = min(2, runtime.NumCPU())
	}
	if o.Threads <= 0 {
		o.Threads = max(1, runtime.NumCPU()/o.Sessions)
	}
	if o.MaxTokens <= 0 {
		o.MaxTokens = 256
	}
	if o.BatchSize <= 0 {
		o.BatchSize = 8
		if o.Variant == INT8 {
			o.BatchSize = 1
		}
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p, missing := Locate(&o)
	var me *MissingError
	if missing != nil && (!o.Background || !errors.As(missing, &me)) {
		return nil, missing
	}
	// With Lazy the runtime loads with the model (loadOnce): a gateway in
	// bm25 mode mapped its library (about 10 MiB of RSS) for nothing.
	if !o.Lazy && (me == nil || me.Path != p.ORTLib) {
		if err := initORT(p.ORTLib); err != nil {
			return nil, err
		}
	}
	e := &Embedder{
		paths:   p,
		batch:   o.BatchSize,
		log:     log,
		pooling: models.PoolingMean,
		loaded:  make(chan struct{}),
		stop:    make(chan struct{}),

		installed: make(chan struct{}),
	}
	if spec := models.Manifest().Model; spec.Name == ModelName {
		if spec.Pooling != "" {
			e.pooling = spec.Pooling
		}
		e.qPrefix, e.dPrefix = spec.QueryPrefix, spec.DocumentPrefix
	}
	if missing != nil {
		// Background, and the runtime or the model's files are not
		// installed yet.
		e.loadErr = missing
		close(e.loaded)
		what := "the embedding model is installed"
		if me.Path == p.ORTLib {
			what = "the ONNX Runtime library is installed"
		}
		if errors.Is(me, os.ErrPermission) {
			what = "this user may read the " + me.Piece
		}
		e.startBackground(o, func() {
			log.Warn("semantic ranking is off until "+what+": search_tools runs BM25-only and says \"mode\": \"bm25\"; its folder is looked at every "+filesPoll.String(), "reason", missing)
			e.awaitFiles(o, "")
		})
		return e, nil
	}
	id, err := e.identify()
	if err != nil && o.Background && limitFix(err, "") == "" {
		// A model file that is there but does not load (damaged, cut
		// short): tried again once it changes (a re-fetch), as a
		// missing one is once it comes.
		e.loadErr = err
		close(e.loaded)
		version := e.filesVersion()
		e.startBackground(o, func() {
			log.Warn("semantic ranking is off until the embedding model's files load: search_tools runs BM25-only and says \"mode\": \"bm25\"; they are tried again once they change (looked at every "+filesPoll.String()+")", "reason", err)
			e.awaitFiles(o, version)
		})
		return e, nil
	}
	if err != nil {
		return nil, err
	}
	e.ident.Store(id)
	if o.Background {
		e.startBackground(o, func() { e.load(o) })
		return e, nil
	}
	if o.Lazy {
		e.lazy, e.lazyLoad = new(sync.Once), func() { e.load(o) }
		return e, nil
	}
	if e.load(o); e.loadErr != nil {
		return nil, e.loadErr
	}
	return e, nil
}

// loadRetry is how often a background load that failed for want of
// memory or descriptors is tried again; filesPoll how often missing model
// files are looked for (a few stats: `toolgate models fetch` is seen
// within seconds).
var (
	loadRetry = 10 * time.Second
	filesPoll = 2 * time.Second
)

// identity is a model file's sha256 and the ID its vectors carry.
type identity struct{ sha, id string }

// identify reads the model file's sha256 (the stamp a fetch wrote beside
// it spares hashing it) and takes its graph's inputs and output: from the
// manifest for a pinned file, else from the graph.
func (e *Embedder) identify() (*identity, error) {
	sum, err := models.StampedSHA256(e.paths.Model)
	if err != nil {
		return nil, fmt.Errorf("read model: %w", err)
	}
	spec := models.Manifest().Model
	if spec.Name == ModelName && len(spec.Inputs) > 0 && spec.Output != "" && spec.Accepts(sum) {
		err = e.setInterface(spec.Inputs, []string{spec.Output})
	} else if err = initORT(e.paths.ORTLib); err == nil {
		err = e.inspect() // a model the manifest does not pin: its graph says
	}
	if err != nil {
		return nil, err
	}
	return &identity{sha: sum, id: fmt.Sprintf("%s/%s@%s", ModelName, e.paths.Variant, sum[:12])}, nil
}

// awaitFiles waits for the files that were missing at New (the ONNX
// Runtime library, the model's): every filesPoll it looks for them and,
// once they are all there and load, makes them the embedder's (Ready then returns nil, and the gateway's
// loop re-indexes with their vectors). Files that are there but do not
// load (one caught while it is copied, a damaged one) are said once per
// reason and tried again once they change. tried is the files' version
// (filesVersion) that failed already ("": none). Until Close.
func (e *Embedder) awaitFiles(o Options, tried string) {
	t := time.NewTicker(filesPoll)
	defer t.Stop()
	said := ""
	if tried != "" {
		e.mu.Lock()
		if e.loadErr != nil {
			said = e.loadErr.Error() // said by the caller
		}
		e.mu.Unlock()
	}
	for {
		select {
		case <-e.stop:
			return
		case <-t.C:
		}
		if _, err := Locate(&o); err != nil {
			e.mu.Lock()
			e.loadErr = err // the piece missing now (the runtime came, the model not yet)
			e.mu.Unlock()
			continue
		}
		if lookHook != nil {
			lookHook()
		}
		if v := e.filesVersion(); v == tried {
			continue // the files that did not load, unchanged
		} else {
			tried = v
		}
		start := time.Now()
		id, err := e.identify()
		var tok *tokenizer
		var sessions []*ort.DynamicAdvancedSession
		if err == nil {
			tok, sessions, err = e.loadOnce(o)
		}
		if err != nil {
			e.mu.Lock()
			e.loadErr = err // what Ready and LoadError say now, rather than the files' absence
			e.mu.Unlock()
			if id != nil && limitFix(err, "") != "" {
				// Files that came, refused memory or descriptors (a
				// memory limit too small): tried again as a load at
				// start is, not only once they change.
				e.ident.Store(id)
				e.log.Error("embedding model failed to load: searches run BM25-only until it loads (tried again every "+loadRetry.String()+")", "model", e.paths.Model, "err", err)
				e.retryShortage(o)
				return
			}
			if err.Error() != said {
				said = err.Error()
				e.log.Warn("the embedding model's files are there but do not load; trying again when they change", "err", err)
			}
			continue
		}
		e.ident.Store(id)
		e.install(tok, sessions, o, time.Since(start), true)
		return
	}
}

// filesVersion tells the embedder's files (the runtime, the model's)
// apart from what they were.
func (e *Embedder) filesVersion() string {
	return fileVersion(e.paths.ORTLib) + fileVersion(e.paths.Model) + fileVersion(e.paths.Tokenizer)
}

// fileVersion is a file's path, size and modification time (as the sha256
// stamp tells a file apart), or "" when it cannot be read.
func fileVersion(path string) string {
	fi, err := os.Stat(path)
	if err != nil {
		return ""
	}
	return fmt.Sprintf("%s %d %d\n", path, fi.Size(), fi.ModTime().UnixNano())
}

// load loads the tokenizer and the sessions side by side, then closes
// e.loaded; on failure it releases what it made and keeps the error. A
// background load refused memory or descriptors (a limit that may be
// raised, or pressure that passes: many clients, a big build) is tried
// again every loadRetry until it loads or Close: searches run BM25-only
// meanwhile, and the gateway's loop re-indexes with vectors once Ready
// says the model is there (it used to stay BM25-only until a restart).
func (e *Embedder) load(o Options) {
	start := time.Now()
	tok, sessions, err := e.loadOnce(o)
	if err == nil {
		e.install(tok, sessions, o, time.Since(start), false)
		close(e.loaded)
		return
	}
	e.loadErr = err
	close(e.loaded)
	if !o.Background {
		return
	}
	if limitFix(err, "") == "" {
		// A file that is wrong stays wrong until it changes (a re-fetch):
		// tried again then, as missing files are once they come.
		e.log.Error("embedding model failed to load: searches run BM25-only until its files change (tried again then; looked at every "+filesPoll.String()+")", "model", e.paths.Model, "err", err)
		e.awaitFiles(o, e.filesVersion())
		return
	}
	e.log.Error("embedding model failed to load: searches run BM25-only until it loads (tried again every "+loadRetry.String()+")", "model", e.paths.Model, "err", err)
	e.retryShortage(o)
}

// retryShortage tries a load refused memory or descriptors again every
// loadRetry until it loads or Close.
func (e *Embedder) retryShortage(o Options) {
	t := time.NewTicker(loadRetry)
	defer t.Stop()
	for {
		select {
		case <-e.stop:
			return
		case <-t.C:
		}
		start := time.Now()
		tok, sessions, err := e.loadOnce(o)
		if err != nil {
			e.log.Debug("embedding model still fails to load", "err", err)
			continue
		}
		e.install(tok, sessions, o, time.Since(start), true)
		return
	}
}

// install makes the loaded tokenizer and sessions the embedder's; after a
// retry (the first load failed) it waits for calls in flight, and releases
// them when Close came first.
func (e *Embedder) install(tok *tokenizer, sessions []*ort.DynamicAdvancedSession, o Options, took time.Duration, retried bool) {
	if retried {
		e.mu.Lock()
		defer e.mu.Unlock()
		if e.closed {
			for _, s := range sessions {
				s.Destroy()
			}
			tok.close()
			return
		}
		e.loadErr = nil
	}
	e.tok, e.sessions = tok, sessions
	e.pool = make(chan *ort.DynamicAdvancedSession, len(sessions))
	for _, s := range sessions {
		e.pool <- s
	}
	e.log.Info("embedder loaded", "model", e.ModelID(), "path", e.paths.Model, "ort", ort.GetVersion(),
		"sessions", o.Sessions, "threads", o.Threads, "token_type_ids", e.useTypes, "took", took.Round(time.Millisecond))
	if retried {
		e.log.Info("the embedding model loads now: searches rank with it again once the index has its vectors")
		select {
		case <-e.installed:
		default:
			close(e.installed) // under mu: once
		}
	}
}

// Installed returns a channel that is closed when a model is installed
// after New returned without one (Background: the files came, or a load
// refused memory or descriptors was tried again and worked), so that the
// gateway's loop re-indexes with its vectors at once.
func (e *Embedder) Installed() <-chan struct{} { return e.installed }

// loadHook, when set (by tests), runs at the start of each load attempt;
// lookHook each time awaitFiles finds every file there; initHook at each
// initORT (under ortMu), whether it loads the library or finds it loaded.
var loadHook, lookHook, initHook func()

// loadOnce loads the tokenizer and the sessions side by side; on failure
// it releases what it made.
func (e *Embedder) loadOnce(o Options) (*tokenizer, []*ort.DynamicAdvancedSession, error) {
	if loadHook != nil {
		loadHook()
	}
	if err := initORT(e.paths.ORTLib); err != nil { // loaded already unless Lazy
		return nil, nil, err
	}
	if err := e.roomToLoad(o.Sessions); err != nil {
		return nil, nil, err
	}
	var tok *tokenizer
	var tokErr error
	tokDone := make(chan struct{})
	go func() {
		defer close(tokDone)
		tok, tokErr = newTokenizer(e.paths.Tokenizer, o.MaxTokens, e.paths.FixModel())
	}()
	sessions := make([]*ort.DynamicAdvancedSession, o.Sessions)
	var g errgroup.Group
	for i := range sessions {
		g.Go(func() (err error) {
			sessions[i], err = e.newSession(o.Threads)
			return err
		})
	}
	err := g.Wait()
	<-tokDone
	if err == nil {
		err = tokErr
	}
	if err != nil {
		for _, s := range sessions {
			if s != nil {
				s.Destroy()
			}
		}
		if tok != nil {
			tok.close()
		}
		return nil, nil, err
	}
	return tok, sessions, nil
}

// memRoom is what the memory limits over this process leave it; tests
// set it.
var memRoom = cgroupmem.Self

// loadNeed is about what loading the model takes, a model file of size
// bytes in each of sessions sessions: its weights (one copy a session)
// with ONNX Runtime's arena and a batch's activations, 1.5 times the file,
// and the tokenizer. Measured (BenchmarkLoadRSS, and a gateway in a memory
// cgroup): fp32 (86 MiB) 133-134 MiB a session, int8 (22 MiB) 30 MiB; this
// says 153 and 57 MiB for one session.
func loadNeed(size int64, sessions int) uint64 {
	return uint64(sessions)*uint64(size)*3/2 + 24<<20
}

// roomToLoad refuses the load when the memory limit over this process (a
// cgroup's: MemoryMax=, a container's) leaves less than it takes. Past
// such a limit the kernel does not refuse memory, it kills a process of
// the group, toolgate (the largest) most often: a gateway limited to
// 180 MiB beside one server was killed loading the model at every start,
// exit status 137, its log ending at "serving MCP". Refused, the load is
// a shortage like ulimit -v's: searches run BM25-only and it is tried
// again every loadRetry, so a limit raised while serving
// (systemctl set-property … MemoryMax=) lets it load.
func (e *Embedder) roomToLoad(sessions int) error {
	r, ok := memRoom()
	if !ok {
		return nil
	}
	fi, err := os.Stat(e.paths.Model)
	if err != nil {
		return nil // the load says why
	}
	need := loadNeed(fi.Size(), sessions)
	if need <= r.Free() {
		return nil
	}
	return fmt.Errorf("not enough memory under toolgate's memory limit to load the embedding model: it takes about %s, and the limit leaves %s (the control group %s may use %s, and uses %s with the servers toolgate started); past the limit the kernel would kill toolgate, so the model is not loaded (%w): raise the limit (MemoryMax= in a systemd unit; a container's memory limit) or run fewer servers under it",
		cgroupmem.MiB(need), cgroupmem.MiB(r.Free()), r.Group, cgroupmem.MiB(r.Limit), cgroupmem.MiB(r.Used), syscall.ENOMEM)
}

// Ready waits until the model is loaded (at once without
// Options.Background) and returns why it could not be, if so: a load that
// failed for want of memory or descriptors may succeed later (load).
func (e *Embedder) Ready(ctx context.Context) error {
	e.loadLazy()
	if err := e.wait(ctx); err != nil {
		return err
	}
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.loadErr
}

// LoadError says, without waiting, why the model is not loaded now: nil
// once it is, and while the first load runs (a search waits for it).
func (e *Embedder) LoadError() error {
	select {
	case <-e.loaded:
	default:
		return nil
	}
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.loadErr
}

// wait waits for the first load to end.
func (e *Embedder) wait(ctx context.Context) error {
	select {
	case <-e.loaded:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// inspect asks ONNX Runtime for the model's inputs and outputs (a session
// made for the purpose: no graph optimisation, one thread).
func (e *Embedder) inspect() error {
	so, err := ort.NewSessionOptions()
	if err != nil {
		return fmt.Errorf("session options: %w", err)
	}
	defer so.Destroy()
	if err := so.SetGraphOptimizationLevel(ort.GraphOptimizationLevelDisableAll); err != nil {
		return fmt.Errorf("session options: %w", err)
	}
	if err := so.SetIntraOpNumThreads(1); err != nil {
		return fmt.Errorf("session options: %w", err)
	}
	ins, outs, err := ort.GetInputOutputInfoWithOptions(e.paths.Model, so)
	if err != nil {
		return fmt.Errorf("open model %s: %w (%s)", e.paths.Model, err, limitFix(err, "re-fetch it with "+e.paths.FixModel()))
	}
	var in, out []string
	for _, i := range ins {
		in = append(in, i.Name)
	}
	for _, o := range outs {
		out = append(out, o.Name)
	}
	return e.setInterface(in, out)
}

// setInterface takes the graph's input and output names: token_type_ids is
// fed only when the graph has it; the output is last_hidden_state (or the
// first one).
func (e *Embedder) setInterface(ins, outs []string) error {
	have := map[string]bool{}
	for _, in := range ins {
		have[in] = true
	}
	for _, name := range []string{"input_ids", "attention_mask"} {
		if !have[name] {
			return fmt.Errorf("model %s has no %q input: not a BERT-style sentence embedding model", e.paths.Model, name)
		}
	}
	e.inputs = []string{"input_ids", "attention_mask"}
	if have["token_type_ids"] {
		e.useTypes = true
		e.inputs = append(e.inputs, "token_type_ids")
	}
	if len(ins) != len(e.inputs) {
		return fmt.Errorf("model %s wants %d inputs, toolgate feeds %v", e.paths.Model, len(ins), e.inputs)
	}
	if len(outs) == 0 {
		return fmt.Errorf("model %s has no outputs", e.paths.Model)
	}
	e.output = outs[0]
	for _, out := range outs {
		if out == "last_hidden_state" {
			e.output = out
		}
	}
	return nil
}

func (e *Embedder) newSession(threads int) (*ort.DynamicAdvancedSession, error) {
	so, err := ort.NewSessionOptions()
	if err != nil {
		return nil, fmt.Errorf("session options: %w", err)
	}
	defer so.Destroy()
	if err := so.SetIntraOpNumThreads(threads); err != nil {
		return nil, fmt.Errorf("set intra-op threads: %w", err)
	}
	if err := so.SetInterOpNumThreads(1); err != nil {
		return nil, fmt.Errorf("set inter-op threads: %w", err)
	}
	// No busy-waiting between runs: toolgate shares the machine with its
	// client, and on a loaded 2-core box spinning threads made a 2-thread
	// session ~4× slower (10 vs 40 texts/s at batch 1).
	if err := so.AddSessionConfigEntry("session.intra_op.allow_spinning", "0"); err != nil {
		return nil, fmt.Errorf("disable thread spinning: %w", err)
	}
	s, err := ort.NewDynamicAdvancedSession(e.paths.Model, e.inputs, []string{e.output}, so)
	if err != nil {
		return nil, fmt.Errorf("load model %s: %w (%s)", e.paths.Model, err, limitFix(err, "re-fetch it with "+e.paths.FixModel()))
	}
	return s, nil
}

// ModelID names the model, variant and weights, e.g.
// "all-MiniLM-L6-v2/fp32@759c3cd2b7fe": vectors from different ids never
// mix. It is "" while the model's files are not installed (Background).
func (e *Embedder) ModelID() string {
	if id := e.ident.Load(); id != nil {
		return id.id
	}
	return ""
}

// Dim is 384.
func (e *Embedder) Dim() int { return Dim }

// Paths reports the files this embedder loaded.
func (e *Embedder) Paths() Paths { return e.paths }

// ModelSHA256 is the hex sha256 of the loaded ONNX file ("" while it is
// not installed).
func (e *Embedder) ModelSHA256() string {
	if id := e.ident.Load(); id != nil {
		return id.sha
	}
	return ""
}

// CountTokens returns how many WordPiece tokens the model's tokenizer makes
// of text, special tokens included and without truncation (0 if the
// tokenizer cannot be loaded). toolgate-bench states token economy in it.
func (e *Embedder) CountTokens(text string) int {
	e.counter.once.Do(func() {
		e.counter.tok, e.counter.err = newTokenizer(e.paths.Tokenizer, math.MaxInt32, e.paths.FixModel())
	})
	if e.counter.err != nil {
		return 0
	}
	return e.counter.tok.count(text)
}

// ErrClosed is returned by Embed after Close.
var ErrClosed = errors.New("embedder closed")

// Embed returns one unit-length vector per text, in order. Texts are
// tokenised, sorted by length and run in batches of similar length so
// padding costs little; the result does not depend on the batching.
func (e *Embedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	e.loadLazy() // before mu: a load's retry takes it
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.closed {
		return nil, ErrClosed
	}
	if err := e.wait(ctx); err != nil {
		return nil, err
	}
	if e.loadErr != nil { // read under mu: a retry writes it
		return nil, e.loadErr
	}
	out := make([][]float32, len(texts))
	if len(texts) == 0 {
		return out, nil
	}
	ids := make([][]int64, len(texts))
	order := make([]int, len(texts))
	for i, t := range texts {
		ids[i] = e.tok.encode(t)
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return len(ids[a]) - len(ids[b]) })
	// Batches of similar length run in parallel, one per pooled session, so
	// a single large call (indexing) uses every session too.
	chunk := e.batch
	if n := len(e.sessions); n > 1 {
		chunk = max(1, min(chunk, (len(order)+n-1)/n))
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(len(e.sessions))
	for start := 0; start < len(order); start += chunk {
		idx := order[start:min(start+chunk, len(order))]
		g.Go(func() error {
			if err := gctx.Err(); err != nil {
				return err
			}
			batch := make([][]int64, len(idx))
			for j, i := range idx {
				batch[j] = ids[i]
			}
			vecs, err := e.run(gctx, batch)
			if err != nil {
				return err
			}
			for j, i := range idx {
				out[i] = vecs[j] // distinct i per goroutine
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return out, nil
}

// run embeds one padded batch on a session from the pool.
func (e *Embedder) run(ctx context.Context, batch [][]int64) ([][]float32, error) {
	n := len(batch)
	seq := 0
	for _, b := range batch {
		seq = max(seq, len(b))
	}
	if seq == 0 {
		seq = 1
	}
	idsData := make([]int64, n*seq)
	maskData := make([]int64, n*seq)
	for i, b := range batch {
		copy(idsData[i*seq:], b)
		for j := range b {
			maskData[i*seq+j] = 1
		}
	}
	shape := ort.NewShape(int64(n), int64(seq))
	var inputs []ort.Value
	defer func() {
		for _, v := range inputs {
			v.Destroy()
		}
	}()
	for _, data := range [][]int64{idsData, maskData} {
		t, err := ort.NewTensor(shape, data)
		if err != nil {
			return nil, fmt.Errorf("input tensor: %w", err)
		}
		inputs = append(inputs, t)
	}
	if e.useTypes {
		t, err := ort.NewTensor(shape, make([]int64, n*seq))
		if err != nil {
			return nil, fmt.Errorf("input tensor: %w", err)
		}
		inputs = append(inputs, t)
	}

	var s *ort.DynamicAdvancedSession
	select {
	case s = <-e.pool:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	outputs := []ort.Value{nil}
	err := s.Run(inputs, outputs)
	e.pool <- s
	if err != nil {
		return nil, fmt.Errorf("run model: %w", err)
	}
	defer outputs[0].Destroy()
	hidden, ok := outputs[0].(*ort.Tensor[float32])
	if !ok {
		return nil, fmt.Errorf("model output %q is %T, want float32 tensor", e.output, outputs[0])
	}
	oshape := hidden.GetShape()
	if len(oshape) != 3 || oshape[0] != int64(n) || oshape[1] != int64(seq) || oshape[2] != Dim {
		return nil, fmt.Errorf("model output %q has shape %v, want [%d %d %d]", e.output, oshape, n, seq, Dim)
	}
	if e.pooling == models.PoolingCLS {
		return clsNormalize(hidden.GetData(), n, seq, Dim), nil
	}
	return meanPoolNormalize(hidden.GetData(), maskData, n, seq, Dim), nil
}

// clsNormalize takes each text's first token vector ([CLS]) and scales it
// to unit length (bge-style pooling).
func clsNormalize(hidden []float32, n, seq, dim int) [][]float32 {
	out := make([][]float32, n)
	for i := range n {
		row := hidden[i*seq*dim : i*seq*dim+dim]
		var norm float64
		for _, x := range row {
			norm += float64(x) * float64(x)
		}
		norm = max(math.Sqrt(norm), 1e-12)
		v := make([]float32, dim)
		for k, x := range row {
			v[k] = float32(float64(x) / norm)
		}
		out[i] = v
	}
	return out
}

// QueryPrefix is what the model wants before a search query (the
// manifest's query_prefix; "I need a tool to " for all-MiniLM-L6-v2, which
// puts every query in the register of a request, as the tools' lead
// sentences are embedded: see catalog.RequestView).
func (e *Embedder) QueryPrefix() string { return e.qPrefix }

// DocumentPrefix is what the model wants before a document (the manifest's
// document_prefix; "" for all-MiniLM-L6-v2).
func (e *Embedder) DocumentPrefix() string { return e.dPrefix }

// meanPoolNormalize averages token vectors where mask is 1 and scales each
// result to unit length (sentence-transformers' Pooling + Normalize).
func meanPoolNormalize(hidden []float32, mask []int64, n, seq, dim int) [][]float32 {
	out := make([][]float32, n)
	acc := make([]float64, dim)
	for i := range n {
		clear(acc)
		var count float64
		for t := range seq {
			if mask[i*seq+t] == 0 {
				continue
			}
			count++
			row := hidden[(i*seq+t)*dim : (i*seq+t+1)*dim]
			for k, v := range row {
				acc[k] += float64(v)
			}
		}
		count = max(count, 1e-9)
		var norm float64
		for k := range acc {
			acc[k] /= count
			norm += acc[k] * acc[k]
		}
		norm = max(math.Sqrt(norm), 1e-12)
		v := make([]float32, dim)
		for k := range acc {
			v[k] = float32(acc[k] / norm)
		}
		out[i] = v
	}
	return out
}

// Close releases the sessions and the tokenizer, waiting for runs in
// flight. The ONNX Runtime library stays loaded for the process.
func (e *Embedder) Close() error {
	e.stopOnce.Do(func() { close(e.stop) })
	if e.lazy != nil {
		// Not loaded yet: never, now; an Embed that starts after says
		// closed.
		e.lazy.Do(func() {
			select {
			case <-e.loaded: // files missing or damaged at New (Background)
			default:
				e.loadErr = ErrClosed
				close(e.loaded)
			}
		})
	}
	<-e.loaded  // a background load finishes first
	e.bg.Wait() // and a wait for new files ends
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil
	}
	e.closed = true
	for _, s := range e.sessions {
		s.Destroy()
	}
	e.sessions = nil
	if e.tok != nil {
		e.tok.close()
	}
	e.counter.once.Do(func() {})
	e.counter.tok.close()
	return nil
}

var _ io.Closer = (*Embedder)(nil)

// loadLazy runs Options.Lazy's load, once; without Lazy, nothing. With
// Background it returns at once: the load runs in the background.
func (e *Embedder) loadLazy() {
	if e.lazy != nil {
		e.lazy.Do(e.lazyLoad)
	}
}

// Start starts a load that Options.Lazy deferred: with Background it
// returns at once, the load running in the background; without, once the
// model is loaded. Without Lazy, or once started, it does nothing. The
// gateway's loop calls it when its search mode comes to read vectors (a
// reload from bm25), so that the model loads before a search waits for it.
func (e *Embedder) Start() { e.loadLazy() }

// startBackground runs f, Background's work, now or, with Options.Lazy,
// at the first Embed, Ready or Start.
func (e *Embedder) startBackground(o Options, f func()) {
	if !o.Lazy {
		e.background(f)
		return
	}
	e.lazy, e.lazyLoad = new(sync.Once), func() { e.background(f) }
}

// background runs f as the Embedder's background work (Close waits for it).
func (e *Embedder) background(f func()) {
	e.bg.Add(1)
	go func() {
		defer e.bg.Done()
		f()
	}()
}
