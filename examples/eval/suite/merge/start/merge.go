// Package merge merges intervals.
package merge

// Interval is the closed range [Start, End].
type Interval struct{ Start, End int }

// Merge returns the union of in as disjoint intervals sorted by Start.
func Merge(in []Interval) []Interval {
	panic("not implemented")
}
