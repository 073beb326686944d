package planner

import (
	"context"
	"fmt"
	"testing"

	"github.com/factory-harness/factory/internal/proc"
)

// BenchmarkValidate99 validates the largest plan there can be, 99 work
// orders each with its own python -c command, with the real python3
// inspector, as `factory validate` does.
func BenchmarkValidate99(b *testing.B) {
	if !proc.Found("python3") {
		b.Skip("python3 is not on PATH")
	}
	var orders []map[string]any
	for n := 1; n <= 99; n++ {
		file := fmt.Sprintf("f%02d.py", n)
		orders = append(orders, wo(n, creates(file), set("context_files", strs(file)),
			cmds(fmt.Sprintf(`python3 -c "import os; from f%02d import value; assert value() == %d"`, n, n))))
	}
	raw := plan(b, nil, orders...)
	for b.Loop() {
		// A new inspector each time: its cache would otherwise answer.
		res := Validate(context.Background(), raw, Env{Python: NewPython3Inspector()})
		if len(res.Issues) != 0 || res.PythonErr != nil {
			b.Fatalf("issues %+v, python error %v", res.Issues, res.PythonErr)
		}
	}
}
