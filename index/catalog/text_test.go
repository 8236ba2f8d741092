package catalog

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/toolgate/toolgate/models"
)

func TestLeadSentence(t *testing.T) {
	for _, tc := range []struct{ desc, want string }{
		{"", ""},
		{"List files.", "List files."},
		{"List files in a directory. Optionally recursive.", "List files in a directory."},
		{"List Azure Container Registries in a subscription. Optionally filter by resource group. Each registry result\nincludes: name.", "List Azure Container Registries in a subscription."},
		{"Wrapped over\nseveral lines. Second sentence.", "Wrapped over several lines."},
		{"Takes a path, e.g. /tmp or ~/x, and reads it. Then more.", "Takes a path, e.g. /tmp or ~/x, and reads it."},
		{"Is it up? Ping it!", "Is it up?"},
		{"Planning something outdoors? Get the 2-day forecast.", "Planning something outdoors?"},
		{"Version 1.2 of the API. 3 modes exist.", "Version 1.2 of the API."},
		{"Summary line without a stop\n\nDetails follow here. More.", "Summary line without a stop"},
		{"Reads a file.\n- path: where\n- mode: how", "Reads a file."},
		{"No terminator at all", "No terminator at all"},
		{"Ends with a stop. ", "Ends with a stop."},
	} {
		if got := LeadSentence(tc.desc); got != tc.want {
			t.Errorf("LeadSentence(%q) = %q, want %q", tc.desc, got, tc.want)
		}
	}
}

func TestViews(t *testing.T) {
	for _, tc := range []struct {
		name string
		tool Tool
		want []string
	}{
		{"name, full text and lead sentence", Tool{Server: "fs", Name: "read_file", Description: "Read a file. Returns its text."},
			[]string{"read file. Read a file. Returns its text.", "read file", "I need a tool to read a file."}},
		{"a title joins the name", Tool{Server: "fs", Name: "read_file", Title: "Read File", Description: "Read a file."},
			[]string{"read file. Read File. Read a file.", "read file. Read File", "I need a tool to read a file."}},
		{"no description: the name alone is the full text", Tool{Server: "fs", Name: "ping"},
			[]string{"ping"}},
		{"white space only", Tool{Server: "fs", Name: "ping", Description: "  \n "},
			[]string{"ping"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Views(tc.tool); !slices.Equal(got, tc.want) {
				t.Errorf("Views = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestRequestView(t *testing.T) {
	for _, tc := range []struct{ lead, want string }{
		{"", ""},
		{"Lists the storage accounts.", "I need a tool to lists the storage accounts."},
		{"Get the 2-day air quality forecast for any US zip code.", "I need a tool to get the 2-day air quality forecast for any US zip code."},
		{"AI video generation for your team.", "I need a tool to AI video generation for your team."},
		{"A calculator app.", "I need a tool to a calculator app."},
		{"Émettre une facture.", "I need a tool to émettre une facture."},
		{"x", "I need a tool to x"},
	} {
		if got := RequestView(tc.lead); got != tc.want {
			t.Errorf("RequestView(%q) = %q, want %q", tc.lead, got, tc.want)
		}
	}
}

// The lead view's request words and the MiniLM manifest's query_prefix are
// one choice made on both sides (round 7: queries and tools in the register
// of a request); a change to one alone would undo the measured gain.
func TestRequestPrefixIsQueryPrefix(t *testing.T) {
	if got := models.Manifest().Model.QueryPrefix; got != RequestPrefix {
		t.Fatalf("models/manifest.json query_prefix %q, catalog.RequestPrefix %q: change both or neither", got, RequestPrefix)
	}
}

// TestParamsTextBounded: the parameters' text the keyword index reads is
// cut at MaxDescription, as a tool's description is: a 1 MB parameter
// description went whole into the index, where a long word costs some 150
// times its size (1 MB of "x": 153 MB of heap kept by the index built).
// Parameters past the cut are left out; those before it are whole.
func TestParamsTextBounded(t *testing.T) {
	big := strings.Repeat("é", MaxDescription) // two bytes each: a cut at a character's start
	schema, _ := json.Marshal(map[string]any{"type": "object", "properties": map[string]any{
		"a": map[string]any{"type": "string", "description": "the first"},
		"b": map[string]any{"type": "string", "description": big},
		"c": map[string]any{"type": "string", "description": "after"},
	}})
	got := ParamsText(Tool{Name: "t", InputSchema: schema})
	if len(got) > MaxDescription || !utf8.ValidString(got) {
		t.Errorf("params text of %d bytes (valid UTF-8: %v), want at most %d", len(got), utf8.ValidString(got), MaxDescription)
	}
	if !strings.HasPrefix(got, "a the first\nb éé") || strings.Contains(got, "after") {
		t.Errorf("params text %q…, want a's whole, b's cut, c's left out", got[:min(len(got), 40)])
	}
	small, _ := json.Marshal(map[string]any{"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string", "description": "where"}}})
	if got := ParamsText(Tool{Name: "t", InputSchema: small}); got != "path where\n" {
		t.Errorf("params text %q, want it as before", got)
	}
}
