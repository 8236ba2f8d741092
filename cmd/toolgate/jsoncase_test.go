package main

import (
	"encoding/json"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/gateway/audit"
	"github.com/toolgate/toolgate/search"
)

// camelKey is a JSON key of toolgate's output: camelCase (like MCP and
// mcpServers), optionally a metric's "@k" cut-off.
var camelKey = regexp.MustCompile(`^[a-z][a-zA-Z0-9]*(@[0-9]+)?$`)

// Every --json output (and GET /status, which `status --json` prints)
// uses camelCase keys, down every nested struct.
func TestJSONOutputsAreCamelCase(t *testing.T) {
	outputs := map[string]any{
		"eval --json":        evalLine{},
		"index --json":       indexResult{},
		"search --json":      searchOutput{},
		"servers --json":     serversReport{},
		"doctor --json":      doctorReport{},
		"status --json":      gateway.StatusReport{},
		"auth status --json": authServerStatus{},
		"keys list --json":   listedKey{},
		"tools quarantined":  quarantinedTool{},
		"audit tail --json":  audit.Record{},
	}
	for cmd, v := range outputs {
		seen := map[reflect.Type]bool{}
		var walk func(path string, ty reflect.Type)
		marshaler := reflect.TypeFor[json.Marshaler]()
		encodesItself := func(ty reflect.Type) bool {
			return ty.Implements(marshaler) || reflect.PointerTo(ty).Implements(marshaler)
		}
		walk = func(path string, ty reflect.Type) {
			// A type that encodes itself (time.Time, search.Metrics,
			// search.MetricList: a slice) is checked on its own, at any
			// level of pointers, slices and maps.
			for !encodesItself(ty) && (ty.Kind() == reflect.Pointer || ty.Kind() == reflect.Slice || ty.Kind() == reflect.Map) {
				ty = ty.Elem()
			}
			if ty.Kind() != reflect.Struct || seen[ty] || encodesItself(ty) {
				return
			}
			seen[ty] = true
			for f := range ty.Fields() {
				tag := f.Tag.Get("json")
				name, _, _ := strings.Cut(tag, ",")
				if name == "-" || !f.IsExported() {
					continue
				}
				if f.Anonymous && name == "" {
					walk(path, f.Type)
					continue
				}
				if name == "" {
					name = f.Name // encoding/json uses the field name
				}
				if !camelKey.MatchString(name) {
					t.Errorf("%s: key %s%s is not camelCase", cmd, path, name)
				}
				walk(path+name+".", f.Type)
			}
		}
		walk("", reflect.TypeOf(v))
	}
	// search.Metrics encodes itself (MarshalJSON): its names.
	for _, m := range (search.Metrics{GroupQueries: 1}).Named() {
		if !camelKey.MatchString(m.Name) {
			t.Errorf("eval --json: metric %s is not camelCase", m.Name)
		}
	}
}
