package hiddentests

import (
	"reflect"
	"testing"

	"example.com/merge"
)

// ivs makes intervals from pairs of bounds.
func ivs(bounds ...int) []merge.Interval {
	var out []merge.Interval
	for i := 0; i+1 < len(bounds); i += 2 {
		out = append(out, merge.Interval{Start: bounds[i], End: bounds[i+1]})
	}
	return out
}

func TestMergeHidden(t *testing.T) {
	for _, tt := range []struct {
		name string
		in   []merge.Interval
		want []merge.Interval
	}{
		{"none", nil, nil},
		{"unsorted and nested", ivs(8, 10, 1, 4, 2, 3, 15, 18), ivs(1, 4, 8, 10, 15, 18)},
		{"touching", ivs(5, 7, 1, 3, 3, 5), ivs(1, 7)},
		{"points", ivs(2, 2, 2, 2, 0, 1), ivs(0, 1, 2, 2)},
		{"negative", ivs(-5, -1, -3, 2), ivs(-5, 2)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			in := append([]merge.Interval(nil), tt.in...)
			if got := merge.Merge(in); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Merge(%v) = %v, want %v", tt.in, got, tt.want)
			}
			if !reflect.DeepEqual(in, tt.in) {
				t.Errorf("Merge modified its input: %v, was %v", in, tt.in)
			}
		})
	}
}

func TestMergePanicsOnReversed(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("Merge([{3 1}]) did not panic")
		}
	}()
	merge.Merge(ivs(3, 1))
}
