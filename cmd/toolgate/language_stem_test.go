package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/gateway/live"
	"github.com/toolgate/toolgate/internal/testenv"
)

// teamConfig is a config of a German team's and a French team's servers
// (testdata/catalogs.mjs de and fr), with "language" on each entry when
// withLanguage.
func teamConfig(t *testing.T, path string, withLanguage bool) {
	t.Helper()
	root := repoRoot(t)
	if _, err := os.Stat(filepath.Join(root, "examples", "servers", "node_modules", "@modelcontextprotocol", "sdk")); err != nil {
		testenv.Missing(t, "the TypeScript SDK is not installed in examples/servers/node_modules (make deps-servers)")
	}
	script := filepath.Join(root, "cmd", "toolgate", "testdata", "catalogs.mjs")
	entry := func(lang string) map[string]any {
		e := map[string]any{"command": "node", "args": []string{script, lang}}
		if withLanguage {
			e["language"] = lang
		}
		return e
	}
	b, err := json.Marshal(map[string]any{"mcpServers": map[string]any{"buchhaltung": entry("de"), "compta": entry("fr")}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// What a German or French user types, and the tool each means.
var teamQueries = []struct{ query, want string }{
	{"Rechnungen", "buchhaltung__rechnung_anlegen"},
	{"Zahlungen buchen", "buchhaltung__zahlung_buchen"},
	{"Zahlungseingänge verbuchen", "buchhaltung__zahlung_buchen"},
	{"Mahnungen für überfällige Zahlungen", "buchhaltung__mahnung_erstellen"},
	{"Bestellungen", "buchhaltung__lieferschein_drucken"},
	{"créer des factures", "compta__creer_facture"},
	{"paiements enregistrés", "compta__enregistrer_paiement"},
	{"réunions de l'équipe", "compta__planifier_reunion"},
}

// A German and a French team's servers behind a real gateway (BM25, the
// side that carries such catalogs: the vector model is English): read
// with English rules, "Rechnungen" matched no word of "Legt eine neue
// Rechnung … an" and "créer des factures" none of "Crée une facture"
// but "factur". With "language" on each server entry (a reload, applied
// without restarting the servers), each query's tool is first and holds
// its words; a restart on the same data folder answers so at once, from
// the index it starts warm from.
func TestServerLanguageInConfig(t *testing.T) {
	dataDir := t.TempDir()
	cfg := filepath.Join(t.TempDir(), "toolgate.json")
	teamConfig(t, cfg, false)
	addr, _, stop := startGatewayStop(t, dataDir, cfg)
	st := waitStatus(t, addr, "the first index", func(s live.Stats) bool { return s.CatalogGeneration > 0 && !s.Reindexing && s.CatalogTools > 16 })

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	search := func(cs *mcp.ClientSession, q string) (tools []struct {
		Name    string
		Keyword float64
	}) {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "search_tools", Arguments: map[string]any{"query": q, "limit": 3}})
		if err != nil || res.IsError {
			t.Fatalf("search %q: %v %v", q, err, res)
		}
		b, _ := json.Marshal(res.StructuredContent)
		var out struct {
			Tools []struct {
				Name    string
				Keyword float64
			}
		}
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatal(err)
		}
		return out.Tools
	}
	check := func(cs *mcp.ClientSession, when string) {
		t.Helper()
		for _, q := range teamQueries {
			got := search(cs, q.query)
			if len(got) == 0 || got[0].Name != q.want || got[0].Keyword <= 0 {
				t.Errorf("%s: %q: got %+v, want %s first, by its words", when, q.query, got, q.want)
			}
		}
	}
	cs, err := connectKey(ctx, t, addr, "/mcp", "", "e2e")
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range teamQueries {
		got := search(cs, q.query)
		t.Logf("English rules: %q: %+v", q.query, got)
	}

	teamConfig(t, cfg, true)
	waitStatus(t, addr, "the reload and the index it asks for", func(s live.Stats) bool {
		return s.ReloadGeneration > st.Stats.ReloadGeneration && s.CatalogGeneration > st.Stats.CatalogGeneration && !s.Reindexing
	})
	check(cs, "after the reload")
	cs.Close()
	stop()

	addr, _, _ = startGatewayStop(t, dataDir, cfg)
	cs, err = connectKey(ctx, t, addr, "/mcp", "", "e2e")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	check(cs, "warm start")
}
