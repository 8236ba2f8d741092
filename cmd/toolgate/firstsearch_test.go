package main

import (
	"context"
	"testing"
	"time"

	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/search"
)

type stubSearcher struct{ entered, release chan struct{} }

func (s stubSearcher) Search(context.Context, search.Query) (search.Result, error) {
	select {
	case s.entered <- struct{}{}:
	default:
	}
	<-s.release
	return search.Result{}, nil
}
func (stubSearcher) Tool(string) (catalog.Tool, bool) { return catalog.Tool{}, false }
func (stubSearcher) IDs() []string                    { return nil }

// A warm start's backends wait for the first search's answer (not its
// arrival), for at most the wait given, or until a call needs one.
func TestFirstSearchReleasesBackends(t *testing.T) {
	f := newFirstSearch()
	stub := stubSearcher{entered: make(chan struct{}), release: make(chan struct{})}
	s := f.searcher(stub)
	waited := make(chan struct{})
	go func() {
		f.wait(context.Background(), time.Hour)
		close(waited)
	}()
	answered := make(chan struct{})
	go func() {
		_, _ = s.Search(context.Background(), search.Query{Text: "q"})
		close(answered)
	}()
	<-stub.entered
	select {
	case <-f.done:
		t.Fatal("the backends were released while the first search was still running")
	default:
	}
	close(stub.release)
	<-answered
	<-waited // released by the answer; the hour never passes
	// Later searches and waits do not block on it again.
	_, _ = s.Search(context.Background(), search.Query{Text: "again"})
	f.wait(context.Background(), time.Hour)

	// No search: released after the wait given.
	newFirstSearch().wait(context.Background(), time.Millisecond)
	// A call that needs a backend ends the wait (StartAfter's context).
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	newFirstSearch().wait(ctx, time.Hour)
}
