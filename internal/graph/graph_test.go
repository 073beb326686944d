package graph

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

type state struct {
	visits []string
	loops  int
}

func visit(name string) Node[state] {
	return func(_ context.Context, s *state) error {
		s.visits = append(s.visits, name)
		return nil
	}
}

func TestRun(t *testing.T) {
	tests := []struct {
		name     string
		loops    int
		maxSteps int
		want     []string
		wantErr  string
	}{
		{name: "straight", loops: 1, maxSteps: 10, want: []string{"a", "b"}},
		{name: "loops back", loops: 3, maxSteps: 10, want: []string{"a", "b", "a", "b", "a", "b"}},
		{name: "step bound", loops: 100, maxSteps: 5, want: []string{"a", "b", "a", "b", "a"}, wantErr: "within 5 steps"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var hooked []string
			g := &Graph[state]{Entry: "a", MaxSteps: tt.maxSteps}
			g.After = func(_ context.Context, node string, s *state) error {
				hooked = append(hooked, node)
				return nil
			}
			g.Add("a", visit("a"), func(*state) string { return "b" })
			g.Add("b", visit("b"), func(s *state) string {
				s.loops++
				if s.loops >= tt.loops {
					return End
				}
				return "a"
			})
			s := &state{}
			err := g.Run(context.Background(), s)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, s.visits); diff != "" {
				t.Errorf("visits (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.want, hooked); diff != "" {
				t.Errorf("hook calls (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRunStopsOnNodeErrorAndCancel(t *testing.T) {
	boom := errors.New("boom")
	g := &Graph[state]{Entry: "a", MaxSteps: 10}
	g.Add("a", func(context.Context, *state) error { return boom }, func(*state) string { return End })
	if err := g.Run(context.Background(), &state{}); !errors.Is(err, boom) {
		t.Fatalf("err = %v, want boom", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	g2 := &Graph[state]{Entry: "a", MaxSteps: 10}
	g2.Add("a", visit("a"), func(*state) string { return End })
	s := &state{}
	if err := g2.Run(ctx, s); !errors.Is(err, context.Canceled) || len(s.visits) != 0 {
		t.Fatalf("err = %v visits = %v, want canceled before any node", err, s.visits)
	}
}
