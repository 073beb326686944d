package proc

import (
	"errors"
	"fmt"
	"strconv"
	"syscall"
)

// KillGroupIfSame sends SIGKILL to the process group pgid, the group of a command that started at
// startTicks (as Spec.OnStart reported them), unless that command is provably gone. It is for recovering
// after this process died without cleaning up: a journal kept the two numbers, and the pid may since
// have been reused.
//
// A pid is never reused while a process, or a process group, with that id exists. So:
//   - if process pgid exists and started at startTicks, it is the command, and its group is killed;
//   - if it exists but started at another time, the pid was reused, so the command's group had emptied:
//     nothing is killed;
//   - if it is gone, the group lives on while a process is left in it: the processes whose group is
//     pgid are looked for in /proc, and the group is killed if some are alive (not zombies) and all
//     started no earlier than startTicks (one that is older belongs to another group of that id).
//
// It reports whether it sent the signal. A group that is gone is not an error.
func KillGroupIfSame(pgid int, startTicks uint64) (killed bool, err error) {
	if pgid <= 1 || startTicks == 0 {
		return false, fmt.Errorf("cannot check process group %d started at tick %d: not a command's group", pgid, startTicks)
	}
	if st, ok := readStat(pgid); ok {
		if st.start != startTicks {
			return false, nil
		}
	} else if ours, err := groupStartedSince(pgid, startTicks); err != nil || !ours {
		return false, err
	}
	switch err := syscall.Kill(-pgid, syscall.SIGKILL); {
	case errors.Is(err, syscall.ESRCH):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("cannot kill process group %d: %w", pgid, err)
	}
	return true, nil
}

// groupStartedSince reports whether process group pgid has live members, all started at startTicks or
// later.
func groupStartedSince(pgid int, startTicks uint64) (bool, error) {
	names, err := readdirnames("/proc")
	if err != nil {
		return false, fmt.Errorf("cannot look for the processes of group %d: %w", pgid, err)
	}
	found := false
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		// A zombie has nothing left to kill.
		if st, ok := readStat(pid); ok && st.pgid == pgid && st.state != 'Z' {
			if st.start < startTicks {
				return false, nil
			}
			found = true
		}
	}
	return found, nil
}
