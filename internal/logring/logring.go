// Package logring keeps the last lines of a process's log in memory, so
// that `toolgate logs` can show a gateway's log when nothing else does: an
// MCP client that starts the gateway on stdio may keep its stderr where
// no one looks, or close it.
package logring

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
)

// DefaultLines is how many lines a Ring made with New(0) keeps.
const DefaultLines = 2000

// maxLine caps one line (a record with a huge attribute): the rest is cut.
const maxLine = 16 << 10

// Line is one log line and its sequence number (1 for the first line the
// Ring was given, counting the lines it dropped).
type Line struct {
	Seq  uint64 `json:"seq"`
	Text string `json:"text"`
}

// Ring is an io.Writer that keeps the last lines written to it. A write
// need not end a line: the rest waits for the next write. Safe for
// concurrent use; it never fails a write.
type Ring struct {
	mu      sync.Mutex
	lines   []Line // a circle of at most cap lines; start is the oldest
	start   int
	cap     int
	seq     uint64 // of the last line kept
	partial []byte
}

// New returns a Ring that keeps the last n lines (DefaultLines for n <= 0).
func New(n int) *Ring {
	if n <= 0 {
		n = DefaultLines
	}
	return &Ring{cap: n}
}

// Write adds p's complete lines.
func (r *Ring) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			r.partial = append(r.partial, p[:min(len(p), maxLine-len(r.partial))]...)
			break
		}
		line := append(r.partial, p[:min(i, maxLine-len(r.partial))]...)
		r.partial = r.partial[:0]
		r.add(string(line))
		p = p[i+1:]
	}
	return n, nil
}

func (r *Ring) add(text string) {
	r.seq++
	l := Line{Seq: r.seq, Text: text}
	if len(r.lines) < r.cap {
		r.lines = append(r.lines, l)
		return
	}
	r.lines[r.start] = l
	r.start = (r.start + 1) % r.cap
}

// After returns the lines after sequence number seq, at most n of them
// (the latest; n <= 0: all), oldest first, and the sequence number of the
// last line the Ring holds (to ask for what comes after it next).
func (r *Ring) After(seq uint64, n int) ([]Line, uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Line
	for i := range r.lines {
		if l := r.lines[(r.start+i)%len(r.lines)]; l.Seq > seq {
			out = append(out, l)
		}
	}
	if n > 0 && len(out) > n {
		out = out[len(out)-n:]
	}
	return out, r.seq
}

// Page is what Handler answers: the lines asked for and the sequence
// number to ask after next.
type Page struct {
	Lines []Line `json:"lines"`
	Last  uint64 `json:"last"`
}

// Handler serves GET ?after=SEQ&n=N: the lines after SEQ (0: from the
// oldest kept), at most the latest N (0: all), as a JSON Page.
func (r *Ring) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		q := req.URL.Query()
		after, err1 := parseUint(q.Get("after"))
		n, err2 := parseUint(q.Get("n"))
		if err1 != nil || err2 != nil {
			http.Error(w, "after and n are whole numbers", http.StatusBadRequest)
			return
		}
		lines, last := r.After(after, int(min(n, uint64(r.cap))))
		if lines == nil {
			lines = []Line{}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(Page{Lines: lines, Last: last})
	})
}

func parseUint(s string) (uint64, error) {
	if s == "" {
		return 0, nil
	}
	return strconv.ParseUint(s, 10, 64)
}
