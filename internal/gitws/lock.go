package gitws

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// FactoryDirName is the directory, inside a git directory, that holds the
// harness's own files: the repository lock in the common git directory, the
// attempt journal in the work tree's git directory (as git keeps an
// interrupted rebase). Git ignores it; the metadata check does not watch it.
const FactoryDirName = "factory"

// LockedError is returned by Lock when another process holds the lock.
type LockedError struct {
	Path string
	PID  int // the holder's pid as it wrote it; 0 if unreadable
}

func (e *LockedError) Error() string {
	holder := "another process"
	if e.PID > 0 {
		holder = fmt.Sprintf("another factory (pid %d)", e.PID)
	}
	return fmt.Sprintf("%s is working on this repository (lock %s); wait for it to finish, or stop it — a run that was killed releases the lock by itself", holder, e.Path)
}

// Lock is an exclusive lock on a repository, shared by all its linked
// worktrees, held until Unlock or until the process dies (flock).
type Lock struct {
	f    *os.File
	path string
}

// Lock takes the repository's lock without waiting: it returns a
// *LockedError naming the holder's pid when another process has it. The
// lock is an flock on <common git dir>/factory/lock, so the kernel releases
// it when its holder dies, however it dies, and nothing can leave it stuck.
// Unlock removes the file, so a repository keeps no trace of a run.
func (r *Repo) Lock() (*Lock, error) {
	dir := filepath.Join(r.CommonDir, FactoryDirName)
	p := filepath.Join(dir, "lock")
	// A holder removes the file as it unlocks; a lock taken on the removed
	// file would exclude no one, so retry until the locked file is the one
	// at p.
	deadWaits := 0
	for range 100 + maxDeadWaits {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("lock repository: %w", err)
		}
		// O_CLOEXEC (Go's default) keeps the lock out of the commands we
		// run, so an orphan of theirs cannot hold it after we die.
		f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o644)
		if errors.Is(err, fs.ErrNotExist) {
			continue // the directory went with the previous holder's unlock
		}
		if err != nil {
			return nil, fmt.Errorf("lock repository: %w", err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			defer f.Close()
			if errors.Is(err, syscall.EWOULDBLOCK) {
				data := make([]byte, 32)
				n, _ := f.ReadAt(data, 0)
				pid, err := strconv.Atoi(strings.TrimSpace(string(data[:n])))
				if err != nil || pid <= 0 {
					pid = 0 // Atoi gives the largest int for a number out of range
				}
				// A holder killed a moment ago keeps the lock until a child it was
				// starting has exec'd or exited (its copy of the descriptor goes
				// then): milliseconds, worth waiting for rather than refusing the
				// rerun that follows the kill.
				if pid > 0 && !processAlive(pid) && deadWaits < maxDeadWaits {
					deadWaits++
					f.Close()
					if r.sleep != nil {
						r.sleep(deadWait)
					} else {
						time.Sleep(deadWait)
					}
					continue
				}
				return nil, &LockedError{Path: p, PID: pid}
			}
			return nil, fmt.Errorf("lock repository %s: %w", p, err)
		}
		held, err1 := f.Stat()
		now, err2 := os.Stat(p)
		if err1 != nil || err2 != nil || !os.SameFile(held, now) {
			f.Close()
			continue
		}
		if err := f.Truncate(0); err == nil {
			_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
		}
		return &Lock{f: f, path: p}, nil
	}
	return nil, fmt.Errorf("lock repository: %s keeps changing under us", p)
}

// How long Lock waits for a dead holder's lock to go: 3 s in all.
const (
	deadWait     = 20 * time.Millisecond
	maxDeadWaits = 150
)

// processAlive reports whether a process with this pid exists.
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// Unlock removes the lock file and the factory directory if nothing else
// is in it (a journal stays), then releases the lock.
func (l *Lock) Unlock() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := os.Remove(l.path)
	_ = os.Remove(filepath.Dir(l.path)) // fails while it holds anything else
	if cerr := l.f.Close(); err == nil {
		err = cerr
	}
	l.f = nil
	return err
}

// LockHolder reports, without taking the lock, whether a live process holds
// the repository's lock and the pid it wrote: for read-only viewers such as
// `factory serve`. The lock file outlives a holder killed by SIGKILL, so the
// file alone proves nothing: on Linux the kernel's table of flocks
// (/proc/locks) decides, elsewhere whether the written pid is alive.
func (r *Repo) LockHolder() (pid int, held bool) {
	p := filepath.Join(r.CommonDir, FactoryDirName, "lock")
	data, err := os.ReadFile(p)
	if err != nil {
		return 0, false
	}
	pid, _ = strconv.Atoi(strings.TrimSpace(string(data)))
	info, err := os.Stat(p)
	if err != nil {
		return 0, false
	}
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		if locks, err := os.ReadFile("/proc/locks"); err == nil {
			return pid, flockedInode(string(locks), uint64(st.Dev), st.Ino)
		}
	}
	if pid <= 0 {
		return 0, false
	}
	return pid, processAlive(pid)
}

// flockedInode reports whether the /proc/locks table lists an FLOCK on
// inode ino of device dev ("1: FLOCK  ADVISORY  WRITE 4242 08:01:1234 0 EOF",
// major and minor in hex).
func flockedInode(table string, dev, ino uint64) bool {
	want := fmt.Sprintf("%02x:%02x:%d", unix.Major(dev), unix.Minor(dev), ino)
	for line := range strings.Lines(table) {
		f := strings.Fields(line)
		if len(f) >= 6 && f[1] == "FLOCK" && f[5] == want {
			return true
		}
	}
	return false
}
