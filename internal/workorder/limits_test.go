package workorder

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestCheckID(t *testing.T) {
	for _, tc := range []struct {
		id string
		ok bool
	}{
		{"WO-01", true},
		{"WO-09", true},
		{"WO-10", true},
		{"WO-99", true},
		{"WO-1", false},
		{"WO-00", false},
		{"WO-100", false},
		{"WO-001", false},
		{"WO-+1", false},
		{"WO- 1", false},
		{"wo-01", false},
		{"WO01", false},
		{"WO-01 ", false},
		{"", false},
		{"bench-true", false},
		// WO-NNrK: an order a build's repair added.
		{"WO-03r1", true},
		{"WO-01r9", true},
		{"WO-99r99", true},
		{"WO-03r10", true},
		{"WO-00r1", false},
		{"WO-03r0", false},
		{"WO-03r01", false},
		{"WO-03r100", false},
		{"WO-3r1", false},
		{"WO-03R1", false},
		{"WO-03r", false},
		{"WO-03r1 ", false},
		{"WO-03r+1", false},
		{"WO-03rr1", false},
		{"WO-03-r1", false},
		{"WO-03r1r1", false},
	} {
		t.Run(tc.id, func(t *testing.T) {
			err := CheckID(tc.id)
			if (err == nil) != tc.ok {
				t.Fatalf("CheckID(%q) = %v, want ok=%v", tc.id, err, tc.ok)
			}
			if err != nil && !strings.Contains(err.Error(), "ids are WO-01 … WO-99 (two digits)") {
				t.Errorf("error %q does not state the rule", err)
			}
		})
	}
	for n := 1; n <= MaxWorkOrders; n++ {
		if err := CheckID(FormatID(n)); err != nil {
			t.Fatalf("CheckID(FormatID(%d)): %v", n, err)
		}
		if got, k, ok := ParseID(FormatID(n)); !ok || got != n || k != 0 {
			t.Fatalf("ParseID(FormatID(%d)) = %d, %d, %v", n, got, k, ok)
		}
	}
	if n, k, ok := ParseID("WO-03r12"); !ok || n != 3 || k != 12 {
		t.Errorf("ParseID(WO-03r12) = %d, %d, %v", n, k, ok)
	}
}

func TestCompareIDs(t *testing.T) {
	ids := []string{"WO-10", "x", "WO-03r10", "WO-04", "WO-03", "WO-03r2", "WO-1", "WO-03r1", "WO-01"}
	slices.SortFunc(ids, CompareIDs)
	want := []string{"WO-01", "WO-03", "WO-03r1", "WO-03r2", "WO-03r10", "WO-04", "WO-10", "WO-1", "x"}
	if !slices.Equal(ids, want) {
		t.Errorf("sorted %v, want %v", ids, want)
	}
}

// TestParseWorkOrderRefusesBadIDs: `factory run` refuses what the planner's
// E001 refuses (the planner tests check the other direction).
func TestParseWorkOrderRefusesBadIDs(t *testing.T) {
	for _, id := range []string{"WO-1", "WO-100", "task-1", "WO-03r0", "WO-3r1"} {
		_, err := ParseWorkOrder(orderWith(t, func(m map[string]any) { m["id"] = id }))
		if err == nil || !strings.Contains(err.Error(), "id: ") {
			t.Errorf("id %q: err = %v, want an id error", id, err)
		}
	}
}

func TestWorkOrderSizeLimits(t *testing.T) {
	big := strings.Repeat("x", MaxTextBytes+1)
	for _, tc := range []struct {
		name string
		data []byte
		want string // substring of the error, "" for none
	}{
		{"intent at the limit", orderWith(t, func(m map[string]any) { m["intent"] = big[1:] }), ""},
		{"intent over the limit", orderWith(t, func(m map[string]any) { m["intent"] = big }),
			"intent: is 65537 bytes; the limit is 65536 bytes (64 KiB)"},
		{"notes at the limit", orderWith(t, func(m map[string]any) { m["notes"] = big[1:] }), ""},
		{"notes over the limit", orderWith(t, func(m map[string]any) { m["notes"] = big }),
			"notes: is 65537 bytes; the limit is 65536 bytes (64 KiB)"},
		{"file over the limit", []byte(minimalOrder + strings.Repeat(" ", MaxWorkOrderBytes)),
			"the work order is 1048725 bytes; the limit is 1048576 bytes (1 MiB)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseWorkOrder(tc.data)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	ok := filepath.Join(dir, "ok.json")
	os.WriteFile(ok, []byte(minimalOrder), 0o644)
	if data, err := ReadFile(ok); err != nil || string(data) != minimalOrder {
		t.Fatalf("ReadFile = %q, %v", data, err)
	}
	big := filepath.Join(dir, "big.json")
	os.WriteFile(big, make([]byte, MaxWorkOrderBytes+1), 0o644)
	if _, err := ReadFile(big); err == nil || !strings.Contains(err.Error(), "big.json: the work order file is larger than the limit of 1048576 bytes (1 MiB)") {
		t.Fatalf("over the limit: err = %v", err)
	}
	if _, err := ReadFile(filepath.Join(dir, "missing.json")); !os.IsNotExist(err) {
		t.Fatalf("missing file: err = %v, want not-exist", err)
	}
	// An endless file is refused after the limit, not read until memory
	// runs out.
	if _, err := ReadFile("/dev/zero"); err == nil || !strings.Contains(err.Error(), "larger than the limit") {
		t.Fatalf("/dev/zero: err = %v", err)
	}
}

// TestInvisibleCharactersInPaths: every path field refuses characters that
// make a path display as another one.
func TestInvisibleCharactersInPaths(t *testing.T) {
	chars := map[string]string{
		"C0": "\x01", "DEL": "\x7f", "C1": "\u0085",
		"LRE": "\u202a", "RLE": "\u202b", "PDF": "\u202c", "LRO": "\u202d", "RLO": "\u202e",
		"LRI": "\u2066", "RLI": "\u2067", "FSI": "\u2068", "PDI": "\u2069",
		"LRM": "\u200e", "RLM": "\u200f", "ALM": "\u061c",
		"ZWSP": "\u200b", "ZWNJ": "\u200c", "ZWJ": "\u200d", "WJ": "\u2060", "BOM": "\ufeff",
	}
	fields := map[string]func(m map[string]any, p string){
		"allowed_files": func(m map[string]any, p string) { m["allowed_files"] = []any{p} },
		"context_files": func(m map[string]any, p string) { m["context_files"] = []any{p} },
		"forbidden":     func(m map[string]any, p string) { m["forbidden"] = []any{p} },
		"forbidden prose": func(m map[string]any, p string) {
			m["forbidden"] = []any{"do not touch " + p}
		},
		"preconditions": func(m map[string]any, p string) {
			m["preconditions"] = []any{map[string]any{"kind": FileExists, "path": p}}
		},
		"postconditions": func(m map[string]any, p string) {
			m["postconditions"] = []any{map[string]any{"kind": FileExists, "path": p}}
		},
	}
	for cname, c := range chars {
		p := "src/ev" + c + "il.py"
		if _, err := NormalizePath(p); err == nil {
			t.Errorf("NormalizePath accepts %s (used for proposal paths too)", cname)
		}
		for fname, set := range fields {
			_, err := ParseWorkOrder(orderWith(t, func(m map[string]any) { set(m, p) }))
			field := strings.Fields(fname)[0]
			if err == nil || !strings.Contains(err.Error(), field) {
				t.Errorf("%s in %s: err = %v", cname, fname, err)
			}
		}
	}
	if _, err := NormalizePath("a\u202eyp.exe"); err == nil || !strings.Contains(err.Error(), "bidirectional control character U+202E") {
		t.Errorf("RLO: err = %v, want it named", err)
	}
	if _, err := NormalizePath("ca\u200blc.py"); err == nil || !strings.Contains(err.Error(), "zero-width character U+200B") {
		t.Errorf("ZWSP: err = %v, want it named", err)
	}
}
