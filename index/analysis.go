package index

import (
	"bytes"
	"unicode"
	"unicode/utf8"

	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/bleve/v2/analysis/token/unicodenorm"
	"github.com/blevesearch/bleve/v2/registry"
	"github.com/toolgate/toolgate/index/catalog"
)

// Registry names of the analysis pieces this package adds to Bleve. They are
// registered in init, so an index written by this package can be reopened by
// any process that links it.
const (
	identTokenizerName = "toolgate_ident"
	identSplitName     = "toolgate_ident_split"
	nfcName            = "toolgate_nfc"
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
	// A letter and its combining accent (café as a Mac writes it) is the
	// one character the composed form is.
	if err := registry.RegisterTokenFilter(nfcName, func(map[string]interface{}, *registry.Cache) (analysis.TokenFilter, error) {
		return unicodenorm.NewUnicodeNormalizeFilter(unicodenorm.NFC)
	}); err != nil {
		panic(err)
	}
}

// isCJK reports the characters of Chinese and Japanese words, which are
// written without spaces between them: ideographs, kana and the kana
// length mark, full- and half-width. The tokenizer gives each run of them
// as one token of type Ideographic, which Bleve's cjk_bigram filter cuts
// into overlapping pairs (東京の天気 → 東京 京の の天 天気): a word of
// two characters, the usual length, is then a term of its own. Korean
// puts spaces between words, and Bleve's own tokenizer keeps them whole:
// so does this one.
func isCJK(r rune) bool {
	return r >= 0x2E80 && (unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana) ||
		r == 0x30FC || r >= 0xFF70 && r <= 0xFF9F) // ー, half-width ｰ and the voicing marks
}

// identTokenizer cuts text into runs of letters, digits and the characters
// that join the parts of an identifier (_ - . / : and apostrophes), trimmed of
// joiners at both ends. Unlike Unicode word segmentation it keeps
// "list_directory", "read-file" and "azure.storage" whole, so that the split
// filter can emit both the parts and the whole identifier. A run of
// Chinese or Japanese characters (isCJK) is a token of its own, of type
// Ideographic, for cjk_bigram.
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
	cjk := false // the run open is of CJK characters
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
		typ := analysis.AlphaNumeric
		if cjk {
			typ = analysis.Ideographic
		}
		out = append(out, &analysis.Token{Term: text[start:end], Start: start, End: end, Position: pos, Type: typ})
		pos++
	}
	start := -1
	for i := 0; i < len(text); {
		r, n := utf8.DecodeRune(text[i:])
		in := catalog.IsWordRune(r) || isJoiner(r)
		c := in && isCJK(r)
		switch {
		case in && start >= 0 && c != cjk:
			emit(start, i) // 文字コードはUTF-8 → 文字コードは, UTF-8
			start, cjk = i, c
		case in && start < 0:
			start, cjk = i, c
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
