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

// CanonicalLanguage is the Tool.Language of a server whose config says
// lang: "" for English ("" or "en"), the code itself for one of
// Languages, else an error that names the codes it may be.
func CanonicalLanguage(lang string) (string, error) {
	switch {
	case lang == "" || lang == English:
		return "", nil
	case Languages[lang] != "":
		return lang, nil
	}
	var list []string
	for _, c := range LanguageCodes() {
		name := "English"
		if c != English {
			name = Languages[c]
		}
		list = append(list, c+" ("+name+")")
	}
	hint := ""
	if l := strings.ToLower(strings.TrimSpace(lang)); l != lang && (l == English || Languages[l] != "") {
		hint = fmt.Sprintf(" (%q)", l)
	} else if len(lang) > 2 && (lang[2] == '-' || lang[2] == '_') {
		if l := strings.ToLower(lang[:2]); l == English || Languages[l] != "" {
			hint = fmt.Sprintf(" (%q: one stemmer for every region)", l)
		}
	}
	return "", fmt.Errorf("unknown language %q: use one of the codes%s %s", lang, hint, strings.Join(list, ", "))
}
