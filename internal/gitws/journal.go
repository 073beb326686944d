package gitws

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/factory-harness/factory/internal/artifact"
)

// The attempt journal: what a later `factory recover` needs to restore the
// baseline after the harness was killed (SIGKILL, a crash, a power cut),
// kept in <git dir>/factory/. journal.json is written once before the first
// write of a run and replaced when an attempt is about to write; command.json
// names the process group of the command running now.
const (
	journalFile = "journal.json"
	commandFile = "command.json"
	gitStepFile = "git-step.json"
)

// journalSumPrefix starts the journal's last line, the SHA-256 of the JSON
// before it: a journal cut short or damaged on disk is refused instead of
// restored from. (With one path in its list of ignored files changed, a
// restore takes that file for one the attempt created and deletes it; only
// a backup in the snapshot, kept for small files, brings it back.)
const journalSumPrefix = "sha256 "

func (r *Repo) factoryPath(name string) string {
	return filepath.Join(r.GitDir, FactoryDirName, name)
}

// JournalPath is where the journal of this work tree lives.
func (r *Repo) JournalPath() string { return r.factoryPath(journalFile) }

// HasJournal reports whether a journal is present, that is, whether a run
// was cut off before it could finish its rollback or accept its result.
func (r *Repo) HasJournal() (bool, error) {
	_, err := os.Lstat(r.JournalPath())
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("check for a journal: %w", err)
	}
	return true, nil
}

// WriteJournal replaces the journal with v, atomically and durably.
func (r *Repo) WriteJournal(v any) error { return WriteJournalFile(r.JournalPath(), v) }

// ReadJournal decodes the journal into v.
func (r *Repo) ReadJournal(v any) error { return ReadJournalFile(r.JournalPath(), v) }

// WriteJournalFile replaces the journal at p with v, atomically and
// durably: compact JSON (it holds the mode of every file, and nobody reads
// it but ReadJournalFile), then its checksum line. `factory loop` keeps its
// step journal in the same form.
func WriteJournalFile(p string, v any) error {
	dir := filepath.Dir(p)
	_, statErr := os.Stat(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("write journal: %w", err)
	}
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("write journal %s: %w", p, err)
	}
	if s, ok := lossyString(data); ok {
		// encoding/json writes each byte that is not UTF-8 as U+FFFD: a
		// recovery would restore (or delete) a file by another name.
		var name string
		_ = json.Unmarshal([]byte(s), &name) // a string encoding/json wrote
		return fmt.Errorf("write journal %s: the name %q is not valid UTF-8 (each bad byte shown as U+FFFD), and a journal cannot record it for a recovery: rename it", p, name)
	}
	sum := sha256.Sum256(data)
	data = fmt.Appendf(data, "\n%s%s\n", journalSumPrefix, hex.EncodeToString(sum[:]))
	if err := artifact.WriteFileAtomic(p, data, 0o644); err != nil {
		return fmt.Errorf("write journal: %w", err)
	}
	if os.IsNotExist(statErr) {
		// A directory made just now: its own name must last too (the
		// journal's sync covers the file and the directory's entries).
		if err := artifact.SyncDir(filepath.Dir(dir)); err != nil {
			return fmt.Errorf("write journal: %w", err)
		}
	}
	return nil
}

// ReadJournalFile decodes the journal WriteJournalFile wrote at p into v
// and accepts only the bytes WriteJournalFile writes for the values read:
// one cut short or damaged is refused, and so is one rewritten with a new
// checksum that holds what factory never writes (a key in another case,
// repeated or unknown, `null`, another spelling of a number).
func ReadJournalFile(p string, v any) error {
	data, err := os.ReadFile(p)
	if err != nil {
		return fmt.Errorf("read journal: %w", err)
	}
	body, sumLine, ok := bytes.Cut(data, []byte("\n"+journalSumPrefix))
	if !ok || !bytes.HasSuffix(sumLine, []byte("\n")) {
		return fmt.Errorf("journal %s is cut short or damaged: it does not end with its checksum line", p)
	}
	sum := sha256.Sum256(body)
	if string(sumLine) != hex.EncodeToString(sum[:])+"\n" {
		return fmt.Errorf("journal %s is damaged: its content does not match its checksum", p)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("read journal %s: %w", p, err)
	}
	if again, err := json.Marshal(v); err != nil || !bytes.Equal(again, body) {
		if s, lossy := lossyString(body); lossy {
			return fmt.Errorf("journal %s holds a name that was not valid UTF-8 (%s, written by an older factory): it cannot be restored from exactly", p, s)
		}
		return fmt.Errorf("journal %s is damaged: its checksum matches, but it is not what factory writes for the values in it", p)
	}
	return nil
}

// lossyString returns the first JSON string in data (as written, quotes
// included) that holds the escape encoding/json writes for a byte that is
// not UTF-8; a U+FFFD of the input itself is written as it is, never escaped.
func lossyString(data []byte) (string, bool) {
	if !bytes.Contains(data, []byte(`\ufffd`)) { // the usual case, scanned fast
		return "", false
	}
	start, lossy := -1, false
	for i := 0; i < len(data); i++ {
		switch c := data[i]; {
		case start < 0:
			if c == '"' {
				start = i
			}
		case c == '\\':
			lossy = lossy || bytes.HasPrefix(data[i+1:], []byte("ufffd"))
			i++ // the escaped byte
		case c == '"':
			if lossy {
				return string(data[start : i+1]), true
			}
			start = -1
		}
	}
	return "", false
}

// RunningCommand identifies the process group of a command the harness
// started, so that recovery can kill it if it outlived the harness.
type RunningCommand struct {
	PGID       int    `json:"pgid"`
	StartTicks uint64 `json:"start_ticks"` // the leader's start time, in clock ticks since boot
}

// RecordCommand notes the command now running; ClearCommand forgets it.
// The note is for a harness that dies while the machine runs on: it
// outlives the process without an fsync, and after a crash of the machine
// no command is left running to kill, so it is not synced to disk.
func (r *Repo) RecordCommand(c RunningCommand) error {
	if err := r.writeNote(commandFile, c); err != nil {
		return fmt.Errorf("record running command: %w", err)
	}
	return nil
}

// ClearCommand forgets the running command.
func (r *Repo) ClearCommand() error {
	if err := r.clearNote(commandFile); err != nil {
		return fmt.Errorf("clear running command: %w", err)
	}
	return nil
}

// RecordedCommand returns the command recorded as running, if any.
func (r *Repo) RecordedCommand() (RunningCommand, bool, error) {
	c, found, err := readNote[RunningCommand](r, commandFile)
	if err != nil {
		return RunningCommand{}, false, fmt.Errorf("read running command %s: %w", r.factoryPath(commandFile), err)
	}
	return c, found, nil
}

// writeNote replaces the note name (beside the journal) with v as JSON,
// atomically but not synced: see RecordCommand and RecordGitStep.
func (r *Repo) writeNote(name string, v any) error {
	data, err := artifact.MarshalJSON(v)
	if err == nil {
		err = os.MkdirAll(filepath.Dir(r.factoryPath(name)), 0o755)
	}
	if err == nil {
		err = artifact.ReplaceFile(r.factoryPath(name), data, 0o644)
	}
	return err
}

// clearNote removes the note name; one already gone is fine.
func (r *Repo) clearNote(name string) error {
	if err := os.Remove(r.factoryPath(name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// readNote decodes the note name; found is false when there is none.
func readNote[T any](r *Repo, name string) (v T, found bool, err error) {
	data, err := os.ReadFile(r.factoryPath(name))
	if errors.Is(err, fs.ErrNotExist) {
		return v, false, nil
	}
	if err == nil {
		err = json.Unmarshal(data, &v)
	}
	if err != nil {
		var zero T
		return zero, false, err
	}
	return v, true, nil
}

// GitStep is a step in which a factory process runs git to write the
// repository (a commit, a branch switch, a rollback), as RecordGitStep
// notes it. Git takes its locks by creating files (index.lock, HEAD.lock,
// refs/heads/<branch>.lock) and leaves them when it is killed; a note left
// behind says those files are the leftovers of a factory that died inside
// the step, not the locks of a git at work (see RecoverGitLocks).
type GitStep struct {
	Step   string `json:"step"`   // what the step does: "commit", "switch branch", ...
	Branch string `json:"branch"` // the branch whose ref it may lock; "" for none
	PID    int    `json:"pid"`    // the process that runs it
	// Target is the commit a branch switch enters (StepSwitch).
	Target string `json:"target,omitempty"`
}

// RecordGitStep notes that this process is about to run git step s (its
// Branch, when empty, is the branch HEAD is on); ClearGitStep forgets it.
// The caller holds the repository Lock and clears the note as soon as the
// step returns, success or failure. Like the running-command note it is
// not synced to disk: it must outlive a killed process, and after a crash
// of the machine every git lock is at least as old as the reboot, which
// RecoverGitLocks's age check (with a journal) takes for stale anyway.
func (r *Repo) RecordGitStep(s GitStep) error {
	if s.Branch == "" {
		s.Branch = r.headBranch()
	}
	s.PID = os.Getpid()
	if err := r.writeNote(gitStepFile, s); err != nil {
		return fmt.Errorf("note the git step %q: %w", s.Step, err)
	}
	return nil
}

// DuringGitStep runs f, which runs git to write the repository, under the
// note of step s (RecordGitStep), and clears the note when f returns: if
// the process is killed inside f, the next factory knows the lock files
// git left are its own.
func (r *Repo) DuringGitStep(s GitStep, f func() error) error {
	if err := r.RecordGitStep(s); err != nil {
		return err
	}
	err := f()
	return errors.Join(err, r.ClearGitStep())
}

// ClearGitStep forgets the git step RecordGitStep noted.
func (r *Repo) ClearGitStep() error {
	if err := r.clearNote(gitStepFile); err != nil {
		return fmt.Errorf("clear the git step note: %w", err)
	}
	return nil
}

// RecordedGitStep returns the git step noted as running, if any.
func (r *Repo) RecordedGitStep() (GitStep, bool, error) {
	s, found, err := readNote[GitStep](r, gitStepFile)
	if err != nil {
		return GitStep{}, false, fmt.Errorf("read the git step note %s: %w (remove it once no factory and no git runs in this repository)", r.factoryPath(gitStepFile), err)
	}
	return s, found, nil
}

// RemoveJournal deletes the journal and the notes of the running command
// and git step, the journal last, so that a crash in between still leaves
// it to be found.
func (r *Repo) RemoveJournal() error {
	if err := r.ClearCommand(); err != nil {
		return err
	}
	if err := r.ClearGitStep(); err != nil {
		return err
	}
	if err := os.Remove(r.JournalPath()); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove journal: %w", err)
	}
	dir := filepath.Dir(r.JournalPath())
	if err := artifact.SyncDir(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	_ = os.Remove(dir) // when empty: a repository keeps no trace of a finished run
	return nil
}

// The JSON form of a Baseline, for the journal: everything Rollback uses,
// backups included (as base64).
type baselineJSON struct {
	Commit    string     `json:"commit"`
	Ignored   []string   `json:"ignored"`
	EmptyDirs []string   `json:"empty_dirs"`
	Modes     modesJSON  `json:"modes"`
	State     *stateJSON `json:"state,omitempty"`
}

// modesJSON encodes a Baseline's modes as encoding/json would (keys
// sorted), without reflection: the journal holds the mode of every file in
// the tree and is written before each attempt's first write, where the
// generic encoder took ~8 ms for 10,000 files.
type modesJSON map[string]fs.FileMode

func (m modesJSON) MarshalJSON() ([]byte, error) {
	if m == nil {
		return []byte("null"), nil
	}
	keys := sortedKeys(m)
	b := make([]byte, 0, 2+len(keys)*32)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, k)
		b = append(b, ':')
		b = strconv.AppendUint(b, uint64(m[k]), 10)
	}
	return append(b, '}'), nil
}

// appendJSONString appends s as a JSON string: as it is when it holds only
// printable ASCII that needs no escape, else as encoding/json writes it.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always encodes
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

type stateJSON struct {
	HeadRef   string                 `json:"head_ref"`
	Refs      []string               `json:"refs"`
	MetaSpots []spotJSON             `json:"meta_spots"`
	Meta      []entryJSON            `json:"meta"`
	Ignored   []entryJSON            `json:"ignored"`
	DirModes  map[string]fs.FileMode `json:"dir_modes"`
	// Absent in journals written before stamps: Rollback then asks git.
	IndexStamp string `json:"index_stamp,omitempty"`
	RefsStamp  string `json:"refs_stamp,omitempty"`
}

type spotJSON struct {
	Path string `json:"path"`
	Walk bool   `json:"walk"`
}

type entryJSON struct {
	Path   string      `json:"path"`
	Mode   fs.FileMode `json:"mode"`
	Size   int64       `json:"size"`
	Mtime  time.Time   `json:"mtime"`
	Target string      `json:"target,omitempty"`
	Change string      `json:"change,omitempty"`
	Data   []byte      `json:"data,omitempty"`
	Backed bool        `json:"backed"`
}

func toEntryJSON(p string, e *entry) entryJSON {
	return entryJSON{Path: p, Mode: e.mode, Size: e.size, Mtime: e.mtime, Target: e.target, Change: e.change, Data: e.data, Backed: e.backed}
}

func (j entryJSON) entry() entry {
	return entry{mode: j.Mode, size: j.Size, mtime: j.Mtime, target: j.Target, change: j.Change, data: j.Data, backed: j.Backed}
}

// MarshalJSON encodes b with everything Rollback needs.
func (b Baseline) MarshalJSON() ([]byte, error) {
	out := baselineJSON{Commit: b.Commit, Ignored: b.Ignored, EmptyDirs: b.EmptyDirs, Modes: modesJSON(b.Modes)}
	if st := b.state; st != nil {
		s := &stateJSON{HeadRef: st.headRef, Refs: st.refs, DirModes: st.dirModes, IndexStamp: st.indexStamp, RefsStamp: st.refsStamp}
		for _, sp := range st.meta.spots {
			s.MetaSpots = append(s.MetaSpots, spotJSON{Path: sp.path, Walk: sp.walk})
		}
		for _, p := range sortedKeys(st.meta.entries) {
			s.Meta = append(s.Meta, toEntryJSON(p, st.meta.entries[p]))
		}
		for i := range st.ignored {
			s.Ignored = append(s.Ignored, toEntryJSON(st.ignored[i].path, &st.ignored[i].entry))
		}
		out.State = s
	}
	return json.Marshal(out)
}

// UnmarshalJSON decodes what MarshalJSON wrote.
func (b *Baseline) UnmarshalJSON(data []byte) error {
	var in baselineJSON
	if err := json.Unmarshal(data, &in); err != nil {
		return err
	}
	*b = Baseline{Commit: in.Commit, Ignored: in.Ignored, EmptyDirs: in.EmptyDirs, Modes: map[string]fs.FileMode(in.Modes)}
	if s := in.State; s != nil {
		st := &baselineState{headRef: s.HeadRef, refs: s.Refs, dirModes: s.DirModes, indexStamp: s.IndexStamp, refsStamp: s.RefsStamp}
		st.meta.entries = map[string]*entry{}
		for _, sp := range s.MetaSpots {
			st.meta.spots = append(st.meta.spots, metaSpot{path: sp.Path, walk: sp.Walk})
		}
		for _, e := range s.Meta {
			en := e.entry()
			st.meta.entries[e.Path] = &en
		}
		for _, e := range s.Ignored {
			st.ignored = append(st.ignored, ignoredFile{path: e.Path, entry: e.entry()})
		}
		b.state = st
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
