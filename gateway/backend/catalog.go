package backend

import (
	"bytes"
	"encoding/json"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/index/catalog"
)

// Catalog turns the backends' tool lists (Pool.Tools) into catalog tools,
// sorted by ID: the one place an MCP tool becomes a catalog.Tool. A tool
// whose input schema cannot be encoded, or is not a JSON object (true, an
// array, a string: a server's bug, as MCP wants an object schema), keeps an
// empty schema (the backend still validates its arguments): search_tools
// says {"type":"object"} for it, as its output schema promises clients
// that check it (the TypeScript and Python SDKs refused a whole answer
// that listed such a tool). Annotations are kept as go-sdk decoded
// them: the spec's five fields (readOnlyHint and idempotentHint always
// present, false when the backend left them out, which is their default),
// in the SDK's field order. An output schema is kept as the input schema
// is, when it is a JSON object (MCP wants one of type object); any other
// is left out, as if the tool declared none.
//
// A schema the list stash kept as sent (json.RawMessage) is shared, not
// copied, when it is already what json.Marshal makes of it: at 50,000
// tools a copy was 14.5 MB more at every merge of a first listing.
func Catalog(byServer map[string][]*mcp.Tool) []catalog.Tool {
	var out []catalog.Tool
	for server, tools := range byServer {
		for _, t := range tools {
			if t == nil || t.Name == "" {
				continue
			}
			var schema json.RawMessage
			if t.InputSchema != nil {
				if b, err := marshal(t.InputSchema); err == nil && b[0] == '{' {
					schema = b
				}
			}
			var output json.RawMessage
			if t.OutputSchema != nil {
				if b, err := marshal(t.OutputSchema); err == nil && b[0] == '{' {
					output = b
				}
			}
			var annotations json.RawMessage
			if t.Annotations != nil {
				if b, err := json.Marshal(t.Annotations); err == nil {
					annotations = b
				}
			}
			title := t.Title
			if title == "" && t.Annotations != nil {
				title = t.Annotations.Title
			}
			out = append(out, catalog.Tool{
				Server:       server,
				Name:         t.Name,
				Title:        title,
				Description:  t.Description,
				InputSchema:  schema,
				Annotations:  annotations,
				OutputSchema: output,
			})
		}
	}
	catalog.SortByID(out)
	return out
}

// compactBuf is marshal's scratch buffer.
var compactBuf = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// marshal is json.Marshal(v), except that a json.RawMessage already in the
// form json.Marshal gives it (compact, no '<', '>', '&', U+2028 or U+2029,
// which it escapes) is returned as is.
func marshal(v any) ([]byte, error) {
	raw, ok := v.(json.RawMessage)
	if !ok || bytes.ContainsAny(raw, "<>&\u2028\u2029") {
		return json.Marshal(v)
	}
	buf := compactBuf.Get().(*bytes.Buffer)
	defer compactBuf.Put(buf)
	buf.Reset()
	if err := json.Compact(buf, raw); err != nil || buf.Len() != len(raw) {
		return json.Marshal(v) // invalid (its error), or spaced
	}
	return raw, nil
}
