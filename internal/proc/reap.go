package proc

import (
	"math"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// subreaper records that BecomeSubreaper succeeded, so that each command's end also kills the orphans
// re-parented to this process. It is package state, not a Spec field, because being a subreaper is a
// property of the whole process, set once by its main function: a library user or test that never calls
// BecomeSubreaper keeps the plain process-group behavior, and no child of theirs is ever killed by a scan.
var subreaper atomic.Bool

// children holds the children that Run and Output are running: their start times (in the kernel's clock
// ticks since boot) by pid. It is process-wide for the same reason as subreaper: the orphans that one
// call's scan finds may belong to any other call in this process. The mutex also serializes each start
// with registering the child, and each scan with its kills and reaps, so that a scan never mistakes a
// child being started for an orphan, and never signals a pid that a concurrent scan has already reaped
// (and the kernel may have reused).
var children = struct {
	sync.Mutex
	active map[int]uint64
	finder childFinder
}{active: map[int]uint64{}, finder: childFinder{childless: true}}

const (
	maxReapRounds = 10                    // each round kills one more generation of orphans
	reapRetry     = 10 * time.Millisecond // pause before the next round when a killed orphan is not yet dead
	reapWait      = time.Second           // how long one round waits for the orphans it killed to die
)

// BecomeSubreaper makes this process a child subreaper (Linux's PR_SET_CHILD_SUBREAPER), so that
// processes orphaned by the commands it runs are re-parented to it rather than to init. From then on,
// whenever a Run or Output call ends, the orphans re-parented to this process are killed and reaped.
// That catches what killing the process group misses: a daemon that double-forked and called setsid().
//
// Commands that other Run or Output calls are still running are spared, and so is every orphan that
// started after one of them did, since it may belong to that command: when calls overlap, such an
// orphan of the finished command lives on until a later command ends. Without overlap, each command's
// orphans die when it ends.
//
// Call it once, early in main, in a program that starts child processes only through this package:
// any other child would be killed at the end of the next command. On systems other than Linux it
// returns an error wrapping errors.ErrUnsupported and changes nothing.
func BecomeSubreaper() error {
	if err := setChildSubreaper(); err != nil {
		return err
	}
	subreaper.Store(true)
	return nil
}

// startTracked starts cmd, records it as a running child and returns its start time in clock ticks
// since boot, 0 if that cannot be read.
func startTracked(cmd *exec.Cmd) (uint64, error) {
	children.Lock()
	defer children.Unlock()
	children.finder.starting(len(children.active) == 0)
	if err := onSpawnThread(cmd.Start); err != nil {
		return 0, err
	}
	// Read before Wait can reap it; 0, if that fails, spares every orphan while the command runs.
	start, _ := StartTicks(cmd.Process.Pid)
	children.active[cmd.Process.Pid] = start
	return start, nil
}

// untrack forgets a child once Wait has reaped it.
func untrack(pid int) {
	children.Lock()
	defer children.Unlock()
	delete(children.active, pid)
}

// reapOrphans kills and reaps the orphans re-parented to this process, when it is a subreaper. Killing an
// orphan re-parents its own children to us, so it scans again until a scan finds nothing.
func reapOrphans() {
	if !subreaper.Load() {
		return
	}
	for range maxReapRounds {
		found, reaped := reapRound()
		if found == 0 {
			return
		}
		if reaped < found {
			time.Sleep(reapRetry)
		}
	}
}

// reapRound kills the children of this process that no running command may own, waits for them to die
// and reaps them. It returns how many it found and how many it reaped. Once one is reaped, its children
// have been re-parented to us, ready for the next round.
func reapRound() (found, reaped int) {
	children.Lock()
	defer children.Unlock()
	// A running command's descendants all started no earlier than it did.
	spareFrom := uint64(math.MaxUint64)
	for _, start := range children.active {
		spareFrom = min(spareFrom, start)
	}
	kids, ok := children.finder.children(os.Getpid())
	if ok {
		children.finder.scanned(len(children.active) == 0, len(kids))
	}
	var orphans []int
	for _, c := range kids {
		if _, running := children.active[c.pid]; !running && c.start < spareFrom {
			orphans = append(orphans, c.pid)
		}
	}
	for _, pid := range orphans {
		// It is our child and unreaped (we hold the lock), so the pid cannot have been reused.
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	deadline := time.Now().Add(reapWait)
	for _, pid := range orphans {
		if reap(pid, deadline) {
			reaped++
		}
	}
	return len(orphans), reaped
}

// reap waits until deadline for the child pid to end and reaps it, reporting whether it is gone. It
// polls rather than blocks, so that a process stuck in the kernel cannot hang the command's caller.
func reap(pid int, deadline time.Time) bool {
	for {
		var ws syscall.WaitStatus
		got, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
		switch {
		case err == syscall.EINTR:
			continue
		case err != nil: // ECHILD: already reaped or not ours
			return true
		case got == pid:
			return true
		case time.Now().After(deadline):
			return false
		}
		time.Sleep(time.Millisecond)
	}
}

// child is a child process found by childFinder.children.
type child struct {
	pid   int
	start uint64 // clock ticks since boot
}
