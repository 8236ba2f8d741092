package catalog

import (
	"strings"
	"testing"
)

// A tools.jsonl line's "language" is the tool's (en or absent: English,
// ""), and a code toolgate does not stem is an error naming the tool. A
// catalog's fingerprint without languages is the one it had before them.
func TestJSONLLanguage(t *testing.T) {
	tools, err := ReadJSONL(strings.NewReader(`{"server": "b", "name": "rechnung_anlegen", "language": "de"}
{"server": "e", "name": "read", "language": "en"}
{"server": "e", "name": "write"}
`), "tools.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if tools[0].Language != "de" || tools[1].Language != "" || tools[2].Language != "" {
		t.Errorf("languages %q %q %q, want de, English, English", tools[0].Language, tools[1].Language, tools[2].Language)
	}
	_, err = ReadJSONL(strings.NewReader(`{"server": "b", "name": "x", "language": "klingon"}`), "tools.jsonl")
	if err == nil || !strings.Contains(err.Error(), `tools.jsonl:1: "language" of "b__x": unknown language "klingon": use one of the codes`) {
		t.Errorf("unknown language: %v", err)
	}
	// A server's lines in two languages: said with both lines, as the
	// index said it later with the server's name alone.
	_, err = ReadJSONL(strings.NewReader(`{"server": "b", "name": "x", "language": "de"}
{"server": "c", "name": "y", "language": "fr"}
{"server": "b", "name": "z", "language": "en"}
`), "tools.jsonl")
	if err == nil || !strings.Contains(err.Error(), `tools.jsonl:3: "b__z" is in English, but line 1 has server "b"'s tools in German: a server's tools are in one language`) {
		t.Errorf("one server in two languages: %v", err)
	}
	plain := []Tool{{Server: "e", Name: "read", Description: "Read a file."}}
	withDE := []Tool{{Server: "e", Name: "read", Description: "Read a file.", Language: "de"}}
	// As the toolgate of before languages computed it: an index of it is
	// up to date after the upgrade.
	if got := Fingerprint(plain); got != "08d666008ad5ce0b90c4c65d0f21dfb34408ae22fe2b92e1a5a24fd28906f709" {
		t.Errorf("fingerprint of a catalog without languages %s, not the one of before", got)
	}
	if Fingerprint(plain) == Fingerprint(withDE) {
		t.Errorf("a tool's language does not change the catalog's fingerprint")
	}
}

// TestUnknownLanguageNamesTheCode: a value that means one of the codes (a
// language's English name, the code in capitals or with a region) is told
// the code to write, and Chinese, Japanese or Korean, which every server's
// text is read in without a "language", is told to leave it out.
func TestUnknownLanguageNamesTheCode(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"german", `unknown language "german": write "de" (German), one of the codes da (Danish), de (German), en (English)`},
		{"French", `unknown language "French": write "fr" (French), one of the codes`},
		{"English", `unknown language "English": write "en" (English), one of the codes`},
		{"DE", `unknown language "DE": write "de" (German), one of the codes`},
		{"fr-CA", `unknown language "fr-CA": write "fr" (French: one stemmer for every region), one of the codes`},
		{"pt_BR", `unknown language "pt_BR": write "pt" (Portuguese: one stemmer for every region), one of the codes`},
		{"ja", `unknown language "ja": Chinese, Japanese and Korean need no "language": leave it out (the keyword index reads them in every server's tools: Chinese and Japanese in pairs of characters, Korean by its words); the codes are for the languages it stems: da (Danish)`},
		{"zh-CN", `unknown language "zh-CN": Chinese, Japanese and Korean need no "language": leave it out`},
		{"klingon", `unknown language "klingon": use one of the codes da (Danish)`},
	} {
		_, err := CanonicalLanguage(tc.in)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("CanonicalLanguage(%q) = %v\nwant it to start %q", tc.in, err, tc.want)
		}
	}
}
