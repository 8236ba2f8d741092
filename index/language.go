package index

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/bleve/v2/analysis/lang/cjk"
	"github.com/blevesearch/bleve/v2/analysis/lang/da"
	"github.com/blevesearch/bleve/v2/analysis/lang/de"
	"github.com/blevesearch/bleve/v2/analysis/lang/en"
	"github.com/blevesearch/bleve/v2/analysis/lang/es"
	"github.com/blevesearch/bleve/v2/analysis/lang/fi"
	"github.com/blevesearch/bleve/v2/analysis/lang/fr"
	"github.com/blevesearch/bleve/v2/analysis/lang/hu"
	"github.com/blevesearch/bleve/v2/analysis/lang/it"
	"github.com/blevesearch/bleve/v2/analysis/lang/nl"
	"github.com/blevesearch/bleve/v2/analysis/lang/no"
	"github.com/blevesearch/bleve/v2/analysis/lang/pt"
	"github.com/blevesearch/bleve/v2/analysis/lang/ro"
	"github.com/blevesearch/bleve/v2/analysis/lang/ru"
	"github.com/blevesearch/bleve/v2/analysis/lang/sv"
	"github.com/blevesearch/bleve/v2/analysis/lang/tr"
	"github.com/blevesearch/bleve/v2/analysis/token/lowercase"
	"github.com/blevesearch/bleve/v2/analysis/token/porter"
	"github.com/blevesearch/bleve/v2/registry"
	"github.com/toolgate/toolgate/index/catalog"
)

// sharedFilters are the filters every language's chain starts with, after
// the tokenizer: what reads the characters, before identifiers are cut
// (identSplit, then lower case) and before stop words and stemming, which
// are each language's.
var sharedFilters = []string{nfcName, cjk.WidthName, cjk.BigramName}

// splitFilters cut identifiers into words and lower-case them, between a
// language's own filters before (elision) and after (stop words, stemmer).
var splitFilters = []string{identSplitName, lowercase.Name}

// englishFilters are the English chain's own filters: the stop words and
// the Porter stemmer every tool of a server without a language is read
// with (see keyword.go for why).
var englishFilters = []string{en.StopName, porter.Name}

// langChain is one language's own filters: pre before splitFilters, post
// after them.
type langChain struct{ pre, post []string }

// Elision filters of French and Italian: the article elided before an
// apostrophe is dropped (l'équipe, L'équipe, d'une → équipe, équipe,
// une), before the identifier split would join the two words
// ("léquipe"). Bleve's own (elision_fr) compares the article as written,
// lower case only.
const (
	elisionFrName = "toolgate_elision_fr"
	elisionItName = "toolgate_elision_it"
)

// languageFilters are the stop words and stemmer of each language of
// catalog.Languages: Bleve's Snowball stemmer (Portuguese: its light
// stemmer, it has no Snowball one), and for French and Italian the
// elision of articles.
var languageFilters = map[string]langChain{
	"da": {post: []string{da.StopName, da.SnowballStemmerName}},
	"de": {post: []string{de.StopName, de.SnowballStemmerName}},
	"es": {post: []string{es.StopName, es.SnowballStemmerName}},
	"fi": {post: []string{fi.StopName, fi.SnowballStemmerName}},
	"fr": {pre: []string{elisionFrName}, post: []string{fr.StopName, fr.SnowballStemmerName}},
	"hu": {post: []string{hu.StopName, hu.SnowballStemmerName}},
	"it": {pre: []string{elisionItName}, post: []string{it.StopName, it.SnowballStemmerName}},
	"nl": {post: []string{nl.StopName, nl.SnowballStemmerName}},
	"no": {post: []string{no.StopName, no.SnowballStemmerName}},
	"pt": {post: []string{pt.StopName, pt.LightStemmerName}},
	"ro": {post: []string{ro.StopName, ro.SnowballStemmerName}},
	"ru": {post: []string{ru.StopName, ru.SnowballStemmerName}},
	"sv": {post: []string{sv.StopName, sv.SnowballStemmerName}},
	"tr": {post: []string{tr.StopName, tr.SnowballStemmerName}},
}

func init() {
	for name, articles := range map[string]string{elisionFrName: fr.ArticlesName, elisionItName: it.ArticlesName} {
		if err := registry.RegisterTokenFilter(name, func(_ map[string]interface{}, cache *registry.Cache) (analysis.TokenFilter, error) {
			m, err := cache.TokenMapNamed(articles)
			if err != nil {
				return nil, err
			}
			return elisionFilter{articles: m}, nil
		}); err != nil {
			panic(err)
		}
	}
}

// elisionFilter drops an elided article (one of articles, in any case)
// and its apostrophe from the front of a token.
type elisionFilter struct{ articles analysis.TokenMap }

func (f elisionFilter) Filter(in analysis.TokenStream) analysis.TokenStream {
	for _, tok := range in {
		for i, r := range string(tok.Term) {
			if r == '\'' || r == '’' {
				if _, ok := f.articles[strings.ToLower(string(tok.Term[:i]))]; ok {
					tok.Term = tok.Term[i+utf8.RuneLen(r):]
				}
				break
			}
		}
	}
	return in
}

// analyzerOf is the name of the analyzer of tools in lang ("" for
// English, the index's default analyzer).
func analyzerOf(lang string) string {
	if lang == "" {
		return analyzerName
	}
	return analyzerName + "_" + lang
}

// languageChain is the whole filter chain of lang's tools.
func languageChain(lang string) []string {
	c := languageFilters[lang]
	return slices.Concat(sharedFilters, c.pre, splitFilters, c.post)
}

// analyzerSignature names the analysis of an index whose tools are in
// langs (sorted, English left out): the English chain, then each
// language's own filters. An index of English tools only has the
// signature it had before languages: it is not rebuilt for them. One of
// other languages is rebuilt by a toolgate that does not know them (a
// rollback), as its signature differs.
func analyzerSignature(langs ...string) string {
	s := strings.Join(analyzerFilters, ",")
	for _, l := range langs {
		s += ";" + l + "=" + strings.Join(languageChain(l)[len(sharedFilters):], ",")
	}
	return s
}

// languagesOf are the languages of tools other than English, sorted.
func languagesOf(tools []catalog.Tool) []string {
	var langs []string
	for _, t := range tools {
		if t.Language != "" && !slices.Contains(langs, t.Language) {
			langs = append(langs, t.Language)
		}
	}
	slices.Sort(langs)
	return langs
}

// serverLanguages are the servers of tools that have a language, each
// with it (nil for none): what a manifest keeps, as the catalog snapshot
// holds no language; an error when one server's tools have two.
func serverLanguages(tools []catalog.Tool) (map[string]string, error) {
	var out map[string]string
	seen := map[string]string{}
	for _, t := range tools {
		if l, ok := seen[t.Server]; ok {
			if l != t.Language {
				return nil, fmt.Errorf("server %q has tools in %s and in %s: a server's tools are in one language", t.Server, catalog.LanguageName(l), catalog.LanguageName(t.Language))
			}
			continue
		}
		seen[t.Server] = t.Language
		if t.Language == "" {
			continue
		}
		if _, ok := languageFilters[t.Language]; !ok {
			_, err := catalog.CanonicalLanguage(t.Language)
			return nil, fmt.Errorf("tool %q: %w", t.ID(), err)
		}
		if out == nil {
			out = map[string]string{}
		}
		out[t.Server] = t.Language
	}
	return out, nil
}

// queryChain is the filters of one language after sharedFilters, made.
type queryChain struct{ pre, split, post []analysis.TokenFilter }

// queryChains are the filters that read a query word in English ("") and
// in each language of catalog.Languages; made once, at first use (after
// init has registered this package's filters).
var queryChains = sync.OnceValue(func() map[string]queryChain {
	cache := registry.NewCache()
	split := mustFilters(cache, splitFilters)
	out := map[string]queryChain{"": {split: split, post: mustFilters(cache, englishFilters)}}
	for lang, c := range languageFilters {
		out[lang] = queryChain{pre: mustFilters(cache, c.pre), split: split, post: mustFilters(cache, c.post)}
	}
	return out
})

// sharedAnalyzer is the tokenizer and sharedFilters: a query's words
// before each language reads them.
var sharedAnalyzer = sync.OnceValue(func() analysis.Analyzer {
	cache := registry.NewCache()
	tok, err := cache.TokenizerNamed(identTokenizerName)
	if err != nil {
		panic(err)
	}
	return &analysis.DefaultAnalyzer{Tokenizer: tok, TokenFilters: mustFilters(cache, sharedFilters)}
})

func mustFilters(cache *registry.Cache, names []string) []analysis.TokenFilter {
	fs := make([]analysis.TokenFilter, len(names))
	for i, n := range names {
		f, err := cache.TokenFilterNamed(n)
		if err != nil {
			panic(fmt.Sprintf("token filter %s: %v", n, err))
		}
		fs[i] = f
	}
	return fs
}

// readWord is what chain c makes of one token of sharedAnalyzer: the
// words of the identifier it may be (identSplit), each as its term, or
// "" where c's stop words drop it.
func readWord(c queryChain, tok *analysis.Token) []string {
	ts := analysis.TokenStream{&analysis.Token{Term: slices.Clone(tok.Term), Start: tok.Start, End: tok.End, Position: tok.Position, Type: tok.Type}}
	for _, f := range c.pre {
		ts = f.Filter(ts)
	}
	for _, f := range c.split {
		ts = f.Filter(ts)
	}
	out := make([]string, len(ts))
	for i, t := range ts {
		one := analysis.TokenStream{t}
		for _, f := range c.post {
			one = f.Filter(one)
		}
		if len(one) > 0 {
			out[i] = string(one[0].Term)
		}
	}
	return out
}

// queryGroups reads a query for an index whose tools are in English and
// langs (sorted, not empty): each word of it is a group of terms, its
// English one first and then what each language makes of it (each term
// once), one keyword match whichever of them a tool holds. A word that
// English or one of langs holds for a stop word is left out: "die" and
// "was" in a German query ask for nothing, though English keeps them. A
// term of an earlier word is not another word's (as queryTerms keeps
// each term once). Where a language cuts a token into other words than
// English does (an elided article: l'équipe is "léquipe" to English,
// "équipe" to French), its terms join the group of the whole token.
func queryGroups(text string, langs []string) [][]string {
	chains := queryChains()
	var groups [][]string
	seen := map[string]bool{}
	for _, tok := range sharedAnalyzer().Analyze([]byte(text)) {
		words := readWord(chains[""], tok)
		byWord := make([][]string, len(words))
		stop := make([]bool, len(words))
		for i, w := range words {
			if w == "" {
				stop[i] = true
			} else {
				byWord[i] = []string{w}
			}
		}
		for _, lang := range langs {
			theirs := readWord(chains[lang], tok)
			for i, w := range theirs {
				at := i
				if len(theirs) != len(words) {
					if w == "" {
						continue // its own cut: English's stop words decide
					}
					at = len(words) - 1
				}
				switch {
				case at < 0:
				case w == "":
					stop[at] = true
				case !slices.Contains(byWord[at], w):
					byWord[at] = append(byWord[at], w)
				}
			}
		}
		for i, group := range byWord {
			if stop[i] {
				continue
			}
			group = slices.DeleteFunc(group, func(s string) bool { return seen[s] })
			if len(group) == 0 {
				continue
			}
			for _, s := range group {
				seen[s] = true
			}
			groups = append(groups, group)
		}
	}
	return groups
}
