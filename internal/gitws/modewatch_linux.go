package gitws

import (
	"bytes"
	"errors"
	"path"
	"path/filepath"
	"unsafe"

	"golang.org/x/sys/unix"
)

// watchMask: what can change a path's permission bits, or replace the path.
const watchMask = unix.IN_ATTRIB | unix.IN_CREATE | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO |
	unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_ONLYDIR | unix.IN_DONT_FOLLOW | unix.IN_EXCL_UNLINK

type watchImpl struct {
	fd   int
	root string
	dirs map[int]string // watch descriptor → slash path of the directory
}

func startWatch(root string) (watchImpl, bool) {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return watchImpl{}, false
	}
	return watchImpl{fd: fd, root: root, dirs: map[int]string{}}, true
}

func (w *watchImpl) add(rel string) bool {
	if len(w.dirs) >= maxWatchedDirs {
		return false
	}
	wd, err := unix.InotifyAddWatch(w.fd, filepath.Join(w.root, filepath.FromSlash(rel)), watchMask)
	if err != nil {
		return false
	}
	if old, seen := w.dirs[wd]; seen && old != rel {
		return false // the same directory under two names: a bind mount or a hard-linked dir
	}
	w.dirs[wd] = rel
	return true
}

// drain reads every pending event into changed (path → deep); false if events were lost
// or a watched directory moved (its path in dirs would be stale).
func (w *watchImpl) drain(changed map[string]bool) bool {
	buf := make([]byte, 64<<10)
	for {
		n, err := unix.Read(w.fd, buf)
		if errors.Is(err, unix.EAGAIN) {
			return true
		}
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || n <= 0 {
			return false
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			nameBytes := buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+int(ev.Len)]
			off += unix.SizeofInotifyEvent + int(ev.Len)
			switch {
			case ev.Mask&unix.IN_Q_OVERFLOW != 0, ev.Mask&unix.IN_MOVE_SELF != 0:
				return false
			case ev.Mask&unix.IN_IGNORED != 0:
				continue // the directory is gone; its parent reported the deletion
			}
			dir, ok := w.dirs[int(ev.Wd)]
			if !ok {
				return false
			}
			name := string(bytes.TrimRight(nameBytes, "\x00"))
			// An entry created, deleted or moved may be a directory whose
			// content no watch saw: deep. A change of attributes is not.
			deep := ev.Mask&(unix.IN_CREATE|unix.IN_DELETE|unix.IN_MOVED_FROM|unix.IN_MOVED_TO|unix.IN_DELETE_SELF) != 0
			p := dir
			if name != "" {
				p = path.Join(dir, name)
			}
			if p != "." {
				changed[p] = changed[p] || deep
			}
		}
	}
}

func (w *watchImpl) close() {
	if w.fd >= 0 {
		unix.Close(w.fd)
		w.fd = -1
	}
}
