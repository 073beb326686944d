package gitws

import (
	"fmt"
	"os"
	"syscall"
)

// statLine is the part of a stamp for one file: inode, size, mtime, ctime.
func statLine(info os.FileInfo) (string, bool) {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return "", false
	}
	return fmt.Sprintf("%d %d %d.%d %d.%d", st.Ino, st.Size, st.Mtim.Sec, st.Mtim.Nsec, st.Ctim.Sec, st.Ctim.Nsec), true
}

// changeStamp is the inode and ctime of info: what a command that rewrites
// a file, even with its size and mtime kept, cannot set back.
func changeStamp(info os.FileInfo) string {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return ""
	}
	return fmt.Sprintf("%d %d.%d", st.Ino, st.Ctim.Sec, st.Ctim.Nsec)
}
