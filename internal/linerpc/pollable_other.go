//go:build !unix

package linerpc

import "os"

// pollable returns f: the poller's files are a Unix matter here.
func pollable(f, _ *os.File) *os.File { return f }

// RestoreStdio does nothing: pollable changed nothing.
func RestoreStdio() {}
