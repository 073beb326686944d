package mcp

import (
	"strings"
	"testing"
)

// factory_build's repair and max_repairs read as `factory build --repair
// --max-repairs` do: auto and 2 when left out.
func TestRepairArgs(t *testing.T) {
	n := func(v int) *int { return &v }
	for _, c := range []struct {
		repair  string
		max     *int
		want    bool
		wantMax int
		err     string
	}{
		{"", nil, true, DefaultMaxRepairs, ""},
		{"auto", nil, true, DefaultMaxRepairs, ""},
		{"off", nil, false, DefaultMaxRepairs, ""},
		{"auto", n(5), true, 5, ""},
		{"", n(0), true, 0, ""},
		{"sometimes", nil, false, 0, "repair must be auto or off"},
		{"auto", n(-1), false, 0, "max_repairs must not be negative"},
	} {
		got, gotMax, err := repairArgs(c.repair, c.max)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("repairArgs(%q, %v): err %v, want %q", c.repair, c.max, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want || gotMax != c.wantMax {
			t.Errorf("repairArgs(%q, %v) = %v, %d, %v; want %v, %d", c.repair, c.max, got, gotMax, err, c.want, c.wantMax)
		}
	}
}
