package merge

import (
	"reflect"
	"testing"
)

func TestMerge(t *testing.T) {
	for _, tt := range []struct {
		name string
		in   []Interval
		want []Interval
	}{
		{"empty", nil, nil},
		{"one", []Interval{{1, 2}}, []Interval{{1, 2}}},
		{"overlapping", []Interval{{1, 3}, {2, 6}, {8, 10}}, []Interval{{1, 6}, {8, 10}}},
		{"touching", []Interval{{1, 3}, {3, 5}}, []Interval{{1, 5}}},
		{"unsorted", []Interval{{8, 10}, {1, 2}}, []Interval{{1, 2}, {8, 10}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := Merge(tt.in); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Merge(%v) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}

func TestMergeKeepsInput(t *testing.T) {
	in := []Interval{{5, 6}, {1, 2}}
	Merge(in)
	if !reflect.DeepEqual(in, []Interval{{5, 6}, {1, 2}}) {
		t.Errorf("Merge modified its input: %v", in)
	}
}

func TestMergePanicsOnReversed(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("no panic")
		}
	}()
	Merge([]Interval{{2, 1}})
}
