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

// toStart are the orders to start now, lowest first: pending ones whose
// dependencies are all on the branch, as long as fewer than jobs run;
// none once the build is stopping.
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
		if s == statePending && depsIntegrated(deps, st, j) {
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

// baseOrder is the order whose commit order j starts from: its latest
// dependency in plan order, or -1 for the commit the build started from.
// That commit holds every dependency (integration follows plan order) and
// does not depend on what else happened to be integrated when j started.
func baseOrder(deps [][]int, j int) int {
	if len(deps[j]) == 0 {
		return -1
	}
	return deps[j][len(deps[j])-1]
}
