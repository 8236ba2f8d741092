package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/internal/oneline"
)

// MCP (2025-06-18 on, "Output schema") says a tool that declares an
// outputSchema MUST return structuredContent that fits it, and that
// clients SHOULD check. The gateway checks each result of such a tool
// that is not an error (an error's structuredContent, if any, need not
// fit: the SDKs' clients do not check it either) with jsonschema-go, as it
// checks arguments against the input schema. A result that does not fit
// is passed on whole, with a note added after its content: the TypeScript
// SDK's client throws such a result away ("Structured content does not
// match the tool's output schema"), which leaves an agent nothing, where
// the data may still be what it wanted, and a note tells it not to count
// on the shape search_tools showed. The operator sees it in the log (once
// a tool and schema), the audit record (outputMismatch) and the metric
// toolgate_output_mismatches_total (Options.OutputMismatch). A result
// whose structuredContent maxResultBytes cut or left out is not checked
// (handleExecute): the client gets none of it whole.

// maxOutputProblem bounds what a note, the log and an audit record say of
// a result that does not fit: the first problem the validator met, cut to
// one line of this many characters.
const maxOutputProblem = 300

// noStructured is the problem of a result without structuredContent.
const noStructured = "no structuredContent"

// outputProblem is what is wrong with res, a result of tool, against the
// output schema tool declares: "" when it fits, when the tool declares
// none, when res is an error, and when the schema is one the validator
// cannot take (logged at debug level once; the result is passed on).
func (g *Gateway) outputProblem(id string, tool catalog.Tool, res *mcp.CallToolResult) string {
	p, _ := g.outputProblems(id, tool, res)
	return p
}

// outputProblems is outputProblem, and recorded the same without the
// result's values (outputRecordWords), for the audit record and the log:
// they keep no data of a result, as they keep arguments only as a hash.
func (g *Gateway) outputProblems(id string, tool catalog.Tool, res *mcp.CallToolResult) (problem, recorded string) {
	if len(tool.OutputSchema) == 0 || res == nil || res.IsError {
		return "", ""
	}
	r := g.outSchemas.resolved(id, tool.OutputSchema, g.log, "output schema not checked")
	if r.err != nil {
		return "", ""
	}
	if res.StructuredContent == nil {
		return noStructured, noStructured
	}
	var v any
	if sc, ok := res.StructuredContent.(map[string]any); ok {
		v = sc
	} else if err := json.Unmarshal(structuredJSON(res.StructuredContent), &v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			// JSON all the same, kept as written: a number past a float64
			// (1e400), which the validator cannot take. Passed on unchecked,
			// where it read "structuredContent is not JSON" and counted as
			// a mismatch.
			return "", ""
		}
		return oneline.Cut("structuredContent is not JSON: "+err.Error(), maxOutputProblem), "structuredContent is not JSON"
	}
	err := r.rs.Validate(v)
	if err == nil {
		return "", ""
	}
	var root map[string]any
	_ = json.Unmarshal(tool.OutputSchema, &root)
	return oneline.Cut(plainWordsOf(outputWords, err.Error(), root, v), maxOutputProblem),
		oneline.Cut(plainWordsOf(outputRecordWords, err.Error(), root, v), maxOutputProblem)
}

// outputNote is res with a text block after its content that says what
// problem (outputProblem) its structuredContent has against the output
// schema of the tool id; res itself is not changed.
func outputNote(res *mcp.CallToolResult, id, problem string) *mcp.CallToolResult {
	note := fmt.Sprintf("toolgate: this result's structuredContent does not fit the outputSchema %s declares: %s. It is passed on as the server sent it: do not count on the shape search_tools showed.", id, problem)
	if problem == noStructured {
		note = fmt.Sprintf("toolgate: %s declares an outputSchema, but this result has no structuredContent, which MCP requires of it: what the tool returned is the content above.", id)
	}
	out := *res
	out.Content = append(slices.Clip(res.Content), &mcp.TextContent{Text: note})
	return &out
}

// warnOutput logs, at warning level and once per tool and output schema
// (the resolved schema remembers it), that a result of the tool id does
// not fit its output schema: the operator learns of a misbehaving server
// without a line per call.
func (g *Gateway) warnOutput(id string, tool catalog.Tool, problem string) {
	r := g.outSchemas.resolved(id, tool.OutputSchema, g.log, "output schema not checked")
	if r.warned.CompareAndSwap(false, true) {
		g.log.Warn("tool result does not fit its output schema (passed on, with a note; later ones of this tool are counted in toolgate_output_mismatches_total and the audit log's outputMismatch)",
			"tool", id, "server", tool.Server, "problem", problem)
	}
}
