package llm

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// FuzzPrices feeds LoadPrices (--prices, a hand-written file) arbitrary
// files. A refusal names the file; an accepted table round-trips through
// its JSON form, holds no repeated key (the file would say two things), and
// gives a finite cost for any plausible usage.
func FuzzPrices(f *testing.F) {
	for _, s := range []string{
		`{"prices": {"gpt-4.1": {"input_per_mtok": 2, "output_per_mtok": 8},
		"qwen2.5-coder:7b": {"input_per_mtok": 0, "output_per_mtok": 0}}}`,
		`{"prices": {}}`,
		`{"prices": {"m": {"input_per_mtok": 1, "output_per_mtok": 1, "input_per_mtok": 9}}}`,
		`{"prices": {"a": {"input_per_mtok": 1, "output_per_mtok": 1}}, "prices": {}}`,
		`{"prices": {"m": {"input_per_mtok": 1e308, "output_per_mtok": 1}}}`,
		`{"prices": {"m": {"input_per_mtok": -0, "output_per_mtok": 1.5e-7}}}`,
		`{"prices": {}} {}`,
		`{"prices": {"c": {"input_per_mtok": 3, "output_per_mtok": 15, "cached_input_per_mtok": 0.3, "cache_write_per_mtok": 3.75, "cache_write_1h_per_mtok": 6}}}`,
	} {
		f.Add([]byte(s))
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(dir, "prices.json")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		p, err := LoadPrices(path)
		if err != nil {
			if !strings.Contains(err.Error(), path) {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		entries, err := parsePrices(data)
		if err != nil {
			t.Fatalf("LoadPrices accepted what parsePrices refuses: %v", err)
		}
		if key := anyRepeatedKey(data); key != "" {
			t.Fatalf("accepted a prices file that repeats the key %q: %s", key, data)
		}
		again, err := json.Marshal(map[string]any{"prices": entries})
		if err != nil {
			t.Fatal(err)
		}
		back, err := parsePrices(again)
		if err != nil || !reflect.DeepEqual(back, entries) {
			t.Fatalf("round trip: %v\n%v\n%v", err, entries, back)
		}
		for model := range entries {
			usd, known := p.Cost(model, Usage{PromptTokens: 1e9, CompletionTokens: 1e9, TotalTokens: 2e9,
				CachedInputTokens: 1e8, CacheWriteTokens: 5e8, CacheWrite1hTokens: 2e8})
			if !known || math.IsInf(usd, 0) || math.IsNaN(usd) || usd < 0 {
				t.Fatalf("model %q: cost of 2e9 tokens is %v (known %v)", model, usd, known)
			}
		}
	})
}

// anyRepeatedKey returns a key that some JSON object in data holds twice.
func anyRepeatedKey(data []byte) string {
	dec := json.NewDecoder(bytes.NewReader(data))
	var stack []map[string]bool
	expectKey := func() bool { return len(stack) > 0 && stack[len(stack)-1] != nil }
	for {
		tok, err := dec.Token()
		if err != nil {
			return ""
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, map[string]bool{})
			continue
		case json.Delim('['):
			stack = append(stack, nil)
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
			continue
		}
		if key, ok := tok.(string); ok && expectKey() && dec.More() {
			// In an object, tokens alternate key, value; a key is
			// followed by its value, so decode it whole.
			if stack[len(stack)-1][key] {
				return key
			}
			stack[len(stack)-1][key] = true
			var v json.RawMessage
			if dec.Decode(&v) != nil {
				return ""
			}
			if k := anyRepeatedKey(v); k != "" {
				return k
			}
		}
	}
}
