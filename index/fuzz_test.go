package index

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/toolgate/toolgate/index/catalog"
)

// FuzzAnalyzer: any text (tool names and descriptions come from backends)
// analyzes without panicking into non-empty tokens that lie inside it.
func FuzzAnalyzer(f *testing.F) {
	for _, s := range []string{"list_directory", "getUserID", "read-file", "azure__foundry_models_list", "user's ‘files’", "--x--", "a.b.c", "日本語_テキスト", "\xff\xfe", "HTTPServer2Go"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		toks := identTokenizer{}.Tokenize([]byte(s))
		for _, tok := range toks {
			if len(tok.Term) == 0 || tok.Start < 0 || tok.End > len(s) || tok.Start >= tok.End {
				t.Fatalf("bad token %v in %q", tok, s)
			}
		}
		for _, tok := range (identSplitFilter{}).Filter(toks) {
			if len(tok.Term) == 0 {
				t.Fatalf("empty token from %q", s)
			}
		}
	})
}

// FuzzCatalog: encode/decode round-trips, and garbage never panics.
func FuzzCatalog(f *testing.F) {
	f.Add("s", "n", "", "d", []byte(`{"type":"object"}`), []byte(`{"readOnlyHint":true}`), []byte(nil))
	f.Add("my server", "search & replace", "T", "", []byte(nil), []byte(nil), []byte(`{"type":"object"}`))
	f.Fuzz(func(t *testing.T, server, name, title, desc string, schema, annotations, output []byte) {
		in := []catalog.Tool{{Server: server, Name: name, Title: title, Description: desc, InputSchema: schema, Annotations: annotations, OutputSchema: output}, {Server: "x", Name: "y"}}
		if len(schema) == 0 {
			in[0].InputSchema = nil
		}
		if len(annotations) == 0 {
			in[0].Annotations = nil
		}
		if len(output) == 0 {
			in[0].OutputSchema = nil
		}
		b := encodeCatalog(in)
		out, err := decodeCatalog(b)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(in, out); diff != "" {
			t.Fatalf("round trip (-in +out):\n%s", diff)
		}
		_, _ = decodeCatalog(schema)
		_, _ = decodeCatalog(append([]byte(catalogMagic), schema...))
		_, _ = decodeCatalog(b[:len(b)/2])
	})
}
