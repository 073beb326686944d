package workorder

import "testing"

// encoding/json turns lone surrogates into U+FFFD; DecodeStrict refuses them
// so the text decoded is always the text sent.
func TestDecodeStrictSurrogates(t *testing.T) {
	tests := []struct {
		name, summary string
		ok            bool
	}{
		{"valid pair", `a\ud83d\ude00b`, true},
		{"valid pair upper hex", `\uD83D\uDE00`, true},
		{"lone high at end", `a\ud800`, false},
		{"lone high before text", `a\ud800x`, false},
		{"lone low", `\udc00`, false},
		{"high then non-surrogate escape", `\ud800\u0041`, false},
		{"escaped backslash is not an escape", `\\ud800`, true},
		{"after an escaped quote", `\"\ud800`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var p WriteProposal
			err := DecodeStrict([]byte(`{"summary":"`+tt.summary+`","writes":[]}`), &p)
			if (err == nil) != tt.ok {
				t.Errorf("err = %v, want ok=%v", err, tt.ok)
			}
		})
	}
}
