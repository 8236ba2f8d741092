package search_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/index/indextest"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/search"
)

// Every tool's bare name and its server__tool ID rank that tool first (a
// bare name on several servers: those tools first), in every mode, on the
// dev catalogs and on a synthetic catalog where names repeat across
// servers. The vectors are the hash stand-in: exact matches do not depend
// on them.
func TestExactNames(t *testing.T) {
	sets := map[string][]catalog.Tool{"synthetic": indextest.Catalog(1500, indextest.Seed)}
	for _, name := range []string{"azure-mcp", "metatool"} {
		path := filepath.Join(benchDir(), name, "tools.jsonl")
		if _, err := os.Stat(path); err != nil {
			testenv.Require(t, fmt.Errorf("bench data missing (set TOOLGATE_BENCH_DIR): %w", err))
		}
		tools, err := catalog.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		sets[name] = tools
	}
	for name, tools := range sets {
		t.Run(name, func(t *testing.T) {
			qs := search.ExactNameQueries(tools)
			e := search.New(build(t, tools, &hashEmbedder{}), &hashEmbedder{}, nil)
			defer e.Close()
			for _, mode := range search.Modes {
				rep, err := search.Evaluate(context.Background(), e, qs, mode)
				if err != nil {
					t.Fatal(err)
				}
				if rep.Metrics.Hit1 != 1 {
					t.Errorf("%s: exact-name Hit@1 %.4f over %d queries, want 1", mode, rep.Metrics.Hit1, len(qs))
				}
			}
			// A bare name on several servers brings all of them first.
			for _, q := range qs {
				if len(q.Relevant) < 2 {
					continue
				}
				res, err := e.Search(context.Background(), search.Query{Text: q.Query, Limit: len(q.Relevant)})
				if err != nil {
					t.Fatal(err)
				}
				got := map[string]bool{}
				for _, h := range res.Hits {
					got[h.Tool.ID()] = h.Exact
				}
				for _, id := range q.Relevant {
					if !got[id] {
						t.Fatalf("%q: %s not among the first %d (exact)", q.Query, id, len(q.Relevant))
					}
				}
			}
		})
	}
}

// Names compare by their words, whatever the case convention, inside a
// longer query too; a one-word name only as the whole query.
func TestExactNameForms(t *testing.T) {
	tools := []catalog.Tool{
		{Server: "fs", Name: "list_directory", Description: "List the entries of a folder."},
		{Server: "fs", Name: "read_file", Description: "Read a file."},
		{Server: "github", Name: "create_issue", Description: "Open an issue."},
		{Server: "gitlab", Name: "create_issue", Description: "Open an issue in GitLab."},
		{Server: "web", Name: "search", Description: "Search the web."},
		{Server: "web", Name: "fetch", Description: "Fetch a URL and read a file from it."},
	}
	e := search.New(build(t, tools, &hashEmbedder{}), &hashEmbedder{}, nil)
	defer e.Close()
	for _, tt := range []struct {
		query string
		want  []string // the exact hits, first
	}{
		{"list_directory", []string{"fs__list_directory"}},
		{"LIST-DIRECTORY", []string{"fs__list_directory"}},
		{"listDirectory", []string{"fs__list_directory"}},
		{"ListDirectory", []string{"fs__list_directory"}},
		{"list.directory", []string{"fs__list_directory"}},
		{"please call `list_directory` on /tmp", []string{"fs__list_directory"}},
		{"what does fs__read_file take?", []string{"fs__read_file"}},
		{"FS__ReadFile", []string{"fs__read_file"}},
		{"create_issue", []string{"github__create_issue", "gitlab__create_issue"}},
		{"gitlab__create_issue", []string{"gitlab__create_issue"}},
		{"search", []string{"web__search"}},
		{"search for a file", nil}, // a one-word name inside a sentence is a word
		{"list directory", nil},    // natural words, not an identifier
	} {
		res, err := e.Search(context.Background(), search.Query{Text: tt.query, Limit: 6})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, h := range res.Hits {
			if h.Exact {
				got = append(got, h.Tool.ID())
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(tt.want) && !(len(got) == 2 && len(tt.want) == 2 && got[0] == tt.want[1] && got[1] == tt.want[0]) {
			t.Errorf("%q: exact hits %v, want %v", tt.query, got, tt.want)
		}
		for i, id := range got {
			if res.Hits[i].Tool.ID() != id {
				t.Errorf("%q: exact hit %s not at rank %d", tt.query, id, i+1)
			}
		}
	}
}

// Names outside ASCII compare as Unicode says two names are one: in
// either normal form (café composed or decomposed, as a Mac's clipboard
// gives it), with full case folding (STRASSE_SUCHEN is straße_suchen),
// and full-width letters as the letters they stand for (what a Japanese
// input method types). A name in another script is one word.
func TestExactNamesBeyondASCII(t *testing.T) {
	tools := []catalog.Tool{
		{Server: "intl", Name: "café", Description: "Commande un café."},
		{Server: "intl", Name: "straße_suchen", Description: "Sucht eine Straße."},
		{Server: "intl", Name: "天気を取得", Description: "指定した都市の天気を取得します"},
		{Server: "intl", Name: "get_weather", Description: "Weather of a city."},
		{Server: "intl", Name: "ıslak_zemin", Description: "Islak zemin uyarısı."},
	}
	e := search.New(build(t, tools, &hashEmbedder{}), &hashEmbedder{}, nil)
	defer e.Close()
	for _, tt := range []struct {
		query string
		want  []string
	}{
		{"café", []string{"intl__café"}},
		{"cafe\u0301", []string{"intl__café"}},
		{"CAFÉ", []string{"intl__café"}},
		{"intl__cafe\u0301", []string{"intl__café"}},
		{"straße_suchen", []string{"intl__straße_suchen"}},
		{"STRASSE_SUCHEN", []string{"intl__straße_suchen"}},
		{"strasse_suchen", []string{"intl__straße_suchen"}},
		{"天気を取得", []string{"intl__天気を取得"}},
		{"ｇｅｔ＿ｗｅａｔｈｅｒ", []string{"intl__get_weather"}},
		{"ＧｅｔＷｅａｔｈｅｒ", []string{"intl__get_weather"}},
		{"ıslak_zemin", []string{"intl__ıslak_zemin"}},
		{"islak_zemin", nil}, // ı is not i: another letter, as Unicode folds it
		{"cafe", nil},        // nor is e é
	} {
		res, err := e.Search(context.Background(), search.Query{Text: tt.query, Limit: 5})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, h := range res.Hits {
			if h.Exact {
				got = append(got, h.Tool.ID())
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(tt.want) {
			t.Errorf("%q: exact hits %v, want %v", tt.query, got, tt.want)
		}
	}
}

// Two tools of one server whose names are one name caselessly (Straße
// and STRASSE, café composed and decomposed): the name written byte for
// byte as one of them ranks that one first, as an ID and as a bare name.
func TestExactNameWrittenAsIsWins(t *testing.T) {
	tools := []catalog.Tool{
		{Server: "intl", Name: "straße", Description: "Sucht eine Straße."},
		{Server: "intl", Name: "STRASSE", Description: "Findet eine Strasse."},
		{Server: "intl", Name: "café", Description: "Commande un café."},
		{Server: "intl", Name: "cafe\u0301", Description: "Commande un autre café."},
	}
	e := search.New(build(t, tools, &hashEmbedder{}), &hashEmbedder{}, nil)
	defer e.Close()
	for _, q := range []string{"intl__straße", "intl__STRASSE", "straße", "STRASSE", "intl__café", "intl__cafe\u0301", "café", "cafe\u0301"} {
		res, err := e.Search(context.Background(), search.Query{Text: q, Limit: 5})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Hits) == 0 || res.Hits[0].Tool.Name != strings.TrimPrefix(q, "intl__") || !res.Hits[0].Exact {
			var got []string
			for _, h := range res.Hits {
				got = append(got, fmt.Sprintf("%s(exact=%v)", h.Tool.ID(), h.Exact))
			}
			t.Errorf("%q: hits %v, want the tool named so first", q, got)
		}
	}
}
