// Package graph is a tiny typed state graph: named nodes, one routing
// function per node, a step bound and a hook after every node.
package graph

import (
	"context"
	"fmt"
)

// End is the route that stops the graph.
const End = "__end__"

// Node does one step of work on the shared state.
type Node[S any] func(ctx context.Context, s *S) error

// Route picks the next node from the state after a node has run.
type Route[S any] func(s *S) string

// Graph runs nodes from Entry until a route returns End.
type Graph[S any] struct {
	Entry    string
	MaxSteps int
	// After runs after every node that returned without error, e.g. to
	// persist artifacts. An error from it stops the graph.
	After func(ctx context.Context, node string, s *S) error

	nodes  map[string]Node[S]
	routes map[string]Route[S]
}

// Add registers a node and the route taken after it.
func (g *Graph[S]) Add(name string, n Node[S], r Route[S]) {
	if g.nodes == nil {
		g.nodes = map[string]Node[S]{}
		g.routes = map[string]Route[S]{}
	}
	g.nodes[name] = n
	g.routes[name] = r
}

// StepLimitError reports a graph that did not reach End within MaxSteps.
type StepLimitError struct{ Steps int }

func (e *StepLimitError) Error() string {
	return fmt.Sprintf("graph did not finish within %d steps", e.Steps)
}

// Run executes the graph. It returns the first node or hook error, a
// *StepLimitError, or ctx's error if ctx is done between steps.
func (g *Graph[S]) Run(ctx context.Context, s *S) error {
	current := g.Entry
	for step := 0; ; step++ {
		if step >= g.MaxSteps {
			return &StepLimitError{Steps: g.MaxSteps}
		}
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		node, ok := g.nodes[current]
		if !ok {
			return fmt.Errorf("graph: no node named %q", current)
		}
		if err := node(ctx, s); err != nil {
			return fmt.Errorf("node %s: %w", current, err)
		}
		if g.After != nil {
			if err := g.After(ctx, current, s); err != nil {
				return fmt.Errorf("after node %s: %w", current, err)
			}
		}
		current = g.routes[current](s)
		if current == End {
			return nil
		}
	}
}
