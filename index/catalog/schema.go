package catalog

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/toolgate/toolgate/internal/jsonwords"
	"github.com/toolgate/toolgate/internal/plural"
)

// ResolveSchema reads an input schema as the gateway validates arguments
// with it. The $schema keyword names drafts the validator may not know;
// validation keywords are shared, so they are checked regardless. An error
// is a schema the gateway cannot validate with: it lets calls through (the
// backend validates) and indexes none of its arguments.
func ResolveSchema(text json.RawMessage) (*jsonschema.Resolved, error) {
	var s jsonschema.Schema
	if err := json.Unmarshal(text, &s); err != nil {
		return nil, err
	}
	s.Schema = ""
	return s.Resolve(nil)
}

// WarnSchemas writes to w a warning for the tools of the file at path
// whose input schema ResolveSchema refuses (at most five named): they are
// taken, as the gateway takes a backend's, but the file's author meant
// them to count (a "properties" written as a list was silently no
// argument). It returns how many there are.
func WarnSchemas(w io.Writer, path string, tools []Tool) int {
	n := 0
	var named []string
	for _, t := range tools {
		if len(t.InputSchema) == 0 {
			continue
		}
		if _, err := ResolveSchema(t.InputSchema); err != nil {
			// JSON's words, not Go's, without the library's inner type.
			why := strings.ReplaceAll(jsonwords.Describe(err), `"schemaWithoutMethods.`, `"`)
			if why == "" {
				why = err.Error()
			}
			if n++; len(named) < 5 {
				named = append(named, fmt.Sprintf("%q (%s)", t.ID(), why))
			}
		}
	}
	if n == 0 {
		return 0
	}
	more := ""
	if n > len(named) {
		more = fmt.Sprintf(", and %d more", n-len(named))
	}
	fmt.Fprintf(w, "toolgate: warning: %s: the input schema of %s is not a JSON Schema the gateway can read: %s%s: the gateway would let their calls through unchecked, and leaves the arguments it cannot read out of the index\n",
		path, plural.Of(n, "tool"), strings.Join(named, ", "), more)
	return n
}
