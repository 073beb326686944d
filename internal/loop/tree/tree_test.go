package tree

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// leaf and node build trees tersely: node(id, order, children...).
func leaf(id string, order int) *Node {
	return &Node{ID: id, Order: order, Title: "T " + id, Goal: "G " + id, Acceptance: []string{}, MaxAttempts: 3, Children: []*Node{}}
}

func node(id string, order int, children ...*Node) *Node {
	n := leaf(id, order)
	n.Children = children
	return n
}

func passed(n *Node) *Node { n.Passes = true; return n }

func tried(n *Node, attempts int) *Node { n.Attempts = attempts; return n }

func TestDecodeStrict(t *testing.T) {
	valid := string(Canonical(node("root", 0, leaf("a", 1))))
	for _, tc := range []struct {
		name, in string
		want     string // substring of the error; "" = valid
	}{
		{"canonical", valid, ""},
		{"minimal new node", `{"id":"root","order":0,"title":"t","goal":"g","acceptance":[]}`, ""},
		{"unknown field", `{"id":"root","order":0,"title":"t","goal":"g","acceptance":[],"status":"done"}`, "additional properties 'status' not allowed"},
		{"missing title", `{"id":"root","order":0,"goal":"g","acceptance":[]}`, "missing property 'title'"},
		{"bad id", `{"id":"Root","order":0,"title":"t","goal":"g","acceptance":[]}`, "/id: "},
		{"duplicate key", `{"id":"root","id":"x","order":0,"title":"t","goal":"g","acceptance":[]}`, `duplicate key "id"`},
		{"trailing data", `{"id":"root","order":0,"title":"t","goal":"g","acceptance":[]} {}`, "data after the top-level value"},
		{"truncated", valid[:len(valid)/2], "invalid JSON"},
		{"wrong type", `{"id":"root","order":"1","title":"t","goal":"g","acceptance":[]}`, "/order: "},
		{"nested error path", `{"id":"root","order":0,"title":"t","goal":"g","acceptance":[],"children":[{"id":"a","order":0,"title":"","goal":"g","acceptance":[]}]}`, "/children/0/title: "},
		{"deep nesting", strings.Repeat("[", 100) + strings.Repeat("]", 100), "nested deeper"},
		{"not an object", `[]`, "/: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode([]byte(tc.in))
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Decode: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Decode error = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestCanonicalForm(t *testing.T) {
	n := node("root", 0, leaf("b", 2), leaf("c", 1), leaf("a", 1))
	n.Goal = "<b> & é"
	got := string(Canonical(n))
	if !strings.HasSuffix(got, "}\n") || !strings.Contains(got, "\n  \"order\": 0,") || !strings.Contains(got, "<b> & é") {
		t.Fatalf("not canonical:\n%s", got)
	}
	var keys []string
	dec := json.NewDecoder(strings.NewReader(got))
	dec.Token()
	for dec.More() {
		k, _ := dec.Token()
		keys = append(keys, k.(string))
		var skip json.RawMessage
		dec.Decode(&skip)
	}
	if diff := cmp.Diff([]string{"id", "order", "title", "goal", "acceptance", "passes", "attempts", "max_attempts", "children"}, keys); diff != "" {
		t.Errorf("key order (-want +got):\n%s", diff)
	}
	if i, j, k := strings.Index(got, `"a"`), strings.Index(got, `"c"`), strings.Index(got, `"b"`); !(i < j && j < k) {
		t.Errorf("children not sorted by (order, id):\n%s", got)
	}
	if n.Children[0].ID != "b" {
		t.Error("Canonical modified its argument")
	}
	back, err := Decode([]byte(got))
	if err != nil || !bytes.Equal(Canonical(back), []byte(got)) {
		t.Errorf("canonical form does not round-trip: %v", err)
	}
}

func TestSelect(t *testing.T) {
	for _, tc := range []struct {
		name   string
		root   *Node
		status Status
		path   string
	}{
		{"root leaf", leaf("root", 0), StatusOpen, "root"},
		{"leftmost by order", node("root", 0, leaf("z", 0), leaf("a", 1)), StatusOpen, "root/z"},
		{"ties by id", node("root", 0, leaf("b", 1), leaf("a", 1)), StatusOpen, "root/a"},
		{"skips passed", node("root", 0, passed(leaf("a", 0)), leaf("b", 1)), StatusOpen, "root/b"},
		{"depth first", node("root", 0, node("a", 0, passed(leaf("a1", 0)), leaf("a2", 1)), leaf("b", 1)), StatusOpen, "root/a/a2"},
		{"stuck stops", node("root", 0, tried(leaf("a", 0), 3), leaf("b", 1)), StatusStuck, "root/a"},
		{"not yet stuck", node("root", 0, tried(leaf("a", 0), 2)), StatusOpen, "root/a"},
		{"complete", passed(node("root", 0, passed(leaf("a", 0)))), StatusComplete, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := Select(tc.root)
			if s.Status != tc.status || s.PathString() != tc.path {
				t.Fatalf("Select = %s %s, want %s %s", s.Status, s.PathString(), tc.status, tc.path)
			}
		})
	}
}

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		changed []string
		want    Kind
	}{
		{nil, Decompose},
		{[]string{".runner/tree.json"}, Decompose},
		{[]string{".runner/tree.json", ".runner/ASSUMPTIONS.md"}, Decompose},
		{[]string{".runner/tree.json", "calc.py"}, Execute},
		{[]string{".runnerx/a"}, Execute},
		{[]string{"schemas/task_tree/v1.schema.json"}, Execute},
	} {
		if got := Classify(tc.changed); got != tc.want {
			t.Errorf("Classify(%q) = %s, want %s", tc.changed, got, tc.want)
		}
	}
}

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name string
		root *Node
		want []string
	}{
		{"valid", node("root", 0, leaf("a", 0)), nil},
		{"duplicate id", node("root", 0, leaf("a", 0), leaf("a", 1)), []string{`/children/1/id: id "a" is already used by the node at /children/0`}},
		{"attempts over max", tried(leaf("root", 0), 4), []string{"/attempts: attempts 4 exceeds max_attempts 3"}},
		{"internal passes", passed(node("root", 0, leaf("a", 0))), []string{"/passes: is true but an internal node passes exactly when all its children pass (false)"}},
		{"internal should pass", node("root", 0, passed(leaf("a", 0))), []string{"/passes: is false but an internal node passes exactly when all its children pass (true)"}},
		{"missing max", func() *Node { n := leaf("root", 0); n.MaxAttempts = 0; return n }(), []string{"/max_attempts: missing or below 1"}},
		{"bad id", leaf("-x", 0), []string{`/id: id "-x" does not match ^[a-z0-9][a-z0-9-]{0,63}$`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, p := range Check(tc.root) {
				got = append(got, p.String())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Check (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCheckDepthAndSize(t *testing.T) {
	deep := leaf("n0", 0)
	cur := deep
	for i := 1; i <= MaxDepth; i++ {
		c := leaf("n"+string(rune('a'+i)), 0)
		cur.Children = []*Node{c}
		cur = c
	}
	if ps := Check(deep); len(ps) == 0 || !strings.Contains(Problems(ps).Error(), "levels deep") {
		t.Errorf("depth %d accepted: %v", MaxDepth+1, ps)
	}
}

func TestCheckImmutable(t *testing.T) {
	last := node("root", 0, passed(node("a", 0, passed(leaf("a1", 0)))), leaf("b", 1))
	for _, tc := range []struct {
		name string
		edit func(n *Node)
		want string // "" = no problem
	}{
		{"unchanged", func(n *Node) {}, ""},
		{"open node edited", func(n *Node) { n.Children[1].Title = "new" }, ""},
		{"open node decomposed", func(n *Node) { n.Children[1].Children = []*Node{leaf("b1", 0)} }, ""},
		{"passed title", func(n *Node) { n.Children[0].Children[0].Title = "x" }, `node "a1" passed and is immutable, but it was changed`},
		{"passed gains child", func(n *Node) { n.Children[0].Children = append(n.Children[0].Children, leaf("a2", 1)) }, `node "a" passed and is immutable, but it was changed`},
		{"passed removed", func(n *Node) { n.Children = n.Children[1:] }, `node "a" passed and is immutable, but it was removed`},
		{"passed order", func(n *Node) { n.Children[0].Order = 5 }, `node "a" passed and is immutable, but it was changed`},
		{"passed moved", func(n *Node) {
			a1 := n.Children[0].Children[0]
			n.Children[0].Children = nil
			n.Children[1].Children = []*Node{a1}
		}, `moved from parent "a" to "b"`},
		{"pass by removing open children", func(n *Node) { n.Children = n.Children[:1]; DerivePasses(n) }, `node "root" passes but did not before`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			next := Clone(last)
			tc.edit(next)
			ps := CheckImmutable(last, next)
			got := Problems(ps).Error()
			if tc.want == "" && len(ps) > 0 || tc.want != "" && !strings.Contains(got, tc.want) {
				t.Errorf("CheckImmutable = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestRestoreRunnerOwned(t *testing.T) {
	last := node("root", 0, passed(leaf("a", 0)), tried(leaf("b", 1), 1))
	next := Clone(last)
	next.Children[1].Passes = true   // illegal pass
	next.Children[1].Attempts = 0    // illegal reset
	next.Children[1].MaxAttempts = 9 // illegal raise
	next.Children = append(next.Children, &Node{ID: "c", Order: 2, Title: "c", Goal: "g", Passes: true, Attempts: 2, MaxAttempts: 7})
	next.Children = append(next.Children, &Node{ID: "d", Order: 3, Title: "d", Goal: "g"})
	got := RestoreRunnerOwned(last, next, 3)
	want := []Overwrite{
		{"b", "passes", true, false}, {"b", "attempts", 0, 1}, {"b", "max_attempts", 9, 3},
		{"c", "passes", true, false}, {"c", "attempts", 2, 0}, {"c", "max_attempts", 7, 3},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("overwrites (-want +got):\n%s", diff)
	}
	if d, _ := next.Find("d"); d.MaxAttempts != 3 || d.Passes || d.Attempts != 0 {
		t.Errorf("new node d = %+v, want defaults", d)
	}
	if next.Passes {
		t.Error("root passes with open children")
	}
}

func TestApply(t *testing.T) {
	for _, tc := range []struct {
		name       string
		o          Outcome
		passes     bool
		attempts   int
		rootPasses bool
	}{
		{"green guard", Outcome{Node: "b", Pass: true}, true, 0, true},
		{"red guard", Outcome{Node: "b", Charge: true}, false, 1, false},
		{"nothing", Outcome{Node: "b"}, false, 0, false},
		{"gone", Outcome{Node: "zz", Pass: true}, false, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := node("root", 0, passed(leaf("a", 0)), leaf("b", 1))
			Apply(root, tc.o)
			b, _ := root.Find("b")
			if b.Passes != tc.passes || b.Attempts != tc.attempts || root.Passes != tc.rootPasses {
				t.Errorf("b=%v/%d root=%v, want %v/%d root=%v", b.Passes, b.Attempts, root.Passes, tc.passes, tc.attempts, tc.rootPasses)
			}
		})
	}
	// A leaf that gained children cannot pass itself.
	root := node("root", 0, node("b", 0, leaf("b1", 0)))
	Apply(root, Outcome{Node: "b", Pass: true})
	if root.Passes {
		t.Error("a decomposed node passed")
	}
	// Attempts never exceed max_attempts.
	root = tried(leaf("root", 0), 3)
	Apply(root, Outcome{Node: "root", Charge: true})
	if root.Attempts != 3 {
		t.Errorf("attempts = %d, want 3", root.Attempts)
	}
}

func TestGainedChildren(t *testing.T) {
	last := node("root", 0, leaf("a", 0))
	next := Clone(last)
	if GainedChildren(last, next, "a") {
		t.Error("unchanged tree gained children")
	}
	next.Children[0].Children = []*Node{leaf("a1", 0)}
	if !GainedChildren(last, next, "a") {
		t.Error("decomposition not seen")
	}
}

func TestRepairState(t *testing.T) {
	s := Broken("a")
	s, charge, stop := s.AfterRepair(false)
	if charge != "" || stop || s.Failed != 1 {
		t.Fatalf("first failed repair: %+v %q %v", s, charge, stop)
	}
	s2, charge, stop := s.AfterRepair(true)
	if charge != "a" || stop || s2.Active {
		t.Fatalf("repair: %+v %q %v", s2, charge, stop)
	}
	s, _, _ = s.AfterRepair(false)
	if _, _, stop = s.AfterRepair(false); !stop {
		t.Fatal("three failed repairs did not stop")
	}
}

func TestSchemaIsValidJSON(t *testing.T) {
	if _, err := librarySchema(); err != nil {
		t.Fatal(err)
	}
}
