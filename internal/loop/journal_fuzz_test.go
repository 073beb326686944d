package loop

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/factory-harness/factory/internal/gitws"
	"github.com/factory-harness/factory/internal/loop/tree"
)

// FuzzStepJournal feeds readJournal (what `factory loop recover` restores
// from after a SIGKILL) damaged step journals: each is refused with an
// error naming it, and only a journal exactly as writeJournal wrote it is
// accepted, since a damaged baseline would restore the wrong state. With
// resum the fuzzer's bytes also get a true checksum line (FuzzReadSpend's
// trick), so mutations reach the decoder behind the checksum: it must read
// the same twice, accept only this factory's version, and what it accepts,
// written back by writeJournal, reads as the same journal.
func FuzzStepJournal(f *testing.F) {
	ctx := context.Background()
	dir := f.TempDir()
	r, err := gitws.Init(ctx, dir)
	if err != nil {
		f.Fatal(err)
	}
	var base gitws.Baseline
	if err := json.Unmarshal([]byte(`{"commit":"5b91faf394d01746b28fcff2ea4600ae8f8e1eca","ignored":[".env","venv/bin/python"],"empty_dirs":["tmp"],"modes":{".env":384,"src":493}}`), &base); err != nil {
		f.Fatal(err)
	}
	j := &journal{Version: journalVersion, RunID: "r1", Iteration: 3, Branch: "loop/r1", PID: 4242, Baseline: base}
	if err := writeJournal(r, j); err != nil {
		f.Fatal(err)
	}
	written, err := os.ReadFile(journalPath(r))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(written, false)
	f.Add(written[:len(written)/2], false)
	f.Add(bytes.Replace(written, []byte(".env"), []byte(".enw"), 1), false)
	f.Add([]byte(`{"version":1}`), false)
	f.Add([]byte(""), false)
	body, _, _ := bytes.Cut(written, []byte("\nsha256 "))
	f.Add(body, true)
	f.Add(bytes.Replace(body, []byte(`"version":1`), []byte(`"version":2`), 1), true)
	f.Add(bytes.Replace(body, []byte(`"modes":{`), []byte(`"modes":{"a":-5,`), 1), true)
	f.Add([]byte(`{"version":1}`), true)
	f.Add([]byte(`{"version":1,"baseline":null,"pid":-1}`), true)
	f.Add([]byte(`null`), true)
	f.Fuzz(func(t *testing.T, data []byte, resum bool) {
		if resum {
			sum := sha256.Sum256(data)
			data = append(append(bytes.Clone(data), "\nsha256 "...), hex.EncodeToString(sum[:])+"\n"...)
		}
		if err := os.WriteFile(journalPath(r), data, 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := readJournal(r)
		again, err2 := readJournal(r)
		if (err == nil) != (err2 == nil) || !reflect.DeepEqual(got, again) {
			t.Fatalf("read twice: %+v, %v, then %+v, %v", got, err, again, err2)
		}
		if err != nil {
			if !strings.Contains(err.Error(), journalPath(r)) {
				t.Fatalf("error does not name the journal: %v", err)
			}
			return
		}
		if got == nil || got.Version != journalVersion {
			t.Fatalf("accepted %+v", got)
		}
		if resum {
			if err := writeJournal(r, got); err != nil {
				t.Fatalf("a journal read could not be written back: %v", err)
			}
			back, err := readJournal(r)
			if err != nil || !reflect.DeepEqual(back, got) {
				t.Fatalf("read %+v; written back, it reads %+v, %v", got, back, err)
			}
			if file, _ := os.ReadFile(journalPath(r)); !bytes.Equal(file, data) {
				t.Fatalf("accepted bytes writeJournal does not write for the values read:\n%q\nwrites\n%q", data, file)
			}
			return
		}
		if !bytes.Equal(data, written) {
			t.Fatalf("accepted a step journal writeJournal did not write: %+v\n%q", got, data)
		}
	})
}

// FuzzRunState feeds readRunState .runner/run.json files (committed in the
// work tree, where an agent can edit them): a refusal names the file; an
// accepted state has a valid run id and survives writeRunState unchanged.
func FuzzRunState(f *testing.F) {
	root := f.TempDir()
	if err := os.MkdirAll(abs(root, ".runner"), 0o755); err != nil {
		f.Fatal(err)
	}
	for _, s := range []RunState{
		{RunID: "r1", Branch: "loop/r1"},
		{RunID: "2026-11-25.a_b", Branch: "loop/2026-11-25.a_b", Iteration: 7, Stuck: "1.2", Repair: tree.RepairState{Active: true}},
	} {
		if err := writeRunState(root, s); err != nil {
			f.Fatal(err)
		}
		data, err := os.ReadFile(abs(root, RunStatePath))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"run_id":"../x"}`))
	f.Add([]byte(`{"run_id":"r","extra":1}`))
	f.Add([]byte(`{"run_id":"r"} {"run_id":"s"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(abs(root, RunStatePath), data, 0o644); err != nil {
			t.Fatal(err)
		}
		s, err := readRunState(root)
		if err != nil {
			if !strings.Contains(err.Error(), RunStatePath) {
				t.Fatalf("error does not name %s: %v", RunStatePath, err)
			}
			return
		}
		if !runIDPattern.MatchString(s.RunID) {
			t.Fatalf("accepted run id %q", s.RunID)
		}
		if err := writeRunState(root, s); err != nil {
			t.Fatal(err)
		}
		back, err := readRunState(root)
		if err != nil {
			t.Fatalf("a state written back from what was read does not read: %v", err)
		}
		a, _ := json.Marshal(s)
		b, _ := json.Marshal(back)
		if !bytes.Equal(a, b) {
			t.Fatalf("round trip changed the state:\n%s\n%s", a, b)
		}
	})
}
