package tree

import (
	"bytes"
	"testing"
)

func fuzzSeeds(f *testing.F) {
	f.Add(Canonical(node("root", 0, passed(leaf("a", 0)), leaf("b", 1))))
	f.Add([]byte(`{"id":"root","order":0,"title":"t","goal":"g","acceptance":[]}`))
	f.Add([]byte(`{"id":"root","id":"x"}`))
	f.Add([]byte(`[[[[`))
	f.Add([]byte(`{"id":"root","order":1e3,"title":"t","goal":"g","acceptance":[],"children":[{"id":"root","order":0,"title":"t","goal":"g","acceptance":[]}]}`))
}

// FuzzDecode: Decode never panics; its schema check agrees with a JSON
// Schema library; and what it accepts re-encodes to a canonical form that
// decodes to the same canonical form.
func FuzzDecode(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		checkAgreement(t, data)
		n, err := Decode(data)
		if err != nil {
			return
		}
		fillMax(n)
		c := Canonical(n)
		back, err := Decode(c)
		if err != nil {
			t.Fatalf("canonical form of an accepted tree is rejected: %v\n%s", err, c)
		}
		if !bytes.Equal(Canonical(back), c) {
			t.Fatalf("canonical form is not stable")
		}
	})
}

// FuzzInvariants: on any decodable tree the checker, the immutability check
// against itself and a runner-owned restore never panic; a tree is
// immutable against itself; and after a restore against itself and
// derivation, the selection is stable.
func FuzzInvariants(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		n, err := Decode(data)
		if err != nil {
			return
		}
		fillMax(n)
		_ = Check(n)
		if ps := CheckImmutable(n, Clone(n)); len(ps) > 0 && len(Check(n)) == 0 {
			t.Fatalf("a valid tree is not immutable against itself: %v", Problems(ps))
		}
		next := Clone(n)
		RestoreRunnerOwned(n, next, 3)
		s1, s2 := Select(next), Select(Clone(next))
		if s1.Status != s2.Status || s1.PathString() != s2.PathString() {
			t.Fatalf("selection differs on a copy: %v vs %v", s1, s2)
		}
	})
}

// fillMax does what the runner does for a left-out max_attempts.
func fillMax(n *Node) {
	n.Walk(func(n, _ *Node, _ int) {
		if n.MaxAttempts == 0 {
			n.MaxAttempts = 3
		}
	})
}
