// Package tomlkeys holds hand-edited TOML files to the keys their structs
// spell out. BurntSushi/toml matches keys case-insensitively, so md.Undecoded
// misses `Command` next to `command`, and which of the two fills the field
// depends on map order: the same file would decode differently run to run.
package tomlkeys

import (
	"reflect"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"
)

// Decode decodes data into v (a pointer to a struct) and returns the keys
// Unknown finds. When decoding fails they come from a decoding into a
// plain map, so that a key spelt otherwise that broke it (`CheCks = {}`,
// read as the `checks` array) is still named; err is then the decoder's.
func Decode(data string, v any) (toml.MetaData, []string, error) {
	md, err := toml.Decode(data, v)
	if err == nil {
		return md, Unknown(md, v), nil
	}
	var raw map[string]any
	rawMD, rawErr := toml.Decode(data, &raw)
	if rawErr != nil {
		return md, nil, err
	}
	return md, Unknown(rawMD, v), err
}

// Unknown returns, in document order and each once, the keys of md (as
// toml.Key.String) that are not spelled exactly as a toml tag of the struct
// v points to; tables and arrays of tables are followed into their fields.
func Unknown(md toml.MetaData, v any) []string {
	var unknown []string
	for _, k := range md.Keys() {
		if !spelled(reflect.TypeOf(v), k) && !slices.Contains(unknown, k.String()) {
			unknown = append(unknown, k.String())
		}
	}
	return unknown
}

// spelled reports whether each part of path names, exactly as its toml tag,
// a field of the struct reached by the parts before it, starting from t.
func spelled(t reflect.Type, path []string) bool {
	for _, part := range path {
		f, ok := field(t, part)
		if !ok {
			return false
		}
		t = f.Type
	}
	return true
}

// field finds the field of t (through pointers, slices and arrays) whose
// toml tag, or name when it has none, is name.
func field(t reflect.Type, name string) (reflect.StructField, bool) {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return reflect.StructField{}, false
	}
	for i := range t.NumField() {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
		if tag == "" {
			tag = f.Name
		}
		if f.IsExported() && tag != "-" && tag == name {
			return f, true
		}
	}
	return reflect.StructField{}, false
}
