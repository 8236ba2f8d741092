// Package audittest holds an in-memory audit log for tests.
package audittest

import (
	"slices"
	"sync"

	"github.com/toolgate/toolgate/gateway/audit"
)

// Log keeps the records written to it. It is safe for concurrent use.
type Log struct {
	mu   sync.Mutex
	recs []audit.Record
}

// Write keeps r.
func (l *Log) Write(r audit.Record) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recs = append(l.recs, r)
}

// Records returns the records written so far, oldest first.
func (l *Log) Records() []audit.Record {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.recs)
}
