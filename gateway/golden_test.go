package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata with this run's output")

// toolsListGolden is the gateway's answer to tools/list as it goes over the
// wire: the two tools' names, descriptions, input and output schemas.
// Clients script against it, so a change must be deliberate: refresh it
// with
//
//	go test ./gateway -run ToolsListGolden -update
//
// and say what changed for clients in the README.
const toolsListGolden = "testdata/tools_list.json"

func TestToolsListGolden(t *testing.T) {
	g, _ := newTestGateway(t, nil)
	var wire bytes.Buffer
	ct, st := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := g.Server().Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(ctx, &mcp.LoggingTransport{Transport: ct, Writer: &wire}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { cs.Close(); ss.Wait() }()
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Fatal(err)
	}
	got := toolsListResult(t, wire.String())

	if *update {
		if err := os.WriteFile(toolsListGolden, got, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", toolsListGolden)
		return
	}
	want, err := os.ReadFile(toolsListGolden)
	if err != nil {
		t.Fatalf("%v (create it with go test ./gateway -run ToolsListGolden -update)", err)
	}
	if diff := cmp.Diff(strings.Split(string(want), "\n"), strings.Split(string(got), "\n")); diff != "" {
		t.Errorf("tools/list differs from %s (-golden +now); clients script against it: if the change is meant, refresh it with -update and say what changed in the README:\n%s", toolsListGolden, diff)
	}
}

// toolsListResult finds the answer to the tools/list request among the
// messages LoggingTransport logged ("write: " the client sent, "read: " it
// received; a write may be logged after its answer's read) and indents it.
func toolsListResult(t *testing.T, wire string) []byte {
	t.Helper()
	type message struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Result json.RawMessage `json:"result"`
	}
	var id json.RawMessage
	results := map[string]json.RawMessage{}
	sc := bufio.NewScanner(strings.NewReader(wire))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		dir, line, _ := strings.Cut(sc.Text(), ": ")
		var m message
		if json.Unmarshal([]byte(line), &m) != nil {
			continue
		}
		switch {
		case dir == "write" && m.Method == "tools/list":
			id = m.ID
		case dir == "read" && m.Result != nil:
			results[string(m.ID)] = m.Result
		}
	}
	res, ok := results[string(id)]
	if id == nil || !ok {
		t.Fatalf("no answer to tools/list among the messages:\n%s", wire)
	}
	var out bytes.Buffer
	if err := json.Indent(&out, res, "", "  "); err != nil {
		t.Fatal(err)
	}
	out.WriteByte('\n')
	return out.Bytes()
}
