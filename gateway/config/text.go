package config

import (
	"bytes"
	"errors"

	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/unicode"
)

// A config file is UTF-8 text, which may start with a byte-order mark:
// editors on Windows start UTF-8 with one, and Windows PowerShell's `>`
// and Out-File write UTF-16 with one. Reading takes each of them; an edit
// (SetServer, DeleteServer) writes the file back in the encoding it had.

// textEncoding is how a file's text was stored.
type textEncoding int

const (
	plainUTF8 textEncoding = iota
	bomUTF8
	bomUTF16LE
	bomUTF16BE
)

var (
	markUTF8    = []byte("\xef\xbb\xbf")
	markUTF16LE = []byte("\xff\xfe")
	markUTF16BE = []byte("\xfe\xff")
)

// errUTF16NoMark is a file that reads as UTF-16 (a NUL byte beside its
// first character) without the mark that would say which order.
var errUTF16NoMark = errors.New("the file looks like UTF-16 without a byte-order mark: save it as UTF-8 (in PowerShell: Out-File -Encoding utf8)")

// decodeText returns data as UTF-8 without a byte-order mark, and how it
// was stored.
func decodeText(data []byte) ([]byte, textEncoding, error) {
	var e textEncoding
	switch {
	case bytes.HasPrefix(data, markUTF8):
		return data[len(markUTF8):], bomUTF8, nil
	case bytes.HasPrefix(data, markUTF16LE):
		e = bomUTF16LE
	case bytes.HasPrefix(data, markUTF16BE):
		e = bomUTF16BE
	case len(data) >= 2 && (data[0] == 0) != (data[1] == 0):
		return nil, plainUTF8, errUTF16NoMark
	default:
		return data, plainUTF8, nil
	}
	text, err := e.codec().NewDecoder().Bytes(data)
	if err != nil {
		return nil, e, err
	}
	return text, e, nil
}

// encode stores UTF-8 text the way e says: decodeText's inverse.
func (e textEncoding) encode(text []byte) ([]byte, error) {
	switch e {
	case bomUTF8:
		return append(append([]byte{}, markUTF8...), text...), nil
	case bomUTF16LE, bomUTF16BE:
		return e.codec().NewEncoder().Bytes(text)
	}
	return text, nil
}

// codec is the UTF-16 encoding of e, writing and reading its mark.
func (e textEncoding) codec() encoding.Encoding {
	order := unicode.LittleEndian
	if e == bomUTF16BE {
		order = unicode.BigEndian
	}
	return unicode.UTF16(order, unicode.ExpectBOM)
}

// Text returns a config file's content as UTF-8 without a byte-order mark
// (see decodeText), for readers of client files outside this package.
func Text(data []byte) ([]byte, error) {
	text, _, err := decodeText(data)
	return text, err
}
