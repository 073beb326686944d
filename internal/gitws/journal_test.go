package gitws

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A Baseline that went through the journal restores exactly as the one in
// memory: metadata, ignored-file backups and modes included.
func TestBaselineJournalRoundTrip(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	chmod(t, f.root, "src/app.py", 0o600)
	b, err := f.repo.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	before := snapshotTree(t, f.root)
	type journal struct {
		Baseline Baseline `json:"baseline"`
	}
	if err := f.repo.WriteJournal(journal{b}); err != nil {
		t.Fatal(err)
	}
	if ok, err := f.repo.HasJournal(); !ok || err != nil {
		t.Fatalf("HasJournal = %v, %v", ok, err)
	}
	var j journal
	if err := f.repo.ReadJournal(&j); err != nil {
		t.Fatal(err)
	}
	if got, err := f.repo.MetaChanges(j.Baseline); err != nil || len(got) != 0 {
		t.Fatalf("MetaChanges against the decoded baseline = %q, %v", got, err)
	}

	writeFile(t, f.root, ".git/hooks/pre-commit", "#!/bin/sh\n")
	appendFile(t, f.root, ".git/config", "[alias]\n\tx = status\n")
	removeAll(t, f.root, ".env")
	writeFile(t, f.root, "src/app.py", "changed\n")
	writeFile(t, f.root, "new/file.py", "x")
	if _, err := f.repo.Rollback(ctx, j.Baseline); err != nil {
		t.Fatalf("Rollback: %v", err)
	}
	if d := diffTrees(before, snapshotTree(t, f.root)); d != "" {
		t.Errorf("tree differs from baseline:\n%s", d)
	}
	if err := f.repo.RemoveJournal(); err != nil {
		t.Fatal(err)
	}
	if ok, _ := f.repo.HasJournal(); ok {
		t.Error("journal still present after RemoveJournal")
	}
	if _, err := json.Marshal(Baseline{Commit: b.Commit}); err != nil {
		t.Errorf("hand-made baseline: %v", err)
	}
}

// The lock is shared by linked worktrees and names its holder.
func TestLock(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	l, err := f.repo.Lock()
	if err != nil {
		t.Fatal(err)
	}
	wt := filepath.Join(t.TempDir(), "wt")
	git(t, f.root, "worktree", "add", "-q", "-b", "feature", wt)
	other, err := Open(ctx, wt)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []*Repo{f.repo, other} {
		_, err := r.Lock()
		var locked *LockedError
		if !errors.As(err, &locked) || locked.PID != os.Getpid() {
			t.Errorf("second Lock via %s = %v, want a LockedError naming pid %d", r.Root, err, os.Getpid())
		}
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
	l2, err := other.Lock()
	if err != nil {
		t.Fatalf("Lock after Unlock: %v", err)
	}
	l2.Unlock()
}

// TestModesJSON checks the hand-written encoding of a baseline's modes
// against encoding/json's, byte for byte, on keys that need escapes.
func TestModesJSON(t *testing.T) {
	for _, m := range []map[string]fs.FileMode{
		nil,
		{},
		{"a": 0o644, "src/b.py": 0o755 | fs.ModeSetuid, "dir": 0o700 | fs.ModeSticky},
		{`q"uote`: 1, `back\slash`: 2, "<html>&": 3, "tab\there": 4, "new\nline": 5, "\x7f": 6, "ünï": 7, "\xff\xfe": 8, "\u2028": 9, "": 10},
	} {
		got, err := json.Marshal(modesJSON(m))
		if err != nil {
			t.Fatal(err)
		}
		want, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("modesJSON(%q) = %s, want %s", m, got, want)
		}
	}
}

// A name that is not UTF-8 cannot go through the journal's JSON unchanged
// (encoding/json writes U+FFFD): a recovery would take the ignored file
// for one the attempt created. Snapshot refuses the tree, naming the file,
// and WriteJournalFile refuses such a value whatever wrote it.
func TestNameNotUTF8(t *testing.T) {
	f := newFixture(t)
	writeFile(t, f.root, ".venv/caf\xe9.txt", "keep me\n")
	_, err := f.repo.Snapshot(context.Background())
	if err == nil || !strings.Contains(err.Error(), `".venv/caf\xe9.txt"`) || !strings.Contains(err.Error(), "not valid UTF-8") {
		t.Fatalf("Snapshot = %v, want a refusal naming .venv/caf\\xe9.txt", err)
	}
	removeAll(t, f.root, ".venv/caf\xe9.txt")
	git(t, f.root, "branch", "caf\xe9")
	_, err = f.repo.Snapshot(context.Background())
	if err == nil || !strings.Contains(err.Error(), `branch or tag name is not valid UTF-8 ("refs/heads/caf\xe9")`) {
		t.Fatalf("Snapshot = %v, want a refusal naming the branch", err)
	}
	type journal struct {
		Ignored []string `json:"ignored"`
	}
	err = f.repo.WriteJournal(journal{Ignored: []string{".env", ".venv/caf\xe9.txt"}})
	if err == nil || !strings.Contains(err.Error(), "\".venv/caf\ufffd.txt\"") {
		t.Fatalf("WriteJournal = %v, want a refusal naming .venv/caf\ufffd.txt", err)
	}
	if ok, _ := f.repo.HasJournal(); ok {
		t.Error("a journal was written")
	}
}

func TestLossyString(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"a":"b"}`, ""},
		{`{"a":"caf\ufffd"}`, `"caf\ufffd"`},
		{`{"a":"x\"y","b":["p\"\ufffd\"q"]}`, `"p\"\ufffd\"q"`},
		{`{"a":"\\ufffd"}`, ""},            // a backslash, then the text ufffd
		{`{"a":"\\\ufffd"}`, `"\\\ufffd"`}, // a backslash, then the escape
		{"{\"a\":\"\xef\xbf\xbd\"}", ""},   // U+FFFD itself
		{`{"caf\ufffd":1}`, `"caf\ufffd"`}, // a key
	} {
		got, ok := lossyString([]byte(tc.in))
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("lossyString(%s) = %q, %v; want %q", tc.in, got, ok, tc.want)
		}
	}
}

// A journal rewritten with a fresh checksum is still refused when it holds
// what WriteJournalFile never writes.
func TestReadJournalFileOnlyWhatWasWritten(t *testing.T) {
	type rec struct {
		Name  string `json:"name"`
		Count int    `json:"count"`
	}
	p := filepath.Join(t.TempDir(), "j.json")
	if err := WriteJournalFile(p, rec{Name: "x", Count: 2}); err != nil {
		t.Fatal(err)
	}
	var got rec
	if err := ReadJournalFile(p, &got); err != nil || got != (rec{"x", 2}) {
		t.Fatalf("ReadJournalFile = %+v, %v", got, err)
	}
	for _, body := range []string{`{"name":"caf\ufffd","count":2}`, `{"name":"x","count":2,"extra":1}`, `{"NAME":"x","count":2}`, `{"name":"y","name":"x","count":2}`, `{"name":"x","count":2.0}`, `null`, `{}`, ` {"name":"x","count":2}`} {
		sum := sha256.Sum256([]byte(body))
		if err := os.WriteFile(p, []byte(body+"\nsha256 "+hex.EncodeToString(sum[:])+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := ReadJournalFile(p, &got); err == nil || !strings.Contains(err.Error(), p) {
			t.Errorf("ReadJournalFile(%s) = %v, want a refusal naming the file", body, err)
		}
	}
}
