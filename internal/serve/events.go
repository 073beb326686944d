package serve

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"time"
)

// maxEventLine bounds one line of an events.jsonl; a longer line is
// skipped (the harness writes lines of a few hundred bytes).
const maxEventLine = 1 << 20

// Event is one line of a build's events.jsonl (internal/builder writes
// them as maps; these are the fields serve reads).
type Event struct {
	Event   string `json:"event"`
	TS      string `json:"ts"`
	WO      string `json:"wo,omitempty"`
	Attempt int    `json:"attempt,omitempty"`
	Node    string `json:"node,omitempty"`
	Verdict string `json:"verdict,omitempty"`
	Stage   string `json:"stage,omitempty"`
	Tokens  int64  `json:"tokens,omitempty"`
	// InputTokens and CachedInputTokens: a node's prompt tokens and the
	// part of them read from the provider's prompt cache.
	InputTokens       int64    `json:"input_tokens,omitempty"`
	CachedInputTokens int64    `json:"cached_input_tokens,omitempty"`
	CostUSD           *float64 `json:"cost_usd,omitempty"`
	DurationMS        int64    `json:"duration_ms,omitempty"`
	Commit            string   `json:"commit,omitempty"`
	PlanHash          string   `json:"plan_hash,omitempty"`
	Branch            string   `json:"branch,omitempty"`
	Repo              string   `json:"repo,omitempty"`
	BaseCommit        string   `json:"base_commit,omitempty"`
	Error             string   `json:"error,omitempty"`
	Name              string   `json:"name,omitempty"` // command_start: verify_1, acceptance_2, ...
	Argv              []string `json:"argv,omitempty"` // command_start
	WorkOrders        int      `json:"work_orders,omitempty"`
	Source            string   `json:"source,omitempty"`
}

// Time is the event's timestamp; zero if it has none.
func (e Event) Time() time.Time {
	t, _ := time.Parse(time.RFC3339Nano, e.TS)
	return t
}

// scanLines calls fn for every complete line of the file at path from byte
// offset from on, one line in memory at a time, and returns the offset
// after the last complete line: a line still being written (no newline
// yet) is left for the next call. A line longer than maxEventLine is not
// held: fn gets nil for it, so that a reader can count it as unreadable.
// fn returning false stops the scan.
func scanLines(path string, from int64, fn func(line []byte, end int64) bool) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return from, err
	}
	defer f.Close()
	return scanReader(f, from, fn)
}

func scanReader(f io.ReadSeeker, from int64, fn func(line []byte, end int64) bool) (int64, error) {
	return scanReaderSize(f, from, 64<<10, fn)
}

// scanReaderSize is scanReader with a read buffer of size bytes (at least
// 16): for a file known to be small.
func scanReaderSize(f io.ReadSeeker, from int64, size int, fn func(line []byte, end int64) bool) (int64, error) {
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return from, err
	}
	r := bufio.NewReaderSize(f, size)
	done, pos := from, from // done: after the last complete line
	var long []byte         // the start of a line longer than the buffer
	tooLong := false
	for {
		chunk, err := r.ReadSlice('\n')
		pos += int64(len(chunk))
		if errors.Is(err, bufio.ErrBufferFull) {
			if len(long)+len(chunk) > maxEventLine {
				tooLong, long = true, nil
			} else if !tooLong {
				long = append(long, chunk...)
			}
			continue
		}
		if errors.Is(err, io.EOF) {
			return done, nil // an incomplete last line is read next time
		}
		if err != nil {
			return done, err
		}
		done = pos
		line := chunk
		if long != nil {
			tooLong = tooLong || len(long)+len(chunk) > maxEventLine
			line, long = append(long, chunk...), nil
		}
		if tooLong {
			tooLong, line = false, nil
			if !fn(nil, done) {
				return done, nil
			}
			continue
		}
		if !fn(bytes.TrimRight(line, "\r\n"), done) {
			return done, nil
		}
	}
}

// decodeEvent decodes one events.jsonl line; ok is false for a line that
// is not a JSON object.
func decodeEvent(line []byte) (Event, bool) {
	var e Event
	if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
		return Event{}, false
	}
	return e, true
}
