package llmtest

import (
	"encoding/json"
	"strings"
	"sync"
)

// PromptCache simulates a provider's prompt cache for a scripted server
// (Server.SimulateCache and the others), so that tests can measure what a
// real provider would read from its cache. Tokens are counted as
// ceil(bytes/4).
//
// OpenAI style (Chat Completions, Responses): every request's prompt — its
// messages' texts in order — is cached; a request reads the longest prefix
// it shares with an earlier one, in steps of 128 tokens from 1024 up,
// nothing below 1024.
//
// Anthropic style: only prefixes ending at a cache_control breakpoint are
// written (order: tools, system, messages); a request reads the longest of
// its breakpoint prefixes that an earlier request wrote, and writes the
// longer ones. Prefixes under 1024 tokens are not cached.
type PromptCache struct {
	mu      sync.Mutex
	prompts []string        // OpenAI: every prompt seen
	written map[string]bool // Anthropic: the prefixes written
	usage   []CacheUsage
}

// CacheUsage is what the cache reported for one request: all its input
// tokens, and the parts read from and written to the cache.
type CacheUsage struct{ Input, Read, Write int64 }

// ReadShare is Read ÷ Input.
func (u CacheUsage) ReadShare() float64 {
	if u.Input == 0 {
		return 0
	}
	return float64(u.Read) / float64(u.Input)
}

// Usage returns what the cache reported for each request, in order.
func (c *PromptCache) Usage() []CacheUsage {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]CacheUsage(nil), c.usage...)
}

// Cache minimums and steps, as the providers document them.
const (
	cacheMinTokens  = 1024
	cacheStepTokens = 128
)

func tokens(n int) int64 { return int64((n + 3) / 4) }

// openai returns the prompt's tokens and how many of them the cache holds,
// then caches the prompt.
func (c *PromptCache) openai(prompt string) (input, cached int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	best := 0
	for _, p := range c.prompts {
		n := 0
		for n < len(p) && n < len(prompt) && p[n] == prompt[n] {
			n++
		}
		best = max(best, n)
	}
	c.prompts = append(c.prompts, prompt)
	input = tokens(len(prompt))
	if hit := int64(best / 4); hit >= cacheMinTokens { // whole tokens of the shared prefix
		cached = hit / cacheStepTokens * cacheStepTokens
	}
	c.usage = append(c.usage, CacheUsage{Input: input, Read: cached})
	return input, cached
}

// anthropic takes the request's blocks in order, each with whether it
// ends at a breakpoint, and returns the uncached input, the cache read and
// the cache write.
func (c *PromptCache) anthropic(blocks []cacheBlock) (uncached, read, write int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.written == nil {
		c.written = map[string]bool{}
	}
	var prefix strings.Builder
	var marks []string
	for _, b := range blocks {
		prefix.WriteString(b.text)
		if b.breakpoint {
			marks = append(marks, prefix.String())
		}
	}
	total := tokens(prefix.Len())
	readBytes := 0
	for _, m := range marks {
		if c.written[m] {
			readBytes = len(m)
		}
	}
	writeEnd := readBytes
	for _, m := range marks {
		if len(m) > readBytes && tokens(len(m)) >= cacheMinTokens {
			c.written[m] = true
			writeEnd = len(m)
		}
	}
	read = tokens(readBytes)
	write = tokens(writeEnd) - read
	c.usage = append(c.usage, CacheUsage{Input: total, Read: read, Write: write})
	return total - read - write, read, write
}

type cacheBlock struct {
	text       string
	breakpoint bool
	ttl        string // the breakpoint's "ttl", "" for the default
}

// anthropicBlocks lists a Messages request's tools, system blocks and
// message blocks in cache order.
func anthropicBlocks(req map[string]any) []cacheBlock {
	var out []cacheBlock
	add := func(v any) {
		m, _ := v.(map[string]any)
		cc, bp := m["cache_control"].(map[string]any)
		ttl, _ := cc["ttl"].(string)
		text, _ := m["text"].(string)
		if text == "" {
			text = canonical(m) // a tool: its whole definition
		}
		out = append(out, cacheBlock{text: text, breakpoint: bp, ttl: ttl})
	}
	tools, _ := req["tools"].([]any)
	for _, t := range tools {
		add(t)
	}
	switch sys := req["system"].(type) {
	case string:
		out = append(out, cacheBlock{text: sys})
	case []any:
		for _, b := range sys {
			add(b)
		}
	}
	msgs, _ := req["messages"].([]any)
	for _, m := range msgs {
		mm, _ := m.(map[string]any)
		switch content := mm["content"].(type) {
		case string:
			out = append(out, cacheBlock{text: content})
		case []any:
			for _, b := range content {
				add(b)
			}
		}
	}
	return out
}

// openaiPrompt is a Chat Completions or Responses request's prompt text:
// its messages (or instructions and input) in order.
func openaiPrompt(req map[string]any) string {
	var b strings.Builder
	if s, ok := req["instructions"].(string); ok {
		b.WriteString(s)
	}
	if s, ok := req["input"].(string); ok {
		b.WriteString(s)
	}
	for _, key := range []string{"messages", "input"} {
		items, _ := req[key].([]any)
		for _, m := range items {
			mm, _ := m.(map[string]any)
			switch c := mm["content"].(type) {
			case string:
				b.WriteString(c)
			case []any:
				for _, part := range c {
					p, _ := part.(map[string]any)
					s, _ := p["text"].(string)
					b.WriteString(s)
				}
			}
		}
	}
	return b.String()
}

func canonical(v any) string {
	b, _ := json.Marshal(v) // map keys sorted
	return string(b)
}
