package tree

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// SchemaV1 is the JSON Schema (draft 2020-12) of .runner/tree.json, as
// `factory loop init` writes it to schemas/task_tree/v1.schema.json.
//
//go:embed v1.schema.json
var SchemaV1 []byte

// SchemaPath is where the schema is written in a repository.
const SchemaPath = "schemas/task_tree/v1.schema.json"

// validateSchema checks syntactically valid JSON against SchemaV1 and
// returns every violation, by instance location, in the words of JSON
// Schema validators.
//
// It is written out by hand for this one small schema: the JSON Schema
// library (santhosh-tekuri/jsonschema) compiles five drafts' meta-schemas
// in its package initializer, about 10 ms of CPU in every factory process,
// however little it validates. The tests hold the two to the same verdict
// (TestSchemaAgreement and FuzzDecode validate with the library too).
func validateSchema(data []byte) []Problem {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return []Problem{{Message: "invalid JSON: " + err.Error()}}
	}
	var s schemaCheck
	s.node(v, "")
	return sortProblems(s.problems)
}

var (
	nodeRequired = []string{"id", "order", "title", "goal", "acceptance"}
	nodeKnown    = []string{"acceptance", "attempts", "children", "goal", "id", "max_attempts", "order", "passes", "title"}
)

type schemaCheck struct{ problems []Problem }

func (s *schemaCheck) add(at, format string, args ...any) {
	s.problems = append(s.problems, Problem{Path: at, Message: fmt.Sprintf(format, args...)})
}

// node checks v against $defs/node.
func (s *schemaCheck) node(v any, at string) {
	obj, ok := v.(map[string]any)
	if !ok {
		s.add(at, "got %s, want object", jsonType(v))
		return
	}
	var missing, extra []string
	for _, k := range nodeRequired {
		if _, ok := obj[k]; !ok {
			missing = append(missing, quoteName(k))
		}
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
		if !slices.Contains(nodeKnown, k) {
			extra = append(extra, quoteName(k))
		}
	}
	slices.Sort(keys)
	slices.Sort(extra)
	switch len(missing) {
	case 0:
	case 1:
		s.add(at, "missing property %s", missing[0])
	default:
		s.add(at, "missing properties %s", strings.Join(missing, ", "))
	}
	if len(extra) > 0 {
		s.add(at, "additional properties %s not allowed", strings.Join(extra, ", "))
	}
	for _, k := range keys {
		val, p := obj[k], at+"/"+pointerToken(k)
		switch k {
		case "id":
			if str, ok := s.str(val, p, 0, math.MaxInt); ok && !idPattern.MatchString(str) {
				s.add(p, "%s does not match pattern %s", quoteName(str), quoteName(idPattern.String()))
			}
		case "order":
			s.integer(val, p, 0, 1000000)
		case "title":
			s.str(val, p, 1, 200)
		case "goal":
			s.str(val, p, 1, 8000)
		case "acceptance":
			for i, item := range s.array(val, p, 50) {
				s.str(item, p+"/"+strconv.Itoa(i), 1, 2000)
			}
		case "passes":
			if _, ok := val.(bool); !ok {
				s.add(p, "got %s, want boolean", jsonType(val))
			}
		case "attempts":
			s.integer(val, p, 0, 1000)
		case "max_attempts":
			s.integer(val, p, 1, 1000)
		case "children":
			for i, item := range s.array(val, p, 100) {
				s.node(item, p+"/"+strconv.Itoa(i))
			}
		}
	}
}

// str checks a string of min to max characters (code points, as JSON
// Schema counts them).
func (s *schemaCheck) str(v any, at string, min, max int) (string, bool) {
	str, ok := v.(string)
	if !ok {
		s.add(at, "got %s, want string", jsonType(v))
		return "", false
	}
	n := utf8.RuneCountInString(str)
	if n < min {
		s.add(at, "minLength: got %d, want %d", n, min)
	}
	if n > max {
		s.add(at, "maxLength: got %d, want %d", n, max)
	}
	return str, true
}

// integer checks a number without a fractional part in [min, max].
func (s *schemaCheck) integer(v any, at string, min, max float64) {
	num, ok := v.(json.Number)
	if !ok {
		s.add(at, "got %s, want integer", jsonType(v))
		return
	}
	f, err := strconv.ParseFloat(string(num), 64)
	if err != nil && !math.IsInf(f, 0) {
		s.add(at, "got %s, want integer", num)
		return
	}
	if f != math.Trunc(f) {
		s.add(at, "got number, want integer")
		return
	}
	if f < min {
		s.add(at, "minimum: got %s, want %v", num, min)
	}
	if f > max {
		s.add(at, "maximum: got %s, want %v", num, max)
	}
}

// array checks an array of at most max items and returns them.
func (s *schemaCheck) array(v any, at string, max int) []any {
	items, ok := v.([]any)
	if !ok {
		s.add(at, "got %s, want array", jsonType(v))
		return nil
	}
	if len(items) > max {
		s.add(at, "maxItems: got %d, want %d", len(items), max)
	}
	return items
}

// jsonType names the JSON type of a value json.Decoder (with UseNumber) made.
func jsonType(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case json.Number:
		if f, err := strconv.ParseFloat(string(v), 64); err == nil && f == math.Trunc(f) {
			return "integer"
		}
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	}
	return "object"
}

func quoteName(s string) string { return "'" + s + "'" }

// pointerToken escapes a key for a JSON Pointer (RFC 6901).
func pointerToken(k string) string {
	return strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
}
