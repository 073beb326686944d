package serve

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
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
	size := 64 << 10
	// A file that says its size gets a buffer no larger than what is left
	// of it: pages read many small files.
	if st, ok := f.(interface{ Stat() (fs.FileInfo, error) }); ok {
		if info, err := st.Stat(); err == nil && info.Size()-from < int64(size) {
			size = int(max(info.Size()-from+1, 16))
		}
	}
	return scanReaderSize(f, from, size, fn)
}

// scanReaderSize is scanReader with a read buffer of size bytes (at least
// 16): for a file known to be small. A line longer than the buffer is not
// gathered as it is read: at its end, it is read again from its start if
// it is within maxEventLine, and skipped otherwise, so that no line over
// the bound is held or copied.
func scanReaderSize(f io.ReadSeeker, from int64, size int, fn func(line []byte, end int64) bool) (int64, error) {
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return from, err
	}
	r := bufio.NewReaderSize(f, size)
	done, pos := from, from // done: after the last complete line
	long := false           // the line being read is longer than the buffer
	for {
		chunk, err := r.ReadSlice('\n')
		pos += int64(len(chunk))
		if errors.Is(err, bufio.ErrBufferFull) {
			long = true
			continue
		}
		if errors.Is(err, io.EOF) {
			return done, nil // an incomplete last line is read next time
		}
		if err != nil {
			return done, err
		}
		line := chunk
		if long {
			long, line = false, nil
			if n := pos - done; n <= maxEventLine {
				line = make([]byte, n)
				if _, err := f.Seek(done, io.SeekStart); err != nil {
					return done, err
				}
				if _, err := io.ReadFull(f, line); err != nil {
					return done, err
				}
				if _, err := f.Seek(pos, io.SeekStart); err != nil {
					return done, err
				}
				r.Reset(f)
			}
		}
		done = pos
		if line == nil {
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
