// Package tree is the deterministic core of `factory loop`: the task tree v1
// model, its embedded JSON Schema, canonical form, strict decoding, the
// selector, the classifier, the invariants and the runner-owned state
// updates. It does no I/O.
package tree

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
)

// Node is one node of the task tree, with exactly the fields of seed §4.1.
// Passes, Attempts and MaxAttempts are runner-owned. MaxAttempts is 0 only
// on a decoded node that left it out (a new node; the runner fills it in).
type Node struct {
	ID          string   `json:"id"`
	Order       int      `json:"order"`
	Title       string   `json:"title"`
	Goal        string   `json:"goal"`
	Acceptance  []string `json:"acceptance"`
	Passes      bool     `json:"passes"`
	Attempts    int      `json:"attempts"`
	MaxAttempts int      `json:"max_attempts"`
	Children    []*Node  `json:"children"`
}

// Limits that keep a tree, and so the prompt pack, bounded.
const (
	MaxFileBytes = 1 << 20 // the size of tree.json
	MaxDepth     = 16      // nesting of nodes, the root being depth 1
	MaxNodes     = 1000    // nodes in the whole tree
	maxJSONDepth = 2*MaxDepth + 8
)

// Problem is one reason a tree is invalid. Path is a JSON pointer into the
// document as written ("" is the whole document).
type Problem struct {
	Path    string `json:"path"`
	Message string `json:"message"`
}

func (p Problem) String() string {
	path := p.Path
	if path == "" {
		path = "/"
	}
	return path + ": " + p.Message
}

// Problems is a list of problems that is also an error.
type Problems []Problem

func (ps Problems) Error() string {
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

func sortProblems(ps []Problem) []Problem {
	slices.SortFunc(ps, func(a, b Problem) int {
		return cmp.Or(strings.Compare(a.Path, b.Path), strings.Compare(a.Message, b.Message))
	})
	return slices.Compact(ps)
}

// Decode parses data strictly: valid JSON of bounded size and nesting, no
// duplicate keys, valid against the v1 schema, every field of the right
// type. On failure it returns every problem found (as Problems).
func Decode(data []byte) (*Node, error) {
	if len(data) > MaxFileBytes {
		return nil, Problems{{Message: fmt.Sprintf("the tree is %d bytes; at most %d are allowed", len(data), MaxFileBytes)}}
	}
	if err := checkSyntax(data); err != nil {
		return nil, Problems{{Message: err.Error()}}
	}
	if ps := validateSchema(data); len(ps) > 0 {
		return nil, Problems(ps)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var n Node
	if err := dec.Decode(&n); err != nil {
		return nil, Problems{{Message: "decode: " + err.Error()}}
	}
	return &n, nil
}

// checkSyntax rejects what encoding/json would accept silently: duplicate
// object keys (the last would win), trailing data, and nesting deep enough
// to make the schema validator recurse without bound.
func checkSyntax(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	type frame struct {
		keys map[string]bool // nil for an array
		key  bool            // the next token of an object is a key
	}
	var stack []*frame
	done := false // a whole top-level value has been read
	valueDone := func() {
		if len(stack) == 0 {
			done = true
		} else if top := stack[len(stack)-1]; top.keys != nil {
			top.key = true
		}
	}
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			if !done {
				return errors.New("invalid JSON: unexpected end of input")
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("invalid JSON: %w", err)
		}
		if done {
			return errors.New("invalid JSON: data after the top-level value")
		}
		if len(stack) > 0 {
			if top := stack[len(stack)-1]; top.keys != nil && top.key {
				if tok == json.Delim('}') {
					stack = stack[:len(stack)-1]
					valueDone()
					continue
				}
				k, _ := tok.(string)
				if top.keys[k] {
					return fmt.Errorf("invalid JSON: duplicate key %q", k)
				}
				top.keys[k] = true
				top.key = false
				continue
			}
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			f := &frame{}
			if tok == json.Delim('{') {
				f.keys, f.key = map[string]bool{}, true
			}
			stack = append(stack, f)
			if len(stack) > maxJSONDepth {
				return fmt.Errorf("invalid JSON: nested deeper than %d levels", maxJSONDepth)
			}
		case json.Delim(']'):
			stack = stack[:len(stack)-1]
			valueDone()
		default:
			valueDone()
		}
	}
}

// Canonical returns the canonical form of n: children sorted by (order, id)
// at every level, keys in seed §4.1 order, empty lists as [], two-space
// indent, no HTML escaping, a trailing newline. n is not modified.
func Canonical(n *Node) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(sorted(n)); err != nil {
		// Node holds only strings, ints, bools and slices of them.
		panic(fmt.Sprintf("encode task tree: %v", err))
	}
	return buf.Bytes()
}

// sorted returns a deep copy of n with children in canonical order and no
// nil slices.
func sorted(n *Node) *Node {
	c := *n
	c.Acceptance = append([]string{}, n.Acceptance...)
	c.Children = make([]*Node, 0, len(n.Children))
	for _, ch := range n.Children {
		c.Children = append(c.Children, sorted(ch))
	}
	sortChildren(c.Children)
	return &c
}

func sortChildren(ch []*Node) {
	slices.SortStableFunc(ch, func(a, b *Node) int {
		return cmp.Or(cmp.Compare(a.Order, b.Order), strings.Compare(a.ID, b.ID))
	})
}

// Clone returns a deep copy of n in canonical order.
func Clone(n *Node) *Node { return sorted(n) }

// IsLeaf reports whether n has no children.
func (n *Node) IsLeaf() bool { return len(n.Children) == 0 }

// Stuck reports whether n is a leaf that has used all its attempts without passing.
func (n *Node) Stuck() bool {
	return n.IsLeaf() && !n.Passes && n.MaxAttempts > 0 && n.Attempts >= n.MaxAttempts
}

// Find returns the node with id and the ids from the root down to it, or nil.
func (n *Node) Find(id string) (*Node, []string) {
	if n.ID == id {
		return n, []string{n.ID}
	}
	for _, c := range n.Children {
		if f, p := c.Find(id); f != nil {
			return f, append([]string{n.ID}, p...)
		}
	}
	return nil, nil
}

// Walk calls fn for every node, parents before children, children in canonical order.
func (n *Node) Walk(fn func(n, parent *Node, depth int)) {
	var walk func(n, parent *Node, depth int)
	walk = func(n, parent *Node, depth int) {
		fn(n, parent, depth)
		ch := slices.Clone(n.Children)
		sortChildren(ch)
		for _, c := range ch {
			walk(c, n, depth+1)
		}
	}
	walk(n, nil, 1)
}
