package index

import (
	"bytes"
	"unicode/utf8"

	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/bleve/v2/registry"
	"github.com/toolgate/toolgate/index/catalog"
)

// Registry names of the analysis pieces this package adds to Bleve. They are
// registered in init, so an index written by this package can be reopened by
// any process that links it.
const (
	identTokenizerName = "toolgate_ident"
	identSplitName     = "toolgate_ident_split"
)

func init() {
	if err := registry.RegisterTokenizer(identTokenizerName, func(map[string]interface{}, *registry.Cache) (analysis.Tokenizer, error) {
		return identTokenizer{}, nil
	}); err != nil {
		panic(err)
	}
	if err := registry.RegisterTokenFilter(identSplitName, func(map[string]interface{}, *registry.Cache) (analysis.TokenFilter, error) {
		return identSplitFilter{}, nil
	}); err != nil {
		panic(err)
	}
}

// identTokenizer cuts text into runs of letters, digits and the characters
// that join the parts of an identifier (_ - . / : and apostrophes), trimmed of
// joiners at both ends. Unlike Unicode word segmentation it keeps
// "list_directory", "read-file" and "azure.storage" whole, so that the split
// filter can emit both the parts and the whole identifier.
type identTokenizer struct{}

func isJoiner(r rune) bool {
	switch r {
	case '_', '-', '.', '/', ':', '\'', '’':
		return true
	}
	return false
}

func (identTokenizer) Tokenize(text []byte) analysis.TokenStream {
	var out analysis.TokenStream
	pos := 1
	emit := func(start, end int) {
		// Trim joiners at both ends ("files." → "files", "--force" → "force").
		for start < end {
			r, n := utf8.DecodeRune(text[start:end])
			if catalog.IsWordRune(r) {
				break
			}
			start += n
		}
		for end > start {
			r, n := utf8.DecodeLastRune(text[start:end])
			if catalog.IsWordRune(r) {
				break
			}
			end -= n
		}
		if start >= end {
			return
		}
		out = append(out, &analysis.Token{Term: text[start:end], Start: start, End: end, Position: pos, Type: analysis.AlphaNumeric})
		pos++
	}
	start := -1
	for i := 0; i < len(text); {
		r, n := utf8.DecodeRune(text[i:])
		in := catalog.IsWordRune(r) || isJoiner(r)
		switch {
		case in && start < 0:
			start = i
		case !in && start >= 0:
			emit(start, i)
			start = -1
		}
		i += n
	}
	if start >= 0 {
		emit(start, len(text))
	}
	return out
}

// identSplitFilter splits identifiers on snake_case, kebab-case, dots,
// camelCase and letter/digit boundaries ("getUserID" → get, User, ID). When a
// token splits, the whole token is kept too (without a trailing possessive),
// so an exact tool name in a query still matches its tool strongly. It runs
// before lower-casing because camelCase boundaries need the case.
type identSplitFilter struct{}

func (identSplitFilter) Filter(in analysis.TokenStream) analysis.TokenStream {
	out := make(analysis.TokenStream, 0, len(in))
	for _, tok := range in {
		term := stripPossessive(tok.Term)
		parts := catalog.SplitIdent(term)
		if len(parts) == 1 && len(parts[0]) == len(term) {
			tok.Term = term
			out = append(out, tok)
			continue
		}
		for _, p := range parts {
			out = append(out, &analysis.Token{Term: p, Start: tok.Start, End: tok.End, Position: tok.Position, Type: tok.Type})
		}
		if len(parts) > 1 {
			whole := bytes.Map(func(r rune) rune {
				if r == '\'' || r == '’' {
					return -1
				}
				return r
			}, term)
			out = append(out, &analysis.Token{Term: whole, Start: tok.Start, End: tok.End, Position: tok.Position, Type: tok.Type})
		}
	}
	return out
}

func stripPossessive(b []byte) []byte {
	for _, suf := range [][]byte{[]byte("'s"), []byte("'S"), []byte("’s"), []byte("’S")} {
		if bytes.HasSuffix(b, suf) && len(b) > len(suf) {
			return b[:len(b)-len(suf)]
		}
	}
	return b
}
