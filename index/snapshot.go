package index

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"unsafe"

	"github.com/toolgate/toolgate/index/catalog"
)

// The catalog snapshot of a generation is a small binary file rather than
// JSON: with real-sized input schemas (1–5 KB each) decoding 10,000 tools
// from JSON took half a second, this takes milliseconds. Layout:
//
//	"TGC3" | uvarint count | count × (7 × (uvarint len | bytes))
//
// with the fields server, name, title, description, input schema,
// annotations, output schema. ("TGC1", without annotations, belongs to
// formats 2 and 3, "TGC2", without output schemas, to formats 4 to 6: an
// index holding either is rebuilt, see FormatVersion. Not served as it
// is: its tools would have no output schema until their servers list them,
// and the quarantine, which decides on the warm catalog as listed, would
// pin them so and hold each as changed at its listing.)
const catalogMagic = "TGC3"

// catalogFields is how many length-prefixed fields each tool has.
const catalogFields = 7

func encodeCatalog(tools []catalog.Tool) []byte {
	size := len(catalogMagic) + binary.MaxVarintLen64
	for _, t := range tools {
		size += catalogFields*binary.MaxVarintLen64 + len(t.Server) + len(t.Name) + len(t.Title) + len(t.Description) + len(t.InputSchema) + len(t.Annotations) + len(t.OutputSchema)
	}
	b := make([]byte, 0, size)
	b = append(b, catalogMagic...)
	b = binary.AppendUvarint(b, uint64(len(tools)))
	for _, t := range tools {
		for _, f := range [catalogFields][]byte{bytesOf(t.Server), bytesOf(t.Name), bytesOf(t.Title), bytesOf(t.Description), t.InputSchema, t.Annotations, t.OutputSchema} {
			b = binary.AppendUvarint(b, uint64(len(f)))
			b = append(b, f...)
		}
	}
	return b
}

var errBadCatalog = errors.New("catalog snapshot is damaged")

// ErrSnapshotFormat says a generation's catalog snapshot is another
// toolgate version's (an older one's, after an upgrade; a newer one's,
// after a rollback): not damaged, and rebuilt by this toolgate from the
// servers' listings and the embedding cache. The upgrade to format 7 met
// it at every first start, which said "could not be read", and `toolgate
// doctor` "damaged: bad header".
var ErrSnapshotFormat = errors.New("catalog snapshot of another toolgate version")

// olderCatalogs names the index formats of each older snapshot header.
var olderCatalogs = map[string]string{"TGC1": "2 to 3", "TGC2": "4 to 6"}

// checkCatalogHeader refuses a snapshot that is not this format's, saying
// whose it is.
func checkCatalogHeader(b []byte) error {
	if len(b) >= len(catalogMagic) && string(b[:len(catalogMagic)]) == catalogMagic {
		return nil
	}
	if len(b) < len(catalogMagic) {
		return fmt.Errorf("%w: bad header", errBadCatalog)
	}
	head := string(b[:len(catalogMagic)])
	if formats, ok := olderCatalogs[head]; ok {
		return fmt.Errorf("%w: %q is an older toolgate's (index formats %s; this one writes %q, format %d)", ErrSnapshotFormat, head, formats, catalogMagic, FormatVersion)
	}
	if head[:3] == catalogMagic[:3] && head[3] > catalogMagic[3] && head[3] <= '9' {
		return fmt.Errorf("%w: %q is a newer toolgate's (this one reads %q, format %d)", ErrSnapshotFormat, head, catalogMagic, FormatVersion)
	}
	return fmt.Errorf("%w: bad header", errBadCatalog)
}

// bytesOf is s's bytes, not copied; they must not be written.
func bytesOf(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// stringOf is b as a string, not copied: b must never be written again.
func stringOf(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// decodeCatalog reads what encodeCatalog wrote. Every field but the server
// name shares b's memory (strings included: at 50,000 tools, copies were
// 7.7 MB more held for the life of the index), so b must never be written
// afterwards.
func decodeCatalog(b []byte) ([]catalog.Tool, error) {
	if err := checkCatalogHeader(b); err != nil {
		return nil, err
	}
	b = b[len(catalogMagic):]
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)) {
		return nil, fmt.Errorf("%w: bad tool count", errBadCatalog)
	}
	b = b[k:]
	tools := make([]catalog.Tool, n)
	server := "" // copied once a server: server names end up in maps that outlive the index
	next := func() ([]byte, error) {
		l, k := binary.Uvarint(b)
		if k <= 0 || l > uint64(len(b)-k) {
			return nil, fmt.Errorf("%w: truncated", errBadCatalog)
		}
		f := b[k : k+int(l)]
		b = b[k+int(l):]
		return f, nil
	}
	for i := range tools {
		var fs [catalogFields][]byte
		for j := range fs {
			f, err := next()
			if err != nil {
				return nil, err
			}
			fs[j] = f
		}
		if string(fs[0]) != server {
			server = string(fs[0])
		}
		tools[i] = catalog.Tool{Server: server, Name: stringOf(fs[1]), Title: stringOf(fs[2]), Description: stringOf(fs[3])}
		if len(fs[4]) > 0 {
			tools[i].InputSchema = json.RawMessage(fs[4][:len(fs[4]):len(fs[4])])
		}
		if len(fs[5]) > 0 {
			tools[i].Annotations = json.RawMessage(fs[5][:len(fs[5]):len(fs[5])])
		}
		if len(fs[6]) > 0 {
			tools[i].OutputSchema = json.RawMessage(fs[6][:len(fs[6]):len(fs[6])])
		}
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("%w: %d trailing bytes", errBadCatalog, len(b))
	}
	return tools, nil
}
