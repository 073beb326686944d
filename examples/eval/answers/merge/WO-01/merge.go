// Package merge merges intervals.
package merge

import (
	"fmt"
	"slices"
)

// Interval is the closed range [Start, End].
type Interval struct{ Start, End int }

// Merge returns the union of in as disjoint intervals sorted by Start.
// Intervals that overlap or touch become one; in is not modified. It
// panics on an interval whose Start is after its End.
func Merge(in []Interval) []Interval {
	if len(in) == 0 {
		return nil
	}
	sorted := slices.Clone(in)
	for _, iv := range sorted {
		if iv.Start > iv.End {
			panic(fmt.Sprintf("merge: interval [%d, %d] starts after it ends", iv.Start, iv.End))
		}
	}
	slices.SortFunc(sorted, func(a, b Interval) int { return a.Start - b.Start })
	out := []Interval{sorted[0]}
	for _, iv := range sorted[1:] {
		last := &out[len(out)-1]
		if iv.Start <= last.End {
			last.End = max(last.End, iv.End)
			continue
		}
		out = append(out, iv)
	}
	return out
}
