// Package audit owns the gateway's audit log: one JSON line per
// search_tools and execute_tool call, management action and refused
// request, saying who (key, session, client), what (tool), the decision,
// the outcome, how long and how big, and a SHA-256 of the arguments, never
// their values unless the log is told to keep them masked.
//
// Writing never holds a call up for long: Write puts the record on a
// bounded queue that one writer goroutine drains into the file (the Log
// owns it; Close drains the queue and waits). A record that cannot be
// queued within MaxWait, or cannot be written, is counted (Stats) and
// logged with who and what (the first ones each, then a line with the
// count every few seconds) — a record is never lost silently.
//
// An API key's refusals alike are coalesced (coalesce.go): the first is
// written, the repeats within a minute are one record with a count, so a
// key cannot rotate other keys' records out with cheap refused calls. A
// rotation that removes records younger than MinRetention is a warning.
//
// The file (audit/audit.jsonl in the data folder) is rotated by size:
// audit.jsonl.1 is the newest rotated file, and MaxFiles of them are kept.
// Several gateways may share a data folder: each appends whole lines in
// single writes, and follows the file when another rotates it.
// Rotation is a few renames, written here rather than taken from
// lumberjack, whose rotation goroutine outlives Close and whose size limit
// is in whole megabytes.
package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolgate/toolgate/internal/mask"
	"github.com/toolgate/toolgate/internal/oneline"
	"github.com/toolgate/toolgate/internal/storage"
	"golang.org/x/sys/unix"
	"golang.org/x/time/rate"
)

// Decisions: what the gateway decided about a request.
const (
	Allowed     = "allowed"
	Denied      = "denied"
	RateLimited = "rate-limited"
	Quarantined = "quarantined"
)

// Outcomes of an allowed call.
const (
	OK      = "ok"      // the tool answered
	IsError = "isError" // an isError result (the tool's own, or the gateway's: bad arguments, unknown tool)
	Timeout = "timeout" // the call's deadline expired
	Down    = "down"    // the backend was unavailable (down, removed, busy)
)

// ConfigReload is the action of the records of a config reload the
// gateway applied from a hand edit of its config file (transport "file")
// or a signal (transport "signal"): one per server it added, removed or
// changed, one for a reload it rejected.
const ConfigReload = "config reload"

// Record is one line of the audit log. Fields are only ever added.
type Record struct {
	// Raw is the record's line as stored, when a Reader read it: a newer
	// toolgate's record may hold fields this one does not know.
	Raw json.RawMessage `json:"-"`

	Time time.Time `json:"time"`
	// Key is the API key's name ("" over stdio, or over HTTP without keys).
	Key       string `json:"key,omitempty"`
	Transport string `json:"transport,omitempty"` // stdio | http
	Session   string `json:"session,omitempty"`
	Client    string `json:"client,omitempty"` // the MCP client's name/version (clientInfo), with or else the HTTP User-Agent (clientOf)
	// Remote is the HTTP client's address (host:port as the gateway saw
	// it; a proxy's when one is in front).
	Remote string `json:"remote,omitempty"`
	// Profile is the profile in effect for the call: the one of its HTTP
	// route (/profiles/NAME/mcp, or serve --profile for /mcp), or of its
	// stdio session ("" = none: every enabled server). KeyProfile is the
	// API key's (keys create --profile), which applies on top.
	Profile    string `json:"profile,omitempty"`
	KeyProfile string `json:"keyProfile,omitempty"`
	// Action is what was asked: search_tools, execute_tool, a management
	// tool, or "http" for a request refused before it reached MCP.
	Action string `json:"action"`
	// Tool is the tool run (server__tool) for execute_tool.
	Tool string `json:"tool,omitempty"`
	// Server is the server a management action acted on, or was refused
	// on: toolgate__disable_server's and the other management tools that
	// name one (as the gateway resolved the name), `toolgate servers
	// disable` and the others, the console's buttons. A backend's tool
	// names its server in Tool.
	Server string `json:"server,omitempty"`
	// ManagedKey is the API key a keys command acted on (keys create,
	// update, revoke: their records' Key is empty, as a command's is), so
	// that audit tail --key NAME finds them with the key's calls. Records
	// written before 2026-12-07 name it in Reason alone (ManagedKeyOf).
	ManagedKey string `json:"managedKey,omitempty"`
	Decision   string `json:"decision"`
	// Reason says why a request was not allowed (or what went wrong).
	Reason string `json:"reason,omitempty"`
	// Outcome is how an allowed call ended.
	Outcome    string  `json:"outcome,omitempty"`
	DurationMs float64 `json:"durationMs"`
	// ResultBytes is the size of the result returned to the client.
	ResultBytes int `json:"resultBytes"`
	// TrimmedBytes is the bytes of text execute_tool left out of the
	// result, which was over its bound (maxResultBytes); absent when it
	// went whole. ResultBytes is then what the client got.
	TrimmedBytes int `json:"trimmedBytes,omitempty"`
	// OutputMismatch says how the result's structuredContent does not fit
	// the output schema its tool declares (or that it has none): the
	// result was passed on with a note (outcome ok all the same).
	OutputMismatch string `json:"outputMismatch,omitempty"`
	// ArgumentsSHA256 is the hex SHA-256 of the arguments as canonical
	// JSON (keys sorted): equal arguments give equal hashes.
	ArgumentsSHA256 string `json:"argumentsSha256,omitempty"`
	// Arguments are the arguments with secrets masked, only when the log
	// keeps them (audit.arguments "masked").
	Arguments any `json:"arguments,omitempty"`
	// Route and Status describe a request refused by the HTTP front;
	// Route alone, the HTTP route an MCP call came through ("POST /mcp",
	// "POST /profiles/kg/mcp").
	Route  string `json:"route,omitempty"`
	Status int    `json:"status,omitempty"`
	// Config is the config of the gateway that wrote the record (its
	// file's path as config.File.Source gives it: Options.Config), so
	// that gateways of several configs sharing a data folder's log tell
	// their records apart; "" for a command's record (Append) and a
	// record written before 2026-12-07.
	Config string `json:"config,omitempty"`
	// Count, FirstTime and LastTime make a record stand for Count
	// refusals of its API key alike (coalesce.go): the same key, action,
	// tool, decision, reason, route and status as the record written in
	// full before them, from FirstTime to LastTime (Time is LastTime; the
	// other fields are the last one's). Absent on every other record.
	Count     int       `json:"count,omitempty"`
	FirstTime time.Time `json:"firstTime,omitzero"`
	LastTime  time.Time `json:"lastTime,omitzero"`
	// Refused marks a call the gateway answered without running anything
	// though its decision is allowed (an execute_tool of a tool it does
	// not have): coalesced as a refusal is. Not stored.
	Refused bool `json:"-"`
	// Unlisted marks a refusal of a name the gateway does not have: a
	// tool a client made up, a path of a request refused before MCP. A
	// client chooses such names freely, so only they are counted into a
	// key's other refusals once it has CoalesceKinds kinds in a window;
	// a refusal of a tool that exists (a quarantined one, one outside the
	// key's scope, a management tool) always has a kind of its own. Not
	// stored.
	Unlisted bool `json:"-"`
}

// Field caps: what a client chooses (a User-Agent, a session id, a tool
// name, a path) is cut to MaxFieldBytes, a reason to MaxReasonBytes, so a
// client without a key cannot write 64 KiB of headers into a record per
// request and rotate the log's evidence away that much faster.
const (
	MaxFieldBytes  = 256
	MaxReasonBytes = 1024
	// MaxArgumentsBytes caps the JSON of the arguments a record keeps
	// (audit.arguments "masked"): larger ones are replaced by a note of
	// their size, as a file's content or a long text would fill the log.
	MaxArgumentsBytes = 8192
	// MaxConfigBytes caps Record.Config, the gateway's own config path
	// (Linux's PATH_MAX): never a client's, so not masked, and whole for
	// audit tail --served-by to match.
	MaxConfigBytes = 4096
)

// clip hides the credentials' shapes (mask.Tokens: an API key a client
// pasted into its session id, User-Agent, a tool's or server's name, a
// path) in the record's text fields and cuts them to their caps (on a rune
// boundary, marked with "…"): every one, as which a client fills is easy
// to miss (the server a management call or a console button names was not
// cut; a key in any of them was written as given). ArgumentsSHA256 is
// kept: it is the hash of the real arguments, which a reader matches.
func (r *Record) clip() {
	for _, f := range []*string{&r.Key, &r.Transport, &r.Session, &r.Client, &r.Remote, &r.Profile, &r.KeyProfile, &r.Action, &r.Tool,
		&r.Server, &r.ManagedKey, &r.Decision, &r.Outcome, &r.Route} {
		*f = clipText(mask.Tokens(*f), MaxFieldBytes)
	}
	r.ArgumentsSHA256 = clipText(r.ArgumentsSHA256, MaxFieldBytes)
	r.Reason = clipText(mask.Tokens(r.Reason), MaxReasonBytes)
	r.OutputMismatch = clipText(mask.Tokens(r.OutputMismatch), MaxReasonBytes)
	r.Config = clipText(r.Config, MaxConfigBytes)
	if r.Arguments != nil {
		if b, err := json.Marshal(r.Arguments); err != nil || len(b) > MaxArgumentsBytes {
			r.Arguments = fmt.Sprintf("(%d bytes of arguments, over the audit log's limit of %d: argumentsSha256 identifies them)", len(b), MaxArgumentsBytes)
		}
	}
}

// clipText is oneline.Clip.
var clipText = oneline.Clip

// HashArguments is the SHA-256 of args as canonical JSON (encoding/json
// sorts map keys), or "" for none.
func HashArguments(args any) string {
	if args == nil {
		return ""
	}
	b, err := json.Marshal(args)
	if err != nil {
		return ""
	}
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// Defaults of Options.
const (
	DefaultMaxFileBytes = 10 << 20
	DefaultMaxFiles     = 5
	DefaultQueue        = 4096
	DefaultMaxWait      = 50 * time.Millisecond
	DefaultRetry        = 10 * time.Second
	DefaultGather       = 5 * time.Millisecond
	DefaultMinRetention = 24 * time.Hour
)

// Options configure a Log. Nil means defaults.
type Options struct {
	Logger *slog.Logger // nil = discard
	// MaxFileBytes rotates the file before it would grow past this size.
	MaxFileBytes int64
	// MaxFiles is how many rotated files are kept (audit.jsonl.1 …).
	MaxFiles int
	// Queue is how many records may wait for the writer.
	Queue int
	// MaxWait is the longest Write waits for room on a full queue before
	// the record is counted as dropped.
	MaxWait time.Duration
	// Storage, if set, is asked before each write whether the data folder
	// can take one, and told how each went (main passes the data folder's
	// health: a removed folder is not made again behind the user's back).
	Storage Storage
	// Gather is how long the writer, woken by a record, lets more come
	// before it writes them together (default 5 ms). One write, and one
	// check of the folder and the file, then serves the records of many
	// calls, and a call that queues a record while the writer gathers
	// does not wake it: that wake-up and those system calls came with
	// every call, on the gateway's two cores beside the client and the
	// backend.
	Gather time.Duration
	// Retry is how often the writer looks at the folder and the file
	// without waiting for a record (opening the file again after a failed
	// open or write), so that GET /status shows the log healthy once the
	// folder is, on an idle gateway too.
	Retry time.Duration
	// Config names the config of the gateway writing (config.File.Source):
	// each record written through Write carries it (Record.Config).
	Config string
	// Coalesce is the window over which an API key's refusals alike are
	// counted into one record (coalesce.go; 0 = DefaultCoalesce, negative
	// = each written on its own), and CoalesceKinds how many kinds of
	// refusal one key may have recorded one by one in a window (0 =
	// DefaultCoalesceKinds).
	Coalesce      time.Duration
	CoalesceKinds int
	// MinRetention is how long the operator counts on records being
	// kept (0 = DefaultMinRetention, negative = no floor): a rotation
	// that removes a record younger than it is logged as a warning, with
	// the API key that wrote the most of the file just rotated, and
	// counted (Stats.RotatedEarly).
	MinRetention time.Duration

	// clock is now (nil = time.Now): a test's, to step it.
	clock func() time.Time
}

// Storage is the data folder's health as the log uses it (serve passes an
// *storage.Writer; nil Options.Storage is storage.Unchecked).
type Storage = storage.Gate

func (o *Options) withDefaults() Options {
	var r Options
	if o != nil {
		r = *o
	}
	if r.Logger == nil {
		r.Logger = slog.New(slog.DiscardHandler)
	}
	if r.MaxFileBytes <= 0 {
		r.MaxFileBytes = DefaultMaxFileBytes
	}
	if r.MaxFiles <= 0 {
		r.MaxFiles = DefaultMaxFiles
	}
	if r.Queue <= 0 {
		r.Queue = DefaultQueue
	}
	if r.Retry <= 0 {
		r.Retry = DefaultRetry
	}
	if r.MaxWait <= 0 {
		r.MaxWait = DefaultMaxWait
	}
	if r.Gather <= 0 {
		r.Gather = DefaultGather
	}
	if r.Storage == nil {
		r.Storage = storage.Unchecked
	}
	if r.Coalesce == 0 {
		r.Coalesce = DefaultCoalesce
	}
	if r.MinRetention == 0 {
		r.MinRetention = DefaultMinRetention
	}
	if r.CoalesceKinds <= 0 {
		r.CoalesceKinds = DefaultCoalesceKinds
	}
	return r
}

// Stats count what the log did since Open.
type Stats struct {
	Written uint64 `json:"written"` // records in the file
	Dropped uint64 `json:"dropped"` // records not queued (the writer fell behind) or not written (a write failed)
	Errors  uint64 `json:"errors"`  // failed writes, rotations and opens
	// Coalesced counts an API key's refusals counted into a record that
	// stands for several (Record.Count) instead of written one by one.
	Coalesced uint64 `json:"coalesced"`
	// RotatedEarly counts the rotations that removed records younger
	// than Options.MinRetention: the log holds less time than the
	// operator counts on.
	RotatedEarly uint64 `json:"rotatedEarly"`
}

// Log is an open audit log. Write is safe for concurrent use.
type Log struct {
	path string
	opts Options
	log  *slog.Logger

	q       chan Record
	mu      sync.RWMutex // held shared by Write, exclusively by Close
	closed  bool
	closing chan struct{} // closed by Close: the writer stops gathering
	done    chan struct{}

	written, dropped, errs atomic.Uint64
	rotatedEarly           atomic.Uint64
	lostLog                rate.Sometimes
	co                     *coalescer // nil: refusals written one by one

	// Owned by the writer goroutine.
	f   *os.File
	buf []byte // a batch's lines
	// fill counts the records this writer put in the file open, by API
	// key ("" for none), to name who fills the log at an early rotation.
	fill map[string]int
	// torn says the file's last line is unfinished (a write cut short by
	// a full disk or a crash): the next write starts with a newline, so
	// its first record is a line of its own rather than glued to the
	// torn one, where a reader would lose both.
	torn bool
}

// Open opens (creating it and its folder, 0700/0600) the audit log at
// path and starts its writer. A file that cannot be opened (a read-only
// or vanished data folder) does not stop it: the failure is counted and
// logged, each record that cannot be written is counted and logged as
// lost, and the writer opens the file again for the next record, so the
// log resumes once the folder takes writes.
func Open(path string, opts *Options) *Log {
	o := opts.withDefaults()
	l := &Log{path: path, opts: o, log: o.Logger, q: make(chan Record, o.Queue), closing: make(chan struct{}), done: make(chan struct{}),
		lostLog: rate.Sometimes{First: lostFirst, Interval: lostEvery}}
	if o.Coalesce > 0 {
		l.co = newCoalescer(o.Coalesce, o.CoalesceKinds)
	}
	if err := o.Storage.Check(); err != nil {
		l.failed("open", err)
	} else if err := l.open(); err != nil {
		o.Storage.Fail(err)
		l.failed("open", err)
	}
	go l.run()
	return l
}

// now is the time as the log reads it (Options.clock).
func (l *Log) now() time.Time {
	if l.opts.clock != nil {
		return l.opts.clock()
	}
	return time.Now()
}

// Path is the file written.
func (l *Log) Path() string { return l.path }

// Tail returns the log's last n records (all of them when n <= 0), oldest
// first, read as `toolgate audit tail` reads them (Reader: the rotated
// files too, up to MaxFiles), each masked and cut again as Write masks and
// cuts a record (a line of a toolgate that masked less, or one edited by
// hand, shows no more than a record written now), its arguments masked as
// the gateway masks them before Write (but for the config's own secret
// values, which the log does not know). The console's recent activity
// reads it.
func (l *Log) Tail(n int) ([]Record, error) {
	rd := NewReader(l.path, l.opts.MaxFiles, Filter{})
	defer rd.Close()
	recs, err := rd.Tail(n)
	for i := range recs {
		if recs[i].Arguments != nil {
			recs[i].Arguments = argumentsMask.Value(recs[i].Arguments)
		}
		recs[i].clip()
	}
	return recs, err
}

// argumentsMask masks the arguments Tail hands on: the shapes of
// credentials, and the fields named like secrets.
var argumentsMask = mask.New(nil)

// Stats returns the counters as of now.
func (l *Log) Stats() Stats {
	s := Stats{Written: l.written.Load(), Dropped: l.dropped.Load(), Errors: l.errs.Load(), RotatedEarly: l.rotatedEarly.Load()}
	if l.co != nil {
		s.Coalesced = l.co.coalesced.Load()
	}
	return s
}

// Write queues r (its Time set when zero). It waits at most MaxWait for
// room; a record that finds none is counted as dropped and logged. After
// Close it is dropped the same way.
func (l *Log) Write(r Record) {
	if r.Time.IsZero() {
		r.Time = time.Now()
	}
	r.Time = r.Time.UTC()
	if r.Config == "" {
		r.Config = l.opts.Config
	}
	r.clip()
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		l.lost(r, errors.New("the audit log is closed"))
		return
	}
	// Under the read lock: Close waits for it, and the writer then writes
	// every group's summary.
	if l.co != nil && coalescible(&r) && l.co.add(&r, l.now()) {
		return
	}
	select {
	case l.q <- r:
		return
	default:
	}
	t := time.NewTimer(l.opts.MaxWait)
	defer t.Stop()
	select {
	case l.q <- r:
	case <-t.C:
		l.lost(r, fmt.Errorf("the writer fell behind (%d records queued)", cap(l.q)))
	}
}

// lost counts and logs a record that is not in the file: who and what, not
// its arguments.
func (l *Log) lost(r Record, err error) {
	// Every loss is counted; the log gets the first ones in full, then
	// one line every lostEvery with the count so far (a broken disk must
	// not flood the log). The line comes before the count: whoever sees
	// the count (Stats) finds the line logged.
	l.lostLog.Do(func() {
		l.log.Error("audit record lost", "err", err, "file", l.path, "lost", l.dropped.Load()+1, "time", r.Time, "key", r.Key, "action", r.Action, "tool", r.Tool, "decision", r.Decision, "outcome", r.Outcome)
	})
	l.dropped.Add(1)
}

// lostEvery is how often a run of lost records is logged after the first
// lostFirst.
const (
	lostFirst = 10
	lostEvery = 10 * time.Second
)

// Close writes what is queued, stops the writer and closes the file.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		<-l.done
		return nil
	}
	l.closed = true
	close(l.q)
	close(l.closing)
	l.mu.Unlock()
	<-l.done
	return nil
}

// maxBatch bounds the records the writer puts in one write.
const maxBatch = 256

// run is the writer: woken by a record, it lets more come for Gather,
// takes what is queued (up to maxBatch records) and writes it with one
// write of whole lines, so a record is in the file moments after Write,
// and lines never interleave with those of another gateway appending to
// the same file.
func (l *Log) run() {
	defer close(l.done)
	defer l.closeFile()
	retry := time.NewTicker(l.opts.Retry)
	defer retry.Stop()
	gather := time.NewTimer(l.opts.Gather)
	gather.Stop()
	var flush <-chan time.Time // closes the coalesced refusals' windows
	if l.co != nil {
		t := time.NewTicker(min(l.opts.Retry, l.co.window/4))
		defer t.Stop()
		flush = t.C
		defer func() { l.writeSummaries(true) }()
	}
	batch := make([]Record, 0, maxBatch)
	for {
		var r Record
		select {
		case <-retry.C:
			l.reopen()
			continue
		case <-flush:
			l.writeSummaries(false)
			continue
		case rec, ok := <-l.q:
			if !ok {
				return
			}
			r = rec
		}
		batch = append(batch[:0], r)
		open := true
		if len(l.q) < maxBatch-1 {
			// Not waiting on the queue meanwhile: a record queued now
			// wakes no one.
			gather.Reset(l.opts.Gather)
			select {
			case <-gather.C:
			case <-l.closing:
				gather.Stop()
			}
		}
	more:
		for open && len(batch) < maxBatch {
			select {
			case r, ok := <-l.q:
				if !ok {
					open = false
					break more
				}
				batch = append(batch, r)
			default:
				break more
			}
		}
		l.writeBatch(batch)
		if !open {
			return
		}
	}
}

// writeSummaries writes the records of the coalesced refusals whose
// window ended (all of them, as the log closes).
func (l *Log) writeSummaries(all bool) {
	if s := l.co.due(l.now(), all); len(s) > 0 {
		l.writeBatch(s)
	}
}

// reopen makes sure the file is open (a failed open or write left it
// closed) when the folder takes writes, and reports the log healthy: a
// fault that ended is then cleared without waiting for a record.
func (l *Log) reopen() {
	if l.opts.Storage.Check() != nil {
		return
	}
	if _, err := l.ready(); err != nil {
		l.opts.Storage.Fail(err)
		return
	}
	l.opts.Storage.OK()
}

// writeBatch writes the records, as many lines a write as fit in the file
// before its size limit, rotating when the next would not fit.
func (l *Log) writeBatch(batch []Record) {
	recs := batch[:0] // filtered in place: recs[i] is written after batch[i] is read
	var lines [][]byte
	for _, r := range batch {
		b, err := json.Marshal(r)
		if err != nil {
			l.errs.Add(1)
			l.lost(r, fmt.Errorf("encode: %w", err))
			continue
		}
		recs, lines = append(recs, r), append(lines, append(b, '\n'))
	}
	rotateFailed := false
	for i := 0; i < len(lines); {
		err := l.opts.Storage.Check()
		var size int64
		if err == nil {
			if size, err = l.ready(); err != nil {
				l.opts.Storage.Fail(err)
			}
		}
		if err != nil {
			l.errs.Add(1)
			for _, r := range recs[i:] {
				l.lost(r, err)
			}
			return
		}
		buf, j := l.buf[:0], i
		if l.torn {
			buf = append(buf, '\n')
		}
		for j < len(lines) && (size+int64(len(buf)+len(lines[j])) <= l.opts.MaxFileBytes || size == 0 && j == i || rotateFailed) {
			buf = append(buf, lines[j]...)
			j++
		}
		l.buf = buf
		if j == i { // the next line does not fit: a new file
			if err := l.rotate(); err != nil {
				l.failed("rotate", err)
				rotateFailed = true // write on in this one rather than lose records
			}
			continue
		}
		if _, err := l.f.Write(buf); err != nil {
			l.opts.Storage.Fail(err)
			l.errs.Add(1)
			for _, r := range recs[i:j] {
				l.lost(r, err)
			}
			l.closeFile() // the next open looks whether it left a torn line
		} else {
			l.torn = false
			l.opts.Storage.OK()
			l.written.Add(uint64(j - i))
			if l.opts.MinRetention > 0 {
				if l.fill == nil {
					l.fill = map[string]int{}
				}
				for _, r := range recs[i:j] {
					if len(l.fill) < maxFill || l.fill[r.Key] > 0 {
						l.fill[r.Key]++
					}
				}
			}
		}
		i = j
	}
}

// ready makes sure a file is open and returns its size: opened again when
// a write or an open failed before (so the log resumes once the disk does)
// or when another gateway rotated it away.
func (l *Log) ready() (int64, error) {
	if l.f != nil {
		fi, ferr := l.f.Stat()
		pi, perr := os.Stat(l.path)
		if ferr != nil || perr != nil || !os.SameFile(fi, pi) {
			l.closeFile() // rotated (or removed) by someone else
		} else {
			return fi.Size(), nil
		}
	}
	if err := l.open(); err != nil {
		return 0, err
	}
	fi, err := l.f.Stat()
	if err != nil {
		l.closeFile()
		return 0, err
	}
	return fi.Size(), nil
}

// failed counts and logs a failure of the file itself.
func (l *Log) failed(what string, err error) {
	l.errs.Add(1)
	l.log.Error("audit log "+what+" failed", "file", l.path, "err", err)
}

func (l *Log) open() error {
	f, err := openAppend(l.opts.Storage, l.path)
	if err != nil {
		return err
	}
	l.f, l.torn = f, endsTorn(f)
	return nil
}

// endsTorn reports whether the file f (opened for appending) ends with an
// unfinished line. A file that cannot be read counts as whole.
func endsTorn(f *os.File) bool {
	fi, err := f.Stat()
	if err != nil || fi.Size() == 0 {
		return false
	}
	r, err := os.Open(f.Name())
	if err != nil {
		return false
	}
	defer r.Close()
	var last [1]byte
	if _, err := r.ReadAt(last[:], fi.Size()-1); err != nil {
		return false
	}
	return last[0] != '\n'
}

func (l *Log) closeFile() {
	if l.f == nil {
		return
	}
	if err := l.f.Close(); err != nil {
		l.failed("close", err)
	}
	l.f = nil
}

// rotate shifts audit.jsonl.N-1 … .1 up by one (dropping the oldest, and
// any past N that a larger MaxFiles kept before), renames the file to .1
// and opens a new one. It holds the folder's lock meanwhile, and rotates
// nothing when another gateway appending to the same file rotated it since
// (the file open is no longer the one at path): two gateways rotating at
// once shifted the same files, and one's rename of .1 to .2 replaced the
// file the other had just made .2, with its records (TestTwoProcessesOneLog
// lost 5% of 6,000 records so).
func (l *Log) rotate() error {
	unlock, err := lockFolder(filepath.Dir(l.path))
	if err != nil {
		return err
	}
	defer unlock()
	if l.f != nil {
		fi, ferr := l.f.Stat()
		pi, perr := os.Stat(l.path)
		if ferr == nil && (errors.Is(perr, fs.ErrNotExist) || perr == nil && !os.SameFile(fi, pi)) {
			l.closeFile() // rotated by another gateway: the next ready opens the new file
			return nil
		}
	}
	l.closeFile()
	oldest := Rotated(l.path, l.opts.MaxFiles)
	var gone time.Time // the newest record of the file the shift removes
	if l.opts.MinRetention > 0 {
		gone = lastTime(oldest)
	}
	dropped, err := shift(l.path, l.opts.MaxFiles) // the next ready opens a new file
	if slices.Contains(dropped, oldest) && !gone.IsZero() && time.Since(gone) < l.opts.MinRetention {
		l.rotatedEarly.Add(1)
		attrs := []any{"file", l.path, "removed", oldest, "newestRemoved", gone.UTC().Format(time.RFC3339), "age", time.Since(gone).Round(time.Second).String(),
			"minRetention", l.opts.MinRetention.String(), "maxFiles", l.opts.MaxFiles, "maxFileBytes", l.opts.MaxFileBytes}
		if key, n, all := topFiller(l.fill); all > 0 {
			attrs = append(attrs, "topKey", key, "topKeyRecords", n, "records", all)
		}
		l.log.Warn("audit log rotation removed records younger than toolgate.audit.minRetention: raise toolgate.audit.maxFiles or maxFileBytes, ship the log (toolgate audit tail -f --json), or lower the rate of the API key that fills it (toolgate.limits.requestsPerSecond)", attrs...)
	}
	l.fill = nil
	return err
}

// maxFill bounds the keys fill counts (the first ones of a file).
const maxFill = 1024

// topFiller is the API key that wrote the most records of fill, how many,
// and the records of all keys. "-" names records without a key.
func topFiller(fill map[string]int) (key string, n, all int) {
	for k, c := range fill {
		all += c
		if c > n || c == n && k < key {
			key, n = k, c
		}
	}
	if key == "" && n > 0 {
		key = "-"
	}
	return key, n, all
}

// lastTime is the time of the last whole record of the file at path (zero
// when it has none, or cannot be read): only its last 64 KiB are read.
func lastTime(path string) time.Time {
	f, err := os.Open(path)
	if err != nil {
		return time.Time{}
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return time.Time{}
	}
	const tail = 64 << 10
	off := max(fi.Size()-tail, 0)
	b := make([]byte, fi.Size()-off)
	if _, err := f.ReadAt(b, off); err != nil {
		return time.Time{}
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	for i := len(lines) - 1; i >= 0; i-- {
		var r struct {
			Time time.Time `json:"time"`
		}
		if json.Unmarshal(lines[i], &r) == nil && !r.Time.IsZero() {
			return r.Time
		}
	}
	return time.Time{}
}

// shift rotates the log at path: it removes the rotated files from .n on
// (the oldest kept, and any past n that a larger MaxFiles kept before),
// renames .n-1 … .1 up by one and the file to .1, and returns the rotated
// files it removed. The caller holds the folder's lock.
func shift(path string, n int) (dropped []string, err error) {
	for i := n; ; i++ {
		err := os.Remove(Rotated(path, i))
		if errors.Is(err, fs.ErrNotExist) && i > n {
			break
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return dropped, err
		}
		if err == nil {
			dropped = append(dropped, Rotated(path, i))
		}
	}
	for i := n - 1; i >= 1; i-- {
		if err := os.Rename(Rotated(path, i), Rotated(path, i+1)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return dropped, err
		}
	}
	return dropped, os.Rename(path, Rotated(path, 1))
}

// ErrNothingToRotate is Rotate's answer for a log that is missing or
// holds no record: there is nothing to move aside.
var ErrNothingToRotate = errors.New("the audit log holds no record: nothing to rotate")

// Rotate rotates the log at path now, from another process than the
// gateways writing it (`toolgate audit rotate`), as a gateway does when
// the file would pass MaxFileBytes: the file becomes .1, keeping maxFiles
// rotated files (0 = DefaultMaxFiles), under the folder's lock that the
// gateways' own rotations take. A gateway writing the file sees it renamed
// at its next record and opens a new one; a record it writes meanwhile
// lands in .1, never lost. dropped are the rotated files removed.
// maxFiles KeepEvery removes none: the files move up past the last one.
func Rotate(path string, maxFiles int) (dropped []string, err error) {
	if maxFiles == 0 {
		maxFiles = DefaultMaxFiles
	}
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNothingToRotate // no folder to lock either
	}
	unlock, err := lockFolder(filepath.Dir(path))
	if err != nil {
		return nil, err
	}
	defer unlock()
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) || err == nil && fi.Size() == 0 {
		return nil, ErrNothingToRotate
	}
	if err != nil {
		return nil, err
	}
	if maxFiles == KeepEvery {
		// Where neither .n nor .n+1 is: shift removes from .n on up to
		// the first missing past it, so none (a .7 after a missing .6
		// stays).
		missing := func(i int) bool {
			_, err := os.Stat(Rotated(path, i))
			return errors.Is(err, fs.ErrNotExist)
		}
		for maxFiles = 1; !missing(maxFiles) || !missing(maxFiles+1); maxFiles++ {
		}
	}
	return shift(path, maxFiles)
}

// KeepEvery is Rotate's maxFiles that keeps every rotated file, for a
// rotation that does not know the gateway's toolgate.audit.maxFiles: the
// default of 5 removed .5 to .8 of a gateway configured to keep 8.
const KeepEvery = -1

// lockFolder takes the exclusive lock of the log's folder (flock: let go
// when the process ends, however it ends), which rotations hold.
func lockFolder(dir string) (unlock func(), err error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	return func() { f.Close() }, nil
}

// Rotated is the name of the i-th rotated file (1 = the newest).
func Rotated(path string, i int) string { return fmt.Sprintf("%s.%d", path, i) }

// Append writes r to the audit log at path from another process than the
// gateway's (a command such as `toolgate keys revoke`): one write of one
// line in append mode, so it never interleaves with the gateway's lines.
func Append(path string, r Record) error {
	if r.Time.IsZero() {
		r.Time = time.Now()
	}
	r.Time = r.Time.UTC()
	r.clip()
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	f, err := openAppend(storage.Unchecked, path)
	if err != nil {
		return fmt.Errorf("audit log: %w", err)
	}
	line := append(b, '\n')
	if endsTorn(f) {
		line = append([]byte{'\n'}, line...)
	}
	_, err = f.Write(line)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("audit log %s: %w", path, err)
	}
	return nil
}

// openAppend opens the log at path for appending, making it (0600) and its
// folder (0700, through st) when missing.
func openAppend(st Storage, path string) (*os.File, error) {
	if err := st.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	return os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
}
