package deps

import (
	"encoding/json"
	"fmt"
	"os"
	"sync"
)

// The decisions a request log entry records.
const (
	Allowed = "allowed"
	Refused = "refused"
)

// Request is one line of deps.jsonl: a request the gateway forwarded or refused, or a refusal the
// step decided before any request (a dependency URL on a host not configured).
type Request struct {
	Method string `json:"method"`
	// URL is the upstream URL the request was for (not the gateway's).
	URL    string `json:"url"`
	Status int    `json:"status"`
	Bytes  int64  `json:"bytes"`
	// SHA256 is the hash of the body as received from upstream, "" when none was.
	SHA256   string `json:"sha256"`
	Decision string `json:"decision"`
	Reason   string `json:"reason"`
}

// Log is deps.jsonl, written as requests end: one JSON object a line, so that a kill loses at most
// the last. It also counts, for the attempt's summary. Safe for concurrent use.
type Log struct {
	mu       sync.Mutex
	f        *os.File
	err      error
	requests int
	refused  int
	bytes    int64
	refusals []string // the refused URLs with their reasons, for a failure brief
}

// OpenLog creates or appends to the log at path.
func OpenLog(path string) (*Log, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("dependency request log: %w", err)
	}
	return &Log{f: f}, nil
}

// Add appends one entry.
func (l *Log) Add(r Request) {
	b, err := json.Marshal(r)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.requests++
	l.bytes += r.Bytes
	if r.Decision == Refused {
		l.refused++
		if len(l.refusals) < 10 {
			l.refusals = append(l.refusals, r.Method+" "+r.URL+": "+r.Reason)
		}
	}
	if err == nil {
		_, err = l.f.Write(append(b, '\n'))
	}
	if err != nil && l.err == nil {
		l.err = err
	}
}

// Counts are the log's totals so far: requests, those refused, bytes received.
func (l *Log) Counts() (requests, refused int, bytes int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.requests, l.refused, l.bytes
}

// Refusals are the first refused requests, each as "METHOD URL: reason".
func (l *Log) Refusals() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.refusals...)
}

// Close syncs and closes the file, reporting the first write error.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	err := l.err
	if serr := l.f.Sync(); err == nil {
		err = serr
	}
	if cerr := l.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("dependency request log %s: %w", l.f.Name(), err)
	}
	return nil
}
