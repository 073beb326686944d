package factory

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestOrderTerms(t *testing.T) {
	got := orderTerms("Add a `verbose` flag to parse_args and call Store.Find(x)", "go test ./cli -run TestVerboseFlag", "Make the help text clearer")
	want := []string{"Find", "Store", "TestVerboseFlag", "parse_args", "verbose"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("orderTerms (-want +got):\n%s", diff)
	}
}

func TestPartialView(t *testing.T) {
	lines := make([]string, 200)
	for i := range lines {
		lines[i] = fmt.Sprintf("line %03d", i+1) // 8 bytes + newline
	}
	lines[99] = "def parse_args(argv):"
	lines[149] = "    return parse_args(x)  # parse_argsv is not a match"
	lines[179] = "parse_argsv = 1"
	for _, tc := range []struct {
		name   string
		terms  []string
		budget int
		want   []lineRange
	}{
		{"head only without terms", nil, 10_000, []lineRange{{1, 30}}},
		{"head and both mentions", []string{"parse_args"}, 10_000, []lineRange{{1, 30}, {85, 115}, {135, 165}}},
		{"budget cuts the later mention", []string{"parse_args"}, 30*9 + 31*9 + 5*9, []lineRange{{1, 30}, {85, 115}, {135, 137}}}, // line 100 is 13 bytes longer than the others
		{"budget inside the head", []string{"parse_args"}, 5 * 9, []lineRange{{1, 5}}},
		{"no budget", []string{"parse_args"}, 0, nil},
		{"whole words only", []string{"args"}, 10_000, []lineRange{{1, 30}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := partialView(lines, tc.terms, tc.budget)
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(lineRange{})); diff != "" {
				t.Errorf("partialView (-want +got):\n%s", diff)
			}
			text, used := renderPartial(lines, got)
			if used > tc.budget {
				t.Errorf("renderPartial used %d bytes of a budget of %d", used, tc.budget)
			}
			for _, r := range got {
				if !strings.Contains(text, fmt.Sprintf("lines %d-%d:\n", r.first, r.last)) {
					t.Errorf("rendered view does not head range %v:\n%s", r, text)
				}
			}
		})
	}
}
