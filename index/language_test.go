package index

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/index/catalog"
)

// teamCatalog is a German team's and a French team's accounting tools (as
// cmd/toolgate/testdata/catalogs.mjs serves them) beside English ones,
// each server's tools in lang[server] ("" = English).
func teamCatalog(lang map[string]string) []catalog.Tool {
	var tools []catalog.Tool
	add := func(server string, pairs ...string) {
		for i := 0; i < len(pairs); i += 2 {
			tools = append(tools, catalog.Tool{Server: server, Name: pairs[i], Description: pairs[i+1], Language: lang[server]})
		}
	}
	add("buchhaltung",
		"rechnung_anlegen", "Legt eine neue Rechnung für einen Kunden an.",
		"angebot_senden", "Sendet ein Angebot per E-Mail an den Kunden.",
		"kunde_suchen", "Sucht einen Kunden nach Name oder Kundennummer.",
		"zahlung_buchen", "Bucht einen Zahlungseingang auf ein Konto.",
		"mahnung_erstellen", "Erstellt eine Mahnung für eine überfällige Zahlung.",
		"bericht_exportieren", "Exportiert den Monatsbericht als PDF-Datei.",
		"lieferschein_drucken", "Druckt den Lieferschein einer Bestellung.")
	add("compta",
		"creer_facture", "Crée une facture pour un client.",
		"envoyer_devis", "Envoie un devis par courriel au client.",
		"chercher_client", "Cherche un client par son nom ou son numéro.",
		"enregistrer_paiement", "Enregistre le paiement reçu sur un compte bancaire.",
		"relancer_impaye", "Relance les clients dont les factures sont impayées.",
		"planifier_reunion", "Planifie une réunion dans l'agenda de l'équipe.")
	add("files",
		"read_file", "Read the complete contents of a file from the file system.",
		"create_directory", "Create a new directory or ensure a directory exists.",
		"search_files", "Search for files matching a pattern.")
	return tools
}

// languageQueries are what a German or French user types: plurals,
// inflected verbs, articles and stop words of their language.
var languageQueries = []struct{ query, want string }{
	{"Rechnungen", "buchhaltung__rechnung_anlegen"},
	{"Zahlungen buchen", "buchhaltung__zahlung_buchen"},
	{"Zahlungseingänge verbuchen", "buchhaltung__zahlung_buchen"},
	{"Mahnungen für überfällige Zahlungen", "buchhaltung__mahnung_erstellen"},
	{"Bestellungen", "buchhaltung__lieferschein_drucken"},
	{"Angebote senden", "buchhaltung__angebot_senden"},
	{"créer des factures", "compta__creer_facture"},
	{"envoyer les devis", "compta__envoyer_devis"},
	{"paiements enregistrés", "compta__enregistrer_paiement"},
	{"réunions de l'équipe", "compta__planifier_reunion"},
	{"read a file", "files__read_file"},
	{"create directories", "files__create_directory"},
}

// With each server's language, the keyword side reads its tools' words
// with that language's stop words and stemmer and every query in it too:
// "Rechnungen" finds the tool that "Legt eine neue Rechnung … an", "créer
// des factures" the one that "Crée une facture". Read with the English
// rules (no language) the German plural matched nothing, nor did "créer"
// "Crée", and "des", "les", "eine" counted as words.
func TestServerLanguageStemsToolsAndQueries(t *testing.T) {
	ctx := context.Background()
	ix, err := Build(ctx, teamCatalog(map[string]string{"buchhaltung": "de", "compta": "fr"}), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	for _, q := range languageQueries {
		r, err := ix.KeywordAll(q.query, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		top := r.Top(3)
		if len(top) == 0 || top[0].ID != q.want {
			t.Errorf("%q: keyword top %v, want %s first", q.query, top, q.want)
		}
		// "verbuchen" is not "Bucht": a prefix no stemmer takes off.
		if c := r.Coverage(q.want); c < 0.99 && q.query != "Zahlungseingänge verbuchen" {
			terms, _, _ := ix.Matched(q.query, nil)
			t.Errorf("%q: %s holds %.2f of the query (terms %v), want all of it", q.query, q.want, c, terms)
		}
	}

	// A learned query is read in its tool's language, as its fields are:
	// "Gutschrift" meets the learned "Gutschriften ausstellen".
	extra, err := ix.NewExtraField(map[string]string{"buchhaltung__rechnung_anlegen": "Gutschriften ausstellen"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := ix.KeywordAll("Gutschrift", "", extra)
	if err != nil {
		t.Fatal(err)
	}
	if top := r.Top(1); len(top) != 1 || top[0].ID != "buchhaltung__rechnung_anlegen" {
		t.Errorf("learned German query: %q finds %v", "Gutschrift", top)
	}

	// The English rules, for the record: the same catalog and queries
	// without languages.
	en, err := Build(ctx, teamCatalog(nil), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer en.Close()
	for _, q := range []string{"Rechnungen", "Bestellungen", "créer des factures"} {
		r, err := en.KeywordAll(q, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		want := ""
		for _, lq := range languageQueries {
			if lq.query == q {
				want = lq.want
			}
		}
		if c := r.Coverage(want); c > 0.7 {
			t.Errorf("English rules: %q covers %.2f of %s; the test's premise (English rules miss it) no longer holds", q, c, want)
		}
	}
}

// A query is read in English and in each language of the catalog, a
// word's forms one group; a stop word of any of them asks for nothing.
func TestQueryGroups(t *testing.T) {
	for _, tt := range []struct {
		query string
		langs []string
		want  [][]string
	}{
		{"Rechnungen für die Kunden", []string{"de"}, [][]string{{"rechnungen", "rechnung"}, {"kunden", "kund"}}},
		{"créer des factures", []string{"fr"}, [][]string{{"créer", "cré"}, {"factur"}}},
		{"L'équipe", []string{"fr"}, [][]string{{"léquip", "équip"}}},
		{"d'une commande", []string{"fr"}, [][]string{{"command"}}}, // une: a French stop word
		{"list_directory files", []string{"de", "fr"}, [][]string{{"list"}, {"directori", "directory"}, {"list_directori", "list_directory"}, {"file", "fil"}}},
	} {
		got := queryGroups(tt.query, tt.langs)
		if !slices.EqualFunc(got, tt.want, slices.Equal[[]string]) {
			t.Errorf("queryGroups(%q, %v) = %q, want %q", tt.query, tt.langs, got, tt.want)
		}
	}
}

// An index of tools in other languages keeps them on disk: its manifest
// names each server's language and the analysis of each, an index opened
// reads queries in them, and dropping a server's language rebuilds the
// keyword index whole with the English rules. An index of English tools
// only has the analyzer signature it had before languages: the upgrade
// does not rebuild it.
func TestServerLanguageOnDisk(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	ix, _, err := Ensure(ctx, dir, teamCatalog(nil), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ix.Close()
	m := readManifestT(t, dir)
	if m.Analyzer != strings.Join([]string{nfcName, "cjk_width", "cjk_bigram", identSplitName, "to_lower", "stop_en", "stemmer_porter"}, ",") || m.Languages != nil {
		t.Fatalf("English-only manifest: analyzer %q, languages %v: want the analyzer of before languages, none", m.Analyzer, m.Languages)
	}

	langs := map[string]string{"buchhaltung": "de", "compta": "fr"}
	ix, rep, err := EnsureReport(ctx, dir, teamCatalog(langs), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Before != StateCatalogChanged || rep.Incremental || rep.Changed != 13 {
		t.Errorf("languages set: before %q, incremental %v, changed %d; want a full build of a changed catalog, 13 tools changed", rep.Before, rep.Incremental, rep.Changed)
	}
	ix.Close()
	m = readManifestT(t, dir)
	if !strings.HasSuffix(m.Analyzer, ";de=toolgate_ident_split,to_lower,stop_de,stemmer_de_snowball;fr=toolgate_elision_fr,toolgate_ident_split,to_lower,stop_fr,stemmer_fr_snowball") || m.Languages["buchhaltung"] != "de" || m.Languages["compta"] != "fr" || len(m.Languages) != 2 {
		t.Errorf("manifest: analyzer %q, languages %v", m.Analyzer, m.Languages)
	}

	// Opened again (a gateway's warm start, toolgate search): the same.
	ix, err = Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if tool, _ := ix.Tool("compta__creer_facture"); tool.Language != "fr" {
		t.Errorf("opened index: compta's tool has language %q, want fr", tool.Language)
	}
	for _, q := range languageQueries {
		top, err := ix.Keyword(q.query, 1, "")
		if err != nil {
			t.Fatal(err)
		}
		if len(top) == 0 || top[0].ID != q.want {
			t.Errorf("opened index: %q: keyword top %v, want %s", q.query, top, q.want)
		}
	}
	ix.Close()
	// The same catalog is up to date.
	ix, st, err := Ensure(ctx, dir, teamCatalog(langs), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ix.Close()
	if st != StateUpToDate {
		t.Errorf("same catalog with languages: %q, want up to date", st)
	}

	// One server's tools changed, the languages kept: updated in place.
	more := append(teamCatalog(langs), catalog.Tool{Server: "buchhaltung", Name: "termin_planen", Description: "Plant einen Termin im Teamkalender.", Language: "de"})
	ix, rep, err = EnsureReport(ctx, dir, more, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Incremental {
		t.Errorf("a tool added, languages kept: not incremental")
	}
	if top, _ := ix.Keyword("Termine planen", 1, ""); len(top) == 0 || top[0].ID != "buchhaltung__termin_planen" {
		t.Errorf("updated index: %q: keyword top %v", "Termine planen", top)
	}
	ix.Close()

	// German dropped: rebuilt whole, with the English rules.
	_, _, err = EnsureReport(ctx, dir, append(teamCatalog(map[string]string{"compta": "fr"}), more[len(more)-1:]...), nil, nil)
	if err == nil {
		t.Fatalf("server buchhaltung with tools in two languages was indexed")
	}
	if !strings.Contains(err.Error(), `server "buchhaltung" has tools in English and in German`) {
		t.Errorf("two languages on one server: %v", err)
	}
	ix, rep, err = EnsureReport(ctx, dir, teamCatalog(map[string]string{"compta": "fr"}), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if rep.Incremental {
		t.Errorf("German dropped: updated in place, want a full build")
	}
	if top, _ := ix.Keyword("Rechnungen", 1, ""); len(top) != 0 {
		t.Errorf("German dropped: %q still finds %v", "Rechnungen", top)
	}
	if top, _ := ix.Keyword("créer des factures", 1, ""); len(top) == 0 || top[0].ID != "compta__creer_facture" {
		t.Errorf("German dropped: French no longer read: %v", top)
	}
}

func readManifestT(t *testing.T, dir string) Manifest {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, manifestFile))
	if err != nil {
		t.Fatal(err)
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// Every language of catalog.Languages has its analysis here, and only
// those.
func TestLanguagesHaveChains(t *testing.T) {
	for code := range catalog.Languages {
		if len(languageFilters[code].post) == 0 {
			t.Errorf("language %q (%s) has no filters", code, catalog.Languages[code])
		}
		if g := queryGroups("test", []string{code}); len(g) == 0 {
			t.Errorf("language %q reads no term of %q", code, "test")
		}
	}
	for code := range languageFilters {
		if catalog.Languages[code] == "" {
			t.Errorf("filters of language %q, which catalog.Languages lacks", code)
		}
	}
}

// The mapping of an index of English tools only is the one of before
// languages, byte for byte (its JSON's sha256 as that toolgate wrote it):
// a toolgate of before opens it at a rollback, warm, and updates it in
// place. With a language the mapping holds its analyzer and document type.
func TestEnglishMappingAsBefore(t *testing.T) {
	m, err := newMapping(nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprintf("%x", sha256.Sum256(b)); got != "8639077e6a5d0ad03fa7033de22fb151ec85aacf7fe0c6a37c89ba77cee621db" {
		t.Errorf("English-only mapping changed (sha256 %s):\n%s", got, b)
	}
	m, err = newMapping([]string{"de"})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ = json.Marshal(m); !strings.Contains(string(b), `"toolgate_de"`) || !strings.Contains(string(b), `"type_field":"lang"`) || strings.Contains(string(b), `"toolgate_fr"`) {
		t.Errorf("mapping of German tools:\n%s", b)
	}
}
