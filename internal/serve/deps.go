package serve

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/factory-harness/factory/internal/deps"
)

// Bounds of what the attempt page shows of the dependency step: every
// string of deps.jsonl or of the step's report comes from what the model
// wrote (a dependency URL in a manifest, a line of a project .npmrc) or
// from a registry, and is cut; the request log is read up to
// maxDepsLogBytes and shown up to a number of rows (the whole file is a
// link away).
const (
	maxDepsLogBytes = 16 << 20
	maxDepsField    = 2000 // a URL, a reason, an ignored setting
	maxDepsError    = 8000 // an ecosystem's error
	maxDepsIgnored  = 100  // ignored settings listed per ecosystem
	maxDepsLogFiles = 50   // package manager logs linked
	// depsRowsServed and depsRowsReport: the allowed requests shown, and
	// again as many refused or unreadable lines.
	depsRowsServed = 1000
	depsRowsReport = 200
)

// DepsView is what the attempt page shows of the dependency step: the
// step's report from run_summary.json, its request log and the package
// managers' logs.
type DepsView struct {
	// Record is what run_summary.json says of the attempt: "recorded" (it
	// holds the attempt's record), "pending" (no run_summary.json yet: the
	// run goes on, or was killed), "unreadable", or "absent" (a summary
	// without this attempt). Ran: the record holds the step's report (null
	// when nothing was installed: no manifest, --deps off, or the attempt
	// stopped before the step).
	Record     string    `json:"record"`
	Ran        bool      `json:"ran"`
	Ecosystems []DepsEco `json:"ecosystems"`
	// Log is deps.jsonl, nil when there is none.
	Log *DepsLog `json:"log"`
	// Logs are the package managers' outputs, logs/deps_<ecosystem>_<n>.txt.
	Logs []DepsFile `json:"logs"`
}

// Shown reports whether the page has anything to say about the step.
func (d *DepsView) Shown() bool {
	return d != nil && (d.Record == depsRecorded || d.Log != nil || len(d.Logs) > 0)
}

// DepsEco is what the step did for one ecosystem (deps.Outcome, strings
// cut).
type DepsEco struct {
	Ecosystem  string   `json:"ecosystem"`
	Skipped    bool     `json:"skipped"`
	DurationMS int64    `json:"duration_ms"`
	Packages   int      `json:"packages"` // -1: unknown
	Bytes      int64    `json:"bytes_fetched"`
	Requests   int      `json:"requests"`
	Refused    int      `json:"refused"`
	Lockfiles  []string `json:"lockfiles"`
	Ignored    []string `json:"ignored"`
	// IgnoredMore is how many ignored settings are not listed.
	IgnoredMore int    `json:"ignored_more,omitempty"`
	Error       string `json:"error,omitempty"`
}

// Seconds is the step's duration for this ecosystem.
func (e DepsEco) Seconds() float64 { return float64(e.DurationMS) / 1000 }

// DepsFile is one package manager log.
type DepsFile struct {
	Name string `json:"name"` // relative to the run directory
}

// DepsLog is deps.jsonl as read: the counts over every line read and the
// rows shown.
type DepsLog struct {
	Name string `json:"name"` // relative to the run directory
	Size int64  `json:"size"`
	// Lines read; each is a request (Requests) or unreadable.
	Lines      int       `json:"lines"`
	Requests   int       `json:"requests"`
	Refused    int       `json:"refused"`
	Unreadable int       `json:"unreadable"`
	Bytes      int64     `json:"bytes"` // the sum of the requests' bytes
	Rows       []DepsRow `json:"rows"`
	// Hidden is how many lines are counted but not shown.
	Hidden int `json:"hidden"`
	// Cut: the file is longer than what was read (maxDepsLogBytes).
	Cut bool `json:"cut,omitempty"`
	// ReadError says why the file, or part of it, could not be read.
	ReadError string `json:"read_error,omitempty"`
}

// ReadLimit is how much of a request log is read.
func (l DepsLog) ReadLimit() int64 { return maxDepsLogBytes }

// DepsRow is one line of deps.jsonl: a request, or why the line could
// not be read.
type DepsRow struct {
	Line int `json:"line"` // 1-based
	deps.Request
	Unreadable string `json:"unreadable,omitempty"`
}

// Flagged reports whether the request was not allowed: refused, or a
// decision the log does not know.
func (r DepsRow) Flagged() bool { return r.Unreadable == "" && r.Decision != deps.Allowed }

// ShortSHA is the start of the body's hash.
func (r DepsRow) ShortSHA() string { return cutRunes(r.SHA256, 12) }

// depsLogFile is what a package manager log of the step is called.
var depsLogFile = regexp.MustCompile(`^deps_[A-Za-z0-9]+_[0-9]+\.txt$`)

// The states of an attempt's record (DepsView.Record).
const (
	depsRecorded   = "recorded"
	depsPending    = "pending"
	depsUnreadable = "unreadable"
	depsAbsent     = "absent"
)

// depsView reads what the dependency step left of attempt n of the run in
// dir; record is what run_summary.json says of the attempt (depsRecorded
// …), rep the record's step report.
func (s *Server) depsView(src *source, dir string, n int, record string, rep *deps.Report) *DepsView {
	v := &DepsView{Record: record, Ecosystems: []DepsEco{}, Logs: []DepsFile{}}
	if record == depsRecorded && rep != nil {
		v.Ran = true
		v.Ecosystems = depsEcos(rep)
	}
	ad := fmt.Sprintf("attempt_%d", n)
	v.Log = openDepsLog(src, dir+"/"+ad+"/deps.jsonl", s.maxDepsRows)
	if v.Log != nil {
		v.Log.Name = ad + "/deps.jsonl"
	}
	ents, _ := src.readDir(dir + "/" + ad + "/logs")
	for _, e := range ents {
		if e.Type().IsRegular() && depsLogFile.MatchString(e.Name()) && len(v.Logs) < maxDepsLogFiles {
			v.Logs = append(v.Logs, DepsFile{Name: ad + "/logs/" + e.Name()})
		}
	}
	return v
}

// depsEcos is the report's outcomes, strings cut.
func depsEcos(rep *deps.Report) []DepsEco {
	out := []DepsEco{}
	for _, o := range rep.Outcomes {
		e := DepsEco{Ecosystem: cutRunes(string(o.Ecosystem), 100), Skipped: o.Skipped, DurationMS: o.DurationMS, Packages: o.Packages,
			Bytes: o.Bytes, Requests: o.Requests, Refused: o.Refused, Lockfiles: []string{}, Ignored: []string{}, Error: cutRunes(o.Error, maxDepsError)}
		for _, l := range o.Lockfiles {
			if len(e.Lockfiles) < maxDepsIgnored { // the step names a handful: a record naming more is not the step's
				e.Lockfiles = append(e.Lockfiles, cutRunes(l, maxDepsField))
			}
		}
		for _, ig := range o.Ignored {
			if len(e.Ignored) < maxDepsIgnored {
				e.Ignored = append(e.Ignored, cutRunes(ig, maxDepsField))
			} else {
				e.IgnoredMore++
			}
		}
		out = append(out, e)
	}
	return out
}

// openDepsLog reads the request log name of src; nil when there is none.
func openDepsLog(src *source, name string, maxRows int) *DepsLog {
	f, err := src.openFile(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return &DepsLog{ReadError: err.Error()}
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return &DepsLog{ReadError: err.Error()}
	}
	if !info.Mode().IsRegular() {
		return &DepsLog{ReadError: "not a regular file"}
	}
	l := readDepsLog(f, info.Size(), maxRows)
	return &l
}

// readDepsLog reads a request log of size bytes from r, at most
// maxDepsLogBytes of it: every line is a request or, when it is not one
// JSON object of a request (a line longer than maxEventLine, a last line
// without its newline included), unreadable. It keeps, in file order, the
// first maxRows requests allowed and the first maxRows other lines (refused
// requests, unknown decisions, unreadable lines); the others are counted.
func readDepsLog(r io.ReaderAt, size int64, maxRows int) DepsLog {
	l := DepsLog{Size: size, Rows: []DepsRow{}}
	end := size
	if end > maxDepsLogBytes {
		end, l.Cut = maxDepsLogBytes, true
	}
	shownAllowed, shownOther := 0, 0
	add := func(row DepsRow) {
		l.Lines++
		if row.Unreadable != "" {
			l.Unreadable++
		} else {
			l.Requests++
			if row.Decision == deps.Refused {
				l.Refused++
			}
			l.Bytes = addSat(l.Bytes, row.Bytes)
		}
		switch {
		case !row.Flagged() && row.Unreadable == "" && shownAllowed < maxRows:
			shownAllowed++
		case (row.Flagged() || row.Unreadable != "") && shownOther < maxRows:
			shownOther++
		default:
			l.Hidden++
			return
		}
		l.Rows = append(l.Rows, shownRow(row))
	}
	off, err := scanReaderSize(io.NewSectionReader(r, 0, end), 0, int(min(end+1, 64<<10)), func(line []byte, _ int64) bool {
		add(decodeDepsLine(l.Lines+1, line))
		return true
	})
	if err != nil {
		l.ReadError = err.Error()
	} else if off < end && !l.Cut {
		add(DepsRow{Line: l.Lines + 1, Unreadable: "incomplete: no end of line (being written, or cut off)"})
	}
	return l
}

// decodeDepsLine reads line n of a request log; nil is a line too long to
// hold.
func decodeDepsLine(n int, line []byte) DepsRow {
	row := DepsRow{Line: n}
	if line == nil {
		row.Unreadable = fmt.Sprintf("longer than %d bytes", maxEventLine)
		return row
	}
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] != '{' {
		row.Unreadable = "not a JSON object"
		return row
	}
	if err := json.Unmarshal(line, &row.Request); err != nil {
		row.Request = deps.Request{}
		row.Unreadable = cutRunes(err.Error(), 200)
	}
	return row
}

// shownRow cuts a row's strings for the page.
func shownRow(r DepsRow) DepsRow {
	r.Method = cutRunes(r.Method, 100)
	r.URL = cutRunes(r.URL, maxDepsField)
	r.SHA256 = cutRunes(r.SHA256, 100)
	r.Decision = cutRunes(r.Decision, 100)
	r.Reason = cutRunes(r.Reason, maxDepsField)
	return r
}

// cutRunes cuts s to at most n runes, marking the cut with "…".
func cutRunes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i, count := 0, 0
	for i < len(s) && count < n {
		_, w := utf8.DecodeRuneInString(s[i:])
		i += w
		count++
	}
	if i >= len(s) {
		return s
	}
	return strings.ToValidUTF8(s[:i], "\uFFFD") + "…"
}

// addSat adds without wrapping around.
func addSat(a, b int64) int64 {
	switch {
	case b > 0 && a > math.MaxInt64-b:
		return math.MaxInt64
	case b < 0 && a < math.MinInt64-b:
		return math.MinInt64
	}
	return a + b
}

// byteSize writes a byte count for people.
func byteSize(n int64) string {
	const k = 1024
	switch {
	case n < k:
		return fmt.Sprintf("%d B", n)
	case n < k*k:
		return fmt.Sprintf("%.1f KiB", float64(n)/k)
	case n < k*k*k:
		return fmt.Sprintf("%.1f MiB", float64(n)/(k*k))
	}
	return fmt.Sprintf("%.1f GiB", float64(n)/(k*k*k))
}
