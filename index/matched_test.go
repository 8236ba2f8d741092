package index

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolgate/toolgate/index/catalog"
)

// TestMatched: Matched says which of a query's terms each keyword field of
// a tool holds, and the query's terms as the analyzer makes them, so that
// `toolgate search --explain` can say why a tool's keyword score is what
// it is.
func TestMatched(t *testing.T) {
	tools := []catalog.Tool{
		{Server: "billing", Name: "list_invoices", Description: "List the invoices of a customer.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"status":{"type":"string","description":"paid or open"}}}`)},
		{Server: "billing", Name: "refund", Description: "Refund a payment."},
	}
	ix, err := Build(context.Background(), tools, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	terms, found, err := ix.Matched("list the open invoices on billing, export csv", []string{"billing__list_invoices", "billing__refund"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"list", "open", "invoic", "bill", "export", "csv"}; !cmp.Equal(terms, want) {
		t.Errorf("terms %v, want %v", terms, want)
	}
	want := map[string]map[string][]string{
		"billing__list_invoices": {"name": {"list", "invoic"}, "server": {"bill"}, "description": {"list", "invoic"}, "params": {"open"}},
		"billing__refund":        {"server": {"bill"}},
	}
	if d := cmp.Diff(want, found); d != "" {
		t.Errorf("found (-want +got):\n%s", d)
	}
}
