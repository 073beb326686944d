package proc

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// prSetChildSubreaper is PR_SET_CHILD_SUBREAPER from <linux/prctl.h>, which package syscall lacks.
const prSetChildSubreaper = 36

func setChildSubreaper() error {
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
		return fmt.Errorf("cannot become a child subreaper: prctl(PR_SET_CHILD_SUBREAPER): %w", errno)
	}
	return nil
}

// childFinder lists the children of this process without reading the stat of every process on the
// machine, which made each command's end cost more the busier the machine was.
//
// Where the kernel lists each thread's children (/proc/<pid>/task/<tid>/children, CONFIG_PROC_CHILDREN),
// it reads those lists: the cost grows with this process's threads and children only.
//
// Elsewhere it must list /proc, but reads the stat only of the processes that can be its descendants:
// those that are not in a baseline listing taken when it had no children at all (which a readdir gives,
// with no file reads), and those whose pid may have been reused since. A process absent from the baseline
// may be a descendant; one in it cannot, as it already lived when this process had none, unless its pid
// now names another process. While commands overlap or orphans outlive a scan, the baseline cannot be
// renewed, so the processes started since then, by anyone, are read at every scan until one finds no
// child while no command runs.
//
// Its methods are called with the children mutex held.
type childFinder struct {
	probed     bool // whether childFiles has been decided
	childFiles bool // the kernel lists children per thread

	base      *pidSnapshot // the baseline; nil: none, so every process is read
	childless bool         // no command has started since a scan found no child while none ran
}

// starting is called before a command starts; idle says that no other command runs.
func (f *childFinder) starting(idle bool) {
	// No baseline while there may be children: they would be in it, and never be found.
	if idle && f.childless && subreaper.Load() && !f.useChildFiles() {
		if now, err := takeSnapshot(); err == nil {
			f.base = &now
		} else {
			f.base = nil
		}
	}
	f.childless = false
}

// scanned is called after a scan found n children while idle says that no command ran.
func (f *childFinder) scanned(idle bool, n int) {
	if idle && n == 0 {
		f.childless = true
	}
}

func (f *childFinder) useChildFiles() bool {
	if !f.probed {
		pid := strconv.Itoa(os.Getpid())
		_, err := os.Stat("/proc/" + pid + "/task/" + pid + "/children")
		f.probed, f.childFiles = true, err == nil
	}
	return f.childFiles
}

// children lists the processes whose parent is this process, ppid; false if /proc cannot be read.
func (f *childFinder) children(ppid int) ([]child, bool) {
	var suspects []int
	if f.useChildFiles() {
		var err error
		if suspects, err = fromChildFiles(ppid); err != nil {
			return nil, false
		}
	} else {
		now, err := takeSnapshot()
		if err != nil {
			return nil, false
		}
		suspects = now.suspects(f.base)
	}
	var kids []child
	for _, pid := range suspects {
		// The parent is checked even for a listed child: it may have been reaped, and its pid reused.
		// A process that exited meanwhile has no stat.
		if st, ok := readStat(pid); ok && st.ppid == ppid {
			kids = append(kids, child{pid: pid, start: st.start})
		}
	}
	return kids, true
}

// fromChildFiles returns the pids that the children files of the threads of process pid list. A thread
// that exits meanwhile hands its children to another, maybe already read: the next scan finds them.
func fromChildFiles(pid int) ([]int, error) {
	dir := "/proc/" + strconv.Itoa(pid) + "/task/"
	tids, err := readdirnames(dir)
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, tid := range tids {
		// One read: the kernel may skip a child when the list changes between reads.
		data, err := os.ReadFile(dir + tid + "/children")
		if err != nil {
			continue
		}
		for _, field := range strings.Fields(string(data)) {
			if pid, err := strconv.Atoi(field); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	return pids, nil
}

// pidSnapshot is the state of the processes and of the pid allocator at one moment.
type pidSnapshot struct {
	pids    []int  // the processes (thread-group ids) in /proc, sorted
	lastPid int    // the pid allocated last in this pid namespace
	tasks   int    // processes and threads, each holding a pid
	forks   uint64 // tasks created since boot
	pidMax  int    // pids are below this
}

// takeSnapshot lists /proc and then reads the allocator's state, so that every pid listed was allocated
// no later than lastPid.
func takeSnapshot() (pidSnapshot, error) {
	names, err := readdirnames("/proc")
	if err != nil {
		return pidSnapshot{}, err
	}
	var s pidSnapshot
	for _, name := range names {
		if pid, err := strconv.Atoi(name); err == nil {
			s.pids = append(s.pids, pid)
		}
	}
	slices.Sort(s.pids)
	// "0.00 0.01 0.05 1/128 6628": runnable/tasks, then the last pid.
	loadavg, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return pidSnapshot{}, err
	}
	fields := strings.Fields(string(loadavg))
	if len(fields) < 5 {
		return pidSnapshot{}, fmt.Errorf("/proc/loadavg: unexpected content %q", loadavg)
	}
	_, tasks, _ := strings.Cut(fields[3], "/")
	s.tasks, err = strconv.Atoi(tasks)
	if err != nil {
		return pidSnapshot{}, fmt.Errorf("/proc/loadavg: bad task count: %w", err)
	}
	if s.lastPid, err = strconv.Atoi(fields[4]); err != nil {
		return pidSnapshot{}, fmt.Errorf("/proc/loadavg: bad last pid: %w", err)
	}
	stat, err := os.ReadFile("/proc/stat")
	if err != nil {
		return pidSnapshot{}, err
	}
	_, forks, found := strings.Cut(string(stat), "\nprocesses ")
	forks, _, _ = strings.Cut(forks, "\n")
	if s.forks, err = strconv.ParseUint(forks, 10, 64); !found || err != nil {
		return pidSnapshot{}, fmt.Errorf("/proc/stat: no fork count")
	}
	pidMax, err := os.ReadFile("/proc/sys/kernel/pid_max")
	if err != nil {
		return pidSnapshot{}, err
	}
	if s.pidMax, err = strconv.Atoi(strings.TrimSpace(string(pidMax))); err != nil {
		return pidSnapshot{}, fmt.Errorf("/proc/sys/kernel/pid_max: %w", err)
	}
	return s, nil
}

// reservedPids is the kernel's RESERVED_PIDS: the allocator wraps around to it, never below.
const reservedPids = 300

// suspects returns the pids in s that may belong to processes started since base: all of them without a
// baseline or if the allocator may have wrapped all the way around since.
//
// Pids are allocated cyclically: each is the next free one after the last. So unless the allocator has
// gone round, every pid allocated since base, reused or not, lies in the cyclic interval
// (base.lastPid, s.lastPid]. Going round means passing every pid in [reservedPids, pidMax), each either
// allocated (one fork each) or held by a task that lived then: one of the base.tasks, or one forked
// since. So fewer than (pidMax-reservedPids-base.tasks)/2 forks cannot go round.
func (s pidSnapshot) suspects(base *pidSnapshot) []int {
	if base == nil || s.forks < base.forks || s.pidMax != base.pidMax ||
		2*(s.forks-base.forks)+uint64(base.tasks)+reservedPids >= uint64(max(s.pidMax, 0)) {
		return s.pids
	}
	var out []int
	for _, pid := range s.pids {
		if _, old := slices.BinarySearch(base.pids, pid); !old || allocatedBetween(pid, base.lastPid, s.lastPid) {
			out = append(out, pid)
		}
	}
	return out
}

// allocatedBetween reports whether pid lies in the cyclic interval (from, to] of pids.
func allocatedBetween(pid, from, to int) bool {
	if from <= to {
		return from < pid && pid <= to
	}
	return pid > from || pid <= to
}

// readdirnames lists dir, keeping what was read before an error.
func readdirnames(dir string) ([]string, error) {
	d, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if len(names) == 0 && err != nil {
		return nil, err
	}
	return names, nil
}

// StartTicks returns when process pid started, in clock ticks since boot (field 22 of
// /proc/<pid>/stat), and whether it could be read. With the pid, it names a process unambiguously, even
// after the pid has been reused. It is false on systems other than Linux.
func StartTicks(pid int) (uint64, bool) {
	st, ok := readStat(pid)
	return st.start, ok
}

// procStat holds the fields of /proc/<pid>/stat that this package uses.
type procStat struct {
	state      byte   // field 3: 'R', 'S', 'Z' for a zombie...
	ppid, pgid int    // fields 4 and 5
	start      uint64 // field 22, in clock ticks since boot
}

func readStat(pid int) (procStat, bool) {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, false
	}
	return parseStat(string(stat))
}

// parseStat parses the text of /proc/<pid>/stat. The command name (field 2) is in parentheses and may
// itself contain spaces and parentheses, so the fields are counted from the last ')', which field 3
// follows.
func parseStat(stat string) (procStat, bool) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return procStat{}, false
	}
	fields := strings.Fields(stat[i+1:])
	if len(fields) < 22-2 {
		return procStat{}, false
	}
	ppid, err1 := strconv.Atoi(fields[4-3])
	pgid, err2 := strconv.Atoi(fields[5-3])
	start, err3 := strconv.ParseUint(fields[22-3], 10, 64)
	st := procStat{state: fields[3-3][0], ppid: ppid, pgid: pgid, start: start}
	return st, err1 == nil && err2 == nil && err3 == nil
}
