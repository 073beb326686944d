package tree

import "strings"

// Status is the outcome of Select.
type Status string

const (
	StatusOpen     Status = "open"     // a leaf to work on
	StatusComplete Status = "complete" // the root passes: nothing left
	StatusStuck    Status = "stuck"    // the next leaf has used all its attempts
)

// Selection is the leaf the next iteration works on.
type Selection struct {
	Status Status
	Node   *Node    // nil when complete
	Path   []string // ids from the root to Node
}

// PathString renders the path as root/a/b.
func (s Selection) PathString() string { return strings.Join(s.Path, "/") }

// Select returns the leftmost open leaf: depth first, children by (order,
// id), passed subtrees skipped. A leaf that has used all its attempts is
// not skipped: it stops the run (StatusStuck), since later siblings may
// build on it.
func Select(root *Node) Selection {
	var visit func(n *Node, path []string) *Selection
	visit = func(n *Node, path []string) *Selection {
		if n.Passes {
			return nil
		}
		path = append(path[:len(path):len(path)], n.ID)
		if n.IsLeaf() {
			st := StatusOpen
			if n.Stuck() {
				st = StatusStuck
			}
			return &Selection{Status: st, Node: n, Path: path}
		}
		for _, c := range sorted(n).Children {
			if s := visit(original(n, c.ID), path); s != nil {
				return s
			}
		}
		return nil
	}
	if s := visit(root, nil); s != nil {
		return *s
	}
	return Selection{Status: StatusComplete}
}

// original returns the child of n with id (sorted returns copies).
func original(n *Node, id string) *Node {
	for _, c := range n.Children {
		if c.ID == id {
			return c
		}
	}
	return nil
}
