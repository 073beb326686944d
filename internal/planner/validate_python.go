// E006: python -c code compiled through Env.Python, once per plan.

package planner

import (
	"fmt"
	"strings"
)

// inspectAll checks the python -c code of every order's commands in one
// Env.Python call (E006) and keeps the verdicts for W101. Codes beyond the
// first maxInspections distinct ones are E006 unchecked.
func (v *validator) inspectAll(orders []*order) {
	type pending struct {
		o *order
		k int
	}
	var todo []pending
	var codes []string
	seen := map[string]bool{}
	for _, o := range orders {
		for k, c := range o.cmds {
			if !c.inspect {
				continue
			}
			if !seen[c.code] && len(seen) >= maxInspections {
				v.add(o.idx, "E006", o.woid, fmt.Sprintf("acceptance_commands[%d]", k), "the python -c code was not checked: the plan has more than %d different python -c codes; move checks into test files", maxInspections)
				continue
			}
			if !seen[c.code] {
				seen[c.code] = true
				codes = append(codes, c.code)
			}
			todo = append(todo, pending{o, k})
		}
	}
	if len(codes) == 0 {
		return
	}
	verdicts := map[string]PythonInfo{}
	infos, err := v.env.Python.Inspect(v.ctx, codes)
	if err == nil && len(infos) != len(codes) {
		err = fmt.Errorf("the python inspector returned %d results for %d codes", len(infos), len(codes))
	}
	if err != nil {
		v.pythonErr = err
	} else {
		for i, code := range codes {
			verdicts[code] = infos[i]
		}
	}
	for _, p := range todo {
		cmd := &p.o.cmds[p.k]
		field := fmt.Sprintf("acceptance_commands[%d]", p.k)
		info := verdicts[cmd.code]
		switch {
		case err != nil:
			v.add(p.o.idx, "E006", p.o.woid, field, "the python -c code was not checked: %v", err)
		case info.SyntaxError != "":
			v.add(p.o.idx, "E006", p.o.woid, field, "the python -c code does not compile: %s%s", info.SyntaxError, offendingLine(cmd.code, info.SyntaxError))
		default:
			cmd.python = &info
		}
	}
}

// offendingLine quotes the line a "line N: …" syntax error points at.
func offendingLine(code, syntaxErr string) string {
	var n int
	if _, err := fmt.Sscanf(syntaxErr, "line %d:", &n); err != nil || n < 1 {
		return ""
	}
	lines := strings.Split(code, "\n")
	if n > len(lines) {
		return ""
	}
	return fmt.Sprintf(" (line %d is %s)", n, clip(strings.TrimSpace(lines[n-1]), 160))
}
