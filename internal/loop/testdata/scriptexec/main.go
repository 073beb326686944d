// Command scriptexec is the scripted agent of the factory loop tests.
//
//	scriptexec SCRIPT     act as the executor: run the actions SCRIPT lists
//	                      for $FACTORY_LOOP_ITERATION, in the current directory
//
// SCRIPT is JSON: {"<iteration>": [action, ...], ...}. Actions:
//
//	{"op": "decompose", "children": [node, ...]}  add children to the selected node (or "node")
//	{"op": "write", "path": P, "content": C}      write a file
//	{"op": "set", "node": ID, "field": F, "value": V}  set a field of a node in tree.json
//	{"op": "break"}                               make tree.json invalid JSON
//	{"op": "restore", "rev": R}                   put back tree.json of commit R (default HEAD~1)
//	{"op": "commit"}                              git add -A && git commit
//	{"op": "hang", "pidfile": P}                  start a child, write its pid to P, sleep forever
//	{"op": "nothing"}
//
// It lives under testdata so that it is not part of the module's packages
// (only internal/proc may start processes there).
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"
)

type action struct {
	Op       string            `json:"op"`
	Node     string            `json:"node"`
	Children []json.RawMessage `json:"children"`
	Path     string            `json:"path"`
	Content  string            `json:"content"`
	Field    string            `json:"field"`
	Value    json.RawMessage   `json:"value"`
	PIDFile  string            `json:"pidfile"`
	Rev      string            `json:"rev"`
}

const treePath = ".runner/tree.json"

func main() {
	if len(os.Args) != 2 {
		fail("usage: scriptexec SCRIPT")
	}
	fmt.Printf("mode=%s node=%s iteration=%s run=%s prompt=%t\n", os.Getenv("FACTORY_LOOP_MODE"), os.Getenv("FACTORY_LOOP_NODE_ID"),
		os.Getenv("FACTORY_LOOP_ITERATION"), os.Getenv("FACTORY_LOOP_RUN_ID"), os.Getenv("FACTORY_LOOP_PROMPT_FILE") != "")
	data, err := os.ReadFile(os.Args[1])
	if err != nil {
		fail(err.Error())
	}
	var script map[string][]action
	if err := json.Unmarshal(data, &script); err != nil {
		fail("script: " + err.Error())
	}
	for _, a := range script[os.Getenv("FACTORY_LOOP_ITERATION")] {
		fmt.Printf("action %s\n", a.Op)
		do(a)
	}
}

func do(a action) {
	switch a.Op {
	case "decompose":
		id := a.Node
		if id == "" {
			id = os.Getenv("FACTORY_LOOP_NODE_ID")
		}
		editNode(id, func(n map[string]any) {
			children, _ := n["children"].([]any)
			for _, c := range a.Children {
				var v any
				must(json.Unmarshal(c, &v))
				children = append(children, v)
			}
			n["children"] = children
		})
	case "write":
		must(os.MkdirAll(filepath.Dir(a.Path), 0o755))
		must(os.WriteFile(a.Path, []byte(a.Content), 0o644))
	case "set":
		editNode(a.Node, func(n map[string]any) {
			var v any
			must(json.Unmarshal(a.Value, &v))
			n[a.Field] = v
		})
	case "break":
		must(os.WriteFile(treePath, []byte("{\"id\": \"root\", broken\n"), 0o644))
	case "restore":
		rev := a.Rev
		if rev == "" {
			rev = "HEAD~1"
		}
		out, err := exec.Command("git", "show", rev+":"+treePath).Output()
		must(err)
		must(os.WriteFile(treePath, out, 0o644))
	case "commit":
		run("git", "add", "-A")
		run("git", "-c", "user.name=agent", "-c", "user.email=agent@example.invalid", "commit", "-q", "-m", "agent commit")
	case "hang":
		child := exec.Command("sleep", "1000")
		must(child.Start())
		must(os.WriteFile(a.PIDFile, []byte(strconv.Itoa(child.Process.Pid)), 0o644))
		for {
			time.Sleep(time.Hour)
		}
	case "nothing":
	default:
		fail("unknown op " + a.Op)
	}
}

func editNode(id string, edit func(map[string]any)) {
	data, err := os.ReadFile(treePath)
	must(err)
	var root map[string]any
	must(json.Unmarshal(data, &root))
	if !find(root, id, edit) {
		fail("no node " + id)
	}
	out, err := json.MarshalIndent(root, "", "  ")
	must(err)
	must(os.WriteFile(treePath, append(out, '\n'), 0o644))
}

func find(n map[string]any, id string, edit func(map[string]any)) bool {
	if n["id"] == id {
		edit(n)
		return true
	}
	children, _ := n["children"].([]any)
	for _, c := range children {
		if m, ok := c.(map[string]any); ok && find(m, id, edit) {
			return true
		}
	}
	return false
}

func run(argv ...string) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	must(cmd.Run())
}

func must(err error) {
	if err != nil {
		fail(err.Error())
	}
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, "scriptexec:", msg)
	os.Exit(2)
}
