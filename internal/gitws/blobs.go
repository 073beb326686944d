package gitws

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/factory-harness/factory/internal/proc"
)

// Blob is a regular file of a commit: its path (slash-separated), object id
// and size in bytes.
type Blob struct {
	Path string
	ID   string
	Size int64
}

// BlobsAt lists the regular files of commit rev with their object ids and
// sizes, sorted by path, in one git process: symlinks and submodules are
// left out.
func (r *Repo) BlobsAt(ctx context.Context, rev string) ([]Blob, error) {
	out, err := r.query(ctx, "ls-tree", "-r", "-z", "-l", "--full-tree", rev+"^{commit}", "--")
	if err != nil {
		return nil, fmt.Errorf("list the files of %s in %s: %w", rev, r.Root, err)
	}
	return parseLsTreeLong(out)
}

// parseLsTreeLong reads `git ls-tree -r -z -l` output:
// "<mode> SP <type> SP <id> SP+ <size> TAB <path> NUL".
func parseLsTreeLong(out []byte) ([]Blob, error) {
	var blobs []Blob
	for _, rec := range splitNUL(out) {
		meta, p, ok := strings.Cut(rec, "\t")
		f := strings.Fields(meta)
		if !ok || len(f) != 4 {
			return nil, fmt.Errorf("git ls-tree printed %q, not <mode> <type> <id> <size>\\t<path>", rec)
		}
		if f[1] != "blob" || f[0] == "120000" {
			continue
		}
		size, err := strconv.ParseInt(f[3], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("git ls-tree printed %q: size %q: %w", rec, f[3], err)
		}
		blobs = append(blobs, Blob{Path: p, ID: f[2], Size: size})
	}
	return blobs, nil
}

// blobsPerCatFile bounds the content one git cat-file holds in memory.
const blobsPerCatFile = 512

// ReadBlobs calls each with the content of every blob in ids, in the order
// of ids, through `git cat-file --batch` (one process per 512 blobs). An
// error from each stops it.
func (r *Repo) ReadBlobs(ctx context.Context, ids []string, each func(id string, data []byte) error) error {
	for start := 0; start < len(ids); start += blobsPerCatFile {
		chunk := ids[start:min(start+blobsPerCatFile, len(ids))]
		out, err := proc.OutputInput(ctx, r.Root, gitArgv(r.pinned(), []string{"cat-file", "--batch"}), gitEnv(true), []byte(strings.Join(chunk, "\n")+"\n"))
		if err != nil {
			return fmt.Errorf("read %d blobs in %s: %w", len(chunk), r.Root, err)
		}
		if err := splitCatFile(out, chunk, each); err != nil {
			return fmt.Errorf("read blobs in %s: %w", r.Root, err)
		}
	}
	return nil
}

// splitCatFile reads `git cat-file --batch` output for ids:
// "<id> SP <type> SP <size> LF <content> LF" per object.
func splitCatFile(out []byte, ids []string, each func(id string, data []byte) error) error {
	for _, id := range ids {
		nl := bytes.IndexByte(out, '\n')
		if nl < 0 {
			return fmt.Errorf("git cat-file ended before blob %s", id)
		}
		f := strings.Fields(string(out[:nl]))
		if len(f) != 3 || f[0] != id {
			return fmt.Errorf("git cat-file printed %q for blob %s", out[:nl], id)
		}
		size, err := strconv.Atoi(f[2])
		if err != nil || size < 0 || nl+1+size >= len(out) {
			return fmt.Errorf("git cat-file printed %q for blob %s: bad or truncated size", out[:nl], id)
		}
		data := out[nl+1 : nl+1+size : nl+1+size]
		out = out[nl+1+size+1:]
		if err := each(id, data); err != nil {
			return err
		}
	}
	return nil
}
