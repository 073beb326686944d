package planner

import (
	"context"
	"testing"

	"github.com/factory-harness/factory/internal/workorder"
)

// TestRunAndValidateAgreeOnIDs: a work order id that `factory run` accepts
// (workorder.ParseWorkOrder) is one `factory validate` accepts for a lone
// work order file, and the other way round. In a plan, order n must be
// WO-nn, which run accepts too.
func TestRunAndValidateAgreeOnIDs(t *testing.T) {
	for _, id := range []string{"WO-01", "WO-07", "WO-42", "WO-99", "WO-1", "WO-00", "WO-100", "WO-001", "WO-+1", "wo-01", "task-1", ""} {
		t.Run(id, func(t *testing.T) {
			_, runErr := workorder.ParseWorkOrder(mustJSON(t, wo(1, set("id", id))))
			res := Validate(context.Background(), plan(t, nil, wo(1, set("id", id))), Env{LoneOrder: true})
			if (runErr == nil) != (len(res.Errors()) == 0) {
				t.Fatalf("run: %v; validate: %+v", runErr, res.Errors())
			}
			for _, i := range res.Errors() {
				if i.Code != "E001" {
					t.Errorf("a bad id is E001 only, got %+v", i)
				}
			}
		})
	}
	var orders []map[string]any
	for n := 1; n <= workorder.MaxWorkOrders; n++ {
		orders = append(orders, wo(n))
		if _, err := workorder.ParseWorkOrder(mustJSON(t, wo(n))); err != nil {
			t.Fatalf("run refuses %s: %v", workorder.FormatID(n), err)
		}
	}
	if res := Validate(context.Background(), plan(t, nil, orders...), Env{}); len(res.Errors()) != 0 {
		t.Fatalf("a plan of %d orders: %+v", workorder.MaxWorkOrders, res.Errors()[0])
	}
	// Without LoneOrder, a plan of one order must start at WO-01.
	if res := Validate(context.Background(), plan(t, nil, wo(1, set("id", "WO-05"))), Env{}); len(res.Errors()) != 1 || res.Errors()[0].Code != "E001" {
		t.Fatalf("plan starting at WO-05: %+v", res.Errors())
	}
}
