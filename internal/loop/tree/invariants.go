package tree

import (
	"bytes"
	"fmt"
	"regexp"
	"strconv"
)

var idPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,63}$`)

// Check returns every invariant a schema cannot express that root breaks:
// size and depth bounds, id syntax and uniqueness, max_attempts present,
// attempts ≤ max_attempts, and an internal node passes exactly when all its
// children pass. Paths point into root as decoded (file order).
func Check(root *Node) []Problem {
	var ps []Problem
	seen := map[string]string{} // id → path of its first node
	count := 0
	var walk func(n *Node, path string, depth int)
	walk = func(n *Node, path string, depth int) {
		count++
		if depth > MaxDepth {
			ps = append(ps, Problem{path, fmt.Sprintf("nested %d levels deep; at most %d are allowed", depth, MaxDepth)})
			return
		}
		if !idPattern.MatchString(n.ID) {
			ps = append(ps, Problem{path + "/id", fmt.Sprintf("id %q does not match %s", n.ID, idPattern)})
		}
		if first, dup := seen[n.ID]; dup {
			ps = append(ps, Problem{path + "/id", fmt.Sprintf("id %q is already used by the node at %s", n.ID, pointer(first))})
		} else {
			seen[n.ID] = path
		}
		switch {
		case n.MaxAttempts < 1:
			ps = append(ps, Problem{path + "/max_attempts", "missing or below 1"})
		case n.Attempts > n.MaxAttempts:
			ps = append(ps, Problem{path + "/attempts", fmt.Sprintf("attempts %d exceeds max_attempts %d", n.Attempts, n.MaxAttempts)})
		}
		if n.Attempts < 0 {
			ps = append(ps, Problem{path + "/attempts", "negative"})
		}
		if !n.IsLeaf() {
			all := true
			for _, c := range n.Children {
				all = all && c.Passes
			}
			if n.Passes != all {
				ps = append(ps, Problem{path + "/passes", fmt.Sprintf("is %t but an internal node passes exactly when all its children pass (%t)", n.Passes, all)})
			}
		}
		for i, c := range n.Children {
			walk(c, path+"/children/"+strconv.Itoa(i), depth+1)
		}
	}
	walk(root, "", 1)
	if count > MaxNodes {
		ps = append(ps, Problem{"", fmt.Sprintf("the tree has %d nodes; at most %d are allowed", count, MaxNodes)})
	}
	return sortProblems(ps)
}

func pointer(p string) string {
	if p == "" {
		return "/"
	}
	return p
}

// place is where a node sits: its parent's id ("" for the root), its order
// key and its JSON pointer in the document as decoded.
type place struct {
	node   *Node
	parent string
	path   string
}

func index(root *Node) map[string]place {
	idx := map[string]place{}
	var walk func(n *Node, parent, path string)
	walk = func(n *Node, parent, path string) {
		if _, dup := idx[n.ID]; !dup {
			idx[n.ID] = place{n, parent, path}
		}
		for i, c := range n.Children {
			walk(c, n.ID, path+"/children/"+strconv.Itoa(i))
		}
	}
	walk(root, "", "")
	return idx
}

// CheckImmutable returns the ways next breaks passed-node immutability
// (seed §4.4) against last, the last valid tree: every node that passed in
// last must exist in next with the same id, the same parent and order, and
// a byte-identical canonical form. It also refuses a node that passes in
// next but did not in last: only a green guard may make a node pass, and an
// internal node would otherwise pass because its open children were removed.
func CheckImmutable(last, next *Node) []Problem {
	var ps []Problem
	now := index(next)
	before := index(last)
	last.Walk(func(n, parent *Node, _ int) {
		if !n.Passes {
			return
		}
		p, ok := now[n.ID]
		if !ok {
			ps = append(ps, Problem{"", fmt.Sprintf("node %q passed and is immutable, but it was removed", n.ID)})
			return
		}
		parentID := ""
		if parent != nil {
			parentID = parent.ID
		}
		if p.parent != parentID {
			ps = append(ps, Problem{p.path, fmt.Sprintf("node %q passed and is immutable, but it was moved from parent %q to %q", n.ID, parentID, p.parent)})
		}
		if !bytes.Equal(Canonical(n), Canonical(p.node)) {
			ps = append(ps, Problem{p.path, fmt.Sprintf("node %q passed and is immutable, but it was changed (fields, order or children)", n.ID)})
		}
	})
	for id, p := range now {
		if b, ok := before[id]; p.node.Passes && (!ok || !b.node.Passes) {
			ps = append(ps, Problem{p.path + "/passes", fmt.Sprintf("node %q passes but did not before, without a green guard (were its open children removed?)", id)})
		}
	}
	return sortProblems(ps)
}
