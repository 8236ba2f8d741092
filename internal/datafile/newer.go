package datafile

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/toolgate/toolgate/internal/shellword"
)

// NewerError is a file or store of the data folder in a format this
// toolgate does not read because a newer toolgate wrote it: what a
// rollback finds. What it holds is the newer toolgate's to read again once
// it is back, so it is never rebuilt over or deleted: the fix is to run the
// newer toolgate again, or to move it aside (kept, and moved back when the
// newer toolgate returns). An older format is not one: each store reads or
// upgrades those itself.
type NewerError struct {
	What  string // "learned pairs", "the quarantine pins file"
	Path  string
	Found int // the format it holds
	Reads int // the format this toolgate reads
	// Then is what moving it aside means for this toolgate ("learning
	// starts afresh"), said in the fix.
	Then string
}

func (e *NewerError) Error() string {
	return fmt.Sprintf("%s %s was written by a newer toolgate (format %d; this one reads format %d)", e.What, e.Path, e.Found, e.Reads)
}

// Fix says what to do: the newer toolgate, or moving it aside.
func (e *NewerError) Fix() string {
	return fmt.Sprintf("run the newer toolgate again (it reads it), or, to go on with this one, move it aside (%s): %s; "+
		"moved back, the newer toolgate reads it again", shellword.Join("mv", e.Path, e.Path+".newer"), e.Then)
}

// Newer returns a *NewerError when found, a format stamp as a file or
// store keeps it ("2"), is a later format than reads; nil otherwise (an
// older format, or a stamp that is no number: the caller's own error).
// then is NewerError.Then.
func Newer(what, path, found string, reads int, then string) error {
	n, err := strconv.Atoi(found)
	if err != nil || n <= reads {
		return nil
	}
	return &NewerError{What: what, Path: path, Found: n, Reads: reads, Then: then}
}

// AsNewer is errors.As for a *NewerError.
func AsNewer(err error) (*NewerError, bool) {
	var ne *NewerError
	ok := errors.As(err, &ne)
	return ne, ok
}
