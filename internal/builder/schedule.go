package builder

// The decisions of a parallel build, as pure functions of the orders'
// states: which order to integrate next and which to start. Only what
// finishes when depends on timing; what is decided from a given state
// never does, and integration follows the plan's order.

// orderState is where a work order of a parallel build is.
type orderState int

const (
	statePending     orderState = iota // not started (yet)
	stateRunning                       // in its worktree
	statePassed                        // committed in its worktree, waiting to be integrated
	stateIntegrating                   // being applied to the build branch (and rechecked)
	stateIntegrated                    // on the build branch
	stateFailed                        // failed (or stopped by a budget or an error)
	stateBlocked                       // depends on a failed order: never started
)

// depsIntegrated reports whether every order j depends on is on the
// branch.
func depsIntegrated(deps [][]int, st []orderState, j int) bool {
	for _, i := range deps[j] {
		if st[i] != stateIntegrated {
			return false
		}
	}
	return true
}

// nextIntegration is the order to integrate now, or -1: the first order
// in plan order that is neither integrated nor settled as never to be
// integrated, when it has passed and its dependencies are on the branch.
// An order still running (or pending, unless the build is stopping)
// holds back every later one, so the branch gets orders in plan order.
// Failed and blocked orders are skipped: after a failure every passed
// order whose dependencies all passed is still integrated.
func nextIntegration(deps [][]int, st []orderState, stopping bool) int {
	for j, s := range st {
		switch s {
		case stateIntegrated, stateFailed, stateBlocked:
			continue
		case stateIntegrating, stateRunning:
			return -1
		case statePending:
			if stopping {
				continue
			}
			return -1
		case statePassed:
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
func depsPassed(deps [][]int, st []orderState, j int) bool {
	for _, i := range deps[j] {
		if s := st[i]; s != statePassed && s != stateIntegrating && s != stateIntegrated {
			return false
		}
	}
	return true
}

// toStart are the orders to start now, lowest first: pending ones whose
// dependencies have all passed (integrated or not: see baseChain), as
// long as fewer than jobs run; none once the build is stopping.
func toStart(deps [][]int, st []orderState, jobs int, stopping bool) []int {
	if stopping {
		return nil
	}
	running := 0
	for _, s := range st {
		if s == stateRunning {
			running++
		}
	}
	var start []int
	for j, s := range st {
		if running+len(start) >= jobs {
			break
		}
		if s == statePending && depsPassed(deps, st, j) {
			start = append(start, j)
		}
	}
	return start
}

// block marks every pending order that depends, directly or through
// others, on failed order f as blocked.
func block(deps [][]int, st []orderState, f int) {
	for j := f + 1; j < len(st); j++ {
		if st[j] != statePending {
			continue
		}
		for _, i := range deps[j] {
			if i == f || st[i] == stateBlocked {
				st[j] = stateBlocked
				break
			}
		}
	}
}

// baseChain lists, ascending, the orders order j depends on directly or
// through others. j starts from the commit the build started from with
// their changes applied in this order (Repo.Replay): a tree that holds
// every dependency, decided by the plan alone — not by what happened to
// be integrated when j started — and, when they are a prefix of the plan
// already on the branch, the branch's own commit.
func baseChain(deps [][]int, j int) []int {
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
