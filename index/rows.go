package index

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"unsafe"
)

// Where an index's float32 rows come from: a matrix in memory (Index.vecs:
// an index built by Build), or the generation's vectors.f32, read with
// pread (Index.vf: an index opened from disk). The file is not mapped: a
// mapping's pages count in the process's resident set once touched, and
// the full passes below touch every row (73 MiB at 50,000 tools), while a
// search reads only a few hundred rows (Scan's rescoring, Cosine). Read
// rows stay in the kernel's page cache, outside the process.
//
// Every reader of the rows goes through readRows, row or eachRows, so each
// has one code path for both sources.

// rowChunk is how many rows a full pass over a file reads at a time: 384
// KiB at 384 dimensions.
const rowChunk = 256

// vectorFile is an open vectors file: rows×dim little-endian float32 after
// the header.
type vectorFile struct {
	f         *os.File
	rows, dim int
}

// openVectors opens a vectors file and checks its size and header against
// the manifest.
func openVectors(path string, rows, dim int) (*vectorFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	vf := &vectorFile{f: f, rows: rows, dim: dim}
	if err := vf.check(path); err != nil {
		f.Close()
		return nil, err
	}
	return vf, nil
}

func (vf *vectorFile) check(path string) error {
	st, err := vf.f.Stat()
	if err != nil {
		return err
	}
	want := int64(vectorsHeader) + 4*int64(vf.rows)*int64(vf.dim)
	if st.Size() != want {
		return fmt.Errorf("%s: %d bytes, want %d for %d×%d vectors", path, st.Size(), want, vf.rows, vf.dim)
	}
	var h [vectorsHeader]byte
	if _, err := vf.f.ReadAt(h[:], 0); err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	if string(h[:4]) != vectorsMagic ||
		binary.LittleEndian.Uint32(h[4:]) != uint32(vf.rows) ||
		binary.LittleEndian.Uint32(h[8:]) != uint32(vf.dim) {
		return fmt.Errorf("%s: header does not match the manifest", path)
	}
	return nil
}

// read fills dst with the rows from row lo on (len(dst) a multiple of dim).
// After Close it fails (os.File makes a read racing Close safe).
func (vf *vectorFile) read(lo int, dst []float32) error {
	if len(dst) == 0 {
		return nil
	}
	b := unsafe.Slice((*byte)(unsafe.Pointer(&dst[0])), 4*len(dst))
	if _, err := vf.f.ReadAt(b, int64(vectorsHeader)+4*int64(lo)*int64(vf.dim)); err != nil {
		if errors.Is(err, os.ErrClosed) {
			return errClosed
		}
		return err
	}
	if !littleEndian() {
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
	}
	return nil
}

func (vf *vectorFile) close() error { return vf.f.Close() }

// readRows copies the rows from row lo on into dst (len(dst) a multiple of
// the dimension).
func (ix *Index) readRows(lo int, dst []float32) error {
	if ix.vf != nil {
		return ix.vf.read(lo, dst)
	}
	copy(dst, ix.vecs[lo*ix.dim:])
	return nil
}

// row returns row i: the matrix's own row in memory, or buf (len dim)
// filled from the file; nil when the read fails.
func (ix *Index) row(i int, buf []float32) []float32 {
	dim := ix.dim
	if ix.vf == nil {
		return ix.vecs[i*dim : (i+1)*dim : (i+1)*dim]
	}
	if ix.vf.read(i, buf[:dim]) != nil {
		return nil
	}
	return buf[:dim:dim]
}

// rowBuf is a buffer of one row for row, from a pool (the search path
// reads single rows without allocating); give it back with putRowBuf.
func (ix *Index) rowBuf() *[]float32 {
	if bp, _ := ix.rowBufs.Get().(*[]float32); bp != nil {
		return bp
	}
	b := make([]float32, ix.dim)
	return &b
}

func (ix *Index) putRowBuf(bp *[]float32) { ix.rowBufs.Put(bp) }

// eachRows calls fn over the rows lo to hi in order, a run of consecutive
// rows at a time (rows holds them row-major, the first being row first):
// the whole range at once from memory, rowChunk rows at a time through one
// buffer from the file. It stops at a failed read and returns its error.
func (ix *Index) eachRows(lo, hi int, fn func(first int, rows []float32)) error {
	dim := ix.dim
	if dim == 0 {
		return nil // no rows to read
	}
	if ix.vf == nil {
		if lo < hi {
			fn(lo, ix.vecs[lo*dim:hi*dim:hi*dim])
		}
		return nil
	}
	buf := make([]float32, min(rowChunk, hi-lo)*dim)
	for first := lo; first < hi; first += rowChunk {
		rows := buf[:min(rowChunk, hi-first)*dim]
		if err := ix.vf.read(first, rows); err != nil {
			return err
		}
		fn(first, rows)
	}
	return nil
}
