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
	"time"
)

// Filter selects records; an empty field matches every record.
type Filter struct {
	Key  string // the key's name
	Tool string // the tool (server__tool), or the action (search_tools, …)
}

// Match reports whether r passes the filter.
func (f Filter) Match(r Record) bool {
	return (f.Key == "" || r.Key == f.Key) && (f.Tool == "" || r.Tool == f.Tool || r.Action == f.Tool)
}

// Reader reads an audit log: the last records (Tail), then the ones
// written after (Follow), across rotations.
type Reader struct {
	path     string
	maxFiles int
	filter   Filter

	f       *os.File // the file being followed
	info    fs.FileInfo
	partial []byte // a line not finished yet
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
	keep := func(r Record) {
		if !rd.filter.Match(r) {
			return
		}
		out = append(out, r)
		if n > 0 && len(out) > 2*n {
			out = append(out[:0], out[len(out)-n:]...)
		}
	}
	for i := rd.maxFiles; i >= 1; i-- {
		if err := readWhole(Rotated(rd.path, i), keep); err != nil {
			return nil, err
		}
	}
	if err := rd.reopen(); err != nil {
		return nil, err
	}
	if rd.f != nil {
		if err := rd.more(keep); err != nil {
			return nil, err
		}
	}
	if n > 0 && len(out) > n {
		out = out[len(out)-n:]
	}
	return out, nil
}

// Follow calls emit with each matching record written after Tail (or after
// the call, without Tail), until ctx ends. It looks for new lines every
// poll, and moves to the new file when the log rotates.
func (rd *Reader) Follow(ctx context.Context, poll time.Duration, emit func(Record)) error {
	if rd.f == nil && rd.info == nil {
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
		if rd.filter.Match(r) {
			emit(r)
		}
	}
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		if rd.f != nil {
			if err := rd.more(keep); err != nil {
				return err
			}
		}
		// Rotated (or created): finish the old file and the files rotated
		// after it, then start the new one from its beginning.
		if fi, err := os.Stat(rd.path); err == nil && (rd.info == nil || !os.SameFile(fi, rd.info)) {
			if rd.f != nil {
				if err := rd.more(keep); err != nil {
					return err
				}
				rd.f.Close()
				rd.f = nil
				if err := rd.rotatedAfter(keep); err != nil {
					return err
				}
			}
			rd.partial = nil
			if err := rd.reopen(); err != nil {
				return err
			}
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// rotatedAfter reads the rotated files newer than the one followed until
// now (several rotations may come between two polls).
func (rd *Reader) rotatedAfter(emit func(Record)) error {
	for i := 1; i <= rd.maxFiles; i++ {
		fi, err := os.Stat(Rotated(rd.path, i))
		if err != nil || !os.SameFile(fi, rd.info) {
			continue
		}
		for j := i - 1; j >= 1; j-- {
			if err := readWhole(Rotated(rd.path, j), emit); err != nil {
				return err
			}
		}
		return nil
	}
	return nil
}

// readWhole reads every record of the file at p (none when it is missing).
func readWhole(p string, emit func(Record)) error {
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = scan(f, nil, emit)
	return err
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

// more reads the lines appended since the last read.
func (rd *Reader) more(emit func(Record)) error {
	rest, err := scan(rd.f, rd.partial, emit)
	rd.partial = rest
	return err
}

// scan reads r to its end and calls emit for each complete line that is a
// record (other lines are skipped); it returns an unfinished last line,
// prefixed by partial.
func scan(r io.Reader, partial []byte, emit func(Record)) ([]byte, error) {
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
		if len(line) > 0 && json.Unmarshal(line, &rec) == nil {
			emit(rec)
		}
		buf = buf[:0:0]
	}
}
