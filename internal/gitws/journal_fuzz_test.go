package gitws

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fuzzJournal is the shape of factory's journal: a version and a baseline.
type fuzzJournal struct {
	Version  int      `json:"version"`
	Baseline Baseline `json:"baseline"`
}

// fixedBaseline is a journal's baseline as Snapshot records one: ignored
// files with backups, modes, git metadata.
const fixedBaseline = `{"commit":"5b91faf394d01746b28fcff2ea4600ae8f8e1eca","ignored":[".env","venv/bin/python"],"empty_dirs":null,` +
	`"modes":{".env":420,".gitignore":420,"src":493,"src/app.py":420,"venv":493,"venv/bin":493,"venv/bin/python":420},` +
	`"state":{"head_ref":"refs/heads/main","refs":["refs/heads/main"],"meta_spots":[{"path":"/r/.git/config","walk":false},{"path":"/r/.git/hooks","walk":true}],` +
	`"meta":[{"path":"/r/.git/config","mode":420,"size":18,"mtime":"2026-11-25T17:53:22.758762583Z","data":"W2NvcmVdCgliYXJlID0gZmFsc2UK","backed":true},` +
	`{"path":"/r/.git/hooks","mode":2147484141,"size":4096,"mtime":"2026-11-25T17:53:22.751934119Z","backed":false}],` +
	`"ignored":[{"path":".env","mode":420,"size":9,"mtime":"2026-11-25T17:53:22.822316665Z","data":"U0VDUkVUPTEK","backed":true},` +
	`{"path":"venv/bin/python","mode":420,"size":10,"mtime":"2026-11-25T17:53:22.825169815Z","data":"IyEvYmluL3NoCg==","backed":true}],` +
	`"dir_modes":{"venv":493,"venv/bin":493}}}`

// FuzzJournal feeds ReadJournal (what `factory recover` restores from after
// a crash) damaged journals: cut short, bytes flipped, lines dropped. It
// must refuse each one with an error naming the journal and accept only a
// journal exactly as WriteJournal wrote it: with a damaged path in the list
// of ignored files, the restore would delete that file. With resum the
// fuzzer's bytes also get a true checksum line (FuzzReadSpend's trick), so
// mutations reach the decoder (the baseline's own JSON codec) behind the
// checksum: it must not panic, read the same twice, and what it accepts,
// written back by WriteJournal, reads as the same journal.
func FuzzJournal(f *testing.F) {
	// The baseline is fixed, not a Snapshot: the fuzzing workers are
	// separate processes, and each must write the very same journals.
	isolateGit(f)
	var b Baseline
	if err := json.Unmarshal([]byte(fixedBaseline), &b); err != nil {
		f.Fatal(err)
	}
	repo, err := Init(context.Background(), f.TempDir())
	if err != nil {
		f.Fatal(err)
	}
	var written [][]byte
	for _, j := range []fuzzJournal{{Version: 1, Baseline: b}, {Version: 1, Baseline: b.Rebased(b.Commit)}} {
		if err := repo.WriteJournal(j); err != nil {
			f.Fatal(err)
		}
		data, err := os.ReadFile(repo.JournalPath())
		if err != nil {
			f.Fatal(err)
		}
		written = append(written, data)
		f.Add(data, false)
		f.Add(data[:len(data)/2], false)
		f.Add(data[:len(data)-1], false)
		f.Add(bytes.Replace(data, []byte(".env"), []byte(".enw"), 1), false)
		body, _, _ := bytes.Cut(data, []byte("\nsha256 "))
		f.Add(body, true)
		f.Add(bytes.Replace(body, []byte(`"modes":{`), []byte(`"modes":{"x":-1,`), 1), true)
		f.Add(bytes.Replace(body, []byte(`420`), []byte(`4294967296`), 1), true)
		f.Add(bytes.Replace(body, []byte(`"ignored":[`), []byte(`"ignored":[null,`), 1), true)
		f.Add(bytes.Replace(body, []byte(`"ignored":[`), []byte(`"IGNORED":[`), 1), true)
		f.Add(bytes.Replace(body, []byte(`"commit":`), []byte(`"extra":1,"commit":`), 1), true)
	}
	f.Add([]byte(""), false)
	f.Add([]byte("{}\n"), false)
	f.Add([]byte("{}"), true)
	f.Add([]byte("null"), true)
	f.Add([]byte(`{"version":1,"baseline":{"modes":{"a":420,"a":493}}}`), true)
	f.Add([]byte(`{"version":1,"baseline":{"modes":[]}}`), true)
	if err := os.MkdirAll(filepath.Dir(repo.JournalPath()), 0o755); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte, resum bool) {
		if resum {
			sum := sha256.Sum256(data)
			data = append(append(bytes.Clone(data), "\nsha256 "...), hex.EncodeToString(sum[:])+"\n"...)
		}
		if err := os.WriteFile(repo.JournalPath(), data, 0o644); err != nil {
			t.Fatal(err)
		}
		var j fuzzJournal
		err := repo.ReadJournal(&j)
		var again fuzzJournal
		if err2 := repo.ReadJournal(&again); (err == nil) != (err2 == nil) || (err == nil && !reflect.DeepEqual(j, again)) {
			t.Fatalf("read twice: %+v, %v, then %+v, %v", j, err, again, err2)
		}
		if err != nil {
			if !strings.Contains(err.Error(), repo.JournalPath()) {
				t.Fatalf("error does not name the journal: %v", err)
			}
			return
		}
		if resum {
			if err := repo.WriteJournal(j); err != nil {
				t.Fatalf("a journal read could not be written back: %v", err)
			}
			var back fuzzJournal
			if err := repo.ReadJournal(&back); err != nil || !reflect.DeepEqual(back, j) {
				t.Fatalf("read %+v; written back, it reads %+v, %v", j, back, err)
			}
			if file, _ := os.ReadFile(repo.JournalPath()); !bytes.Equal(file, data) {
				t.Fatalf("accepted bytes WriteJournal does not write for the values read:\n%q\nwrites\n%q", data, file)
			}
			return
		}
		for _, w := range written {
			if bytes.Equal(data, w) {
				return
			}
		}
		t.Fatalf("accepted a journal WriteJournal did not write:\n%q", data)
	})
}

// FuzzRecordedCommand feeds RecordedCommand damaged command.json files: an
// error names the file; what it accepts is what RecordCommand writes for
// the same values.
func FuzzRecordedCommand(f *testing.F) {
	f.Add([]byte("{\n  \"pgid\": 4242,\n  \"start_ticks\": 123456\n}\n"))
	f.Add([]byte(`{"pgid":-1,"start_ticks":0}`))
	f.Add([]byte(`{"pgid":1e3}`))
	f.Add([]byte(`{"pgid":`))
	isolateGit(f)
	root := f.TempDir()
	git(f, root, "init", "-q", "-b", "main")
	repo, err := Open(context.Background(), root)
	if err != nil {
		f.Fatal(err)
	}
	p := repo.factoryPath(commandFile)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		c, running, err := repo.RecordedCommand()
		if err != nil {
			if running || c != (RunningCommand{}) || !strings.Contains(err.Error(), p) {
				t.Fatalf("refusal %v comes with running %v, %+v, or does not name the file", err, running, c)
			}
			return
		}
		if !running {
			t.Fatal("a command file present, but no command recorded")
		}
		if err := repo.RecordCommand(c); err != nil {
			t.Fatal(err)
		}
		back, running, err := repo.RecordedCommand()
		if err != nil || !running || back != c {
			t.Fatalf("recorded %+v, read back %+v, %v, %v", c, back, running, err)
		}
	})
}

// FuzzLockHolder writes arbitrary content into a held lock file: a second
// Lock must be refused with a *LockedError naming the lock, and the holder
// pid it reports only when the file holds exactly a positive decimal pid.
// (Lock gives the lock of a holder that is not alive 3 s to go, in steps;
// here the steps do not sleep, or most inputs, naming no live process,
// would take 3 s each.)
func FuzzLockHolder(f *testing.F) {
	for _, s := range []string{"4242\n", "", "0", "-5\n", "12 34", "99999999999999999999", "\xff", " 7 "} {
		f.Add([]byte(s))
	}
	isolateGit(f)
	root := f.TempDir()
	git(f, root, "init", "-q", "-b", "main")
	repo, err := Open(context.Background(), root)
	if err != nil {
		f.Fatal(err)
	}
	repo.sleep = func(time.Duration) {}
	held, err := repo.Lock()
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { held.Unlock() })
	p := filepath.Join(repo.CommonDir, FactoryDirName, "lock")
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		l, err := repo.Lock()
		if err == nil {
			l.Unlock()
			t.Fatal("a held lock was taken again")
		}
		var le *LockedError
		if !errors.As(err, &le) || le.Path != p || !strings.Contains(err.Error(), p) {
			t.Fatalf("refusal %v is not a LockedError naming %s", err, p)
		}
		head := data[:min(len(data), 32)]
		want, perr := strconv.Atoi(strings.TrimSpace(string(head)))
		if perr != nil || want <= 0 {
			want = 0
		}
		if le.PID != want {
			t.Fatalf("lock file %q: holder pid %d, want %d", data, le.PID, want)
		}
	})
}
