// Package jsonwords says what is wrong with a JSON value in JSON's words
// ("a list of strings", "a JSON number"), not Go's ("cannot unmarshal
// number into Go struct field executeArgs.name of type string"): for
// messages to the person or model that wrote the JSON.
package jsonwords

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"strconv"
	"strings"
)

// Explain rewrites an error of json.Unmarshal(b, v) that says a value has
// the wrong type: a field's as `"name" must be a string, not a JSON
// number`, the whole value's as `a JSON string, not an object`. Other
// errors are returned as they are.
func Explain(err error, v any) error {
	var te *json.UnmarshalTypeError
	switch {
	case !errors.As(err, &te):
		return err
	case te.Field == "":
		return fmt.Errorf("a JSON %s, not %s", valueKind(te.Value), kind(reflect.TypeOf(v), false))
	}
	return errors.New(fieldWords(te.Field, fieldType(v, te.Field, te.Type), te.Value))
}

// fieldWords is `"name" must be a string, not a JSON number`; a number
// its type cannot hold is said with its range: `"e" must be a number
// within ±1.7976931348623157e+308, not 1e400` (it read `must be a number,
// not a JSON number`).
func fieldWords(field string, want reflect.Type, value string) string {
	if n := numberIn(value); n != "" && noun(want) == "number" {
		if r := numberRange(want); r != "" {
			return fmt.Sprintf("%q must be %s, not %s", field, r, n)
		}
	}
	return fmt.Sprintf("%q must be %s, not a JSON %s", field, kind(want, false), valueKind(value))
}

// jsonNumber is a JSON number at the start of a text.
var jsonNumber = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`)

// numberIn is the JSON number an UnmarshalTypeError's Value holds
// (encoding/json's "number 1e400", segmentio's "1e400}" quoted or its
// "number 300 overflows"), or "".
func numberIn(v string) string {
	v = strings.TrimSpace(v)
	if u, err := strconv.Unquote(v); err == nil {
		v = strings.TrimSpace(u)
	} else if rest, ok := strings.CutPrefix(v, "number "); ok {
		v = rest
	} else {
		return ""
	}
	return jsonNumber.FindString(v)
}

// numberRange says which numbers t, a number type, holds: "a whole number
// from 0 to 255", "a number within ±3.4028234663852886e+38".
func numberRange(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	bits := t.Bits()
	switch t.Kind() {
	case reflect.Float32:
		return fmt.Sprintf("a number within ±%v", float64(math.MaxFloat32))
	case reflect.Float64:
		return fmt.Sprintf("a number within ±%v", math.MaxFloat64)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return fmt.Sprintf("a whole number from %d to %d", int64(-1)<<(bits-1), int64(uint64(1)<<(bits-1)-1))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return fmt.Sprintf("a whole number from 0 to %d", uint64(1)<<(bits-1)<<1-1)
	}
	return ""
}

// Describe says what an error of decoding JSON into a type the caller
// does not have at hand (a library's) says is wrong, as Explain does from
// the type the error names: `"content" must be a list of objects, not a
// JSON object`; "" for an error that is no type error or names no field.
func Describe(err error) string {
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) || te.Field == "" || te.Type == nil {
		return ""
	}
	return fieldWords(te.Field, te.Type, te.Value)
}

// valueKind is the kind of JSON value an UnmarshalTypeError's Value
// names: encoding/json writes a word ("object", "number -5");
// github.com/segmentio/encoding/json, which go-sdk's messages are read
// with here (internal/linerpc), writes the value itself and the rest of
// the input after it, quoted as a Go string (`"{\"type\": …}}"`,
// `"true}"`; TestExplain holds it).
func valueKind(v string) string {
	u, err := strconv.Unquote(strings.TrimSpace(v))
	if err != nil {
		// A word: "number -5" is a number.
		if w, _, _ := strings.Cut(strings.TrimSpace(v), " "); w != "" {
			return w
		}
		return "value"
	}
	// The value itself, and what followed it in the input ("true}").
	if u = strings.TrimSpace(u); u == "" {
		return "value"
	}
	switch u[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "bool"
	case 'n':
		return "null"
	}
	return "number"
}

// fieldType is the declared type of v's top-level field whose JSON key is
// key (a wrong element of a list is reported with the element's type: the
// message names the whole field's), else t.
func fieldType(v any, key string, t reflect.Type) reflect.Type {
	st := reflect.TypeOf(v)
	for st != nil && st.Kind() == reflect.Pointer {
		st = st.Elem()
	}
	if st == nil || st.Kind() != reflect.Struct {
		return t
	}
	for i := range st.NumField() {
		f := st.Field(i)
		if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name == key {
			return f.Type
		}
	}
	return t
}

// kind names what a Go type holds, in JSON's words ("a list of
// strings"); plural for the things a list holds ("strings").
func kind(t reflect.Type, plural bool) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
		if plural {
			return "lists of " + kind(t.Elem(), true)
		}
		return "a list of " + kind(t.Elem(), true)
	}
	n := noun(t)
	switch {
	case plural:
		return n + "s"
	case n == "object":
		return "an object"
	}
	return "a " + n
}

func noun(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return "number"
	}
	return "object"
}
