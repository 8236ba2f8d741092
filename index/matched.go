package index

import (
	"context"
	"fmt"
	"slices"

	bindex "github.com/blevesearch/bleve_index_api"
)

// Matched returns the terms the analyzer makes of query (lower case,
// stemmed, without stop words, in the order they first appear; with tools
// in other languages than English, each word's terms in each) and, for
// each tool of ids, which of them each keyword field holds (field → terms,
// in query order; a tool or field with none is left out). It says why a
// tool's keyword score is what it is (`toolgate search --explain`); it
// scores nothing.
func (ix *Index) Matched(query string, ids []string) ([]string, map[string]map[string][]string, error) {
	if ix.closed.Load() {
		return nil, nil, errClosed
	}
	found := map[string]map[string][]string{}
	groups, err := ix.queryGroups(query)
	terms := slices.Concat(groups...)
	if err != nil || len(terms) == 0 || len(ix.tools) == 0 {
		return terms, found, err
	}
	kr, err := ix.keywordReader()
	if err != nil {
		return nil, nil, err
	}
	want := map[int32]string{}
	for _, id := range ids {
		if row, ok := ix.byID[id]; ok {
			want[int32(row)] = id
		}
	}
	var tfd bindex.TermFieldDoc
	for _, term := range terms {
		for _, f := range keywordFields {
			tr, err := kr.r.TermFieldReader(context.Background(), []byte(term), f, false, false, false)
			if err != nil {
				return nil, nil, fmt.Errorf("keyword terms: %w", err)
			}
			for {
				d, err := tr.Next(&tfd)
				if err != nil {
					_ = tr.Close()
					return nil, nil, fmt.Errorf("keyword terms: %w", err)
				}
				if d == nil {
					break
				}
				num := d.ID.Value()
				if num >= uint64(len(kr.rows)) || kr.rows[num] < 0 {
					continue // a deleted document
				}
				if id, ok := want[kr.rows[num]]; ok {
					if found[id] == nil {
						found[id] = map[string][]string{}
					}
					found[id][f] = append(found[id][f], term)
				}
			}
			if err := tr.Close(); err != nil {
				return nil, nil, fmt.Errorf("keyword terms: %w", err)
			}
		}
	}
	return terms, found, nil
}
