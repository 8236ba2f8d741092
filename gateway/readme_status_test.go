package gateway

import (
	"cmp"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// jsonFields are the JSON names of a struct type's fields as
// encoding/json writes them (an embedded struct without a name flattened
// into its parent), each with its type.
func jsonFields(ty reflect.Type) map[string]reflect.Type {
	for ty.Kind() == reflect.Pointer {
		ty = ty.Elem()
	}
	fields := map[string]reflect.Type{}
	for f := range ty.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case name == "-" || !f.IsExported() && !f.Anonymous:
		case name == "" && f.Anonymous:
			for n, t := range jsonFields(f.Type) {
				fields[n] = t
			}
		default:
			fields[cmp.Or(name, f.Name)] = f.Type
		}
	}
	return fields
}

// nestedFields are the JSON names inside a field's value, at every depth
// (a slice's or a map's elements, a pointer's target); times are values.
func nestedFields(ty reflect.Type, into map[string]bool) {
	for ty.Kind() == reflect.Pointer || ty.Kind() == reflect.Slice || ty.Kind() == reflect.Map {
		ty = ty.Elem()
	}
	if ty.Kind() != reflect.Struct || ty == reflect.TypeFor[time.Time]() {
		return
	}
	for name, t := range jsonFields(ty) {
		if !into[name] {
			into[name] = true
			nestedFields(t, into)
		}
	}
}

// TestREADMEStatusFields holds the README's table of GET /status's fields
// (under "Changing the config while running") to StatusReport, which
// `toolgate status --json` prints too: every field a row, the fields of
// its value named in that row, and every row a field.
func TestREADMEStatusFields(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	intro := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "`GET /status` (served with `--http`") })
	header := slices.Index(lines[max(intro, 0):], "| field | meaning |")
	if intro < 0 || header < 0 {
		t.Fatal("README.md: no table of GET /status's fields (\"| field | meaning |\" after \"`GET /status` (served with `--http`\")")
	}
	header += intro
	span := regexp.MustCompile("`([^`]+)`")
	rows := map[string]string{} // field → its row
	rowLine := map[string]int{}
	for i := header + 2; i < len(lines) && strings.HasPrefix(lines[i], "| "); i++ {
		first, _, _ := strings.Cut(lines[i][2:], " | ")
		for _, m := range span.FindAllStringSubmatch(first, -1) {
			rows[m[1]], rowLine[m[1]] = lines[i], i+1
		}
	}
	fields := jsonFields(reflect.TypeFor[StatusReport]())
	t.Logf("GET /status has %d fields", len(fields))
	for name, ty := range fields {
		row, ok := rows[name]
		if !ok {
			t.Errorf("GET /status's field %q is not in the README's table of its fields: add a row `%s` | what it says (README.md:%d)", name, name, header+1)
			continue
		}
		inner := map[string]bool{}
		nestedFields(ty, inner)
		for n := range inner {
			if !strings.Contains(row, "`"+n+"`") && !strings.Contains(row, "`"+n+": ") { // `bm25Only: true`
				t.Errorf("GET /status's %s has a field %q that its row in the README does not name: add `%s` to it (README.md:%d)", name, n, n, rowLine[name])
			}
		}
	}
	for name, line := range rowLine {
		if _, ok := fields[name]; !ok {
			t.Errorf("README.md:%d: the table of GET /status's fields names %q, which GET /status does not have (its fields are StatusReport's)", line, name)
		}
	}
}
