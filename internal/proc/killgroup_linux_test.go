package proc

import (
	"context"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestKillGroupIfSame runs a command, gets its group from OnStart, and kills it only with the right
// start time.
func TestKillGroupIfSame(t *testing.T) {
	type group struct {
		pgid  int
		ticks uint64
	}
	started := make(chan group, 1)
	done := make(chan Result)
	go func() {
		done <- Run(context.Background(), Spec{
			Argv: []string{"sleep", "30"}, Timeout: hangLimit,
			OnStart: func(pgid int, ticks uint64) { started <- group{pgid, ticks} },
		})
	}()
	g := <-started
	if want, _ := StartTicks(g.pgid); g.ticks == 0 || g.ticks != want {
		t.Fatalf("OnStart got start time %d, want %d", g.ticks, want)
	}
	if killed, err := KillGroupIfSame(g.pgid, g.ticks+1); killed || err != nil {
		t.Errorf("KillGroupIfSame with a later start time = %v, %v; want false, nil", killed, err)
	}
	if killed, err := KillGroupIfSame(g.pgid, g.ticks-1); killed || err != nil {
		t.Errorf("KillGroupIfSame with an earlier start time = %v, %v; want false, nil", killed, err)
	}
	select {
	case res := <-done:
		t.Fatalf("the command ended after a KillGroupIfSame with the wrong start time: %+v", res)
	case <-time.After(100 * time.Millisecond):
	}
	if killed, err := KillGroupIfSame(g.pgid, g.ticks); !killed || err != nil {
		t.Errorf("KillGroupIfSame = %v, %v; want true, nil", killed, err)
	}
	select {
	case res := <-done:
		if res.Err != "killed by signal: killed" {
			t.Errorf("Run = %+v, want it killed by SIGKILL", res)
		}
	case <-time.After(hangLimit):
		t.Fatal("the command survived KillGroupIfSame")
	}
	if killed, err := KillGroupIfSame(g.pgid, g.ticks); killed || err != nil {
		t.Errorf("KillGroupIfSame on a gone group = %v, %v; want false, nil", killed, err)
	}
}

// TestKillGroupIfSameLeaderGone kills a group whose leader has exited, leaving a background process.
func TestKillGroupIfSameLeaderGone(t *testing.T) {
	dir := t.TempDir()
	leader := exec.Command("sh", "-c", "sleep 30 & echo $! > pid")
	leader.Dir = dir
	leader.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := leader.Start(); err != nil {
		t.Fatal(err)
	}
	pgid := leader.Process.Pid
	ticks, ok := StartTicks(pgid) // readable until Wait reaps it
	if err := leader.Wait(); err != nil || !ok {
		t.Fatalf("leader: %v, start time read: %v", err, ok)
	}
	member := readPid(t, filepath.Join(dir, "pid"))
	memberTicks, _ := StartTicks(member)
	defer syscall.Kill(member, syscall.SIGKILL)

	tests := []struct {
		name       string
		ticks      uint64
		wantKilled bool
	}{
		{"the group has a member older than the command", memberTicks + 1, false},
		{"the group started then", ticks, true},
		{"the group is gone", ticks, false},
	}
	for _, tt := range tests {
		killed, err := KillGroupIfSame(pgid, tt.ticks)
		if killed != tt.wantKilled || err != nil {
			t.Errorf("%s: KillGroupIfSame = %v, %v; want %v, nil", tt.name, killed, err, tt.wantKilled)
		}
		if killed {
			waitGone(t, member)
		}
	}
}

// waitGone fails unless process pid ends or turns zombie soon; it reaps it if it is a child.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	for deadline := time.Now().Add(hangLimit); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if st, ok := readStat(pid); !ok || st.state == 'Z' {
			_, _ = syscall.Wait4(pid, nil, syscall.WNOHANG, nil) // a subreaper adopted it
			return
		}
	}
	t.Errorf("process %d survived", pid)
}
