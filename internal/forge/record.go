package forge

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/factory-harness/factory/internal/workorder"
)

// Record is <build dir>/pr.json: the pull request a build was last
// published to (factory pr, build --pr, factory issue), for status, serve
// and --json.
type Record struct {
	Forge  Kind   `json:"forge"`
	Repo   string `json:"repo"`
	Number int    `json:"number"`
	URL    string `json:"url"`
	State  State  `json:"state"`
	Draft  bool   `json:"draft"`
	Head   string `json:"head"`
	Base   string `json:"base"`
	// Commit is the head commit pushed; Action what this publication did:
	// created, updated or unchanged.
	Commit string `json:"commit"`
	Action string `json:"action"`
	Pushed bool   `json:"pushed"`
}

// RecordFile is the record's name in a build directory.
const RecordFile = "pr.json"

// MaxRecordBytes bounds a record read back: factory writes a few hundred
// bytes.
const MaxRecordBytes = 64 << 10

// DecodeRecord decodes a pr.json strictly (known fields, once, one object,
// valid UTF-8): its strings come from a forge's answers and the remote's
// URL, and a reader shows them.
func DecodeRecord(data []byte) (*Record, error) {
	if len(data) > MaxRecordBytes {
		return nil, fmt.Errorf("%s is larger than %d KiB", RecordFile, MaxRecordBytes>>10)
	}
	var r Record
	if err := workorder.DecodeStrict(data, &r); err != nil {
		return nil, fmt.Errorf("%s is not a record factory wrote: %w", RecordFile, err)
	}
	return &r, nil
}

// ReadRecord reads the record of the build whose directory is buildDir;
// nil and no error when the build was never published.
func ReadRecord(buildDir string) (*Record, error) {
	f, err := os.Open(filepath.Join(buildDir, RecordFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxRecordBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", f.Name(), err)
	}
	return DecodeRecord(data)
}
