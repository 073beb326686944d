package canon

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

func TestJSON(t *testing.T) {
	type inner struct {
		Z string `json:"z"`
		A int    `json:"a"`
	}
	type outer struct {
		B     []inner           `json:"b"`
		A     map[string]string `json:"a"`
		Empty []string          `json:"empty"`
		Nil   []string          `json:"nil"`
		Ptr   *string           `json:"ptr"`
		Omit  string            `json:"omit,omitempty"`
	}
	for _, tc := range []struct {
		name string
		in   any
		want string
	}{
		{"sorts keys",
			map[string]int{"b": 2, "a": 1, "c": 3},
			`{"a":1,"b":2,"c":3}`},
		{"sorts nested keys",
			json.RawMessage(`{"z":{"y":1,"x":[{"b":1,"a":2}]},"a":null}`),
			`{"a":null,"z":{"x":[{"a":2,"b":1}],"y":1}}`},
		{"sorts struct fields by JSON name",
			outer{B: []inner{{Z: "z", A: 1}}, A: map[string]string{"y": "1", "x": "2"}, Empty: []string{}},
			`{"a":{"x":"2","y":"1"},"b":[{"a":1,"z":"z"}],"empty":[],"nil":null,"ptr":null}`},
		{"sorts by UTF-8 bytes, not case-insensitively",
			map[string]int{"b": 1, "B": 2, "é": 3, "a": 4, "_": 5},
			`{"B":2,"_":5,"a":4,"b":1,"é":3}`},
		{"no insignificant whitespace",
			json.RawMessage(" {\n\t\"a\" : [ 1 , 2 ] ,\r\n \"b\" : { } } \n"),
			`{"a":[1,2],"b":{}}`},
		{"whitespace inside strings kept",
			map[string]string{"k": " a \n b "},
			`{"k":" a \n b "}`},
		{"no HTML escaping",
			map[string]string{"<k>": "a < b && c > d"},
			`{"<k>":"a < b && c > d"}`},
		{"HTML-escaped input unescaped",
			json.RawMessage(`{"k":"\u003c\u0026\u003e"}`),
			`{"k":"<&>"}`},
		{"unicode escapes resolved",
			json.RawMessage(`{"k":"\u00e9\/"}`),
			`{"k":"é/"}`},
		{"numbers kept as written",
			json.RawMessage(`{"b":1.50,"a":1e3,"c":-0,"d":12345678901234567890123}`),
			`{"a":1e3,"b":1.50,"c":-0,"d":12345678901234567890123}`},
		{"float from Go",
			map[string]float64{"x": 0.1},
			`{"x":0.1}`},
		{"top-level scalar", "x", `"x"`},
		{"top-level null", nil, `null`},
		{"top-level array", []int{3, 1, 2}, `[3,1,2]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := JSON(tc.in)
			if err != nil {
				t.Fatalf("JSON: %v", err)
			}
			if string(got) != tc.want {
				t.Fatalf("JSON(%v)\n got %s\nwant %s", tc.in, got, tc.want)
			}
		})
	}
}

func TestJSONStableAcrossFieldOrder(t *testing.T) {
	type ab struct {
		A string   `json:"a"`
		B []int    `json:"b"`
		C struct{} `json:"c"`
	}
	type ba struct {
		C struct{} `json:"c"`
		B []int    `json:"b"`
		A string   `json:"a"`
	}
	x, err := JSON(ab{A: "v", B: []int{2, 1}})
	if err != nil {
		t.Fatal(err)
	}
	y, err := JSON(ba{A: "v", B: []int{2, 1}})
	if err != nil {
		t.Fatal(err)
	}
	if string(x) != string(y) {
		t.Fatalf("field order changes canonical JSON:\n%s\n%s", x, y)
	}
	m, err := JSON(map[string]any{"b": []int{2, 1}, "c": map[string]any{}, "a": "v"})
	if err != nil {
		t.Fatal(err)
	}
	if string(m) != string(x) {
		t.Fatalf("map and struct forms differ:\n%s\n%s", m, x)
	}
}

func TestJSONIdempotent(t *testing.T) {
	in := json.RawMessage(`{ "z": [1.0, {"b": "<", "a": 2e-3}], "a": "\u2028 é" }`)
	once, err := JSON(in)
	if err != nil {
		t.Fatal(err)
	}
	twice, err := JSON(json.RawMessage(once))
	if err != nil {
		t.Fatal(err)
	}
	if string(once) != string(twice) {
		t.Fatalf("canonical JSON is not a fixed point:\n%s\n%s", once, twice)
	}
}

func TestJSONErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   any
	}{
		{"channel", make(chan int)},
		{"NaN", math.NaN()},
		{"invalid raw message", json.RawMessage(`{"a":`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, err := JSON(tc.in); err == nil {
				t.Fatalf("JSON(%v) = %s, want an error", tc.in, got)
			}
		})
	}
}

func TestSHA256Hex(t *testing.T) {
	for _, tc := range []struct {
		in, want string
	}{
		// FIPS 180-2 test vectors.
		{"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
		{"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got := SHA256Hex([]byte(tc.in))
			if got != tc.want {
				t.Fatalf("SHA256Hex(%q) = %s, want %s", tc.in, got, tc.want)
			}
			if strings.ToLower(got) != got {
				t.Fatalf("SHA256Hex(%q) = %s is not lowercase", tc.in, got)
			}
		})
	}
}

func TestRepeatedKey(t *testing.T) {
	for raw, want := range map[string]string{
		`{"a":1,"b":2}`:        "-",
		`{"a":1,"b":2,"a":3}`:  "a",
		`{"a":{"x":1,"x":2}}`:  "-", // values are not looked into
		`{"":1,"":2}`:          "",
		`[1,1]`:                "-",
		`{"a":`:                "-",
		` {"p":{}, "p":null} `: "p",
		`{"\u0061":1,"a":2}`:   "a",
	} {
		key, ok := RepeatedKey([]byte(raw))
		if !ok {
			key = "-"
		}
		if key != want {
			t.Errorf("RepeatedKey(%s) = %q, %v; want %q", raw, key, ok, want)
		}
	}
}
