package proc

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"unicode/utf8"
)

// Tail returns at most maxBytes bytes from the end of the file at path as valid UTF-8 (invalid sequences
// replaced, cut on a rune boundary), prefixed with "[... N bytes truncated ...]\n" when it was cut.
// A missing file returns "".
func Tail(path string, maxBytes int) (string, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	defer f.Close()
	return tailOf(f, maxBytes)
}

// tailOf is Tail for an open file.
func tailOf(f *os.File, maxBytes int) (string, error) {
	info, err := f.Stat()
	if err != nil {
		return "", err
	}
	size := info.Size()
	keep := min(size, int64(max(maxBytes, 0)))
	buf := make([]byte, keep)
	// The file may shrink while we read (a child still writing to it); keep what was there.
	n, err := f.ReadAt(buf, size-keep)
	if err != nil && err != io.EOF {
		return "", err
	}
	return tailText(buf[:n], size-keep), nil
}

// tailText renders b, the end of a longer text of which the first dropped bytes were cut off.
func tailText(b []byte, dropped int64) string {
	if dropped == 0 {
		return strings.ToValidUTF8(string(b), "\uFFFD")
	}
	// Skip the rest of a rune the cut went through, rather than showing it as a replacement char.
	for i := 0; i < utf8.UTFMax-1 && len(b) > 0 && !utf8.RuneStart(b[0]); i++ {
		b = b[1:]
		dropped++
	}
	return fmt.Sprintf("[... %d bytes truncated ...]\n", dropped) + strings.ToValidUTF8(string(b), "\uFFFD")
}
