package workorder

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"reflect"
	"slices"
	"strings"
	"unicode/utf8"
)

// DecodeStrict decodes one JSON value into v (a pointer to a struct) and
// rejects what encoding/json lets through: unknown fields, missing required
// fields (tag `jsonschema:"required"`), null for a required field (but one
// also tagged `nullable`, where null is a value), a
// top-level value or a non-pointer array element, duplicate keys, trailing
// data and invalid UTF-8. Error messages name the field by its
// JSON path, e.g. `writes[1].base_sha256`.
func DecodeStrict(data []byte, v any) error {
	if !utf8.Valid(data) {
		return errors.New("input is not valid UTF-8")
	}
	if err := checkSurrogates(data); err != nil {
		return err
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return errors.New("DecodeStrict needs a non-nil pointer")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return fmt.Errorf("invalid JSON: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("invalid JSON: unexpected data after the top-level value")
	}
	if isNull(raw) && !nullable(rv.Type().Elem()) {
		return errors.New("top-level value: must not be null")
	}
	if err := checkShape(raw, rv.Type().Elem(), ""); err != nil {
		return err
	}
	typed := json.NewDecoder(bytes.NewReader(raw))
	if err := typed.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return fmt.Errorf("%s: expected %s, got JSON %s", fieldOr(te.Field), te.Type, te.Value)
		}
		return fmt.Errorf("invalid JSON: %w", err)
	}
	return nil
}

func fieldOr(f string) string {
	if f == "" {
		return "top-level value"
	}
	return f
}

// checkShape walks raw alongside the Go type t, checking object keys.
func checkShape(raw json.RawMessage, t reflect.Type, at string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	trimmed := bytes.TrimSpace(raw)
	if bytes.Equal(trimmed, []byte("null")) {
		return nil // nullability of the field itself is checked by the parent
	}
	if t == rawMessage {
		return nil // any value: its reader checks it
	}
	switch t.Kind() {
	case reflect.Struct:
		return checkObject(trimmed, t, at)
	case reflect.Slice:
		if len(trimmed) == 0 || trimmed[0] != '[' {
			return fmt.Errorf("%s: expected a JSON array", fieldOr(at))
		}
		var items []json.RawMessage
		if err := json.Unmarshal(trimmed, &items); err != nil {
			return fmt.Errorf("%s: %w", fieldOr(at), err)
		}
		for i, item := range items {
			itemAt := fmt.Sprintf("%s[%d]", at, i)
			if isNull(item) && !nullable(t.Elem()) {
				// encoding/json would silently decode null as the zero value.
				return fmt.Errorf("%s: must not be null", itemAt)
			}
			if err := checkShape(item, t.Elem(), itemAt); err != nil {
				return err
			}
		}
	}
	return nil
}

func checkObject(raw []byte, t reflect.Type, at string) error {
	if len(raw) == 0 || raw[0] != '{' {
		return fmt.Errorf("%s: expected a JSON object", fieldOr(at))
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil {
		return fmt.Errorf("%s: %w", fieldOr(at), err)
	}
	seen := map[string]json.RawMessage{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fmt.Errorf("%s: %w", fieldOr(at), err)
		}
		key := tok.(string)
		if _, dup := seen[key]; dup {
			return fmt.Errorf("%s: duplicate key %q", fieldOr(at), key)
		}
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return fmt.Errorf("%s: %w", join(at, key), err)
		}
		seen[key] = val
	}
	fields := jsonFields(t)
	for _, key := range sortedKeys(seen) {
		if _, ok := fields[key]; !ok {
			return fmt.Errorf("%s: unknown field (allowed: %s)", join(at, key), strings.Join(sortedKeys(fields), ", "))
		}
	}
	for _, name := range sortedKeys(fields) {
		f := fields[name]
		val, ok := seen[name]
		required := hasTagOption(f.Tag.Get("jsonschema"), "required")
		switch {
		case !ok && required:
			return fmt.Errorf("%s: required field is missing", join(at, name))
		case !ok:
			continue
		case required && isNull(val) && !hasTagOption(f.Tag.Get("jsonschema"), "nullable"):
			return fmt.Errorf("%s: required field must not be null", join(at, name))
		}
		if err := checkShape(val, f.Type, join(at, name)); err != nil {
			return err
		}
	}
	return nil
}

var rawMessage = reflect.TypeFor[json.RawMessage]()

func isNull(raw []byte) bool { return bytes.Equal(bytes.TrimSpace(raw), []byte("null")) }

// nullable reports whether JSON null is a meaningful value for t, rather
// than one encoding/json turns into t's zero value.
func nullable(t reflect.Type) bool {
	return t.Kind() == reflect.Pointer || t.Kind() == reflect.Interface
}

func join(at, key string) string {
	if at == "" {
		return key
	}
	return at + "." + key
}

func jsonFields(t reflect.Type) map[string]reflect.StructField {
	out := map[string]reflect.StructField{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f
	}
	return out
}

func hasTagOption(tag, opt string) bool {
	for _, o := range strings.Split(tag, ",") {
		if o == opt {
			return true
		}
	}
	return false
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

// checkSurrogates rejects \u escapes that encode a lone UTF-16 surrogate:
// encoding/json would silently turn them into U+FFFD, so the text decoded
// would not be the text sent.
func checkSurrogates(data []byte) error {
	inString := false
	for i := 0; i < len(data); i++ {
		switch c := data[i]; {
		case c == '"':
			inString = !inString
		case c == '\\' && inString && i+1 < len(data):
			if data[i+1] != 'u' {
				i++ // skip the escaped character, which may be a quote
				continue
			}
			r, ok := hex4(data, i+2)
			switch {
			case !ok:
				continue // malformed; the JSON decoder reports it
			case r >= 0xD800 && r < 0xDC00:
				if low, ok := hex4(data, i+8); ok && i+7 < len(data) && data[i+6] == '\\' && data[i+7] == 'u' && low >= 0xDC00 && low < 0xE000 {
					i += 11
					continue
				}
				return fmt.Errorf("invalid JSON: lone UTF-16 surrogate \\u%04x at byte %d", r, i)
			case r >= 0xDC00 && r < 0xE000:
				return fmt.Errorf("invalid JSON: lone UTF-16 surrogate \\u%04x at byte %d", r, i)
			}
			i += 5
		}
	}
	return nil
}

// hex4 parses four hex digits at data[at:].
func hex4(data []byte, at int) (rune, bool) {
	if at+4 > len(data) {
		return 0, false
	}
	var r rune
	for _, c := range data[at : at+4] {
		var v byte
		switch {
		case c >= '0' && c <= '9':
			v = c - '0'
		case c >= 'a' && c <= 'f':
			v = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			v = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(v)
	}
	return r, true
}
