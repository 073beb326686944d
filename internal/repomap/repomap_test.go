//go:build cgo

package repomap

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// memRepo is a tree in memory: the Reader a test gives Build, counting
// what it was asked for.
type memRepo struct {
	files map[string][]byte // path -> content
	reads []string          // blobs read, over all calls
}

func blobID(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:20])
}

func loadFixture(t *testing.T) *memRepo {
	t.Helper()
	r := &memRepo{files: map[string][]byte{}}
	root := filepath.Join("testdata", "fixture")
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		rel, _ := filepath.Rel(root, p)
		r.files[filepath.ToSlash(rel)] = data
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *memRepo) entries() []Entry {
	var out []Entry
	for p, data := range r.files {
		out = append(out, Entry{Path: p, Blob: blobID(data), Size: int64(len(data))})
	}
	return out
}

func (r *memRepo) read(_ context.Context, blobs []string, each func(string, []byte) error) error {
	byID := map[string][]byte{}
	for _, data := range r.files {
		byID[blobID(data)] = data
	}
	for _, b := range blobs {
		r.reads = append(r.reads, b)
		data, ok := byID[b]
		if !ok {
			return fmt.Errorf("no blob %s", b)
		}
		if err := each(b, data); err != nil {
			return err
		}
	}
	return nil
}

func (r *memRepo) build(t *testing.T, cacheDir string) *Map {
	t.Helper()
	m, err := Build(context.Background(), Options{Files: r.entries(), Read: r.read, CacheDir: cacheDir})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	p := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(p, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s differs (-want +got; go test -update rewrites it):\n%s", name, diff)
	}
}

// The definitions of every fixture file, and the maps for no task and for a
// task naming a file and a function, are the golden files.
func TestGolden(t *testing.T) {
	m := loadFixture(t).build(t, "")
	defs, err := json.MarshalIndent(m.Files, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "defs.golden.json", append(defs, '\n'))
	golden(t, "map.golden", []byte(m.Render(m.FocusFromText(""), DefaultTokens).Text))
	spec := "Add a refund to server/handler.go: ServeOrder must call FindOrder and apply_discount."
	golden(t, "map_focus.golden", []byte(m.Render(m.FocusFromText(spec), 400).Text))
}

func TestSkipped(t *testing.T) {
	r := loadFixture(t)
	const limit = 500
	m, err := Build(context.Background(), Options{Files: r.entries(), Read: r.read, MaxFileBytes: limit})
	if err != nil {
		t.Fatal(err)
	}
	// vendor/dep/dep.go; gen/api.pb.go and web/bundle.min.js; gen/blob.rs;
	// and the larger source files.
	want := Skipped{Vendored: 1, Generated: 2, Binary: 1}
	for p, data := range r.files {
		if grammarFor(p) != nil && len(data) > limit && !strings.HasPrefix(p, "vendor/") {
			want.Huge++
		}
	}
	if m.Skipped != want {
		t.Errorf("skipped %+v, want %+v", m.Skipped, want)
	}
	for _, f := range m.Files {
		if strings.HasPrefix(f.Path, "vendor/") || strings.HasPrefix(f.Path, "gen/") || strings.HasSuffix(f.Path, ".min.js") {
			t.Errorf("%s is in the map", f.Path)
		}
	}
	if v := m.Render(Focus{}, DefaultTokens); want.Huge == 0 || !strings.Contains(v.Text, fmt.Sprintf("skipped %d files (2 generated, 1 vendored, %d huge, 1 binary)", want.Total(), want.Huge)) {
		t.Errorf("the map does not say what it skipped:\n%s", v.Text)
	}
}

// Same tree and task, same bytes: whatever order the files come in, with
// or without the cache.
func TestDeterministic(t *testing.T) {
	r := loadFixture(t)
	cache := t.TempDir()
	spec := "extend Store.FindOrder in server/store.go"
	var outs []string
	for i := range 4 {
		files := r.entries()
		if i%2 == 1 {
			slices.Reverse(files)
		}
		m, err := Build(context.Background(), Options{Files: files, Read: r.read, CacheDir: cache, Workers: i + 1})
		if err != nil {
			t.Fatal(err)
		}
		outs = append(outs, m.Render(m.FocusFromText(spec), 300).Text)
	}
	for i, o := range outs[1:] {
		if o != outs[0] {
			t.Errorf("run %d differs from run 0:\n%s\n----\n%s", i+1, o, outs[0])
		}
	}
}

// The named file's definitions come first, in source order; then those of
// the file it uses.
func TestRankNamedFileFirst(t *testing.T) {
	m := loadFixture(t).build(t, "")
	for _, tc := range []struct{ spec, first, next string }{
		{"change server/handler.go", "server/handler.go", "server/store.go"},
		{"a new method on web/cart.js", "web/cart.js", ""},
		{"make lib/pricing.py round cents", "lib/pricing.py", ""},
		{"Inventory.java needs a restock method", "app/src/main/java/com/example/Inventory.java", ""},
	} {
		t.Run(tc.first, func(t *testing.T) {
			v := m.Render(m.FocusFromText(tc.spec), DefaultTokens)
			if len(v.Files) == 0 || v.Files[0].Path != tc.first {
				t.Fatalf("first file %v, want %s", v.Files, tc.first)
			}
			var want File
			for _, f := range m.Files {
				if f.Path == tc.first {
					want = f
				}
			}
			if diff := cmp.Diff(want.Defs, v.Files[0].Defs); diff != "" {
				t.Errorf("the named file's definitions (-all +shown):\n%s", diff)
			}
			if tc.next != "" && (len(v.Files) < 2 || v.Files[1].Path != tc.next) {
				t.Errorf("second file %v, want %s (the file it uses)", v.Files[1:], tc.next)
			}
		})
	}
}

// A named identifier's definition comes before the rest.
func TestRankNamedIdentifier(t *testing.T) {
	m := loadFixture(t).build(t, "")
	v := m.Render(m.FocusFromText("open_ledger should create the file"), 150)
	if len(v.Files) == 0 || v.Files[0].Path != "native/ledger.rs" || !slices.ContainsFunc(v.Files[0].Defs, func(d Def) bool { return d.Name == "open_ledger" }) {
		t.Errorf("open_ledger is not first:\n%s", v.Text)
	}
}

func TestBudget(t *testing.T) {
	m := loadFixture(t).build(t, "")
	prev := 0
	for _, tokens := range []int{1, 40, 100, 200, 400, 800, 100000} {
		v := m.Render(m.FocusFromText("server/store.go"), tokens)
		if got := EstimateTokens(v.Text); got > tokens {
			t.Errorf("budget %d: the map takes %d tokens", tokens, got)
		}
		if v.Shown < prev {
			t.Errorf("budget %d shows %d definitions, fewer than a smaller budget (%d)", tokens, v.Shown, prev)
		}
		prev = v.Shown
	}
	if prev != m.Render(Focus{}, 100000).Total {
		t.Errorf("a large budget shows %d definitions, not all", prev)
	}
	if v := m.Render(Focus{}, 0); v.Text != "" || v.Shown != 0 {
		t.Errorf("budget 0 gives %q", v.Text)
	}
}

// A file that does not parse yields what tree-sitter recovered.
func TestBrokenFilesYieldWhatParses(t *testing.T) {
	for _, tc := range []struct {
		path, src string
		want      []string
	}{
		{"a.py", "def complete(a, b):\n    return a\n\ndef broken(x:\n    return x\n\nclass Survivor:\n    def method(self):\n        pass\n", []string{"complete", "Survivor"}},
		{"a.go", "package a\n\nfunc Good() int { return 1 }\n\nfunc Bad( { \n\ntype After struct{ X int }\n", []string{"Good"}},
		{"a.js", "function ok() {}\nfunction bad( {\nclass Later { m() {} }\n", []string{"ok"}},
		{"a.rs", "fn fine() {}\nfn broken( {\n", []string{"fine"}},
		{"a.java", "class A { void ok() {} void bad( { }\n", []string{"A"}},
		{"a.c", "int ok(void) { return 0; }\nint bad( {\n", []string{"ok"}},
		{"a.ts", "export function ok(): void {}\nexport function (\n", []string{"ok"}},
		{"a.go", "\x00\x01", nil},
		{"a.py", "", nil},
	} {
		t.Run(tc.path, func(t *testing.T) {
			ps := parsers{}
			defer ps.close()
			defs, err := extract(context.Background(), ps, grammarFor(tc.path), []byte(tc.src))
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, d := range defs {
				names = append(names, d.Name)
			}
			for _, w := range tc.want {
				if !slices.Contains(names, w) {
					t.Errorf("recovered %q, want %q among them", names, w)
				}
			}
		})
	}
}

// A second run parses nothing; a changed file is parsed again, alone.
func TestCacheReuse(t *testing.T) {
	r := loadFixture(t)
	dir := t.TempDir()
	first := r.build(t, dir)
	if first.Parsed == 0 || first.Cached != 0 {
		t.Fatalf("cold run: %d parsed, %d cached", first.Parsed, first.Cached)
	}
	r.reads = nil
	second := r.build(t, dir)
	if second.Parsed != 0 || len(r.reads) != 0 || second.Cached != first.Parsed {
		t.Errorf("warm run: %d parsed, %d read, %d cached; want 0, 0, %d", second.Parsed, len(r.reads), second.Cached, first.Parsed)
	}
	if diff := cmp.Diff(first.Files, second.Files); diff != "" {
		t.Errorf("the cached map differs:\n%s", diff)
	}
	r.files["server/handler.go"] = append(r.files["server/handler.go"], "\nfunc Added() {}\n"...)
	r.reads = nil
	third := r.build(t, dir)
	if third.Parsed != 1 || len(r.reads) != 1 {
		t.Errorf("after one change: %d parsed, %d read; want 1", third.Parsed, len(r.reads))
	}
	if !strings.Contains(third.Render(Focus{Files: []string{"server/handler.go"}}, DefaultTokens).Text, "func Added()") {
		t.Error("the changed file's new definition is not in the map")
	}
	// A cache file that cannot be decoded costs a parse, not an error.
	if err := os.WriteFile(filepath.Join(dir, cacheFile), []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	if m := r.build(t, dir); m.Parsed != first.Parsed {
		t.Errorf("after a corrupt cache: %d parsed, want %d", m.Parsed, first.Parsed)
	}
}

func TestReaderErrors(t *testing.T) {
	r := loadFixture(t)
	for _, tc := range []struct {
		name string
		read Reader
		want string
	}{
		{"fails", func(context.Context, []string, func(string, []byte) error) error { return fmt.Errorf("disk on fire") }, "disk on fire"},
		{"skips a blob", func(ctx context.Context, blobs []string, each func(string, []byte) error) error {
			return r.read(ctx, blobs[1:], each)
		}, "was not returned"},
		{"returns another blob", func(_ context.Context, _ []string, each func(string, []byte) error) error {
			return each("feed", nil)
		}, "not asked for"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Build(context.Background(), Options{Files: r.entries(), Read: tc.read})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Build: %v, want an error saying %q", err, tc.want)
			}
		})
	}
}

func TestFocusFromText(t *testing.T) {
	m := loadFixture(t).build(t, "")
	for _, tc := range []struct {
		text string
		want Focus
	}{
		{"", Focus{}},
		{"see `server/store.go`, then handler.go.", Focus{Files: []string{"server/handler.go", "server/store.go"}}},
		{"call Store.FindOrder and apply_discount()", Focus{Idents: []string{"FindOrder", "Store", "apply_discount"}}},
		{"the end of the world", Focus{}},
		// Words of a sentence are not names; written as code, they are.
		{"Add the order to the Store; see handler.go and store.go", Focus{Files: []string{"server/handler.go", "server/store.go"}}},
		{"Add the order to the `Store` with add(o)", Focus{Idents: []string{"Store", "add"}}},
	} {
		if diff := cmp.Diff(tc.want, m.FocusFromText(tc.text), cmp.Comparer(func(a, b []string) bool { return slices.Equal(a, b) })); diff != "" {
			t.Errorf("FocusFromText(%q):\n%s", tc.text, diff)
		}
	}
}

// FuzzExtract feeds every grammar arbitrary bytes: extraction never fails
// or panics, and what it returns is well formed.
func FuzzExtract(f *testing.F) {
	exts := slices.Sorted(func(yield func(string) bool) {
		for e := range grammars {
			if !yield(e) {
				return
			}
		}
	})
	r := &memRepo{files: map[string][]byte{}}
	_ = filepath.WalkDir(filepath.Join("testdata", "fixture"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			data, _ := os.ReadFile(p)
			r.files[p] = data
		}
		return nil
	})
	for _, p := range slices.Sorted(func(yield func(string) bool) {
		for p := range r.files {
			if !yield(p) {
				return
			}
		}
	}) {
		if i := slices.Index(exts, filepath.Ext(p)); i >= 0 {
			f.Add(uint8(i), r.files[p])
		}
	}
	f.Add(uint8(0), []byte("}{)(][\x00\xff"))
	ps := parsers{}
	words := newIdents() // kept across inputs, as a worker keeps it across files
	f.Fuzz(func(t *testing.T, lang uint8, src []byte) {
		g := grammars[exts[int(lang)%len(exts)]]
		defs, err := extract(context.Background(), ps, g, src)
		if err != nil {
			t.Fatalf("extract as %s: %v", g.name, err)
		}
		for _, d := range defs {
			if d.Name == "" || d.Line < 1 || d.Depth < 0 || d.Depth >= maxDepth || !utf8.ValidString(d.Sig) || len(d.Sig) > maxSigBytes+len("…") {
				t.Fatalf("malformed definition %+v", d)
			}
		}
		if len(defs) > maxDefs {
			t.Fatalf("%d definitions, more than %d", len(defs), maxDefs)
		}
		// The fast paths against the slow ones they replace: the same
		// definitions, where the whole file parses without an error (the
		// bodies of a broken Go file can make its whole parse recover less).
		slow, err := extractWith(context.Background(), ps, g, src, slowMode)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(slow, defs) && (g != goGrammar || parsesClean(t, ps, g, src)) {
			t.Fatalf("extract as %s (-slow +fast):\n%s", g.name, cmp.Diff(slow, defs))
		}
		if got, want := words.count(src), refIdentifiers(src); !slices.Equal(got, want) {
			t.Fatalf("identifiers (-fresh +kept):\n%s", cmp.Diff(want, got))
		}
	})
}

// A signature is the header on one line: no body, no comments, the
// keywords that say how it is seen (export, declare).
func TestSignatures(t *testing.T) {
	for _, tc := range []struct{ path, src, want string }{
		{"a.py", "def f(a,  # the first\n      b):  # why\n    return a\n", "def f(a, b):"},
		{"a.go", "package a\n\nfunc F(\n\ta int, // count\n\tb string,\n) error {\n\treturn nil\n}\n", "func F( a int, b string, ) error"},
		{"a.ts", "export async function load(id: string): Promise<void> {}\n", "export async function load(id: string): Promise<void>"},
		{"a.h", "int add(int a, /* left */ int b);\n", "int add(int a, int b);"},
		{"a.rs", "pub(crate) fn go<T>(x: T) -> T where T: Copy { x }\n", "pub(crate) fn go<T>(x: T) -> T where T: Copy"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			ps := parsers{}
			defer ps.close()
			defs, err := extract(context.Background(), ps, grammarFor(tc.path), []byte(tc.src))
			if err != nil || len(defs) == 0 || defs[0].Sig != tc.want {
				t.Errorf("extract: %v, %+v; want the signature %q", err, defs, tc.want)
			}
		})
	}
}

// The markers generators write, and lines that only look like them.
func TestGeneratedMarkers(t *testing.T) {
	for _, tc := range []struct {
		head string
		want bool
	}{
		{"// Code generated by protoc-gen-go. DO NOT EDIT.\npackage a\n", true},
		{"// Code generated by a tool\n// from x.y; DO NOT EDIT\n", true},
		{"# Generated by the protocol buffer compiler.  DO NOT EDIT!\n# source: a.proto\n", true},
		{"/* This file was automatically generated. Do not edit by hand. */\n", true},
		{"// @generated by relay-compiler\n", true},
		{"// generated code lives in gen/\n// do not edit the lines below without a review\n", false},
		{"def generate():\n    pass\n", false},
		{strings.Repeat("\n", 2100) + "// Code generated by x. DO NOT EDIT.\n", false},
	} {
		if got := generated([]byte(tc.head)); got != tc.want {
			t.Errorf("generated(%q) = %v, want %v", tc.head, got, tc.want)
		}
	}
	for p, want := range map[string]bool{"a/vendor/b.go": true, "site-packages/x/y.py": true, "Pods/A/a.h": true, "src/vendors.go": false, "node_modules.js": false} {
		if got := vendored(p); got != want {
			t.Errorf("vendored(%q) = %v, want %v", p, got, want)
		}
	}
}
