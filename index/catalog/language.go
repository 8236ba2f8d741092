package catalog

import (
	"fmt"
	"slices"
	"strings"
)

// Languages are the languages besides English that a server's tools can be
// keyword-indexed in (its "language" in the config, a tools.jsonl line's
// "language"), by ISO 639-1 code: those Bleve ships stop words and a
// stemmer for (a Snowball stemmer, Portuguese's light one). The index
// package holds each one's analysis chain.
var Languages = map[string]string{
	"da": "Danish",
	"de": "German",
	"es": "Spanish",
	"fi": "Finnish",
	"fr": "French",
	"hu": "Hungarian",
	"it": "Italian",
	"nl": "Dutch",
	"no": "Norwegian",
	"pt": "Portuguese",
	"ro": "Romanian",
	"ru": "Russian",
	"sv": "Swedish",
	"tr": "Turkish",
}

// English is the language of every tool whose server names none, and the
// one every query is read in.
const English = "en"

// LanguageCodes are English's code and Languages', sorted: what a
// "language" may say.
func LanguageCodes() []string {
	codes := []string{English}
	for c := range Languages {
		codes = append(codes, c)
	}
	slices.Sort(codes)
	return codes
}

// LanguageName is the English name of a Tool.Language or a code of
// LanguageCodes: "English" for "" and English.
func LanguageName(code string) string {
	if code == "" || code == English {
		return "English"
	}
	return Languages[code]
}

// CanonicalLanguage is the Tool.Language of a server whose config says
// lang: "" for English ("" or "en"), the code itself for one of
// Languages, else an error that names the codes it may be: the one lang
// means when it is a language's English name, or a code in capitals or
// with a region ("German", "DE", "de-AT" → "de"), and, for Chinese,
// Japanese and Korean, that the keyword index reads them without one.
func CanonicalLanguage(lang string) (string, error) {
	switch {
	case lang == "" || lang == English:
		return "", nil
	case Languages[lang] != "":
		return lang, nil
	}
	var list []string
	for _, c := range LanguageCodes() {
		list = append(list, c+" ("+LanguageName(c)+")")
	}
	codes := strings.Join(list, ", ")
	l := strings.ToLower(strings.TrimSpace(lang))
	base, region := l, false
	if len(l) > 2 && (l[2] == '-' || l[2] == '_') {
		base, region = l[:2], true
	}
	switch base {
	case "zh", "ja", "ko":
		return "", fmt.Errorf("unknown language %q: Chinese, Japanese and Korean need no \"language\": leave it out "+
			"(the keyword index reads them in every server's tools: Chinese and Japanese in pairs of characters, Korean by its words); "+
			"the codes are for the languages it stems: %s", lang, codes)
	}
	code := ""
	if LanguageName(base) != "" {
		code = base
	}
	for _, c := range LanguageCodes() {
		if strings.EqualFold(l, LanguageName(c)) {
			code, region = c, false
		}
	}
	if code == "" {
		return "", fmt.Errorf("unknown language %q: use one of the codes %s", lang, codes)
	}
	why := LanguageName(code)
	if region {
		why += ": one stemmer for every region"
	}
	return "", fmt.Errorf("unknown language %q: write %q (%s), one of the codes %s", lang, code, why, codes)
}
