package audit

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Filter selects records; an empty field matches every record.
type Filter struct {
	// Key is an API key's name: the records of its calls (Record.Key) and
	// those of the keys commands that acted on it (ManagedKeyOf).
	Key  string
	Tool string // the tool (server__tool), or the action (search_tools, …)
	// Server is a server the record's call ran a tool of (server__…) or
	// that its management action acted on (Record.Server).
	Server string
	// Profile is a profile the record's call was limited to: the one in
	// effect (its route's, its session's) or its API key's.
	Profile string
	// Since and Until bound the record's time (zero: unbounded): Since is
	// in, Until out. A record that stands for several (Count) matches
	// when its span, FirstTime to its time, overlaps them.
	Since, Until time.Time
	// Decisions and Outcomes, when not empty, are those a record must
	// have one of (Allowed …, OK …).
	Decisions, Outcomes []string
	// Config is the config whose gateway wrote the record (Record.Config).
	Config string
}

// Match reports whether r passes the filter.
func (f Filter) Match(r Record) bool {
	return (f.Key == "" || r.Key == f.Key || ManagedKeyOf(r) == f.Key) && (f.Tool == "" || r.Tool == f.Tool || r.Action == f.Tool) &&
		(f.Server == "" || r.Server == f.Server || strings.HasPrefix(r.Tool, f.Server+"__")) &&
		(f.Profile == "" || r.Profile == f.Profile || r.KeyProfile == f.Profile) &&
		(f.Since.IsZero() || !r.Time.Before(f.Since)) && (f.Until.IsZero() || r.firstTime().Before(f.Until)) &&
		(len(f.Decisions) == 0 || slices.Contains(f.Decisions, r.Decision)) &&
		(len(f.Outcomes) == 0 || slices.Contains(f.Outcomes, r.Outcome)) &&
		(f.Config == "" || r.Config == f.Config)
}

// firstTime is the time of the earliest request r stands for: its
// FirstTime when it counts several, else its time.
func (r Record) firstTime() time.Time {
	if r.Count > 0 && !r.FirstTime.IsZero() && r.FirstTime.Before(r.Time) {
		return r.FirstTime
	}
	return r.Time
}

// The actions of the keys commands' records, which name the key they
// acted on in ManagedKey.
const (
	KeysCreate = "keys create"
	KeysUpdate = "keys update"
	KeysRevoke = "keys revoke"
)

// ManagedKeyOf is the API key a keys command's record says it acted on:
// its ManagedKey, or for a record written before that field (2026-12-07)
// the name its reason begins with (`key "carol": …`), as those commands
// wrote it; "" for any other record.
func ManagedKeyOf(r Record) string {
	if r.ManagedKey != "" || r.Transport != "cli" || (r.Action != KeysCreate && r.Action != KeysUpdate && r.Action != KeysRevoke) {
		return r.ManagedKey
	}
	rest, ok := strings.CutPrefix(r.Reason, "key ")
	if !ok {
		return ""
	}
	q, err := strconv.QuotedPrefix(rest)
	if err != nil {
		return ""
	}
	name, _ := strconv.Unquote(q)
	return name
}

// Decisions and Outcomes are the values of a record's decision and
// outcome, in the order the audit log's documentation gives them.
var (
	Decisions = []string{Allowed, Denied, RateLimited, Quarantined}
	Outcomes  = []string{OK, IsError, Timeout, Down}
)

// Reader reads an audit log: the last records (Tail), then the ones
// written after (Follow), across rotations.
type Reader struct {
	path     string
	maxFiles int
	filter   Filter

	f       *os.File // the file being followed
	info    fs.FileInfo
	partial []byte     // a line not finished yet
	seen    []seenFile // rotated files read whole (and files left)
	skipped int        // lines read that are not records
	unnamed int        // records read that only Filter.Config left out, naming no config
}

// Found reports whether Tail found the log: the file or a rotated one.
func (rd *Reader) Found() bool { return rd.f != nil || len(rd.seen) > 0 }

// Unnamed is how many records read so far the filter left out for naming
// no config alone (Filter.Config set, Record.Config empty: a record of a
// toolgate of before 2026-12-07, or a command's).
func (rd *Reader) Unnamed() int { return rd.unnamed }

// match is rd.filter.Match, counting the records Unnamed counts.
func (rd *Reader) match(r Record) bool {
	if rd.filter.Match(r) {
		return true
	}
	if rd.filter.Config != "" && r.Config == "" {
		f := rd.filter
		f.Config = ""
		if f.Match(r) {
			rd.unnamed++
		}
	}
	return false
}

// Skipped is how many lines read so far were not records: a line cut short
// by a crash or a full disk (the gateway starts its next record on a line
// of its own), or one edited by hand. They are left out.
func (rd *Reader) Skipped() int { return rd.skipped }

// seenFile is a file read: its identity, and its first bytes, since a file
// made after another was removed may get the removed one's inode.
type seenFile struct {
	info fs.FileInfo
	head []byte
}

// headLen is how much of a file tells it from another on the same inode:
// its first record holds the time to the nanosecond.
const headLen = 128

// head returns the first bytes of the file at path ("" when it cannot be
// read).
func head(path string) []byte {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	b := make([]byte, headLen)
	n, _ := io.ReadFull(f, b)
	return b[:n]
}

// NewReader reads the audit log at path (audit/audit.jsonl in the data
// folder) and its rotated files (up to maxFiles; 0 = DefaultMaxFiles).
func NewReader(path string, maxFiles int, f Filter) *Reader {
	if maxFiles <= 0 {
		maxFiles = DefaultMaxFiles
	}
	return &Reader{path: path, maxFiles: maxFiles, filter: f}
}

// Close releases the file being followed.
func (rd *Reader) Close() error {
	if rd.f != nil {
		return rd.f.Close()
	}
	return nil
}

// Tail returns the last n records that match (all of them when n <= 0),
// oldest first, from the rotated files and the file, and leaves the Reader
// at the end of the file for Follow. A missing log is no records.
func (rd *Reader) Tail(n int) ([]Record, error) {
	var out []Record
	_, err := rd.TailFunc(n, func(r Record) { out = append(out, r) })
	if err != nil {
		return nil, err
	}
	return out, nil
}

// TailFunc is Tail handing each record to emit, oldest first, and saying
// how many it handed. With n <= 0 each record goes to emit as it is read,
// so printing a whole log (`audit tail -n 0`: some 180,000 records at the
// defaults) holds one record at a time, not all of them; an error ends it
// after the records already handed.
func (rd *Reader) TailFunc(n int, emit func(Record)) (int, error) {
	if n > 0 {
		out, err := rd.tailLast(n)
		for _, r := range out {
			emit(r)
		}
		return len(out), err
	}
	count := 0
	keep := func(r Record) {
		if rd.match(r) {
			count++
			emit(r)
		}
	}
	return count, rd.readAll(keep)
}

// tailLast is Tail(n) for n > 0: the last n records that match.
func (rd *Reader) tailLast(n int) ([]Record, error) {
	if out, ok, err := rd.tailNewest(n); err != nil || ok {
		return out, err
	}
	var out []Record
	if err := rd.readAll(rd.keeper(&out, n)); err != nil {
		return nil, err
	}
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return out, nil
}

// readAll calls keep with every record of the rotated files, oldest first,
// then of the file, and leaves the Reader at the end of the file.
func (rd *Reader) readAll(keep func(Record)) error {
	for i := rd.maxFiles; i >= 1; i-- {
		p := Rotated(rd.path, i)
		fi, err := rd.readWhole(p, keep)
		if err != nil {
			return err
		}
		if fi != nil {
			rd.seen = append(rd.seen, seenFile{fi, head(p)})
		}
	}
	if err := rd.reopen(); err != nil {
		return err
	}
	if rd.f != nil {
		return rd.more(keep)
	}
	return nil
}

// keeper appends to out the records that match, keeping the last n of
// them (all when n <= 0) and at most 2n at a time.
func (rd *Reader) keeper(out *[]Record, n int) func(Record) {
	return func(r Record) {
		if !rd.match(r) {
			return
		}
		*out = append(*out, r)
		if n > 0 && len(*out) > 2*n {
			*out = append((*out)[:0], (*out)[len(*out)-n:]...)
		}
	}
}

// tailNewest is Tail(n) read newest first: the file, then the rotated
// files from .1 back, only as far as it takes to find n records that
// match; the older ones are only noted as read (Follow starts after
// them). At the defaults' five rotated files of 10 MiB, `audit tail`
// decoded some 180,000 records to print 20 (BenchmarkTail), and just after
// a rotation, with fewer than n in the file, every rotated file too
// (BenchmarkTailJustRotated: 0.9 s). ok is false when the file is missing
// or the log rotated while it read (a rotated file is no longer the one
// it was): the Reader is then as new, for readAll.
func (rd *Reader) tailNewest(n int) (out []Record, ok bool, err error) {
	// The rotated files, newest first, as they are before the file is
	// opened: a rotation meanwhile leaves the file read among them,
	// unnoted, and Follow reads it as it reads a rotation's.
	type rotated struct {
		path string
		seen seenFile
	}
	var rots []rotated
	for i := 1; i <= rd.maxFiles; i++ {
		p := Rotated(rd.path, i)
		if fi, err := os.Stat(p); err == nil {
			rots = append(rots, rotated{p, seenFile{fi, head(p)}})
		}
	}
	if err := rd.reopen(); err != nil || rd.f == nil {
		return nil, false, err
	}
	undo := func(err error) ([]Record, bool, error) {
		if cerr := rd.f.Close(); err == nil {
			err = cerr
		}
		rd.f, rd.info, rd.partial, rd.skipped, rd.unnamed = nil, nil, nil, 0, 0
		return nil, false, err
	}
	var newest []Record
	if err := rd.more(rd.keeper(&newest, n)); err != nil {
		return undo(err)
	}
	chunks, got := [][]Record{newest}, len(newest) // newest first
	for _, r := range rots {
		if got >= n {
			break
		}
		var c []Record
		same, err := rd.readSame(r.path, r.seen, rd.keeper(&c, n))
		if err != nil || !same {
			return undo(err)
		}
		chunks, got = append(chunks, c), got+len(c)
	}
	for i := len(chunks) - 1; i >= 0; i-- {
		out = append(out, chunks[i]...)
	}
	rd.seen = nil
	for i := len(rots) - 1; i >= 0; i-- {
		rd.seen = append(rd.seen, rots[i].seen)
	}
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return out, true, nil
}

// readSame reads every record of the rotated file at p when it is still
// the file s (same reports it is; a rotation moved it on otherwise).
func (rd *Reader) readSame(p string, s seenFile, emit func(Record)) (same bool, err error) {
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return false, err
	}
	h := make([]byte, headLen)
	k, _ := f.ReadAt(h, 0)
	if !os.SameFile(fi, s.info) || !bytes.Equal(h[:k], s.head) {
		return false, nil
	}
	_, err = rd.scan(f, nil, emit)
	return true, err
}

// Follow calls emit with each matching record written after Tail (or after
// the call, without Tail), until ctx ends. It looks for new lines every
// poll; when the log rotates, it finishes the file it followed, reads the
// files rotated after it (several rotations may come between two polls),
// then follows the new file from its start.
func (rd *Reader) Follow(ctx context.Context, poll time.Duration, emit func(Record)) error {
	if rd.f == nil && rd.info == nil && rd.seen == nil {
		// Without Tail: everything there is now counts as read.
		for _, f := range rd.files() {
			rd.seen = append(rd.seen, seenFile{f.info, head(f.path)})
		}
		if err := rd.reopen(); err != nil {
			return err
		}
		if rd.f != nil {
			if _, err := rd.f.Seek(0, io.SeekEnd); err != nil {
				return err
			}
		}
	}
	keep := func(r Record) {
		if rd.match(r) {
			emit(r)
		}
	}
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		moved, err := rd.step(keep)
		if err != nil {
			return err
		}
		if moved {
			continue // look again at once: more may have come
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// logFile is one file of the log and its identity.
type logFile struct {
	path string
	info fs.FileInfo
}

// files lists the log's files that exist, oldest first: the rotated ones
// from the highest number down, then the file itself.
func (rd *Reader) files() []logFile {
	var out []logFile
	for i := rd.maxFiles; i >= 0; i-- {
		p := rd.path
		if i > 0 {
			p = Rotated(rd.path, i)
		}
		if fi, err := os.Stat(p); err == nil {
			out = append(out, logFile{p, fi})
		}
	}
	return out
}

func (rd *Reader) wasRead(f logFile) bool {
	var h []byte
	return slices.ContainsFunc(rd.seen, func(s seenFile) bool {
		if !os.SameFile(s.info, f.info) {
			return false
		}
		if h == nil {
			h = head(f.path)
		}
		return bytes.Equal(h, s.head)
	})
}

// step reads what the followed file gained, and moves on when the log
// rotated; moved says it did (or found the files changing under it).
func (rd *Reader) step(emit func(Record)) (moved bool, err error) {
	if rd.f != nil {
		if err := rd.more(emit); err != nil {
			return false, err
		}
	}
	files := rd.files()
	if n := len(files); n == 0 || rd.f != nil && files[n-1].path == rd.path && os.SameFile(files[n-1].info, rd.info) {
		return false, nil // still the newest file (or none yet)
	}
	if rd.f != nil { // rotated: finish it
		if err := rd.more(emit); err != nil {
			return false, err
		}
		rd.seen = append(rd.seen, seenFile{rd.info, rd.head()})
		rd.f.Close()
		rd.f, rd.partial = nil, nil
		moved = true
	}
	for _, f := range files {
		if rd.wasRead(f) {
			continue
		}
		fh, err := os.Open(f.path)
		if err != nil {
			return true, nil // rotated meanwhile: list again
		}
		fi, err := fh.Stat()
		if err != nil || !os.SameFile(fi, f.info) {
			fh.Close()
			return true, nil
		}
		if f.path == rd.path { // the newest: follow it from its start
			rd.f, rd.info = fh, fi
			return true, rd.more(emit)
		}
		h := make([]byte, headLen)
		n, _ := fh.ReadAt(h, 0)
		_, err = rd.scan(fh, nil, emit)
		fh.Close()
		if err != nil {
			return false, err
		}
		rd.seen = append(rd.seen, seenFile{fi, h[:n]})
		moved = true
	}
	if len(rd.seen) > 4*rd.maxFiles+8 { // forget files long gone
		rd.seen = rd.seen[len(rd.seen)-2*rd.maxFiles-4:]
	}
	// Nothing new to read (the log was rotated and its new file is not
	// made yet): wait for the next poll.
	return moved, nil
}

// readWhole reads every record of the file at p and returns its identity
// (nil when it is missing).
func (rd *Reader) readWhole(p string, emit func(Record)) (fs.FileInfo, error) {
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	_, err = rd.scan(f, nil, emit)
	return fi, err
}

// reopen opens the file at path (none when it does not exist yet).
func (rd *Reader) reopen() error {
	f, err := os.Open(rd.path)
	if errors.Is(err, fs.ErrNotExist) {
		rd.f, rd.info = nil, nil
		return nil
	}
	if err != nil {
		return err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	rd.f, rd.info = f, fi
	return nil
}

// head is the first bytes of the file followed.
func (rd *Reader) head() []byte {
	b := make([]byte, headLen)
	n, _ := rd.f.ReadAt(b, 0)
	return b[:n]
}

// more reads the lines appended since the last read.
func (rd *Reader) more(emit func(Record)) error {
	rest, err := rd.scan(rd.f, rd.partial, emit)
	rd.partial = rest
	return err
}

// scan reads r to its end and calls emit for each complete line that is a
// record (other lines are skipped and counted, empty ones only skipped);
// it returns an unfinished last line, prefixed by partial.
func (rd *Reader) scan(r io.Reader, partial []byte, emit func(Record)) ([]byte, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	buf := partial
	for {
		chunk, err := br.ReadSlice('\n')
		buf = append(buf, chunk...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
		line := bytes.TrimSpace(buf)
		var rec Record
		if len(line) > 0 {
			if json.Unmarshal(line, &rec) == nil {
				rec.Raw = bytes.Clone(line)
				emit(rec)
			} else {
				rd.skipped++
			}
		}
		buf = buf[:0:0]
	}
}
