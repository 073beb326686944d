package tree

// Overwrite records a runner-owned field the agent changed and the runner
// put back (or a value it capped).
type Overwrite struct {
	Node   string `json:"node"`
	Field  string `json:"field"`
	Agent  any    `json:"agent"`
	Runner any    `json:"runner"`
}

// RestoreRunnerOwned puts back the runner-owned fields of next from last,
// the last valid tree: on a node last has, passes, attempts and
// max_attempts take last's values; a new node starts at passes=false,
// attempts=0, and max_attempts capped at maxDefault (maxDefault when left
// out). Each change of a value the agent wrote is returned, in canonical
// node order; a left-out max_attempts is filled in silently. It then
// derives internal passes (DerivePasses).
func RestoreRunnerOwned(last, next *Node, maxDefault int) []Overwrite {
	before := index(last)
	var out []Overwrite
	next.Walk(func(n, _ *Node, _ int) {
		set := func(field string, agent, runner any, apply func()) {
			if agent != runner {
				out = append(out, Overwrite{Node: n.ID, Field: field, Agent: agent, Runner: runner})
				apply()
			}
		}
		if p, ok := before[n.ID]; ok {
			set("passes", n.Passes, p.node.Passes, func() { n.Passes = p.node.Passes })
			set("attempts", n.Attempts, p.node.Attempts, func() { n.Attempts = p.node.Attempts })
			if n.MaxAttempts == 0 {
				n.MaxAttempts = p.node.MaxAttempts
			}
			set("max_attempts", n.MaxAttempts, p.node.MaxAttempts, func() { n.MaxAttempts = p.node.MaxAttempts })
			return
		}
		set("passes", n.Passes, false, func() { n.Passes = false })
		set("attempts", n.Attempts, 0, func() { n.Attempts = 0 })
		switch {
		case n.MaxAttempts == 0:
			n.MaxAttempts = maxDefault
		case n.MaxAttempts > maxDefault:
			set("max_attempts", n.MaxAttempts, maxDefault, func() { n.MaxAttempts = maxDefault })
		}
	})
	DerivePasses(next)
	return out
}

// DerivePasses sets every internal node's passes to whether all its
// children pass, bottom-up.
func DerivePasses(n *Node) bool {
	if n.IsLeaf() {
		return n.Passes
	}
	all := true
	for _, c := range n.Children {
		all = DerivePasses(c) && all
	}
	n.Passes = all
	return all
}

// Outcome is what an iteration earned its selected leaf.
type Outcome struct {
	Node   string // the selected leaf's id; "" for none (REPAIR)
	Pass   bool   // EXECUTE, green guard and a valid tree
	Charge bool   // a failed attempt: red guard, timeout, undone commit, invalid tree, DECOMPOSE that added no children
}

// Apply records o on root: the node passes if it is still a leaf and o.Pass,
// it is charged one attempt (never beyond max_attempts) if o.Charge, and
// internal passes are derived again. A node that no longer exists is
// ignored.
func Apply(root *Node, o Outcome) {
	if n, _ := root.Find(o.Node); n != nil {
		if o.Pass && n.IsLeaf() {
			n.Passes = true
		}
		if o.Charge && n.Attempts < n.MaxAttempts {
			n.Attempts++
		}
	}
	DerivePasses(root)
}

// GainedChildren reports whether the node id has, in next, a child that it
// did not have in last: whether a DECOMPOSE decomposed it.
func GainedChildren(last, next *Node, id string) bool {
	n, _ := next.Find(id)
	if n == nil {
		return false
	}
	had := map[string]bool{}
	if l, _ := last.Find(id); l != nil {
		for _, c := range l.Children {
			had[c.ID] = true
		}
	}
	for _, c := range n.Children {
		if !had[c.ID] {
			return true
		}
	}
	return false
}

// MaxFailedRepairs is how many REPAIR TREE iterations in a row may leave
// the tree invalid before the run stops for a human.
const MaxFailedRepairs = 3

// RepairState is the REPAIR TREE bookkeeping carried from one iteration to
// the next: Active while the committed tree is invalid, the leaf to charge
// once it is valid again, and the failed repairs so far.
type RepairState struct {
	Active bool   `json:"active"`
	Charge string `json:"charge,omitempty"`
	Failed int    `json:"failed_repairs"`
}

// Broken is the state after a normal iteration whose selected leaf (id) left
// the tree invalid.
func Broken(selected string) RepairState { return RepairState{Active: true, Charge: selected} }

// AfterRepair returns the state after a REPAIR TREE iteration that left the
// tree valid or not, the leaf to charge now ("" for none), and whether the
// run must stop for a human.
func (s RepairState) AfterRepair(valid bool) (next RepairState, charge string, stop bool) {
	if valid {
		return RepairState{}, s.Charge, false
	}
	s.Active = true
	s.Failed++
	return s, "", s.Failed >= MaxFailedRepairs
}
