package index_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toolgate/toolgate/index"
	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/index/indextest"
)

// Environment of the child process TestUpdateKilled starts (this test
// binary again): the index folder, the first revision to write, how many,
// and the update stage at which the child kills itself ("" = never).
const (
	envChildDir    = "TOOLGATE_UPDATE_CHILD_DIR"
	envChildFrom   = "TOOLGATE_UPDATE_CHILD_FROM"
	envChildCount  = "TOOLGATE_UPDATE_CHILD_COUNT"
	envChildKillAt = "TOOLGATE_UPDATE_CHILD_KILL_AT"
)

const killTools = 1000

var killBase = indextest.Catalog(killTools, indextest.Seed)

// revision r of the catalog differs from revision r-1 in two tools'
// descriptions, so each step is a small, incremental update.
func revision(r int) []catalog.Tool {
	tools := slices.Clone(killBase)
	if r > 0 {
		tools[(r*37)%killTools].Description += fmt.Sprintf(" Revision %d keeps archived entries.", r)
	}
	return tools
}

// TestUpdateKilled kills a process in the middle of incremental updates —
// at each stage of the Bleve update (the process kills itself there) and at
// moments chosen by the clock — and checks each time that the index opens
// holding a whole revision, the one before or the one being written,
// answering as a full build of that revision does; and that the next update
// goes on from there.
func TestUpdateKilled(t *testing.T) {
	if dir := os.Getenv(envChildDir); dir != "" {
		updateChild(t, dir)
		return
	}
	if testing.Short() {
		t.Skip("starts child processes")
	}
	dir := t.TempDir()
	ensure(t, dir, revision(0))
	qs := queries(killBase)[:6]
	fps := map[string]int{}
	for r := 0; r < 400; r++ {
		fps[catalog.Fingerprint(revision(r))] = r
	}
	cur := 0 // the revision on disk

	// check opens the index and returns the revision it holds, which must
	// be between lo and hi.
	check := func(t *testing.T, what string, lo, hi int) int {
		t.Helper()
		ix, err := index.Open(dir, nil)
		if err != nil {
			t.Fatalf("%s: index does not open: %v", what, err)
		}
		defer ix.Close()
		r, ok := fps[catalog.Fingerprint(ix.Tools())]
		if !ok || r < lo || r > hi {
			t.Fatalf("%s: index holds revision %d (known %v), want %d…%d", what, r, ok, lo, hi)
		}
		if diff := cmp.Diff(answers(t, fullBuild(t, revision(r)), qs), answers(t, ix, qs), scoresEqual); diff != "" {
			t.Errorf("%s: revision %d answers differently from a full build:\n%s", what, r, diff)
		}
		return r
	}

	for _, stage := range []string{"clone", "open", "batch", "close"} {
		t.Run("self-killed at "+stage, func(t *testing.T) {
			err := runChild(t, dir, cur+1, 1, stage, 0)
			if !killed(err) {
				t.Fatalf("child was not killed: %v", err)
			}
			cur = check(t, "after the kill", cur, cur)
		})
	}
	for _, delay := range []time.Duration{50 * time.Millisecond, 150 * time.Millisecond, 300 * time.Millisecond, 500 * time.Millisecond, 800 * time.Millisecond, 1200 * time.Millisecond} {
		t.Run("killed after "+delay.String(), func(t *testing.T) {
			const steps = 40
			err := runChild(t, dir, cur+1, steps, "", delay)
			if !killed(err) && err != nil {
				t.Fatalf("child: %v", err)
			}
			r := check(t, "after the kill", cur, cur+steps)
			t.Logf("killed at revision %d after %d complete updates", r, r-cur)
			cur = r
		})
	}
	// The next update after all that is right (incremental, unless the
	// segments are due for compaction), re-indexing the tools that changed:
	// two, or one when no update was whole before a kill and the index
	// still holds revision 0 (under -race on a loaded machine, where the
	// test read Reindexed 1 as wrong).
	next := revision(cur + 1)
	changed := 0
	for i, tl := range revision(cur) {
		if tl.Description != next[i].Description {
			changed++
		}
	}
	ix, rep := ensure(t, dir, next)
	if rep.Generation <= 1 || (rep.Incremental && rep.Reindexed != changed) {
		t.Errorf("update after the kills from revision %d: %+v, want %d tools re-indexed", cur, rep, changed)
	}
	if diff := cmp.Diff(answers(t, fullBuild(t, next), qs), answers(t, ix, qs), scoresEqual); diff != "" {
		t.Errorf("update after the kills answers differently from a full build:\n%s", diff)
	}
}

func killed(err error) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// runChild runs revisions from…from+count-1 in a child process, killing it
// after delay when delay > 0.
func runChild(t *testing.T, dir string, from, count int, killAt string, delay time.Duration) error {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestUpdateKilled$", "-test.count=1")
	cmd.Env = append(os.Environ(), envChildDir+"="+dir, envChildFrom+"="+strconv.Itoa(from),
		envChildCount+"="+strconv.Itoa(count), envChildKillAt+"="+killAt)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if delay > 0 {
		time.AfterFunc(delay, func() { _ = cmd.Process.Signal(syscall.SIGKILL) })
	}
	return cmd.Wait()
}

// updateChild is the child process: it writes its revisions one after the
// other, killing itself at the update stage it was given. Every update is
// incremental but those that compact the segments (one in
// index.MaxSegments-1: each revision leaves one live document in the
// previous update's segment).
func updateChild(t *testing.T, dir string) {
	from, _ := strconv.Atoi(os.Getenv(envChildFrom))
	count, _ := strconv.Atoi(os.Getenv(envChildCount))
	if at := os.Getenv(envChildKillAt); at != "" {
		index.SetUpdateFault(func(stage string) error {
			if stage == at {
				_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
				select {} // the signal is on its way
			}
			return nil
		})
	}
	for r := from; r < from+count; r++ {
		ix, rep, err := index.EnsureReport(context.Background(), dir, revision(r), nil, nil)
		if err != nil {
			t.Fatalf("revision %d: %v", r, err)
		}
		t.Logf("revision %d: incremental %v, generation %d", r, rep.Incremental, rep.Generation)
		ix.Close()
	}
}
