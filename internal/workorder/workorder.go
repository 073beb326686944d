// Package workorder defines the work order and write proposal contracts,
// their strict decoding and validation, canonical JSON and run ids. It is
// pure apart from ReadFile: no I/O beyond what callers hand it.
package workorder

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/factory-harness/factory/internal/canon"
)

// Limits shared by the factory and the planner.
const (
	MaxContextFiles   = 10
	ContextReadBudget = 200 * 1024 // bytes of context file content shown to the model, all files together
	MaxWriteBytes     = 200 * 1024 // per whole-file write, and per edit (old and new together)
	MaxProposalBytes  = 500 * 1024 // all written contents, olds and news of one proposal together
	// MaxEditedFileBytes bounds a file that edits change, before and after:
	// a small proposal may change a file far larger than a whole write can be.
	MaxEditedFileBytes = 2 << 20
	// MaxReplyBytes bounds a raw model reply before parsing. JSON escaping
	// can make a legal proposal up to six times its content size (\u00XX for
	// one byte), so the bound leaves room for that and no more.
	MaxReplyBytes = 6*MaxProposalBytes + 64*1024
	// MaxWorkOrderBytes bounds a work order file, so a wrong path (a log,
	// a disk image) is refused rather than read into memory.
	MaxWorkOrderBytes = 1 << 20
	// MaxTextBytes bounds intent and notes each: both go into every
	// prompt, and no honest work order needs more.
	MaxTextBytes = 64 * 1024
	// MaxWorkOrders is the most work orders a plan can hold: ids run
	// WO-01 … WO-99.
	MaxWorkOrders = 99
)

// CheckID reports whether id is a work order id: "WO-" and a number from
// 1 to MaxWorkOrders in two digits, WO-01 … WO-99, or such an id followed
// by "r" and a number K from 1 to 99 without a leading zero, WO-03r1 …
// WO-03r99: the ids a build's repair gives the orders it adds (WO-03r1 is
// the first order that replaces WO-03). `factory run`, the planner and
// the builder share this rule; a compiled plan's ids also run WO-01,
// WO-02, … in order.
func CheckID(id string) error {
	if _, _, ok := ParseID(id); !ok {
		return fmt.Errorf("%s is not a work order id; ids are WO-01 … WO-%02d (two digits), or WO-NNrK (K from 1 to 99, e.g. WO-03r1) for an order a repair adds", clip(id), MaxWorkOrders)
	}
	return nil
}

// ParseID splits a work order id (CheckID) into its number n and its
// repair number k (0 for WO-NN); ok is false for anything else.
func ParseID(id string) (n, k int, ok bool) {
	rest, found := strings.CutPrefix(id, "WO-")
	if !found || len(rest) < 2 || !isDigits(rest[:2]) {
		return 0, 0, false
	}
	n, _ = strconv.Atoi(rest[:2])
	if n < 1 || n > MaxWorkOrders {
		return 0, 0, false
	}
	if len(rest) == 2 {
		return n, 0, true
	}
	ks, found := strings.CutPrefix(rest[2:], "r")
	if !found || len(ks) < 1 || len(ks) > 2 || ks[0] == '0' || !isDigits(ks) {
		return 0, 0, false
	}
	k, _ = strconv.Atoi(ks)
	return n, k, true
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// CompareIDs orders work order ids by number, then repair number: WO-03,
// WO-03r1, WO-03r2, WO-03r10, WO-04. Strings that are not ids come after
// every id, in byte order.
func CompareIDs(a, b string) int {
	an, ak, aok := ParseID(a)
	bn, bk, bok := ParseID(b)
	switch {
	case aok && bok:
		if an != bn {
			return cmp.Compare(an, bn)
		}
		return cmp.Compare(ak, bk)
	case aok:
		return -1
	case bok:
		return 1
	}
	return strings.Compare(a, b)
}

// FormatID is the id of the n-th work order of a plan, counting from 1.
func FormatID(n int) string { return fmt.Sprintf("WO-%02d", n) }

// clip quotes s, shortened to about 64 bytes on a rune boundary, so that a
// message never repeats a huge value.
func clip(s string) string {
	const n = 64
	if len(s) <= n {
		return strconv.Quote(s)
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strconv.Quote(s[:cut]) + "…"
}

// ReadFile reads a work order file of at most MaxWorkOrderBytes without
// reading more than that from it; ParseWorkOrder decodes the result. The
// two steps stay apart so that callers can tell an unreadable file from an
// invalid work order.
func ReadFile(path string) ([]byte, error) {
	return ReadLimited(path, MaxWorkOrderBytes, "work order")
}

// ReadLimited reads a file of at most limit bytes, reading no more than
// limit+1; what names the content in the error.
func ReadLimited(path string, limit int64, what string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s: the %s file is larger than the limit of %s", path, what, byteSize(limit))
	}
	return data, nil
}

// byteSize writes a limit in bytes and, when exact, in KiB or MiB.
func byteSize(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d bytes (%d MiB)", n, n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d bytes (%d KiB)", n, n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// Condition kinds.
const (
	FileExists = "file_exists"
	FileAbsent = "file_absent"
)

// Condition is a filesystem fact checked before the model is called
// (preconditions) or after the writes (postconditions).
type Condition struct {
	Kind string `json:"kind" jsonschema:"required,enum=file_exists,enum=file_absent"`
	Path string `json:"path" jsonschema:"required"`
}

// WorkOrder is one unit of work for `factory run`.
type WorkOrder struct {
	ID                 string      `json:"id" jsonschema:"required,minLength=1"`
	Title              string      `json:"title" jsonschema:"required,minLength=1"`
	Intent             string      `json:"intent" jsonschema:"required,minLength=1"`
	Preconditions      []Condition `json:"preconditions"`
	Postconditions     []Condition `json:"postconditions"`
	AllowedFiles       []string    `json:"allowed_files" jsonschema:"required,minItems=1"`
	Forbidden          []string    `json:"forbidden" jsonschema:"required"`
	AcceptanceCommands []string    `json:"acceptance_commands" jsonschema:"required,minItems=1"`
	ContextFiles       []string    `json:"context_files" jsonschema:"required,maxItems=10"`
	Notes              *string     `json:"notes" jsonschema:"oneof_type=string;null"`
	VerifyExempt       bool        `json:"verify_exempt"`
}

// ParseWorkOrder strictly decodes and validates a work order. Paths in the
// result are normalised and nil lists are empty, so the canonical JSON of the
// result does not depend on how the file was written.
func ParseWorkOrder(data []byte) (*WorkOrder, error) {
	if len(data) > MaxWorkOrderBytes {
		return nil, fmt.Errorf("the work order is %d bytes; the limit is %s", len(data), byteSize(MaxWorkOrderBytes))
	}
	var w WorkOrder
	if err := DecodeStrict(data, &w); err != nil {
		return nil, err
	}
	if err := w.Normalize(); err != nil {
		return nil, err
	}
	return &w, nil
}

// Normalize validates w in place: the id rule (CheckID), path rules, limits,
// condition kinds and the allowed/forbidden overlap. It reports every
// problem, not just the first.
func (w *WorkOrder) Normalize() error {
	var errs []error
	bad := func(field string, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	for field, s := range map[string]string{"id": w.ID, "title": w.Title, "intent": w.Intent} {
		if strings.TrimSpace(s) == "" {
			bad(field, "must not be empty")
		}
	}
	if strings.TrimSpace(w.ID) != "" {
		if err := CheckID(w.ID); err != nil {
			bad("id", "%v", err)
		}
	}
	if len(w.Intent) > MaxTextBytes {
		bad("intent", "is %d bytes; the limit is %s", len(w.Intent), byteSize(MaxTextBytes))
	}
	if w.Notes != nil && len(*w.Notes) > MaxTextBytes {
		bad("notes", "is %d bytes; the limit is %s", len(*w.Notes), byteSize(MaxTextBytes))
	}
	normList := func(field string, list []string) []string {
		out := make([]string, 0, len(list))
		for i, p := range list {
			clean, err := NormalizePath(p)
			if err != nil {
				bad(fmt.Sprintf("%s[%d]", field, i), "%v", err)
				clean = p
			}
			out = append(out, clean)
		}
		return out
	}
	w.AllowedFiles = normList("allowed_files", w.AllowedFiles)
	w.ContextFiles = normList("context_files", w.ContextFiles)
	if len(w.AllowedFiles) == 0 {
		bad("allowed_files", "must list at least one file")
	}
	if len(w.ContextFiles) > MaxContextFiles {
		bad("context_files", "lists %d files; at most %d are allowed", len(w.ContextFiles), MaxContextFiles)
	}
	if len(w.AcceptanceCommands) == 0 {
		bad("acceptance_commands", "must list at least one command")
	}
	for i, c := range w.AcceptanceCommands {
		if strings.TrimSpace(c) == "" {
			bad(fmt.Sprintf("acceptance_commands[%d]", i), "must not be empty")
		}
	}
	if w.Forbidden == nil {
		w.Forbidden = []string{}
	}
	for i, f := range w.Forbidden {
		if _, _, err := forbiddenPattern(f); err != nil {
			bad(fmt.Sprintf("forbidden[%d]", i), "%v", err)
		}
	}
	normConds := func(field string, conds []Condition, onlyExists bool) []Condition {
		out := make([]Condition, 0, len(conds))
		for i, c := range conds {
			at := fmt.Sprintf("%s[%d]", field, i)
			if c.Kind != FileExists && c.Kind != FileAbsent {
				bad(at+".kind", "must be %q or %q, not %q", FileExists, FileAbsent, c.Kind)
			} else if onlyExists && c.Kind != FileExists {
				bad(at+".kind", "postconditions may only use %q", FileExists)
			}
			clean, err := NormalizePath(c.Path)
			if err != nil {
				bad(at+".path", "%v", err)
				clean = c.Path
			}
			out = append(out, Condition{Kind: c.Kind, Path: clean})
		}
		return out
	}
	w.Preconditions = normConds("preconditions", w.Preconditions, false)
	w.Postconditions = normConds("postconditions", w.Postconditions, true)
	for i, p := range w.AllowedFiles {
		if w.IsForbidden(p) {
			bad(fmt.Sprintf("allowed_files[%d]", i), "%q is also covered by forbidden; a file cannot be both", p)
		}
	}
	if len(errs) == 0 {
		return nil
	}
	slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return errors.Join(errs...)
}

// IsAllowed reports whether the normalised path p is in allowed_files.
func (w *WorkOrder) IsAllowed(p string) bool {
	for _, a := range w.AllowedFiles {
		if a == p {
			return true
		}
	}
	return false
}

// RunID is sha256(canonical_json(work_order) + baseline_commit)[:16], hex.
func RunID(w *WorkOrder, baselineCommit string) (string, error) {
	b, err := canon.JSON(w)
	if err != nil {
		return "", fmt.Errorf("canonical JSON of work order %s: %w", w.ID, err)
	}
	return canon.SHA256Hex(append(b, baselineCommit...))[:16], nil
}

// FileWrite is one full-file write proposed by the model.
type FileWrite struct {
	Path       string `json:"path" jsonschema:"required"`
	BaseSHA256 string `json:"base_sha256" jsonschema:"required,pattern=^[0-9a-f]{64}$"`
	Content    string `json:"content" jsonschema:"required"`
}

// FileEdit is a set of exact search/replace edits of one existing file:
// each Old must occur exactly once in the file's current content
// (internal/edit applies them, all or none).
type FileEdit struct {
	Path       string        `json:"path" jsonschema:"required"`
	BaseSHA256 string        `json:"base_sha256" jsonschema:"required,pattern=^[0-9a-f]{64}$"`
	Replace    []Replacement `json:"replace" jsonschema:"required,minItems=1"`
}

// Replacement is one edit: the exact text Old, replaced by New.
type Replacement struct {
	Old string `json:"old" jsonschema:"required"`
	New string `json:"new" jsonschema:"required"`
}

// WriteProposal is the only thing the model may produce: whole-file writes,
// edits of existing files, or both; never neither.
type WriteProposal struct {
	Summary string      `json:"summary" jsonschema:"required"`
	Writes  []FileWrite `json:"writes,omitempty"`
	Edits   []FileEdit  `json:"edits,omitempty"`
}

// Paths are the proposal's paths as the model wrote them: the writes', then
// the edits'.
func (p *WriteProposal) Paths() []string {
	out := make([]string, 0, len(p.Writes)+len(p.Edits))
	for _, w := range p.Writes {
		out = append(out, w.Path)
	}
	for _, e := range p.Edits {
		out = append(out, e.Path)
	}
	return out
}

// At names the i-th path of Paths as a JSON path: writes[i] or edits[j].
func (p *WriteProposal) At(i int) string {
	if i < len(p.Writes) {
		return fmt.Sprintf("writes[%d]", i)
	}
	return fmt.Sprintf("edits[%d]", i-len(p.Writes))
}

// BaseSHA256 is the base hash the i-th path of Paths was proposed against.
func (p *WriteProposal) BaseSHA256(i int) string {
	if i < len(p.Writes) {
		return p.Writes[i].BaseSHA256
	}
	return p.Edits[i-len(p.Writes)].BaseSHA256
}

// EmptySHA256 is the base hash of a file that does not exist yet.
const EmptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

var sha256Hex = regexp.MustCompile(`^[0-9a-f]{64}$`)

// ParseProposal strictly parses a raw model reply. The whole reply must be
// one JSON object: prose or markdown fences around it are rejected, never
// repaired. Path safety, scope and hashes are the TR node's job; this checks
// shape, text-only content and size limits.
func ParseProposal(reply string) (*WriteProposal, error) {
	if len(reply) > MaxReplyBytes {
		return nil, fmt.Errorf("reply is %d bytes; the limit is %d", len(reply), MaxReplyBytes)
	}
	trimmed := strings.TrimSpace(reply)
	if !strings.HasPrefix(trimmed, "{") {
		return nil, errors.New("reply does not start with a JSON object; send only the JSON object, no prose or markdown fences")
	}
	var p WriteProposal
	if err := DecodeStrict([]byte(trimmed), &p); err != nil {
		return nil, err
	}
	if len(p.Writes) == 0 && len(p.Edits) == 0 {
		return nil, errors.New("writes and edits are both empty: propose at least one write or edit")
	}
	total := 0
	for i, wr := range p.Writes {
		at := fmt.Sprintf("writes[%d]", i)
		if !sha256Hex.MatchString(wr.BaseSHA256) {
			return nil, fmt.Errorf("%s.base_sha256: %q is not 64 lowercase hex digits", at, wr.BaseSHA256)
		}
		if strings.ContainsRune(wr.Content, 0) {
			return nil, fmt.Errorf("%s.content: contains a NUL byte; only text files can be written", at)
		}
		if len(wr.Content) > MaxWriteBytes {
			return nil, fmt.Errorf("%s.content: %d bytes exceeds the per-file limit of %d; change an existing file with edits", at, len(wr.Content), MaxWriteBytes)
		}
		total += len(wr.Content)
	}
	for i, ed := range p.Edits {
		at := fmt.Sprintf("edits[%d]", i)
		if !sha256Hex.MatchString(ed.BaseSHA256) {
			return nil, fmt.Errorf("%s.base_sha256: %q is not 64 lowercase hex digits", at, ed.BaseSHA256)
		}
		if ed.BaseSHA256 == EmptySHA256 {
			return nil, fmt.Errorf("%s: base_sha256 is that of an empty or new file; edits change existing files, create a file with a write", at)
		}
		if len(ed.Replace) == 0 {
			return nil, fmt.Errorf("%s.replace: must contain at least one edit", at)
		}
		for j, rp := range ed.Replace {
			if strings.ContainsRune(rp.Old, 0) || strings.ContainsRune(rp.New, 0) {
				return nil, fmt.Errorf("%s.replace[%d]: contains a NUL byte; only text files can be edited", at, j)
			}
			if n := len(rp.Old) + len(rp.New); n > MaxWriteBytes {
				return nil, fmt.Errorf("%s.replace[%d]: old and new are %d bytes together; the per-edit limit is %d", at, j, n, MaxWriteBytes)
			}
			total += len(rp.Old) + len(rp.New)
		}
	}
	if total > MaxProposalBytes {
		return nil, fmt.Errorf("the proposal's contents, olds and news are %d bytes in total; the per-proposal limit is %d", total, MaxProposalBytes)
	}
	// A path named twice is ambiguous whatever the scope: which change wins?
	// Every repeat is reported, so one retry can mend them all.
	seen := map[string]string{}
	var dups []string
	for i, path := range p.Paths() {
		key := path
		if clean, err := NormalizePath(path); err == nil {
			key = clean
		}
		if first, ok := seen[key]; ok {
			dups = append(dups, fmt.Sprintf("%s: %s is already named by %s", p.At(i), path, first))
			continue
		}
		seen[key] = p.At(i)
	}
	if len(dups) > 0 {
		return nil, fmt.Errorf("%s; name each path once in the whole proposal (several edits of one file go in one replace list)", strings.Join(dups, "\n"))
	}
	return &p, nil
}
