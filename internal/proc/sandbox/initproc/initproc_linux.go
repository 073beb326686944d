//go:build linux

package initproc

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

func init() {
	if len(os.Args) < 2 || os.Args[0] != Arg0 {
		return
	}
	run()
}

// run confines this process as os.Args[1] says and executes the command of os.Args[2:]; it never
// returns.
func run() {
	// Capabilities, the Landlock domain and the no-new-privileges bit are per thread: they must be set
	// on the thread that executes the command. The initializers run locked to the main thread; this
	// keeps it so should run ever be called from elsewhere.
	runtime.LockOSThread()
	var pl Plan
	if err := json.Unmarshal([]byte(os.Args[1]), &pl); err != nil {
		die(fmt.Errorf("bad plan: %w", err))
	}
	if pl.InitFD > 2 {
		syscall.CloseOnExec(pl.InitFD)
	}
	if err := confine(pl); err != nil {
		die(err)
	}
	if pl.Probe {
		os.Exit(0)
	}
	// The command dies with factory. proc arms this signal at the fork,
	// but an exec may clear it; armed again here, it survives the
	// command's exec. If factory died before, the parent is another (in
	// a new PID namespace the parent is outside it and reads as 0: the
	// signal alone covers it).
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(syscall.SIGKILL), 0, 0, 0); err != nil {
		die(fmt.Errorf("cannot set the parent-death signal: %w", err))
	}
	if pl.Parent != 0 && !pl.PIDs && os.Getppid() != pl.Parent {
		die(errors.New("factory exited before the command started"))
	}
	if len(os.Args) < 4 {
		die(errors.New("no command to run"))
	}
	err := syscall.Exec(os.Args[2], os.Args[3:], os.Environ())
	die(fmt.Errorf("cannot execute %s: %w", os.Args[2], err))
}

// Run is the init for a binary that reached main with Arg0 as its argv[0] (which the package
// initializer prevents): it confines the process and executes the command, never returning.
func Run() { run() }

func die(err error) {
	fmt.Fprintf(os.Stderr, "factory sandbox: %v\n", err)
	os.Exit(Failed)
}

// HostTmp is /tmp with symlinks resolved: the directory the namespaces mechanism replaces.
func HostTmp() string {
	if real, err := filepath.EvalSymlinks("/tmp"); err == nil {
		return real
	}
	return "/tmp"
}

// within reports whether path is dir or lies beneath it; both are clean absolute paths.
func within(path, dir string) bool {
	return path == dir || strings.HasPrefix(path, strings.TrimSuffix(dir, "/")+"/")
}

// confine applies pl to this process.
func confine(pl Plan) error {
	if pl.Namespaces {
		if err := buildView(pl); err != nil {
			return err
		}
		if !pl.HostNet {
			if err := loopbackUp(); err != nil {
				return err
			}
		}
		if pl.PIDs {
			// Our own /proc: the new PID namespace's processes only.
			if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
				return fmt.Errorf("cannot mount a private /proc: %w", err)
			}
		}
		// The mounts moved the directory we stand in.
		if wd, err := os.Getwd(); err == nil {
			if err := os.Chdir(wd); err != nil {
				return fmt.Errorf("cannot enter %s: %w", wd, err)
			}
		}
	}
	if err := restrictLandlock(pl); err != nil {
		return err
	}
	if pl.Namespaces {
		return dropCapabilities()
	}
	return nil
}

// mountOp is one mount that buildView attaches: a detached copy of source, taken before anything
// was mounted, attached at target.
type mountOp struct {
	target   string
	fd       int // from open_tree
	writable bool
}

// buildView makes the file system read-only but for the writable paths, with a private /tmp, the
// read-only paths bound read-only and the hidden paths covered.
func buildView(pl Plan) error {
	// Our mounts must not propagate to the host.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("cannot make the mounts private: %w", err)
	}
	tmp := HostTmp()
	// A fresh tmpfs (pl.Tmp == "") is mounted once / is read-only; a
	// directory of the host is cloned now, before anything covers it.
	var tmpOp mountOp
	if pl.Tmp != "" {
		var err error
		if tmpOp, err = cloneTree(pl.Tmp, tmp, true); err != nil {
			return err
		}
	}
	// Copies of the sources come first: the private /tmp will cover those under /tmp.
	var ops []mountOp
	for _, list := range []struct {
		paths    []string
		writable bool
	}{{pl.Writable, true}, {pl.ReadOnly, false}} {
		for _, path := range list.paths {
			op, err := cloneTree(path, path, list.writable)
			if os.IsNotExist(err) {
				continue
			}
			if err != nil {
				return err
			}
			ops = append(ops, op)
		}
	}
	// The more specific path wins: .git is read-only inside the writable work tree.
	slices.SortStableFunc(ops, func(a, b mountOp) int { return strings.Count(a.target, "/") - strings.Count(b.target, "/") })
	var empty mountOp
	if pl.Empty != "" && len(pl.Hide) > 0 {
		var err error
		if empty, err = cloneTree(pl.Empty, pl.Empty, false); err != nil {
			return err
		}
	}

	if err := unix.MountSetattr(-1, "/", unix.AT_RECURSIVE, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}); err != nil {
		return fmt.Errorf("cannot make the file system read-only: %w", err)
	}
	if pl.Tmp != "" {
		if err := attach(tmpOp); err != nil {
			return err
		}
	} else {
		made, err := freshTmp(tmp, pl, &empty)
		if err != nil {
			return err
		}
		// The name goes once the hidden paths are covered: a bind from a
		// copy of an unlinked file fails.
		defer os.Remove(made)
	}
	if err := skeleton(tmp, ops); err != nil {
		return err
	}
	for _, op := range ops {
		if err := attach(op); err != nil {
			return err
		}
	}
	for _, path := range pl.Hide {
		if err := hide(path, empty); err != nil {
			return err
		}
	}
	// A private /dev/shm, where Python's multiprocessing keeps its semaphores.
	if info, err := os.Stat("/dev/shm"); err == nil && info.IsDir() {
		if err := unix.Mount("tmpfs", "/dev/shm", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777"); err != nil {
			return fmt.Errorf("cannot mount a private /dev/shm: %w", err)
		}
	}
	return nil
}

// freshTmp mounts a tmpfs at tmp, private to this mount namespace: nothing
// of it is on the host to create, remove or leave behind. In it, it makes
// pl.MakeHome and, when files are to be hidden, the empty file bound over
// them, whose name it returns for removal once they are ("" if none).
func freshTmp(tmp string, pl Plan, empty *mountOp) (string, error) {
	if err := unix.Mount("tmpfs", tmp, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=700"); err != nil {
		return "", fmt.Errorf("cannot mount a private /tmp: %w", err)
	}
	if pl.MakeHome != "" {
		if !within(pl.MakeHome, tmp) || pl.MakeHome == tmp {
			return "", fmt.Errorf("HOME %s is not inside the private /tmp", pl.MakeHome)
		}
		if err := os.MkdirAll(pl.MakeHome, 0o700); err != nil {
			return "", fmt.Errorf("cannot create HOME: %w", err)
		}
	}
	if len(pl.Hide) == 0 {
		return "", nil
	}
	name := filepath.Join(tmp, ".factory-empty")
	if err := os.WriteFile(name, nil, 0); err != nil {
		return "", fmt.Errorf("cannot create the file that hides files: %w", err)
	}
	op, err := cloneTree(name, name, false)
	if err != nil {
		return "", err
	}
	*empty = op
	return name, nil
}

// cloneTree takes a detached copy of the mounts at source, read-only or writable, to attach at target.
func cloneTree(source, target string, writable bool) (mountOp, error) {
	fd, err := unix.OpenTree(unix.AT_FDCWD, source, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
	if err != nil {
		if err == unix.ENOENT {
			return mountOp{}, os.ErrNotExist
		}
		return mountOp{}, fmt.Errorf("cannot bind %s: open_tree: %w", source, err)
	}
	attr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
	if writable {
		attr = &unix.MountAttr{Attr_clr: unix.MOUNT_ATTR_RDONLY}
	}
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, attr); err != nil {
		unix.Close(fd)
		return mountOp{}, fmt.Errorf("cannot set the access of the bind of %s: %w", source, err)
	}
	return mountOp{target: target, fd: fd, writable: writable}, nil
}

func attach(op mountOp) error {
	defer unix.Close(op.fd)
	if err := unix.MoveMount(op.fd, "", unix.AT_FDCWD, op.target, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("cannot bind %s: move_mount: %w", op.target, err)
	}
	return nil
}

// skeleton creates, in the private /tmp, the mount points of the ops whose targets lie under the
// host's /tmp, and makes the directories it creates read-only, so that nothing but the targets
// themselves can be written there.
func skeleton(tmp string, ops []mountOp) error {
	var tops []string
	for _, op := range ops {
		if !within(op.target, tmp) || op.target == tmp {
			continue
		}
		rel := strings.TrimPrefix(op.target, tmp+"/")
		if err := os.MkdirAll(filepath.Dir(op.target), 0o700); err != nil {
			return fmt.Errorf("cannot create the mount point of %s: %w", op.target, err)
		}
		var st unix.Stat_t
		if err := unix.Fstat(op.fd, &st); err != nil {
			return fmt.Errorf("cannot inspect %s: %w", op.target, err)
		}
		var err error
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			err = os.Mkdir(op.target, 0o700)
		} else {
			err = os.WriteFile(op.target, nil, 0o600)
		}
		if err != nil && !os.IsExist(err) {
			return fmt.Errorf("cannot create the mount point of %s: %w", op.target, err)
		}
		top := filepath.Join(tmp, strings.SplitN(rel, "/", 2)[0])
		if !slices.Contains(tops, top) {
			tops = append(tops, top)
		}
	}
	for _, top := range tops {
		op, err := cloneTree(top, top, false)
		if err != nil {
			return err
		}
		if err := attach(op); err != nil {
			return err
		}
	}
	return nil
}

// hide covers path, if it is visible, with an empty read-only directory or an unreadable empty file.
func hide(path string, empty mountOp) error {
	info, err := os.Lstat(path)
	switch {
	case os.IsNotExist(err):
		return nil
	case err != nil:
		return fmt.Errorf("cannot hide %s: %w", path, err)
	case info.IsDir():
		if err := unix.Mount("tmpfs", path, "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=000,size=4k"); err != nil {
			return fmt.Errorf("cannot hide %s: %w", path, err)
		}
		return nil
	}
	if err := unix.Mount(fdPath(empty.fd), path, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("cannot hide %s: %w", path, err)
	}
	return nil
}

func fdPath(fd int) string { return "/proc/self/fd/" + strconv.Itoa(fd) }

// loopbackUp brings up lo in the new network namespace, the only interface there.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("cannot bring up loopback: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return fmt.Errorf("cannot bring up loopback: %w", err)
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("cannot bring up loopback: SIOCGIFFLAGS: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("cannot bring up loopback: SIOCSIFFLAGS: %w", err)
	}
	return nil
}

// dropCapabilities leaves the command none of the capabilities the init used, whatever its uid, also
// across the execve: the ambient and inheritable sets are cleared and the bounding set emptied.
func dropCapabilities() error {
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return fmt.Errorf("cannot clear ambient capabilities: %w", err)
	}
	last, err := lastCap()
	if err != nil {
		return err
	}
	for c := 0; c <= last; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil {
			return fmt.Errorf("cannot drop capability %d from the bounding set: %w", c, err)
		}
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("cannot clear capabilities: %w", err)
	}
	return nil
}

func lastCap() (int, error) {
	data, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	if err != nil {
		return 0, fmt.Errorf("cannot read the last capability: %w", err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		return 0, fmt.Errorf("cannot read the last capability: %w", err)
	}
	return n, nil
}
