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
