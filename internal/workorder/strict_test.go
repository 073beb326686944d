package workorder

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestDecodeStrictArguments(t *testing.T) {
	var w WorkOrder
	var nilPtr *WorkOrder
	for _, tc := range []struct {
		name string
		v    any
	}{
		{"non-pointer", w},
		{"nil pointer", nilPtr},
		{"nil interface", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := DecodeStrict([]byte(minimalOrder), tc.v)
			if err == nil || !strings.Contains(err.Error(), "non-nil pointer") {
				t.Fatalf("DecodeStrict(%T) error = %v, want one about a non-nil pointer", tc.v, err)
			}
		})
	}
}

func TestDecodeStrictNulls(t *testing.T) {
	type inner struct {
		A string `json:"a" jsonschema:"required"`
	}
	type outer struct {
		Ptrs  []*inner        `json:"ptrs"`
		Items []inner         `json:"items"`
		Strs  []string        `json:"strs"`
		Anys  []any           `json:"anys"`
		Opt   *inner          `json:"opt"`
		Lists [][]int64       `json:"lists"`
		Raw   json.RawMessage `json:"raw"`
	}
	for _, tc := range []struct {
		name, in, wantErr string // wantErr "" means accepted
	}{
		{"null pointer element", `{"ptrs":[null]}`, ""},
		{"null interface element", `{"anys":[null]}`, ""},
		{"null optional pointer field", `{"opt":null}`, ""},
		{"null optional slice field", `{"items":null}`, ""},
		{"null struct element", `{"items":[{"a":"x"},null]}`, "items[1]: must not be null"},
		{"null string element", `{"strs":["x",null]}`, "strs[1]: must not be null"},
		{"null nested list element", `{"lists":[[1],null]}`, "lists[1]: must not be null"},
		{"null inside nested list", `{"lists":[[1,null]]}`, "lists[0][1]: must not be null"},
		{"required field inside pointer element", `{"ptrs":[{}]}`, "ptrs[0].a: required field is missing"},
		{"top-level null", `null`, "top-level value: must not be null"},
		{"raw message holds any value", `{"raw":{"x":[1,{"y":null}]}}`, ""},
		{"raw message repeated", `{"raw":{"x":1},"raw":2}`, `duplicate key "raw"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var v outer
			err := DecodeStrict([]byte(tc.in), &v)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("DecodeStrict(%s): unexpected error %v", tc.in, err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("DecodeStrict(%s) error = %v, want one containing %q", tc.in, err, tc.wantErr)
			}
		})
	}
	t.Run("required and nullable", func(t *testing.T) {
		var v struct {
			Names []string `json:"names" jsonschema:"required,nullable"`
		}
		if err := DecodeStrict([]byte(`{"names":null}`), &v); err != nil || v.Names != nil {
			t.Fatalf("DecodeStrict(null for a nullable field) = %v, %q", err, v.Names)
		}
		if err := DecodeStrict([]byte(`{}`), &v); err == nil || !strings.Contains(err.Error(), "names: required field is missing") {
			t.Fatalf("DecodeStrict(nullable field missing) error = %v", err)
		}
	})
	t.Run("top-level null into a pointer", func(t *testing.T) {
		p := &inner{A: "keep"}
		if err := DecodeStrict([]byte(`null`), &p); err != nil {
			t.Fatalf("DecodeStrict(null, **T): %v", err)
		}
		if p != nil {
			t.Fatalf("null did not clear the pointer: %#v", p)
		}
	})
}
