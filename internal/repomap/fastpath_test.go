//go:build cgo

package repomap

import (
	"context"
	"encoding/binary"
	"hash/crc32"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// trees is the fixture and a few random trees.
func trees(t *testing.T, n int) []*memRepo {
	out := []*memRepo{loadFixture(t)}
	for seed := range n {
		out = append(out, randomTree(rand.New(rand.NewPCG(uint64(seed), 7))))
	}
	return out
}

// Signatures come out the same whether every header's subtree is searched
// for comments or only those whose bytes may hold one.
func TestHeaderCommentsDifferential(t *testing.T) {
	ps := parsers{}
	defer ps.close()
	extra := map[string]string{
		"c.py":   "def f(a,  # why\n      b):  # more\n    return a\n\nclass K(Base):  # note\n    pass\n",
		"c.go":   "package a\n\nfunc F(\n\ta int, // count\n\tb /* inline */ string,\n) error {\n\treturn nil\n}\n\ntype T struct{ X int } // after\n",
		"c.js":   "function f(a /* one */, b) {}\n<!-- html\nfunction g(a, // two\n b) {}\n",
		"c.rs":   "fn f(a: u8 /* x */, b: u8) {}\n/// doc\nfn g() {}\n",
		"c.h":    "int add(int a, /* left */ int b);\n#define X 1\nint sub(int a, // right\n int b);\n",
		"C.java": "class C { void f(int a /* x */, int b) {} }\n",
	}
	for _, r := range trees(t, 10) {
		files := r.files
		for p, src := range extra {
			files[p] = []byte(src)
		}
		for p, src := range files {
			g := grammarFor(p)
			if g == nil {
				continue
			}
			fast, err1 := extractWith(context.Background(), ps, g, src, extractMode{wholeGo: true})
			slow, err2 := extractWith(context.Background(), ps, g, src, extractMode{wholeGo: true, everyHeader: true})
			if err1 != nil || err2 != nil {
				t.Fatal(err1, err2)
			}
			if diff := cmp.Diff(slow, fast); diff != "" {
				t.Fatalf("%s (-every header +where bytes may hold a comment):\n%s", p, diff)
			}
		}
	}
}

// slowMode is extraction without any fast path.
var slowMode = extractMode{everyHeader: true, wholeGo: true}

// parsesClean reports that tree-sitter reads src whole without an error.
func parsesClean(t testing.TB, ps parsers, g *grammar, src []byte) bool {
	tree, err := ps.get(g).ParseCtx(context.Background(), nil, src)
	if err != nil {
		t.Fatal(err)
	}
	defer tree.Close()
	return !tree.RootNode().HasError()
}

// goSources is a sample of Go's own source files (every one with
// FACTORY_TEST_GOROOT=all): real Go of every kind, assembly stubs,
// generics, cgo, testdata that does not compile.
func goSources(t *testing.T) map[string][]byte {
	root := filepath.Join(runtime.GOROOT(), "src")
	var paths []string
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".go") {
			paths = append(paths, p)
		}
		return nil
	})
	every := 25
	if os.Getenv("FACTORY_TEST_GOROOT") == "all" {
		every = 1
	}
	out := map[string][]byte{}
	for i := 0; i < len(paths); i += every {
		data, err := os.ReadFile(paths[i])
		if err == nil && len(data) <= DefaultMaxFileBytes {
			rel, _ := filepath.Rel(root, paths[i])
			out[filepath.ToSlash(rel)] = data
		}
	}
	if len(out) == 0 {
		t.Log("no Go source tree at runtime.GOROOT(): only the fixture and generated files")
	}
	return out
}

// Blanking the bodies of Go functions changes nothing for a file that
// parses without an error: the same definitions, signatures and lines.
func TestGoBodiesDifferential(t *testing.T) {
	ps := parsers{}
	defer ps.close()
	files := goSources(t)
	for _, r := range trees(t, 20) {
		for p, src := range r.files {
			files["tree/"+p] = src
		}
	}
	for p, src := range map[string]string{
		"stub.go":       "package a\n\nfunc Stub(x int) int\n\nvar V = struct{ A int }{1}\n\nfunc After() {}\n",
		"results.go":    "package a\n\nfunc F() struct{ A int } { return struct{ A int }{} }\n\nfunc G() interface /* c */ { M() } {\n\treturn nil\n}\n",
		"generic.go":    "package a\n\nfunc Map[T any, U interface{ ~int }](xs []T, f func(T) U) []U {\n\tvar out []U\n\treturn out\n}\n",
		"strings.go":    "package a\n\nfunc S() string {\n\tx := \"}\" + `{\n}` + string('}')\n\t/* } */\n\treturn x // }\n}\n\nfunc T() {}\n",
		"multiline.go":  "package a\n\nfunc (r *R) M(\n\ta int, // a\n\tb string,\n) (\n\tint, error,\n) {\n\treturn 0, nil\n}\n",
		"funclit.go":    "package a\n\nvar f = func(a int) int {\n\treturn a\n}\n\nvar g = []func(){func() {}, func() { _ = 1 }}\n",
		"brokenbody.go": "package a\n\nfunc A() {\n\tx := := 1\n}\n\nfunc B() int { return 1 }\n",
		"unbalanced.go": "package a\n\nfunc A() {\n\tif x {\n}\n\nfunc B() {}\n",
		"crlf.go":       "package a\r\n\r\nfunc A() {\r\n\treturn\r\n}\r\n",
		"numbers.go":    "package a\n\nconst C = 1e+3 + 0x1p-2 + .5\n\nfunc N() float64 { return 1e-3 }\n",
	} {
		files[p] = []byte(src)
	}
	clean := 0
	for p, src := range files {
		if grammarFor(p) != goGrammar {
			continue
		}
		fast, err1 := extract(context.Background(), ps, goGrammar, src)
		slow, err2 := extractWith(context.Background(), ps, goGrammar, src, slowMode)
		if err1 != nil || err2 != nil {
			t.Fatal(p, err1, err2)
		}
		if !parsesClean(t, ps, goGrammar, src) {
			continue // broken somewhere: the blanked parse may recover more
		}
		clean++
		if diff := cmp.Diff(slow, fast); diff != "" {
			t.Fatalf("%s (-whole +bodies blanked):\n%s", p, diff)
		}
	}
	t.Logf("%d Go files that parse cleanly, the same with their bodies blanked", clean)
}

// The counter that keeps its words across files counts as the one that
// started afresh for each file did.
func TestIdentsDifferential(t *testing.T) {
	c := newIdents()
	for _, r := range trees(t, 5) {
		for _, p := range slices.Sorted(func(yield func(string) bool) {
			for p := range r.files {
				if !yield(p) {
					return
				}
			}
		}) {
			if diff := cmp.Diff(refIdentifiers(r.files[p]), c.count(r.files[p])); diff != "" {
				t.Fatalf("%s (-fresh +kept):\n%s", p, diff)
			}
		}
	}
	for _, src := range []string{"", "a", "ab ab 12ab ab1 _x $y", strings.Repeat("z", 65) + " " + strings.Repeat("y", 64)} {
		if diff := cmp.Diff(refIdentifiers([]byte(src)), c.count([]byte(src))); diff != "" {
			t.Fatalf("%q (-fresh +kept):\n%s", src, diff)
		}
	}
}

// The parse cache reads back what was written.
func TestCacheRoundTrip(t *testing.T) {
	for _, r := range trees(t, 6) {
		dir := t.TempDir()
		m := r.build(t, dir)
		c, err := loadCache(dir)
		if err != nil || len(c.entries) != m.Parsed {
			t.Fatalf("%v, %d entries, want %d", err, len(c.entries), m.Parsed)
		}
		back, err := decodeCache(encodeCache(c.entries))
		if err != nil || !reflect.DeepEqual(back, c.entries) {
			t.Fatalf("%v: the cache does not read back what was written:\n%s", err, cmp.Diff(c.entries, back, cmp.AllowUnexported(parsed{})))
		}
	}
}

// A map read from its snapshot is the map built from scratch: the same
// files, definitions, counts and index, and for any task the same text.
func TestSnapshotDifferential(t *testing.T) {
	seeds := 30
	if testing.Short() || raceOn {
		seeds = 8
	}
	for seed := range seeds {
		rng := rand.New(rand.NewPCG(uint64(seed), 9))
		r := randomTree(rng)
		if seed == 0 {
			r = loadFixture(t)
		}
		o := Options{Files: r.entries(), Read: r.read, CacheDir: t.TempDir()}
		built, err := Build(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		if err := built.SaveSnapshot(o, "c0ffee"); err != nil {
			t.Fatal(err)
		}
		r.reads = nil
		loaded := LoadSnapshot(o, "c0ffee")
		if loaded == nil || len(r.reads) != 0 {
			t.Fatalf("seed %d: no snapshot (%d blobs read)", seed, len(r.reads))
		}
		scratch := r.build(t, "")
		if loaded.Parsed != 0 || loaded.Cached != scratch.Parsed {
			t.Errorf("seed %d: %d parsed, %d cached; want 0, %d", seed, loaded.Parsed, loaded.Cached, scratch.Parsed)
		}
		if diff := cmp.Diff(scratch.Files, loaded.Files); diff != "" || scratch.Skipped != loaded.Skipped {
			t.Fatalf("seed %d: files (-scratch +snapshot):\n%s%+v %+v", seed, diff, scratch.Skipped, loaded.Skipped)
		}
		if !reflect.DeepEqual(scratch.ix, loaded.ix) {
			t.Fatalf("seed %d: the index differs:\n%s", seed, cmp.Diff(scratch.ix, loaded.ix, cmp.AllowUnexported(index{}, nameCount{})))
		}
		for _, focus := range randomFocuses(rng, scratch) {
			for _, tokens := range []int{1, 200, DefaultTokens} {
				if want, got := scratch.Render(focus, tokens), loaded.Render(focus, tokens); !reflect.DeepEqual(want, got) {
					t.Fatalf("seed %d, %+v, %d tokens (-scratch +snapshot):\n%s", seed, focus, tokens, cmp.Diff(want, got))
				}
			}
		}
	}
}

// A snapshot is used only whole and under the rules it was made with:
// anything else is no snapshot (the map is built), never an error or a
// wrong map.
func TestSnapshotRefused(t *testing.T) {
	r := loadFixture(t)
	o := Options{Files: r.entries(), Read: r.read, CacheDir: t.TempDir()}
	m, err := Build(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.SaveSnapshot(o, "k1"); err != nil {
		t.Fatal(err)
	}
	name := filepath.Join(o.CacheDir, snapshotDir, "k1")
	good, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	other := o
	other.MaxFileBytes = 100
	for _, tc := range []struct {
		what string
		o    Options
		key  string
		data []byte
	}{
		{"another key", o, "k2", good},
		{"a key that is a path", o, "../k1", good},
		{"other rules", other, "k1", good},
		{"truncated", o, "k1", good[:len(good)/2]},
		{"empty", o, "k1", nil},
		{"a flipped bit", o, "k1", func() []byte { b := slices.Clone(good); b[len(b)/3] ^= 4; return b }()},
		{"another file's magic", o, "k1", encodeCache(nil)},
	} {
		t.Run(tc.what, func(t *testing.T) {
			if err := os.WriteFile(name, tc.data, 0o644); err != nil {
				t.Fatal(err)
			}
			if got := LoadSnapshot(tc.o, tc.key); got != nil {
				t.Errorf("a snapshot was used")
			}
		})
	}
	// A torn or hostile file passes no index out of bounds: every prefix
	// with a valid checksum is refused or read whole.
	rng := rand.New(rand.NewPCG(3, 4))
	for range 300 {
		b := slices.Clone(good)
		b[len(snapshotMagic)+rng.IntN(len(b)-len(snapshotMagic)-4)] = byte(rng.Uint32())
		b = withChecksum(b)
		if got, err := decodeSnapshot(b, rules(o)); err == nil {
			got.Render(got.FocusFromText("server/handler.go FindOrder"), 300)
		}
	}
}

func withChecksum(b []byte) []byte {
	end := len(b) - 4
	binary.LittleEndian.PutUint32(b[end:], crc32.Checksum(b[:end], crcTable))
	return b
}

// The newest snapshots are kept; a hit makes one the newest.
func TestSnapshotPrune(t *testing.T) {
	r := loadFixture(t)
	o := Options{Files: r.entries(), Read: r.read, CacheDir: t.TempDir()}
	m, err := Build(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(o.CacheDir, snapshotDir)
	for i := range snapshotsKept { // a1, b1, ... made an hour apart, long ago
		key := string(rune('a'+i)) + "1"
		if err := m.SaveSnapshot(o, key); err != nil {
			t.Fatal(err)
		}
		at := time.Unix(1e9+int64(i)*3600, 0)
		if err := os.Chtimes(filepath.Join(dir, key), at, at); err != nil {
			t.Fatal(err)
		}
	}
	if LoadSnapshot(o, "a1") == nil { // the oldest, used again
		t.Fatal("no snapshot a1")
	}
	if err := m.SaveSnapshot(o, "z1"); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if len(names) != snapshotsKept || !slices.Contains(names, "a1") || !slices.Contains(names, "z1") || slices.Contains(names, "b1") {
		t.Errorf("kept %v; want the %d most recently used: a1 and z1, not b1", names, snapshotsKept)
	}
}
