// Package artifact writes the audit trail: atomic files, stable JSON and run
// directories that never overwrite an earlier run.
package artifact

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
)

// WriteFileAtomic replaces path with data so that a reader sees either the
// old or the new content, never a mix (temp file in the same directory,
// renamed over path), and returns once the new content is durable: as
// WriteFilesAtomic with one file.
func WriteFileAtomic(path string, data []byte, perm fs.FileMode) error {
	return WriteFilesAtomic(filepath.Dir(path), []File{{Name: filepath.Base(path), Data: data, Perm: perm}})
}

// ReplaceFile replaces path with data atomically for readers, like
// WriteFileAtomic, but does not wait for the disk: the new content survives
// the end of this process, not a crash of the machine. It is for notes that
// mean nothing after a reboot, such as which process is running.
func ReplaceFile(path string, data []byte, perm fs.FileMode) error {
	return replaceFile(path, data, perm)
}

// File is one file for WriteFilesAtomic: a name inside the directory and
// its content.
type File struct {
	Name string
	Data []byte
	Perm fs.FileMode
}

// WriteFilesAtomic writes files into dir, each atomically for readers (a
// temp file renamed over it), and makes them durable together: one sync
// of the file system once all are renamed (syncfs on Linux, for more than
// one file; else an fsync of each file and of dir), instead of two fsyncs
// per file. On a
// loaded disk one syncfs took a third of the time of the fsyncs of one file
// and its directory (see bench/README.md). When it
// returns nil every file is durable with its new content; a crash of the
// machine before that may lose some of them, or leave one empty, but a
// reader never sees a mix of old and new content. A failure leaves the
// files already renamed in place (each is whole) and none of its temp files.
func WriteFilesAtomic(dir string, files []File) error {
	paths := make([]string, 0, len(files))
	for _, f := range files {
		p := filepath.Join(dir, f.Name)
		if err := replaceFile(p, f.Data, f.Perm); err != nil {
			return err
		}
		paths = append(paths, p)
	}
	return syncTogether(dir, paths)
}

// replaceFile writes data to a temp file next to path and renames it over
// path; the caller makes it durable.
func replaceFile(path string, data []byte, perm fs.FileMode) (err error) {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, ".factory-tmp-*")
	if err != nil {
		return fmt.Errorf("create temp file in %s: %w", dir, err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err = tmp.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", tmp.Name(), err)
	}
	if err = tmp.Chmod(perm); err != nil {
		return fmt.Errorf("chmod %s: %w", tmp.Name(), err)
	}
	if err = tmp.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp.Name(), err)
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("rename into %s: %w", path, err)
	}
	return nil
}

// syncEach fsyncs each of paths, then their directory dir.
func syncEach(dir string, paths []string) error {
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return fmt.Errorf("open %s: %w", p, err)
		}
		err = f.Sync()
		f.Close()
		if err != nil {
			return fmt.Errorf("fsync %s: %w", p, err)
		}
	}
	return SyncDir(dir)
}

// SyncDir fsyncs a directory so a rename or create in it is durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open directory %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync directory %s: %w", dir, err)
	}
	return nil
}

// MarshalJSON is the human-readable, stable form of every JSON artifact:
// two-space indent, no HTML escaping, trailing newline.
func MarshalJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// JSONFile is v as MarshalJSON encodes it, named name, for WriteFilesAtomic.
func JSONFile(name string, v any) (File, error) {
	b, err := MarshalJSON(v)
	if err != nil {
		return File{}, fmt.Errorf("encode %s: %w", name, err)
	}
	return File{Name: name, Data: b, Perm: 0o644}, nil
}

// WriteJSON atomically writes v as MarshalJSON to path.
func WriteJSON(path string, v any) error {
	b, err := MarshalJSON(v)
	if err != nil {
		return fmt.Errorf("encode %s: %w", filepath.Base(path), err)
	}
	return WriteFileAtomic(path, b, 0o644)
}

// NewRunDir creates the directory for a run under out and returns it. The
// first run of an id gets out/<id>; a re-run of the same id (same work order
// at the same commit) gets out/<id>.2, out/<id>.3, … so earlier artifacts are
// never overwritten. Creation with os.Mkdir makes the choice race-free.
func NewRunDir(out, runID string) (string, error) {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return "", fmt.Errorf("create output directory %s: %w", out, err)
	}
	for n := 1; ; n++ {
		name := runID
		if n > 1 {
			name += "." + strconv.Itoa(n)
		}
		dir := filepath.Join(out, name)
		err := os.Mkdir(dir, 0o755)
		if err == nil {
			return dir, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return "", fmt.Errorf("create run directory %s: %w", dir, err)
		}
	}
}

// AppendJSONLine appends v as one line of JSON to path (created 0644), for
// append-only event logs. A crash can cut only the last line short.
func AppendJSONLine(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("append to %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("append to %s: %w", path, err)
	}
	_, err = f.Write(append(b, '\n'))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("append to %s: %w", path, err)
	}
	return nil
}
