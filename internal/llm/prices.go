package llm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"

	"github.com/factory-harness/factory/internal/canon"
)

// Price is what a model costs, in USD per million tokens: uncached input,
// output, input read from the provider's prompt cache, input written to it
// (Anthropic's 5-minute TTL), and input written to it with a 1-hour TTL
// (Anthropic's long one; see Request.LongCache).
type Price struct {
	InputPerMTok        float64 `json:"input_per_mtok"`
	OutputPerMTok       float64 `json:"output_per_mtok"`
	CachedInputPerMTok  float64 `json:"cached_input_per_mtok"`
	CacheWritePerMTok   float64 `json:"cache_write_per_mtok"`
	CacheWrite1hPerMTok float64 `json:"cache_write_1h_per_mtok"`
}

// openaiPrice: OpenAI caches automatically and charges nothing extra for
// writing the cache, whatever its retention.
func openaiPrice(in, out, cached float64) Price { return Price{in, out, cached, in, in} }

// anthropicPrice: Anthropic bills cache reads at 0.1× the input price,
// 5-minute cache writes at 1.25× and 1-hour ones at 2×.
func anthropicPrice(in, out float64) Price { return Price{in, out, in / 10, in * 1.25, in * 2} }

// defaultPrices are list prices in USD per million tokens (standard tier,
// no batch discounts; cache reads and writes at their own rates) as the
// providers published them up to early 2026, written down in November 2026. They are an estimate: prices change,
// so costs computed from them are estimates too, and --prices FILE corrects
// or extends them. A model missing here has no cost, never a guessed one.
var defaultPrices = map[string]Price{
	// OpenAI
	"gpt-4.1":            openaiPrice(2.00, 8.00, 0.50),
	"gpt-4.1-mini":       openaiPrice(0.40, 1.60, 0.10),
	"gpt-4.1-nano":       openaiPrice(0.10, 0.40, 0.025),
	"gpt-4o":             openaiPrice(2.50, 10.00, 1.25),
	"gpt-4o-mini":        openaiPrice(0.15, 0.60, 0.075),
	"o1":                 openaiPrice(15.00, 60.00, 7.50),
	"o3":                 openaiPrice(2.00, 8.00, 0.50),
	"o3-mini":            openaiPrice(1.10, 4.40, 0.55),
	"o4-mini":            openaiPrice(1.10, 4.40, 0.275),
	"gpt-5":              openaiPrice(1.25, 10.00, 0.125),
	"gpt-5-mini":         openaiPrice(0.25, 2.00, 0.025),
	"gpt-5-nano":         openaiPrice(0.05, 0.40, 0.005),
	"gpt-5-codex":        openaiPrice(1.25, 10.00, 0.125),
	"gpt-5.1":            openaiPrice(1.25, 10.00, 0.125),
	"gpt-5.1-codex":      openaiPrice(1.25, 10.00, 0.125),
	"gpt-5.1-codex-mini": openaiPrice(0.25, 2.00, 0.025),
	"gpt-5.2":            openaiPrice(1.75, 14.00, 0.175),
	"gpt-5.2-codex":      openaiPrice(1.75, 14.00, 0.175),
	// Anthropic
	"claude-opus-4-6":   anthropicPrice(5.00, 25.00),
	"claude-opus-4-5":   anthropicPrice(5.00, 25.00),
	"claude-opus-4-1":   anthropicPrice(15.00, 75.00),
	"claude-opus-4-0":   anthropicPrice(15.00, 75.00),
	"claude-opus-4":     anthropicPrice(15.00, 75.00),
	"claude-sonnet-4-6": anthropicPrice(3.00, 15.00),
	"claude-sonnet-4-5": anthropicPrice(3.00, 15.00),
	"claude-sonnet-4-0": anthropicPrice(3.00, 15.00),
	"claude-sonnet-4":   anthropicPrice(3.00, 15.00),
	"claude-haiku-4-5":  anthropicPrice(1.00, 5.00),
	"claude-3-7-sonnet": anthropicPrice(3.00, 15.00),
	"claude-3-5-sonnet": anthropicPrice(3.00, 15.00),
	"claude-3-5-haiku":  anthropicPrice(0.80, 4.00),
	"claude-3-opus":     anthropicPrice(15.00, 75.00),
	"claude-3-haiku":    anthropicPrice(0.25, 1.25),
}

// snapshotSuffix is the one name rule besides an exact match: a dated
// snapshot or a "latest" alias costs what its base name costs —
// gpt-4.1-2025-04-14 → gpt-4.1, claude-sonnet-4-5-20250929 →
// claude-sonnet-4-5, claude-3-5-haiku-latest → claude-3-5-haiku. No other
// prefix matching: gpt-4.1 must not price gpt-4.1-mini.
var snapshotSuffix = regexp.MustCompile(`-(\d{4}-\d{2}-\d{2}|\d{8}|latest)$`)

// Prices is a price table: the built-in prices, possibly overridden and
// extended from a file. The zero value and nil know no model.
type Prices struct {
	models map[string]Price
}

// DefaultPrices returns the built-in table.
func DefaultPrices() *Prices {
	p := &Prices{models: make(map[string]Price, len(defaultPrices))}
	for k, v := range defaultPrices {
		p.models[k] = v
	}
	return p
}

// Lookup finds model's price by exact name, else by the name without a
// snapshot suffix (see snapshotSuffix).
func (p *Prices) Lookup(model string) (Price, bool) {
	if p == nil {
		return Price{}, false
	}
	if pr, ok := p.models[model]; ok {
		return pr, true
	}
	if base := snapshotSuffix.ReplaceAllString(model, ""); base != model {
		pr, ok := p.models[base]
		return pr, ok
	}
	return Price{}, false
}

// Cost is the estimated cost of usage on model in USD; known is false when
// the table has no price for model.
func (p *Prices) Cost(model string, u Usage) (usd float64, known bool) {
	pr, ok := p.Lookup(model)
	if !ok {
		return 0, false
	}
	return pr.cost(u), true
}

// cost is the sum of each part of u at its price: uncached input, cache
// reads, cache writes (5-minute and 1-hour) and output. The 1-hour writes
// are a part of the writes, never more than all of them.
func (pr Price) cost(u Usage) float64 {
	long := min(u.CacheWrite1hTokens, u.CacheWriteTokens)
	return (float64(u.UncachedInputTokens())*pr.InputPerMTok + float64(u.CachedInputTokens)*pr.CachedInputPerMTok +
		float64(u.CacheWriteTokens-long)*pr.CacheWritePerMTok + float64(long)*pr.CacheWrite1hPerMTok +
		float64(u.CompletionTokens)*pr.OutputPerMTok) / 1e6
}

// Estimate is a conservative cost of a call expected to send prompt input
// tokens and receive output ones: it assumes no cache hit, and every input
// token at the dearest of the uncached and cache-write prices — the 1-hour
// write price included when the call asks for the long cache (longCache).
func (p *Prices) Estimate(model string, prompt, output int64, longCache bool) (usd float64, known bool) {
	pr, ok := p.Lookup(model)
	if !ok {
		return 0, false
	}
	in := max(pr.InputPerMTok, pr.CacheWritePerMTok)
	if longCache {
		in = max(in, pr.CacheWrite1hPerMTok)
	}
	return (float64(prompt)*in + float64(output)*pr.OutputPerMTok) / 1e6, true
}

// extendedRetention lists the OpenAI models that accept
// prompt_cache_retention "24h" (extended prompt caching), as OpenAI listed
// them up to early 2026; other models may reject the field.
var extendedRetention = map[string]bool{
	"gpt-4.1": true, "gpt-5": true, "gpt-5-codex": true, "gpt-5.1": true, "gpt-5.1-codex": true,
	"gpt-5.1-codex-mini": true, "gpt-5.2": true,
}

// ExtendedRetention reports whether model accepts OpenAI's extended prompt
// cache retention ("24h"), by the names rule of Prices.Lookup: its exact
// name, or its name without a snapshot suffix.
func ExtendedRetention(model string) bool {
	return extendedRetention[model] || extendedRetention[snapshotSuffix.ReplaceAllString(model, "")]
}

// maxPricesFile bounds a prices file: it is a small hand-written table.
const maxPricesFile = 1 << 20

// LoadPrices returns the built-in table with the entries of a prices file
// added, replacing built-in entries of the same name. The file is JSON:
//
//	{"prices": {"gpt-4.1": {"input_per_mtok": 2.0, "output_per_mtok": 8.0,
//	                        "cached_input_per_mtok": 0.5, "cache_write_per_mtok": 2.0},
//	            "qwen2.5-coder:7b": {"input_per_mtok": 0, "output_per_mtok": 0}}}
//
// cached_input_per_mtok and cache_write_per_mtok are optional and default
// to input_per_mtok: without them cached input costs what uncached input
// does, as it did before caching was priced. cache_write_1h_per_mtok is
// optional and defaults to cache_write_per_mtok: one write price given
// prices every write. Decoding is strict: an unknown field, a duplicate model, a missing or
// negative price, a model name that is empty or has whitespace, or trailing
// data is an error naming the model and field.
func LoadPrices(path string) (*Prices, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read prices: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxPricesFile+1))
	if err != nil {
		return nil, fmt.Errorf("read prices %s: %w", path, err)
	}
	if len(data) > maxPricesFile {
		return nil, fmt.Errorf("prices file %s is larger than 1 MiB", path)
	}
	entries, err := parsePrices(data)
	if err != nil {
		return nil, fmt.Errorf("prices file %s: %w", path, err)
	}
	p := DefaultPrices()
	for k, v := range entries {
		p.models[k] = v
	}
	return p, nil
}

func parsePrices(data []byte) (map[string]Price, error) {
	var top struct {
		Prices json.RawMessage `json:"prices"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&top); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data after the JSON object")
	}
	if key, ok := canon.RepeatedKey(data); ok {
		return nil, fmt.Errorf("%q appears twice", key)
	}
	if top.Prices == nil || string(top.Prices) == "null" {
		return nil, errors.New(`missing "prices": want {"prices": {"MODEL": {"input_per_mtok": N, "output_per_mtok": N}}}`)
	}
	dec = json.NewDecoder(bytes.NewReader(top.Prices))
	dec.DisallowUnknownFields()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, errors.New(`"prices" must be an object mapping model names to prices`)
	}
	out := map[string]Price{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		model := t.(string) // object keys are strings
		if strings.TrimSpace(model) == "" || strings.ContainsFunc(model, func(r rune) bool { return r <= ' ' }) {
			return nil, fmt.Errorf("model name %q is empty or has whitespace", model)
		}
		if _, dup := out[model]; dup {
			return nil, fmt.Errorf("model %q is listed twice", model)
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, fmt.Errorf("model %q: %w", model, err)
		}
		if key, ok := canon.RepeatedKey(raw); ok {
			return nil, fmt.Errorf("model %q: %s appears twice", model, key)
		}
		var e struct {
			In      *float64 `json:"input_per_mtok"`
			Out     *float64 `json:"output_per_mtok"`
			Cached  *float64 `json:"cached_input_per_mtok"`
			Write   *float64 `json:"cache_write_per_mtok"`
			Write1h *float64 `json:"cache_write_1h_per_mtok"`
		}
		entry := json.NewDecoder(bytes.NewReader(raw))
		entry.DisallowUnknownFields()
		if err := entry.Decode(&e); err != nil {
			return nil, fmt.Errorf("model %q: %w", model, err)
		}
		for _, f := range []struct {
			name     string
			v        *float64
			optional bool
		}{{"input_per_mtok", e.In, false}, {"output_per_mtok", e.Out, false},
			{"cached_input_per_mtok", e.Cached, true}, {"cache_write_per_mtok", e.Write, true},
			{"cache_write_1h_per_mtok", e.Write1h, true}} {
			switch {
			case f.v == nil && f.optional:
			case f.v == nil:
				return nil, fmt.Errorf("model %q: missing %s", model, f.name)
			case *f.v < 0 || *f.v > maxPricePerMTok:
				return nil, fmt.Errorf("model %q: %s is %v; want a price from 0 to %v in USD per million tokens", model, f.name, *f.v, maxPricePerMTok)
			}
		}
		pr := Price{InputPerMTok: *e.In, OutputPerMTok: *e.Out, CachedInputPerMTok: *e.In, CacheWritePerMTok: *e.In}
		if e.Cached != nil {
			pr.CachedInputPerMTok = *e.Cached
		}
		if e.Write != nil {
			pr.CacheWritePerMTok = *e.Write
		}
		pr.CacheWrite1hPerMTok = pr.CacheWritePerMTok
		if e.Write1h != nil {
			pr.CacheWrite1hPerMTok = *e.Write1h
		}
		out[model] = pr
	}
	return out, nil
}

// maxPricePerMTok bounds a price read from a file: the dearest models cost
// hundreds of USD per million tokens, and a bound keeps every cost finite
// (1e308 per million tokens made the cost of a large run +Inf).
const maxPricePerMTok = 1e6
