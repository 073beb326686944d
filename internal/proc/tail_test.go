package proc

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestTail(t *testing.T) {
	tests := []struct {
		name    string
		content string
		max     int
		want    string
	}{
		{"short file", "hello\n", 100, "hello\n"},
		{"exactly max", "hello", 5, "hello"},
		{"empty file", "", 10, ""},
		{"long file", "0123456789abcdef", 6, "[... 10 bytes truncated ...]\nabcdef"},
		{"zero max", "abc", 0, "[... 3 bytes truncated ...]\n"},
		// "é" is 2 bytes and "中" 3: a cut through a rune drops (and counts) the rest of it.
		{"cut inside a 2-byte rune", "aé-end", 5, "[... 3 bytes truncated ...]\n-end"},
		{"cut inside a 3-byte rune", "x中yz", 4, "[... 4 bytes truncated ...]\nyz"},
		{"cut on a rune boundary", "ab中", 3, "[... 2 bytes truncated ...]\n中"},
		{"invalid UTF-8 replaced", "ok\xff\xfe!", 100, "ok\uFFFD!"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "log")
			writeFile(t, path, tt.content, 0o644)
			got, err := Tail(path, tt.max)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("Tail(%q, %d) = %q, want %q", tt.content, tt.max, got, tt.want)
			}
		})
	}
}

func TestTailErrors(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name    string
		path    string
		wantErr string // "" means no error
	}{
		{"missing file", filepath.Join(dir, "missing"), ""},
		{"directory", dir, "is a directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Tail(tt.path, 10)
			if got != "" {
				t.Errorf("Tail(%q) = %q, want \"\"", tt.path, got)
			}
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("Tail(%q) error = %v, want %q", tt.path, err, tt.wantErr)
			}
		})
	}
}
