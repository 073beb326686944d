package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// FuzzTranscript feeds LoadReplayer (what --replay reads) arbitrary files.
// A transcript it accepts must replay faithfully: each recorded request
// gets exactly its recorded answer or error, in order, and then a
// mismatch; written back line by line it loads to the same exchanges. A
// transcript it refuses gets an error naming the file.
func FuzzTranscript(f *testing.F) {
	// Short seeds: the exchanges --record writes, with short texts. The
	// example transcripts (7 and 80 KB) were the seeds: an input that finds
	// new code is minimized before fuzzing goes on, in time that grows with
	// the square of its length, so that a run did little else.
	full := Request{Model: "example-scripted-model", Messages: []Message{{Role: "system", Content: "You are the SE."}, {Role: "user", Content: "WO-01: add multiply"}},
		SchemaName: "se_proposal", Schema: map[string]any{"type": "object", "additionalProperties": false, "required": []any{"summary"}}, CacheKey: "factory-0123456789abcdef"}
	line, err := json.Marshal(Exchange{Seq: 1, RequestSHA256: full.Hash(), Request: full,
		Response: &Response{Content: `{"summary":"Add multiply.","writes":[]}`, FinishReason: "stop", Model: "example-scripted-model", Usage: Usage{PromptTokens: 900, CompletionTokens: 40, TotalTokens: 940}}})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(append(line, '\n'))
	f.Add(line[:len(line)/2]) // cut in the middle of a line, as a crash would
	req := Request{Model: "m", Messages: []Message{{Role: "user", Content: "hi"}}}
	pe := &ProviderError{Kind: KindRateLimited, Provider: "openai", URL: "http://x/v1", Model: "m", Status: 429, Attempts: 4}
	for _, ex := range []Exchange{
		{Seq: 1, RequestSHA256: req.Hash(), Request: req, Response: &Response{Content: "ok", FinishReason: "stop", Usage: Usage{PromptTokens: 1, CompletionTokens: 2, TotalTokens: 3}}},
		{Seq: 2, RequestSHA256: req.Hash(), Request: req, Error: "boom"},
		{Seq: 3, RequestSHA256: req.Hash(), Request: req, Error: pe.Error(), ProviderError: pe},
		{Seq: 1, RequestSHA256: "0000", Request: req, Response: &Response{}},
	} {
		line, _ := json.Marshal(ex)
		f.Add(append(line, '\n'))
	}
	f.Add([]byte("\n\n"))
	f.Add([]byte(`{"seq":1,"request_sha256":"x","request":{},"response":{"content":""},"extra":1}`))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(dir, "t.jsonl")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		r, err := LoadReplayer(path)
		_, again := LoadReplayer(path)
		if (err == nil) != (again == nil) || err != nil && err.Error() != again.Error() {
			t.Fatalf("not deterministic: %v / %v", err, again)
		}
		if err != nil {
			if !strings.Contains(err.Error(), path) {
				t.Fatalf("error does not name the transcript: %v", err)
			}
			return
		}
		exchanges := r.exchanges

		// Written back, it loads to the same exchanges.
		var buf bytes.Buffer
		for _, ex := range exchanges {
			line, err := json.Marshal(ex)
			if err != nil {
				t.Fatalf("exchange %d does not encode: %v", ex.Seq, err)
			}
			buf.Write(append(line, '\n'))
		}
		if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
			t.Fatal(err)
		}
		back, err := LoadReplayer(path)
		if err != nil {
			t.Fatalf("a transcript written back from what was loaded does not load: %v", err)
		}
		if !reflect.DeepEqual(back.exchanges, exchanges) {
			t.Fatalf("round trip changed the exchanges:\n%+v\n%+v", exchanges, back.exchanges)
		}

		// Replaying the recorded requests gives the recorded outcomes.
		for i, ex := range exchanges {
			resp, err := r.Complete(context.Background(), ex.Request)
			var mismatch *ReplayMismatchError
			if errors.As(err, &mismatch) {
				t.Fatalf("exchange %d: its own request does not replay: %v", i+1, err)
			}
			switch {
			case ex.ProviderError != nil:
				got, ok := AsProviderError(err)
				if !ok || !reflect.DeepEqual(got, ex.ProviderError) {
					t.Fatalf("exchange %d: replayed %v, recorded provider error %+v", i+1, err, ex.ProviderError)
				}
			case ex.Error != "":
				if err == nil || err.Error() != ex.Error {
					t.Fatalf("exchange %d: replayed %v, recorded error %q", i+1, err, ex.Error)
				}
			default:
				if err != nil || !reflect.DeepEqual(resp, *ex.Response) {
					t.Fatalf("exchange %d: replayed %+v, %v; recorded %+v", i+1, resp, err, *ex.Response)
				}
			}
		}
		var mismatch *ReplayMismatchError
		if _, err := r.Complete(context.Background(), req); !errors.As(err, &mismatch) {
			t.Fatalf("a request beyond the transcript: %v, want a ReplayMismatchError", err)
		}
	})
}
