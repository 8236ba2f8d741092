//go:build !unix

package linerpc

import "os"

// ReaderGone never sees a reader go here.
type ReaderGone struct{ gone chan struct{} }

// WatchReaderGone returns a watch whose Gone is never closed.
func WatchReaderGone(*os.File) *ReaderGone { return &ReaderGone{gone: make(chan struct{})} }

// Gone is never closed.
func (g *ReaderGone) Gone() <-chan struct{} { return g.gone }

// Stop does nothing.
func (g *ReaderGone) Stop() {}
