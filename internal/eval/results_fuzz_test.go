package eval

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/factory-harness/factory/internal/artifact"
)

// FuzzReadResults feeds readResults (what a resumed eval takes as the runs
// already done) arbitrary results.jsonl files. Properties: the result is
// deterministic; a refusal names the file and the line; an accepted result
// is one a run writes (a known status, a case, a model, a run number from
// 1); the results written back, line by line as the eval appends them,
// read the same; and that file cut at any byte (a crash during an append)
// reads without error as a prefix of them, every complete line kept.
func FuzzReadResults(f *testing.F) {
	cost := 0.0125
	var seed []byte
	for _, r := range []Result{
		{Case: "rle", Model: "gpt-4.1", Run: 1, Status: StatusSolved, Solved: true, BuildVerdict: "PASS", ChecksPassed: 2, ChecksTotal: 2,
			WorkOrdersPassed: 2, WorkOrdersTotal: 2, Attempts: 2, FirstAttemptPass: true, Tokens: 4242, CostUSD: &cost, WallSeconds: 12.5,
			BuildDir: "runs/rle/gpt-4.1/1/out/builds/0123", Repo: "runs/rle/gpt-4.1/1/repo"},
		{Case: "roman", Model: "anthropic:claude-x", Run: 2, Status: StatusUnsolved, BuildVerdict: "FAIL", ChecksTotal: 2,
			FailedCheck: &FailedCheck{Index: 2, Name: "hidden tests", Command: []string{"python3", "-m", "unittest"}, ExitCode: 1, OutputTail: "FAILED (failures=1)\n"}},
		{Case: "fizzbuzz", Model: "m", Run: 1, Status: StatusError, Error: "provider: 503 Service Unavailable"},
	} {
		line, err := jsonLine(r)
		if err != nil {
			f.Fatal(err)
		}
		seed = append(seed, line...)
	}
	f.Add(seed, uint16(0))
	f.Add(seed[:len(seed)-7], uint16(40))
	f.Add(append(bytes.Clone(seed), "\n\n"...), uint16(3))
	f.Add([]byte(`{"case":"a","model":"m","run":1,"status":"solved","solved":true}`+"\n"+`{"case":`), uint16(9))
	f.Add([]byte(`{"case":`+"\n"+`{"case":"a","model":"m","run":1,"status":"solved","solved":true}`+"\n"), uint16(1))
	f.Add([]byte("{}\n"), uint16(1))
	f.Add([]byte(`{"case":"a","model":"m","run":0,"status":"bogus"}`+"\n"), uint16(1))
	f.Add([]byte(`{"case":"a","model":"m","run":1,"status":"solved","run":2}`+"\n"), uint16(1))
	f.Add([]byte(`{"case":"a","model":"m","run":1,"status":"solved","solved":true}`+"\n{\n\n"), uint16(1))
	f.Add([]byte("null\n"), uint16(0))
	dir := f.TempDir()
	path := filepath.Join(dir, ResultsFile)
	f.Fuzz(func(t *testing.T, data []byte, cut uint16) {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		rs, err := readResults(path)
		again, err2 := readResults(path)
		if !reflect.DeepEqual(rs, again) || (err == nil) != (err2 == nil) || err != nil && err.Error() != err2.Error() {
			t.Fatalf("not deterministic: %v, %v then %v, %v", rs, err, again, err2)
		}
		if err != nil {
			if !strings.Contains(err.Error(), path+" line ") {
				t.Fatalf("refusal does not name the file and line: %v", err)
			}
			return
		}
		var written []byte
		for _, r := range rs {
			if r.Case == "" || r.Model == "" || r.Run < 1 || r.Status != StatusSolved && r.Status != StatusUnsolved && r.Status != StatusError {
				t.Fatalf("accepted a result no run writes: %+v", r)
			}
			line, err := jsonLine(r)
			if err != nil {
				t.Fatal(err)
			}
			written = append(written, line...)
		}
		back := filepath.Join(dir, "back.jsonl")
		os.Remove(back)
		for _, r := range rs {
			if err := artifact.AppendJSONLine(back, r); err != nil {
				t.Fatal(err)
			}
		}
		if got, err := readResults(back); err != nil || !reflect.DeepEqual(nonNil(got), nonNil(rs)) {
			t.Fatalf("written back, %+v reads as %+v, %v", rs, got, err)
		}
		if len(written) == 0 {
			return
		}
		k := int(cut) % (len(written) + 1)
		if err := os.WriteFile(back, written[:k], 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := readResults(back)
		complete := bytes.Count(written[:k], []byte("\n"))
		if err != nil || len(got) < complete || len(got) > len(rs) || !reflect.DeepEqual(nonNil(got), nonNil(rs[:len(got)])) {
			t.Fatalf("cut at byte %d of %q: %+v, %v; want the first %d or more of %+v", k, written, got, err, complete, rs)
		}
	})
}

func jsonLine(r Result) ([]byte, error) {
	b, err := artifact.MarshalJSON(r)
	if err != nil {
		return nil, err
	}
	line, err := compactJSON(b)
	return append(line, '\n'), err
}

func nonNil(rs []Result) []Result {
	if rs == nil {
		return []Result{}
	}
	return rs
}
