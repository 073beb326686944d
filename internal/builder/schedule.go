package builder

// The decisions of a parallel build, as pure functions of the orders'
// states: which order to integrate next and which to start, shared by the
// local runner (parallel.go) and the Temporal workflow (internal/temporal).
// Only what finishes when depends on timing; what is decided from a given
// state never does, and integration follows the plan's order.

// OrderState is where a work order of a parallel build is.
type OrderState int

const (
	StatePending     OrderState = iota // not started (yet)
	StateRunning                       // in its worktree
	StatePassed                        // committed in its worktree, waiting to be integrated
	StateIntegrating                   // being applied to the build branch (and rechecked)
	StateIntegrated                    // on the build branch
	StateFailed                        // failed (or stopped by a budget or an error)
	StateBlocked                       // depends on a failed order: never started
)

// depsIntegrated reports whether every order j depends on is on the
// branch.
func depsIntegrated(deps [][]int, st []OrderState, j int) bool {
	for _, i := range deps[j] {
		if st[i] != StateIntegrated {
			return false
		}
	}
	return true
}

// NextIntegration is the order to integrate now, or -1: the first order
// in plan order that is neither integrated nor settled as never to be
// integrated, when it has passed and its dependencies are on the branch.
// An order still running (or pending, unless the build is stopping)
// holds back every later one, so the branch gets orders in plan order.
// Failed and blocked orders are skipped: after a failure every passed
// order whose dependencies all passed is still integrated.
func NextIntegration(deps [][]int, st []OrderState, stopping bool) int {
	for j, s := range st {
		switch s {
		case StateIntegrated, StateFailed, StateBlocked:
			continue
		case StateIntegrating, StateRunning:
			return -1
		case StatePending:
			if stopping {
				continue
			}
			return -1
		case StatePassed:
			if depsIntegrated(deps, st, j) {
				return j
			}
			return -1
		}
	}
	return -1
}

// depsPassed reports whether every order j depends on has passed: it has
// a commit (in its worktree or on the branch) to start j from.
func depsPassed(deps [][]int, st []OrderState, j int) bool {
	for _, i := range deps[j] {
		if s := st[i]; s != StatePassed && s != StateIntegrating && s != StateIntegrated {
			return false
		}
	}
	return true
}

// ToStart are the orders to start now, lowest first: pending ones whose
// dependencies have all passed (integrated or not: see BaseChain), as
// long as fewer than jobs run; none once the build is stopping.
func ToStart(deps [][]int, st []OrderState, jobs int, stopping bool) []int {
	if stopping {
		return nil
	}
	running := 0
	for _, s := range st {
		if s == StateRunning {
			running++
		}
	}
	var start []int
	for j, s := range st {
		if running+len(start) >= jobs {
			break
		}
		if s == StatePending && depsPassed(deps, st, j) {
			start = append(start, j)
		}
	}
	return start
}

// Block marks every pending order that depends, directly or through
// others, on failed order f as blocked.
func Block(deps [][]int, st []OrderState, f int) {
	for j := f + 1; j < len(st); j++ {
		if st[j] != StatePending {
			continue
		}
		for _, i := range deps[j] {
			if i == f || st[i] == StateBlocked {
				st[j] = StateBlocked
				break
			}
		}
	}
}

// BaseChain lists, ascending, the orders order j depends on directly or
// through others. j starts from the commit the build started from with
// their changes applied in this order (Repo.Replay): a tree that holds
// every dependency, decided by the plan alone — not by what happened to
// be integrated when j started — and, when they are a prefix of the plan
// already on the branch, the branch's own commit.
func BaseChain(deps [][]int, j int) []int {
	in := map[int]bool{}
	var visit func(int)
	visit = func(k int) {
		for _, i := range deps[k] {
			if !in[i] {
				in[i] = true
				visit(i)
			}
		}
	}
	visit(j)
	chain := make([]int, 0, len(in))
	for i := range j {
		if in[i] {
			chain = append(chain, i)
		}
	}
	return chain
}
