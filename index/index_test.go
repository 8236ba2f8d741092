package index

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"testing"

	"github.com/blevesearch/bleve/v2/analysis/analyzer/custom"
	"github.com/blevesearch/bleve/v2/registry"
	"github.com/google/go-cmp/cmp"
	"github.com/toolgate/toolgate/index/catalog"
)

func analyze(t *testing.T, filters []string, text string) []string {
	t.Helper()
	a, err := custom.AnalyzerConstructor(map[string]interface{}{
		"type":          custom.Name,
		"tokenizer":     identTokenizerName,
		"token_filters": toAny(filters),
	}, registry.NewCache())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, tok := range a.Analyze([]byte(text)) {
		out = append(out, string(tok.Term))
	}
	return out
}

func TestAnalyzer(t *testing.T) {
	split := []string{identSplitName, "to_lower"}
	tests := []struct {
		in      string
		filters []string
		want    []string
	}{
		{"list_directory", split, []string{"list", "directory", "list_directory"}},
		{"getUserID", split, []string{"get", "user", "id", "getuserid"}},
		{"read-file", split, []string{"read", "file", "read-file"}},
		{"azure__foundry_models_list", split, []string{"azure", "foundry", "models", "list", "azure__foundry_models_list"}},
		{"HTTPServer v2beta", split, []string{"http", "server", "httpserver", "v", "2", "beta", "v2beta"}},
		{"Lists the files.", split, []string{"lists", "the", "files"}},
		{"the user's files, (don't)", split, []string{"the", "user", "files", "dont"}},
		{"storage.blob list", split, []string{"storage", "blob", "storage.blob", "list"}},
		{"Lists the files in a directory", analyzerFilters, []string{"list", "file", "directori"}},
		{"list_directory", analyzerFilters, []string{"list", "directori", "list_directori"}},
		{"--force", split, []string{"force"}},
		{"", split, nil},
		// Chinese and Japanese have no spaces: their runs of ideographs and
		// kana are cut into overlapping bigrams (Bleve's cjk_bigram), so
		// "天気" in a query meets "…現在の天気と…" in a description; a
		// lone character stays whole. Other scripts' words stay whole.
		{"東京の天気", analyzerFilters, []string{"東京", "京の", "の天", "天気"}},
		{"文字コードはUTF-8を想定", analyzerFilters, []string{"文字", "字コ", "コー", "ード", "ドは", "utf", "8", "utf-8", "を想", "想定"}},
		{"翻译_文本", analyzerFilters, []string{"翻译", "文本"}},
		{"天", analyzerFilters, []string{"天"}},
		{"get天気", analyzerFilters, []string{"get", "天気"}},
		{"파일 읽기", analyzerFilters, []string{"파일", "읽기"}},
		// Full-width Latin and half-width kana as their usual forms
		// (cjk_width); a letter and its combining accent as one (NFC).
		{"ＳＴＲＡＳＳＥ", analyzerFilters, []string{"strass"}},
		{"ﾌｧｲﾙ", analyzerFilters, []string{"ファ", "ァイ", "イル"}},
		{"cafe\u0301 crème", analyzerFilters, []string{"café", "crème"}},
		// A vowel sign that takes a space of its own (Devanagari ा,
		// Tamil ு) is part of its word: फ़ाइल was cut in two and the
		// Tamil signs dropped.
		{"फ़ाइल पढ़ें", analyzerFilters, []string{"फ़ाइल", "पढ़ें"}},
		{"அனுப்பு செய்தி", analyzerFilters, []string{"அனுப்பு", "செய்தி"}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, analyze(t, tt.filters, tt.in)); diff != "" {
				t.Errorf("tokens of %q (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

func testTools() []catalog.Tool {
	return []catalog.Tool{
		{Server: "filesystem", Name: "list_directory", Description: "List the files and folders in a directory.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"Directory to list"}}}`)},
		{Server: "filesystem", Name: "read_file", Description: "Read the contents of a file."},
		{Server: "memory", Name: "create_entities", Description: "Create multiple new entities in the knowledge graph."},
		{Server: "memory", Name: "read_graph", Description: "Read the entire knowledge graph."},
		{Server: "my server", Name: "search & replace", Description: "Search text and replace it in a file."},
		{Server: "github", Name: "getPullRequest", Description: "Get details of a pull request."},
	}
}

// fakeEmbedder maps each text to a deterministic unit vector built from the
// words it contains (a bag of hashed words), and counts the texts it embeds.
type fakeEmbedder struct {
	id    string
	dim   int
	calls int
	texts int
}

func (f *fakeEmbedder) ModelID() string { return f.id }
func (f *fakeEmbedder) Dim() int        { return f.dim }
func (f *fakeEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	f.calls++
	f.texts += len(texts)
	out := make([][]float32, len(texts))
	for i, s := range texts {
		out[i] = fakeVector(s, f.dim)
	}
	return out, nil
}

func fakeVector(s string, dim int) []float32 {
	v := make([]float32, dim)
	for _, w := range analyzeText(s) {
		h := uint32(2166136261)
		for _, c := range []byte(w) {
			h = (h ^ uint32(c)) * 16777619
		}
		v[h%uint32(dim)]++
	}
	var n float64
	for _, x := range v {
		n += float64(x * x)
	}
	if n == 0 {
		v[0], n = 1, 1
	}
	for i := range v {
		v[i] /= float32(math.Sqrt(n))
	}
	return v
}

// toolVector is what Build makes of a tool with fakeVector: the
// normalised sum of its views' vectors.
func toolVector(tool catalog.Tool, dim int) []float32 {
	sum := make([]float64, dim)
	for _, v := range catalog.Views(tool) {
		for d, x := range fakeVector(v, dim) {
			sum[d] += float64(x)
		}
	}
	var n float64
	for _, x := range sum {
		n += x * x
	}
	out := make([]float32, dim)
	for d, x := range sum {
		out[d] = float32(x / math.Sqrt(n))
	}
	return out
}

func analyzeText(s string) []string {
	var out []string
	for _, tok := range (identTokenizer{}).Tokenize([]byte(s)) {
		out = append(out, string(tok.Term))
	}
	return out
}

func TestBuildKeywordNearest(t *testing.T) {
	ctx := context.Background()
	emb := &fakeEmbedder{id: "fake/1", dim: 64}
	ix, err := Build(ctx, testTools(), emb, &Options{BatchSize: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if ix.Len() != 6 || !ix.HasVectors() || ix.ModelID() != "fake/1" || ix.Dim() != 64 {
		t.Fatalf("Len %d HasVectors %v ModelID %q Dim %d", ix.Len(), ix.HasVectors(), ix.ModelID(), ix.Dim())
	}
	// Each tool's views, a text shared within a batch embedded once.
	wantTexts := 0
	for start := 0; start < len(ix.Tools()); start += 4 {
		seen := map[string]bool{}
		for _, tool := range ix.Tools()[start:min(start+4, ix.Len())] {
			for _, v := range catalog.Views(tool) {
				if !seen[v] {
					seen[v] = true
					wantTexts++
				}
			}
		}
	}
	if emb.calls != 2 || emb.texts != wantTexts {
		t.Errorf("embedder calls %d texts %d, want 2 batches of %d texts", emb.calls, emb.texts, wantTexts)
	}
	kw := []struct {
		query, server string
		wantTop       string
	}{
		{"list the files in a directory", "", "filesystem__list_directory"},
		{"store new entities in the knowledge graph", "", "memory__create_entities"},
		{"get pull request", "", "github__getPullRequest"},
		{"replace text", "", "my server__search & replace"},
		{"read", "memory", "memory__read_graph"},
		{"read", "filesystem", "filesystem__read_file"},
		{"list_directory", "", "filesystem__list_directory"},
	}
	for _, tt := range kw {
		t.Run("keyword/"+tt.query+"/"+tt.server, func(t *testing.T) {
			got, err := ix.Keyword(tt.query, 3, tt.server)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) == 0 || got[0].ID != tt.wantTop {
				t.Fatalf("top of %q = %v, want %s", tt.query, got, tt.wantTop)
			}
			for i := 1; i < len(got); i++ {
				if got[i].Score > got[i-1].Score {
					t.Errorf("not sorted: %v", got)
				}
			}
			if tt.server != "" {
				for _, h := range got {
					if s, _, _ := catalog.SplitID(h.ID); s != tt.server {
						t.Errorf("hit %s outside server %s", h.ID, tt.server)
					}
				}
			}
		})
	}

	// The server filter keeps raw scores.
	all, _ := ix.Keyword("read", 10, "")
	mem, _ := ix.Keyword("read", 10, "memory")
	for _, m := range mem {
		for _, a := range all {
			if a.ID == m.ID && math.Abs(a.Score-m.Score) > 1e-9 {
				t.Errorf("%s: filtered score %v != unfiltered %v", m.ID, m.Score, a.Score)
			}
		}
	}
	if got, _ := ix.Keyword("   ", 5, ""); len(got) != 0 {
		t.Errorf("blank query: %v", got)
	}
	if got, _ := ix.Keyword("read", 5, "nosuch"); len(got) != 0 {
		t.Errorf("unknown server: %v", got)
	}

	// Nearest: a tool's own vector (its views' mean) is its own nearest
	// neighbour.
	for _, tool := range testTools() {
		got := ix.Nearest(toolVector(tool, 64), 2, "")
		if len(got) != 2 || got[0].ID != tool.ID() || math.Abs(got[0].Score-1) > 1e-5 || got[1].Score > got[0].Score {
			t.Errorf("Nearest(%s) = %v", tool.ID(), got)
		}
		got = ix.Nearest(toolVector(tool, 64), 10, "memory")
		if len(got) != 2 {
			t.Errorf("Nearest(server memory) = %v, want the 2 memory tools", got)
		}
	}
	if got := ix.Nearest(make([]float32, 3), 2, ""); got != nil {
		t.Errorf("wrong dimension: %v", got)
	}
	if tool, ok := ix.Tool("my server__search & replace"); !ok || tool.Name != "search & replace" {
		t.Errorf("Tool(odd id) = %v %v", tool, ok)
	}
	if _, ok := ix.Tool("nope__x"); ok {
		t.Error("Tool(nope) found")
	}
}

func TestBuildBM25Only(t *testing.T) {
	ix, err := Build(context.Background(), testTools(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if ix.HasVectors() || ix.ModelID() != "" || ix.Nearest(make([]float32, 64), 3, "") != nil {
		t.Error("BM25-only index claims vectors")
	}
	if err := ix.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestBuildRejectsDuplicates(t *testing.T) {
	tools := append(testTools(), testTools()[0])
	if _, err := Build(context.Background(), tools, nil, nil); err == nil {
		t.Error("duplicate IDs accepted")
	}
}

func TestFingerprint(t *testing.T) {
	a := testTools()
	b := testTools()
	b[0], b[1] = b[1], b[0]
	b[2].InputSchema = json.RawMessage(" null ")
	a[2].InputSchema = nil
	if catalog.Fingerprint(a) != catalog.Fingerprint(b) {
		t.Error("fingerprint depends on order or schema whitespace")
	}
	b[3].Description += "!"
	if catalog.Fingerprint(a) == catalog.Fingerprint(b) {
		t.Error("fingerprint ignores a description change")
	}
}

func TestDocumentText(t *testing.T) {
	got := catalog.DocumentText(testTools()[0])
	want := "list directory. List the files and folders in a directory."
	if got != want {
		t.Errorf("DocumentText = %q, want %q", got, want)
	}
}

func ExampleIndex_Keyword() {
	ix, _ := Build(context.Background(), testTools(), nil, nil)
	defer ix.Close()
	hits, _ := ix.Keyword("list the files in a directory", 1, "")
	fmt.Println(hits[0].ID)
	// Output: filesystem__list_directory
}

// syntheticTools makes n distinct tools over 50 servers with small schemas.
func syntheticTools(n int) []catalog.Tool {
	verbs := []string{"list", "get", "create", "delete", "update", "search", "read", "write", "send", "query"}
	nouns := []string{"file", "issue", "user", "message", "record", "bucket", "table", "event", "invoice", "page", "image", "repository"}
	tools := make([]catalog.Tool, n)
	for i := range tools {
		v, o := verbs[i%len(verbs)], nouns[(i/len(verbs))%len(nouns)]
		tools[i] = catalog.Tool{
			Server:      fmt.Sprintf("server%02d", i%50),
			Name:        fmt.Sprintf("%s_%s_%d", v, o, i),
			Description: fmt.Sprintf("%s a %s in workspace %d. Returns the %s with its id, owner and timestamps.", v, o, i%97, o),
			InputSchema: json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{"id":{"type":"string","description":"The %s id"},"limit":{"type":"integer","description":"Maximum results"}}}`, o)),
		}
	}
	return tools
}
