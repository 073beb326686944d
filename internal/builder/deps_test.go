package builder

import (
	"slices"
	"testing"

	"github.com/factory-harness/factory/internal/workorder"
)

func wo(allowed, context []string, accept ...string) workorder.WorkOrder {
	return workorder.WorkOrder{AllowedFiles: allowed, ContextFiles: context, AcceptanceCommands: accept}
}

func TestDependencies(t *testing.T) {
	a := wo([]string{"pkg/a.py", "tests/test_a.py"}, nil, "python3 -m unittest tests.test_a")
	for _, tc := range []struct {
		name string
		b    workorder.WorkOrder
		vc   *workorder.VerifyContract
		dep  bool
	}{
		{"disjoint files", wo([]string{"pkg/b.py", "tests/test_b.py"}, []string{"pkg/b.py"}, "python3 -m unittest tests.test_b"), nil, false},
		{"same allowed file", wo([]string{"pkg/a.py"}, nil, "true"), nil, true},
		{"reads a's file", wo([]string{"pkg/b.py"}, []string{"pkg/a.py"}, "true"), nil, true},
		{"directory holding a's file", wo([]string{"pkg/b.py"}, []string{"pkg"}, "true"), nil, true},
		{"precondition on a's file", workorder.WorkOrder{AllowedFiles: []string{"pkg/b.py"}, AcceptanceCommands: []string{"true"},
			Preconditions: []workorder.Condition{{Kind: "file_exists", Path: "pkg/a.py"}}}, nil, true},
		{"postcondition on a's file", workorder.WorkOrder{AllowedFiles: []string{"pkg/b.py"}, AcceptanceCommands: []string{"true"},
			Postconditions: []workorder.Condition{{Kind: "file_absent", Path: "tests/test_a.py"}}}, nil, true},
		{"command names the path", wo([]string{"pkg/b.py"}, nil, "cat pkg/a.py"), nil, true},
		{"command imports the module", wo([]string{"pkg/b.py"}, nil, `python3 -c "import a; print(a.f())"`), nil, true},
		{"command runs a's test module", wo([]string{"pkg/b.py"}, nil, "python3 -m unittest tests.test_a"), nil, true},
		{"command runs a directory holding a's test", wo([]string{"pkg/b.py"}, nil, "python3 -m pytest tests/"), nil, true},
		{"command runs everything", wo([]string{"pkg/b.py"}, nil, "python3 -m compileall -q ."), nil, true},
		{"a longer name is not the module", wo([]string{"pkg/b.py"}, nil, `python3 -c "import abc"`), nil, false},
		// When in doubt, depend: files every later order's checks may read.
		{"verify contract names a's file", wo([]string{"pkg/b.py"}, nil, "true"), &workorder.VerifyContract{Command: "bash scripts/verify.sh",
			Requires: []workorder.Condition{{Kind: "file_exists", Path: "tests/test_a.py"}}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Dependencies(&workorder.Manifest{VerifyContract: tc.vc, WorkOrders: []workorder.WorkOrder{a, tc.b}})
			if dep := slices.Equal(got[1], []int{0}); dep != tc.dep || len(got[0]) != 0 {
				t.Errorf("deps = %v, want dependent %v", got, tc.dep)
			}
		})
	}
	for _, global := range []string{"scripts/verify.sh", "go.mod", "package.json", "pyproject.toml", "Makefile", ".gitignore", "sub/.gitignore", "tests/conftest.py", "pkg/__init__.py"} {
		t.Run("global "+global, func(t *testing.T) {
			m := &workorder.Manifest{WorkOrders: []workorder.WorkOrder{wo([]string{global}, nil, "true"), wo([]string{"x/y.py"}, nil, "true")}}
			if got := Dependencies(m); !slices.Equal(got[1], []int{0}) {
				t.Errorf("an order after one writing %s: deps %v, want [0]", global, got[1])
			}
		})
	}
	t.Run("a module at the root is not global", func(t *testing.T) {
		m := &workorder.Manifest{WorkOrders: []workorder.WorkOrder{wo([]string{"alpha.py"}, nil, "true"), wo([]string{"beta.py"}, nil, "true")}}
		if got := Dependencies(m); len(got[1]) != 0 {
			t.Errorf("deps %v, want none", got[1])
		}
	})
}

func TestConcurrent(t *testing.T) {
	for _, tc := range []struct {
		deps [][]int
		want bool
	}{
		{[][]int{nil}, false},
		{[][]int{nil, {0}, {1}}, false},
		{[][]int{nil, {0}, {0, 1}}, false},
		{[][]int{nil, {0}, {0}}, true},                // 1 and 2 only need 0
		{[][]int{nil, nil}, true},                     // nothing in common
		{[][]int{nil, {0}, {1}, {0}}, true},           // 3 needs only 0
		{[][]int{nil, {0}, {1}, {2}, {3}}, false},     // a chain
		{[][]int{nil, {0}, {1}, {1, 2}, {3}}, false},  // transitively a chain
		{[][]int{nil, {0}, {1}, {1}, {3}, {4}}, true}, // 3 does not need 2
	} {
		if got := Concurrent(tc.deps); got != tc.want {
			t.Errorf("Concurrent(%v) = %v, want %v", tc.deps, got, tc.want)
		}
	}
}

func TestSchedule(t *testing.T) {
	const (
		P = StatePending
		R = StateRunning
		S = StatePassed
		G = StateIntegrating
		I = StateIntegrated
		F = StateFailed
		B = StateBlocked
	)
	// 0 ← 1, 0 ← 2, 1 ← 3, 2 ← 4: two chains after a common root.
	deps := [][]int{nil, {0}, {0}, {1}, {2}}
	for _, tc := range []struct {
		name      string
		st        []OrderState
		jobs      int
		stopping  bool
		integrate int
		start     []int
	}{
		{"the root first", []OrderState{P, P, P, P, P}, 3, false, -1, []int{0}},
		{"the root is integrated: both chains start", []OrderState{I, P, P, P, P}, 3, false, -1, []int{1, 2}},
		{"jobs bound the start", []OrderState{I, P, P, P, P}, 1, false, -1, []int{1}},
		{"integration waits for an earlier order", []OrderState{I, R, S, P, P}, 1, false, -1, nil},
		{"plan order: the earlier passes first", []OrderState{I, S, S, P, P}, 3, false, 1, []int{3, 4}},
		{"one integration at a time", []OrderState{I, G, S, R, P}, 2, false, -1, []int{4}},
		{"a dependency on the branch starts its dependant", []OrderState{I, I, S, P, P}, 3, false, 2, []int{3, 4}},
		{"a passed dependency starts its dependant", []OrderState{I, R, S, P, P}, 3, false, -1, []int{4}},
		{"after a failure nothing starts", []OrderState{I, F, I, B, P}, 3, true, -1, nil},
		{"after a failure the others are integrated", []OrderState{I, F, S, B, P}, 3, true, 2, nil},
		{"after a failure a running order is waited for", []OrderState{I, F, R, B, P}, 3, true, -1, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := NextIntegration(deps, tc.st, tc.stopping); got != tc.integrate {
				t.Errorf("NextIntegration = %d, want %d", got, tc.integrate)
			}
			if got := ToStart(deps, tc.st, tc.jobs, tc.stopping); !slices.Equal(got, tc.start) {
				t.Errorf("ToStart = %v, want %v", got, tc.start)
			}
		})
	}
	st := []OrderState{I, F, P, P, P}
	Block([][]int{nil, {0}, {0}, {1}, {3}}, st, 1)
	if want := []OrderState{I, F, P, B, B}; !slices.Equal(st, want) {
		t.Errorf("Block: %v, want %v", st, want)
	}
	chains := [][]int{nil, {0}, {1}, {0}, {2, 3}}
	for j, want := range [][]int{{}, {0}, {0, 1}, {0}, {0, 1, 2, 3}} {
		if got := BaseChain(chains, j); !slices.Equal(got, want) {
			t.Errorf("BaseChain(%d) = %v, want %v", j, got, want)
		}
	}
}
