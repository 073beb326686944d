//go:build cgo

package repomap

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	sitter "github.com/smacker/go-tree-sitter"
)

const (
	maxSigBytes   = 200 // a longer signature is cut (parameter lists of generated code)
	maxValueBytes = 40  // a longer constant value is left out of its signature
	maxDepth      = 3   // nesting shown: a method of a class inside a namespace inside a module
	maxDefs       = 2000
)

// parsers holds one tree-sitter parser per grammar for one goroutine
// (a parser is not safe for concurrent use).
type parsers map[*grammar]*sitter.Parser

func (ps parsers) get(g *grammar) *sitter.Parser {
	p := ps[g]
	if p == nil {
		p = sitter.NewParser()
		p.SetLanguage(g.lang())
		ps[g] = p
	}
	return p
}

func (ps parsers) close() {
	for _, p := range ps {
		p.Close()
	}
}

// extract parses src with g and returns its definitions in source order.
// Syntax errors are not failures: tree-sitter recovers, and what it
// recovered is extracted (ERROR nodes are looked through).
func extract(ctx context.Context, ps parsers, g *grammar, src []byte) ([]Def, error) {
	return extractWith(ctx, ps, g, src, extractMode{})
}

// extractMode turns off the fast paths, for the differential tests.
type extractMode struct {
	// everyHeader looks for comments in every signature's subtree, not
	// only where the bytes say one may be.
	everyHeader bool
	// wholeGo parses Go files whole, not with their function bodies
	// blanked (gobodies.go).
	wholeGo bool
}

func extractWith(ctx context.Context, ps parsers, g *grammar, src []byte, mode extractMode) ([]Def, error) {
	parse := func(b []byte) (*sitter.Tree, error) {
		tree, err := ps.get(g).ParseCtx(ctx, nil, b)
		if err != nil {
			return nil, fmt.Errorf("parse as %s: %w", g.name, err)
		}
		return tree, nil
	}
	var tree *sitter.Tree
	var err error
	if g == goGrammar && !mode.wholeGo {
		if blank, ok := blankGoBodies(src); ok {
			if tree, err = parse(blank); err != nil {
				return nil, err
			}
			if tree.RootNode().HasError() {
				// Broken outside the bodies (or the scan was wrong): read
				// the file whole, as tree-sitter recovers it.
				tree.Close()
				tree = nil
			}
		}
	}
	if tree == nil {
		if tree, err = parse(src); err != nil {
			return nil, err
		}
	}
	defer tree.Close()
	x := extractor{g: g, src: src, everyHeader: mode.everyHeader}
	x.walk(tree.RootNode(), "", 0)
	return x.defs, nil
}

type extractor struct {
	g    *grammar
	src  []byte
	defs []Def
	// from is where the next definition's signature starts when a wrapper
	// that says something ("export", "declare") holds it (hasFrom).
	from    uint32
	hasFrom bool
	// everyHeader walks every header for comments (see extractWith).
	everyHeader bool
}

func (x *extractor) walk(n *sitter.Node, parent string, depth int) {
	for i := 0; i < int(n.NamedChildCount()) && len(x.defs) < maxDefs; i++ {
		c := n.NamedChild(i)
		t := c.Type()
		if kind, ok := x.g.defs[t]; ok {
			x.def(c, t, kind, parent, depth)
			x.hasFrom = false
			continue
		}
		if x.g.wrappers[t] {
			if t == "export_statement" || t == "ambient_declaration" {
				x.from, x.hasFrom = c.StartByte(), true
			}
			x.walk(c, parent, depth)
			x.hasFrom = false
		}
	}
}

// def records definition node n of type t, then the definitions in its
// body when its kind has members.
func (x *extractor) def(n *sitter.Node, t, kind, parent string, depth int) {
	body := n.ChildByFieldName("body")
	name := ""
	switch t {
	case "declaration", "field_declaration", "type_definition":
		// C/C++: a prototype is a declaration whose declarator is a function;
		// a struct defined inside a declaration or typedef is a definition
		// of its own.
		if ty := n.ChildByFieldName("type"); ty != nil && ty.ChildByFieldName("body") != nil {
			if k, ok := x.g.defs[ty.Type()]; ok {
				x.def(ty, ty.Type(), k, parent, depth)
			}
		}
		decl := n.ChildByFieldName("declarator")
		if decl == nil {
			return
		}
		if t == "type_definition" {
			kind, name = "typedef", declName(decl, x.src)
			break
		}
		if !isFunctionDeclarator(decl) {
			return
		}
		name = declName(decl, x.src)
	case "function_definition":
		if d := n.ChildByFieldName("declarator"); d != nil {
			name = declName(d, x.src)
		} else {
			name = x.text(n.ChildByFieldName("name"))
		}
	case "impl_item":
		name = x.text(n.ChildByFieldName("type"))
	case "method_declaration":
		name = x.text(n.ChildByFieldName("name"))
		if x.g == goGrammar {
			parent = receiverType(n.ChildByFieldName("receiver"), x.src)
			depth = 0
		}
	case "variable_declarator":
		// A top-level constant or variable; a function value shows its
		// parameters.
		name = x.text(n.ChildByFieldName("name"))
		if v := n.ChildByFieldName("value"); v != nil {
			switch v.Type() {
			case "arrow_function", "function", "function_expression", "generator_function":
				kind = "function"
				body = v.ChildByFieldName("body")
			case "class":
				kind = "class"
				body = v.ChildByFieldName("body")
			default:
				body = v
			}
		}
		if p := n.Parent(); p != nil && (p.Type() == "lexical_declaration" || p.Type() == "variable_declaration") {
			n = p // the signature starts at const/let/var
		}
	case "type_spec", "type_alias":
		if ty := n.ChildByFieldName("type"); ty != nil && (ty.Type() == "struct_type" || ty.Type() == "interface_type") {
			body = ty
		}
		name = x.text(n.ChildByFieldName("name"))
	case "const_spec", "var_spec":
		name = x.text(n.ChildByFieldName("name"))
		if v := n.ChildByFieldName("value"); v != nil && v.EndByte()-v.StartByte() > maxValueBytes {
			body = v
		}
	default:
		name = x.text(n.ChildByFieldName("name"))
	}
	if name == "" {
		return
	}
	if t == "type_definition" {
		body = nil // a typedef's name comes last: keep the whole of it
	}
	sig := x.signature(n, body, t == "type_definition")
	x.hasFrom = false // the members' signatures start at their own nodes
	if x.g == goGrammar && (kind == "type" || kind == "const" || kind == "var") {
		sig = kind + " " + sig // the keyword belongs to the enclosing declaration
	}
	x.defs = append(x.defs, Def{Name: name, Parent: parent, Kind: kind, Line: int(n.StartPoint().Row) + 1, Depth: depth, Sig: sig})
	if body != nil && x.g.members[kind] && depth+1 < maxDepth {
		x.walk(body, qualify(parent, name), depth+1)
	}
}

func qualify(parent, name string) string {
	if parent == "" {
		return name
	}
	return parent + "." + name
}

// signature is the source of n up to its body (without one: its first
// line, or all of it when whole), whitespace collapsed to single spaces,
// cut at maxSigBytes; a Go struct or interface type keeps its keyword.
func (x *extractor) signature(n, body *sitter.Node, whole bool) string {
	start, end := n.StartByte(), n.EndByte()
	if x.hasFrom && x.from < start {
		start = x.from
	}
	if body != nil && body.StartByte() > n.StartByte() && body.StartByte() <= end {
		end = body.StartByte()
		if t := body.Type(); t == "struct_type" || t == "interface_type" {
			end = min(body.StartByte()+uint32(len(strings.TrimSuffix(t, "_type"))), n.EndByte())
		}
	} else if nl := bytes.IndexByte(x.src[start:end], '\n'); nl >= 0 && !whole {
		end = start + uint32(nl) // no body to stop at (a macro, a prototype): the first line
	}
	// Comments inside the header (Python's "def f(a,  # why") are not part
	// of the signature.
	var b strings.Builder
	from := start
	// A comment node starts with its marker, so a header whose bytes hold
	// none has none, and its subtree (a cgo call per node) is not walked.
	if lo, hi := n.StartByte(), min(end+3, uint32(len(x.src))); x.everyHeader || lo < hi && mayHoldComment(x.src[lo:hi]) {
		for _, c := range headerComments(n, end, nil) {
			if c[0] >= from {
				b.Write(x.src[from:c[0]])
				from = min(c[1], end)
			}
		}
	}
	b.Write(x.src[from:end])
	s := b.String()
	s = strings.Join(strings.Fields(s), " ")
	s = strings.TrimRight(s, " {=")
	// Invalid bytes become U+FFFD before the cut, so that the cut bounds
	// what is shown (extractVersion 3; before, three bytes could replace
	// one after it).
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) > maxSigBytes {
		cut := maxSigBytes
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

// mayHoldComment reports that b holds the start of a comment in one of
// the grammars: // or /* (Go, JavaScript, TypeScript, Rust, C, C++,
// Java), # (Python), <!-- or --> (JavaScript's HTML comments).
func mayHoldComment(b []byte) bool {
	for i, c := range b {
		switch c {
		case '#':
			return true
		case '/':
			if i+1 < len(b) && (b[i+1] == '/' || b[i+1] == '*') {
				return true
			}
		case '<':
			if bytes.HasPrefix(b[i:], []byte("<!--")) {
				return true
			}
		case '-':
			if bytes.HasPrefix(b[i:], []byte("-->")) {
				return true
			}
		}
	}
	return false
}

// headerComments appends the byte ranges of the comments in n that start
// before end, in source order; it descends only into what starts before
// end, the header, never the body.
func headerComments(n *sitter.Node, end uint32, out [][2]uint32) [][2]uint32 {
	for i := 0; i < int(n.ChildCount()) && len(out) < 64; i++ {
		c := n.Child(i)
		if c.StartByte() >= end {
			break
		}
		if strings.Contains(c.Type(), "comment") {
			out = append(out, [2]uint32{c.StartByte(), c.EndByte()})
		} else if c.ChildCount() > 0 {
			out = headerComments(c, end, out)
		}
	}
	return out
}

func (x *extractor) text(n *sitter.Node) string {
	if n == nil {
		return ""
	}
	return n.Content(x.src)
}

// declName finds the name inside a C/C++ declarator: the identifier under
// any pointer, reference, array or function declarator.
func declName(n *sitter.Node, src []byte) string {
	for depth := 0; n != nil && depth < 16; depth++ {
		switch n.Type() {
		case "identifier", "field_identifier", "type_identifier", "qualified_identifier", "destructor_name",
			"operator_name", "primitive_type":
			return n.Content(src)
		}
		next := n.ChildByFieldName("declarator")
		if next == nil && n.NamedChildCount() > 0 {
			next = n.NamedChild(0)
		}
		n = next
	}
	return ""
}

func isFunctionDeclarator(n *sitter.Node) bool {
	for depth := 0; n != nil && depth < 16; depth++ {
		switch n.Type() {
		case "function_declarator":
			return true
		case "pointer_declarator", "reference_declarator", "init_declarator":
			n = n.ChildByFieldName("declarator")
			if n == nil {
				return false
			}
		default:
			return false
		}
	}
	return false
}

// receiverType is T for a Go receiver (t *T) or (T[K]).
func receiverType(recv *sitter.Node, src []byte) string {
	if recv == nil {
		return ""
	}
	s := recv.Content(src)
	s = strings.Trim(s, "()")
	if i := strings.IndexByte(s, '['); i >= 0 {
		s = s[:i]
	}
	s = strings.TrimSpace(s)
	if i := strings.LastIndexAny(s, " *."); i >= 0 {
		s = s[i+1:]
	}
	return s
}
