package planner

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Lenient readers: they look at a work order the way a person would, so
// that E001, E003, E004, E006 and E007 can be reported for orders that the
// strict decoder rejects.

func looseObject(raw json.RawMessage) map[string]json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return nil
	}
	return m
}

func looseArray(raw json.RawMessage) []json.RawMessage {
	var a []json.RawMessage
	if raw == nil || json.Unmarshal(raw, &a) != nil {
		return nil
	}
	return a
}

func looseString(raw json.RawMessage) (string, bool) {
	var s string
	if raw == nil || jsonKind(raw) != "string" || json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// looseStrings returns the entries of an array, nil for those that are not
// strings.
func looseStrings(raw json.RawMessage) []*string {
	items := looseArray(raw)
	out := make([]*string, len(items))
	for i, item := range items {
		if s, ok := looseString(item); ok {
			out[i] = &s
		}
	}
	return out
}

func isNull(raw json.RawMessage) bool { return jsonKind(raw) == "null" }

// jsonKind names the kind of a valid JSON value for messages.
func jsonKind(raw json.RawMessage) string {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 {
		return "nothing"
	}
	switch t[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 'n':
		return "null"
	case 't', 'f':
		return "boolean"
	}
	return "number"
}

// splitField separates the "field: message" form of workorder errors. A
// message without a field path keeps its whole text.
func splitField(msg string) (field, rest string) {
	f, r, ok := strings.Cut(msg, ": ")
	switch {
	case ok && f == "top-level value":
		return "", r
	case !ok || f == "" || strings.ContainsAny(f, " \t\n\"'"):
		return "", msg
	}
	return f, r
}

// splitErrors undoes errors.Join.
func splitErrors(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

func join(at, field string) string {
	switch {
	case field == "":
		return at
	case at == "":
		return field
	}
	return at + "." + field
}

// clip quotes s, shortened to about n bytes on a rune boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return fmt.Sprintf("%q", s)
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%q…", s[:cut])
}
