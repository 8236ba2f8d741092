package gateway

import (
	"strings"
	"testing"

	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/search"
)

// noMatch tells an agent to rephrase in the language of the closest
// tools' descriptions, which it reads in the answer: to a catalog in
// Japanese, Arabic or German it said "in English, the tools' language",
// which was not so (and the keyword side reads their own words, not
// English ones). To an English catalog the descriptions say English.
func TestNoMatchRephraseInTheToolsLanguage(t *testing.T) {
	for _, tt := range []struct {
		descs []string
		want  string
	}{
		{[]string{"指定した都市の天気を取得します", "将文本翻译成另一种语言"}, "Rephrase the task in other words, in the language of the tools' descriptions below. The closest"},
		{[]string{"ترجمة النص من العربية إلى الإنجليزية", "שולח הודעה לערוץ הצוות"}, "Rephrase the task in other words, in the language of the tools' descriptions below. The closest"},
		{[]string{"Read a file, e.g. café.txt", "指定した都市の天気"}, "Rephrase the task in other words, in the language of the tools' descriptions below. The closest"},
		{[]string{"Liest eine Datei aus dem Dateisystem", "Crée une facture"}, "Rephrase the task in other words, in the language of the tools' descriptions below. The closest"},
	} {
		g, fs := newTestGateway(t, nil)
		var tools []catalog.Tool
		for i, d := range tt.descs {
			tools = append(tools, catalog.Tool{Server: "intl", Name: string(rune('a' + i)), Description: d})
		}
		fs.search = func(q search.Query) (search.Result, error) {
			var hits []search.Hit
			for _, tl := range tools {
				hits = append(hits, search.Hit{Tool: tl, Score: 0.5, Confidence: 0.02})
			}
			return search.Result{Hits: hits, Mode: search.ModeHybrid, NoMatch: true}, nil
		}
		res := call(t, connect(t, g), SearchToolName, map[string]any{"query": "🚀"})
		if txt := text(res); !strings.Contains(txt, tt.want) {
			t.Errorf("closest tools %q: the text\n%s\nwant %q", tt.descs, txt, tt.want)
		}
	}
}

// A tool name written as none of the catalog's is read nearest first: in
// another case only, then caselessly. With Straße and STRASSE side by
// side, "intl__straße" runs Straße (caselessly it was both, and the call
// was refused as ambiguous), "intl.STRASSE" STRASSE, and the name as
// written runs that tool.
func TestExecuteNameNearestFirst(t *testing.T) {
	g, fs := newTestGateway(t, nil)
	fs.tools = []catalog.Tool{{Server: "intl", Name: "Straße"}, {Server: "intl", Name: "STRASSE"}}
	cs := connect(t, g)
	for name, want := range map[string]string{
		"intl__Straße":  "intl/Straße",
		"intl__STRASSE": "intl/STRASSE",
		"intl__straße":  "intl/Straße",
		"intl__strasse": "intl/STRASSE",
		"intl.straße":   "intl/Straße",
		"INTL:STRASSE":  "intl/STRASSE",
	} {
		res := call(t, cs, ExecuteToolName, map[string]any{"name": name})
		if txt := text(res); res.IsError || txt != want {
			t.Errorf("execute_tool %q: %q (isError %v), want %q run", name, txt, res.IsError, want)
		}
	}
}
