package proc

import (
	"fmt"
	"os"
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

// childrenOf lists the processes whose parent is ppid, by reading /proc; nil if it cannot be read.
func childrenOf(ppid int) []child {
	dir, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	defer dir.Close()
	names, _ := dir.Readdirnames(-1) // keep what was read on an error
	var kids []child
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + name + "/stat")
		if err != nil {
			continue // it exited meanwhile
		}
		parent, start, ok := parseStat(string(stat))
		if ok && parent == ppid {
			kids = append(kids, child{pid: pid, start: start})
		}
	}
	return kids
}

// startTime returns when process pid started, in clock ticks since boot.
func startTime(pid int) (uint64, bool) {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	_, start, ok := parseStat(string(stat))
	return start, ok
}

// parseStat extracts the parent pid (field 4) and the start time (field 22, in clock ticks since boot)
// from the text of /proc/<pid>/stat. The command name (field 2) is in parentheses and may itself
// contain spaces and parentheses, so the fields are counted from the last ')', which field 3 follows.
func parseStat(stat string) (ppid int, start uint64, ok bool) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, 0, false
	}
	fields := strings.Fields(stat[i+1:])
	if len(fields) < 22-2 {
		return 0, 0, false
	}
	ppid, err1 := strconv.Atoi(fields[4-3])
	start, err2 := strconv.ParseUint(fields[22-3], 10, 64)
	return ppid, start, err1 == nil && err2 == nil
}
