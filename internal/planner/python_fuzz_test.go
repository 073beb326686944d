package planner

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// realInspection is what inspectScript printed (python3 3.11) for the codes
// "import calc; assert calc.add(2, 3) == 5", "from os.path import join,
// exists\nimport json, numpy.linalg", "def f(:\n  pass", "return 1",
// "from . import x\nimport sys" and "x = 'é'\nimport café".
const realInspection = `[{"syntax_error": "", "imports": [{"module": "calc", "names": null, "stdlib": false}]}, {"syntax_error": "", "imports": [{"module": "os.path", "names": ["join", "exists"], "stdlib": true}, {"module": "json", "names": null, "stdlib": true}, {"module": "numpy.linalg", "names": null, "stdlib": false}]}, {"syntax_error": "line 1: invalid syntax", "imports": []}, {"syntax_error": "line 1: 'return' outside function", "imports": []}, {"syntax_error": "", "imports": [{"module": "sys", "names": null, "stdlib": true}]}, {"syntax_error": "", "imports": [{"module": "caf\u00e9", "names": null, "stdlib": false}]}]`

// FuzzInspectionOutput feeds decodeInspection what the Python helper
// prints back (the codes' verdicts) and the number of codes asked about.
// Properties: the same verdicts or error twice; an error names the helper
// (its bin) and, for a bad result, its index; an accepted output holds
// exactly n results that an independent reading (a generic JSON decode,
// exact keys, exact types) reads the same: above all, a code reads as
// compiling only where the output says so with "syntax_error": "", so a
// missing, null, misspelt, repeated or mistyped verdict is refused, never
// taken for "compiles"; no imports for code that does not compile; and
// written back as the helper writes it, the verdicts read the same.
func FuzzInspectionOutput(f *testing.F) {
	f.Add([]byte(realInspection), 6)
	f.Add([]byte(realInspection), 5)
	f.Add([]byte(`[{"syntax_error": "", "imports": []}]`), 1)
	f.Add([]byte(`[{}]`), 1)                                                                            // no verdict: not "compiles"
	f.Add([]byte(`[{"imports": []}]`), 1)                                                               // the same
	f.Add([]byte(`[{"syntax_error": null, "imports": []}]`), 1)                                         // null is no verdict
	f.Add([]byte(`[{"SYNTAX_ERROR": "line 1: invalid syntax", "syntax_error": "", "imports": []}]`), 1) // misspelt key
	f.Add([]byte(`[{"syntax_error": "line 1: x", "syntax_error": "", "imports": []}]`), 1)              // repeated key
	f.Add([]byte(`[{"syntax_error": "", "imports": []}] [{"syntax_error": "line 1: x", "imports": []}]`), 1)
	f.Add([]byte(`[{"syntax_error": "line 1: x", "imports": [{"module": "os", "names": null, "stdlib": true}]}]`), 1)
	f.Add([]byte(`[{"syntax_error": "", "imports": [{"module": "", "names": [], "stdlib": 1}]}]`), 1)
	f.Add([]byte(`[{"syntax_error": "", "imports": [{"module": "os", "names": [null], "stdlib": true, "extra": 1}]}]`), 1)
	f.Add([]byte(`null`), 0)
	f.Add([]byte(`[{"syntax_error":"line 1: \udc80","imports":[]}]`), 1)
	f.Add([]byte(`[{"syntax_error":"line 1: \ud83d\ude00 \\udc80","imports":[]}]`), 1)
	f.Add([]byte(`{"syntax_error": ""}`), 1)
	f.Add([]byte("Traceback (most recent call last):\n"), 1)
	f.Fuzz(func(t *testing.T, out []byte, n int) {
		if n < 0 || n > 1000 {
			return
		}
		const bin = "/opt/py/python3"
		infos, err := decodeInspection(bin, out, n)
		infos2, err2 := decodeInspection(bin, out, n)
		if !reflect.DeepEqual(infos, infos2) || (err == nil) != (err2 == nil) || (err != nil && err.Error() != err2.Error()) {
			t.Fatalf("differs run to run: %v %v / %v %v", infos, err, infos2, err2)
		}
		want, why := readInspection(out, n)
		if err != nil {
			if infos != nil {
				t.Fatalf("an error and verdicts: %v", err)
			}
			if !strings.HasPrefix(err.Error(), bin+" ") || strings.Contains(err.Error(), "\n") {
				t.Fatalf("the error does not start with the helper's name, on one line: %q", err)
			}
			if why == "" {
				t.Fatalf("refused (%v), but it is an output the helper writes: %+v", err, want)
			}
			if i := strings.Index(why, ":"); strings.HasPrefix(why, "result ") && !strings.Contains(err.Error(), why[:i]) {
				t.Fatalf("the error %q does not name %s", err, why[:i])
			}
			return
		}
		if why != "" {
			t.Fatalf("accepted %+v, but %s", infos, why)
		}
		if !reflect.DeepEqual(infos, want) {
			t.Fatalf("read as %+v, an independent reading gives %+v", infos, want)
		}
		back, err := json.Marshal(infos)
		if err != nil {
			t.Fatal(err)
		}
		again, err := decodeInspection(bin, back, n)
		if err != nil || !reflect.DeepEqual(again, infos) {
			t.Fatalf("written back as %s, reads as %+v, %v", back, again, err)
		}
	})
}

// readInspection is the test's own reading of the helper's output: what
// the verdicts are, or why the output is not one the helper writes
// ("result N: ..." when it is one result's fault).
func readInspection(out []byte, n int) ([]PythonInfo, string) {
	// The helper's json.dumps writes ASCII only, and a \ud800-\udfff
	// escape only as half of a pair (the codes it reads are valid UTF-8).
	if !utf8.Valid(out) {
		return nil, "not UTF-8"
	}
	if loneSurrogate(out) {
		return nil, "a lone surrogate escape"
	}
	// A key twice anywhere: the generic reading would keep one silently.
	if repeatedKeyAnywhere(out) {
		return nil, "a repeated key"
	}
	var doc any
	dec := json.NewDecoder(strings.NewReader(string(out)))
	if err := dec.Decode(&doc); err != nil {
		return nil, "not JSON"
	}
	if dec.InputOffset() != int64(len(strings.TrimRight(string(out), " \t\r\n"))) {
		return nil, "data after the array"
	}
	arr, ok := doc.([]any)
	if !ok || len(arr) != n {
		return nil, "not an array of n results"
	}
	exact := func(v any, keys ...string) (map[string]any, bool) {
		m, ok := v.(map[string]any)
		if !ok || len(m) != len(keys) {
			return nil, false
		}
		for _, k := range keys {
			if _, ok := m[k]; !ok {
				return nil, false
			}
		}
		return m, true
	}
	infos := make([]PythonInfo, n)
	for i, v := range arr {
		res := "result " + strconv.Itoa(i) + ": "
		m, ok := exact(v, "syntax_error", "imports")
		if !ok {
			return nil, res + "keys"
		}
		se, ok := m["syntax_error"].(string)
		imps, ok2 := m["imports"].([]any)
		if !ok || !ok2 || (se != "" && len(imps) > 0) {
			return nil, res + "types"
		}
		infos[i] = PythonInfo{SyntaxError: se, Imports: []Import{}}
		for _, iv := range imps {
			im, ok := exact(iv, "module", "names", "stdlib")
			if !ok {
				return nil, res + "import keys"
			}
			mod, ok := im["module"].(string)
			std, ok2 := im["stdlib"].(bool)
			if !ok || !ok2 || mod == "" {
				return nil, res + "import types"
			}
			imp := Import{Module: mod, Stdlib: std}
			if im["names"] != nil {
				names, ok := im["names"].([]any)
				if !ok || len(names) == 0 {
					return nil, res + "names"
				}
				for _, nv := range names {
					s, ok := nv.(string)
					if !ok || s == "" {
						return nil, res + "a name"
					}
					imp.Names = append(imp.Names, s)
				}
			}
			infos[i].Imports = append(infos[i].Imports, imp)
		}
	}
	return infos, ""
}

// repeatedKeyAnywhere reports whether any object in the JSON text data
// holds a key twice.
func repeatedKeyAnywhere(data []byte) bool {
	dec := json.NewDecoder(strings.NewReader(string(data)))
	var seen []map[string]bool // one per open object
	var inObj []bool           // per open container: is it an object
	expectKey := false
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		switch tok {
		case json.Delim('{'):
			seen, inObj = append(seen, map[string]bool{}), append(inObj, true)
			expectKey = true
			continue
		case json.Delim('['):
			inObj = append(inObj, false)
			expectKey = false
			continue
		case json.Delim('}'):
			seen, inObj = seen[:len(seen)-1], inObj[:len(inObj)-1]
		case json.Delim(']'):
			inObj = inObj[:len(inObj)-1]
		default:
			if expectKey {
				k := tok.(string)
				if seen[len(seen)-1][k] {
					return true
				}
				seen[len(seen)-1][k] = true
				expectKey = false
				continue
			}
		}
		// After a value: the next token is a key when inside an object.
		expectKey = len(inObj) > 0 && inObj[len(inObj)-1]
	}
}

// loneSurrogate reports whether out holds a \u escape of a UTF-16
// surrogate that is not a high one followed by a low one.
func loneSurrogate(out []byte) bool {
	surrogate := func(i int) (high, low bool) {
		if i+6 > len(out) || out[i] != '\\' || out[i+1] != 'u' {
			return false, false
		}
		v, err := strconv.ParseUint(string(out[i+2:i+6]), 16, 16)
		if err != nil {
			return false, false
		}
		return v >= 0xd800 && v < 0xdc00, v >= 0xdc00 && v < 0xe000
	}
	for i := 0; i < len(out); i++ {
		if out[i] != '\\' {
			continue
		}
		high, low := surrogate(i)
		switch {
		case low:
			return true
		case high:
			if _, low2 := surrogate(i + 6); !low2 {
				return true
			}
			i += 11 // the pair
		default:
			i++ // the escaped character
		}
	}
	return false
}
