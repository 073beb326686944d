package sandbox

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// openFDs counts this process's open descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}

// settles waits until count() is at most want, and reports whether it got there.
func settles(count func() int, want int) bool {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if count() <= want {
			return true
		}
	}
	return false
}

// An init that fails before it hands the port over (here on a bad plan) makes Accept fail at once,
// and the port leaves no goroutine or descriptor behind once closed.
func TestPortInitFailsBeforeHandover(t *testing.T) {
	if _, err := initExe(); err != nil {
		t.Skipf("no init here: %v", err)
	}
	dir := t.TempDir()
	// A relative hidden path: the init refuses the plan before it makes the namespaces.
	p := &Policy{mode: ModeAuto, mech: MechanismNamespaces, abi: Detect().LandlockABI, workTree: dir, hide: []string{"relative"}}
	fds, goroutines := openFDs(t), runtime.NumGoroutine()
	for range 3 {
		pt, err := p.OpenPort()
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("/bin/true")
		cmd.Dir = dir
		var stderr strings.Builder
		cmd.Stderr = &stderr
		cleanup, err := p.WrapPort(cmd, pt)
		if err != nil {
			t.Fatal(err)
		}
		err = cmd.Start()
		pt.Started()
		if err != nil {
			t.Fatal(err)
		}
		accepted := make(chan error, 1)
		go func() {
			c, err := pt.Listener().Accept()
			if c != nil {
				c.Close()
			}
			accepted <- err
		}()
		select {
		case err := <-accepted:
			if err == nil || !strings.Contains(err.Error(), "without handing the port over") {
				t.Errorf("Accept: %v; want it to say the port was not handed over", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Accept still waits after the init failed")
		}
		if err := cmd.Wait(); err == nil || !strings.Contains(stderr.String(), "factory sandbox: bad plan") {
			t.Errorf("the init: %v: %s; want a bad plan", err, stderr.String())
		}
		cleanup()
		if err := pt.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}
	if !settles(func() int { return openFDs(t) }, fds) {
		t.Errorf("%d descriptors open, %d before the ports", openFDs(t), fds)
	}
	if !settles(runtime.NumGoroutine, goroutines) {
		t.Errorf("%d goroutines, %d before the ports", runtime.NumGoroutine(), goroutines)
	}
}

// The init's end of the handover goes after the command's own extra descriptors, and the plan
// names it.
func TestPortDescriptorFollowsExtraFiles(t *testing.T) {
	if _, err := initExe(); err != nil {
		t.Skipf("no init here: %v", err)
	}
	p := &Policy{mode: ModeAuto, mech: MechanismNamespaces, abi: 4, workTree: t.TempDir()}
	pt, err := p.OpenPort()
	if err != nil {
		t.Fatal(err)
	}
	defer pt.Close()
	extra, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	cmd := exec.Command("/bin/true")
	cmd.ExtraFiles = []*os.File{extra}
	cleanup, err := p.WrapPort(cmd, pt)
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	if len(cmd.ExtraFiles) != 2 || cmd.ExtraFiles[0] != extra {
		t.Fatalf("ExtraFiles = %v; want the command's, then the port's", cmd.ExtraFiles)
	}
	i := slices.Index(cmd.Args, "-g")
	if i < 0 || i+3 >= len(cmd.Args) || cmd.Args[i+1] != "4" || cmd.Args[i+2] != "-p" || cmd.Args[i+3] != "7390" {
		t.Errorf("args %q; want -g 4 -p 7390", cmd.Args)
	}
	if _, err := p.WrapPort(exec.Command("/bin/true"), pt); err == nil {
		t.Error("a second command wrapped with the port; want an error")
	}
}

// With Landlock alone the port is a listener on the host's loopback, the one port (with ABI 4 and
// later) the command may connect to.
func TestPortLandlockAlone(t *testing.T) {
	abi, why := landlockABI()
	if abi < 1 {
		t.Skipf("no Landlock here: %s", why)
	}
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed")
	}
	repo, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	p := &Policy{mode: ModeAuto, mech: MechanismLandlock, abi: abi, workTree: repo}
	pt, err := p.OpenPort()
	if err != nil {
		t.Fatal(err)
	}
	defer pt.Close()
	port := strings.TrimPrefix(pt.Addr(), "127.0.0.1:")
	want := "host, TCP connect only to port " + port + " (Landlock)"
	if abi < 4 {
		want = "host, TCP connect unrestricted (Landlock ABI < 4)"
	}
	if got := pt.Network(); got != want {
		t.Errorf("Network() = %q, want %q", got, want)
	}
	if got := p.Summary().Network; abi >= 4 && got != "TCP connect denied (Landlock)" {
		t.Errorf("Summary().Network = %q: the policy's other commands must keep theirs", got)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "gateway says hi")
	})}
	go srv.Serve(pt.Listener())
	defer srv.Close()
	other, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	cmd := exec.Command("python3", "-c", fmt.Sprintf(`
import socket, urllib.request
try:
    socket.create_connection(('127.0.0.1', %d), timeout=5)
    print('other connected')
except OSError as e:
    print('other', e.strerror)
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
print(opener.open('http://%s/', timeout=10).read().decode())`, other.Addr().(*net.TCPAddr).Port, pt.Addr()))
	cmd.Dir = repo
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	cleanup, err := p.WrapPort(cmd, pt)
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "gateway says hi") {
		t.Errorf("%v: %s; want the gateway's answer", err, out)
	}
	if abi >= 4 && !strings.Contains(string(out), "other Permission denied") {
		t.Errorf("output %s; want the other host port denied", out)
	}
}

// Network for each mechanism and network of the policy.
func TestPortNetwork(t *testing.T) {
	for _, c := range []struct {
		name string
		p    *Policy
		want string // %d: the port
	}{
		{"namespaces", &Policy{mode: ModeAuto, mech: MechanismNamespaces, abi: 6}, "loopback only, with the gateway at 127.0.0.1:7390"},
		{"namespaces, host network", &Policy{mode: ModeAuto, mech: MechanismNamespaces, abi: 6, hostNet: true, ports: []uint16{443}},
			"host, TCP connect only to port 443, %d (Landlock)"},
		{"Landlock alone", &Policy{mode: ModeAuto, mech: MechanismLandlock, abi: 4}, "host, TCP connect only to port %d (Landlock)"},
		{"Landlock alone, ConnectPorts without the host network", &Policy{mode: ModeAuto, mech: MechanismLandlock, abi: 5, ports: []uint16{443}},
			"host, TCP connect only to port %d (Landlock)"},
		{"old Landlock", &Policy{mode: ModeAuto, mech: MechanismLandlock, abi: 3}, "host, TCP connect unrestricted (Landlock ABI < 4)"},
		{"off", &Policy{mode: ModeOff, mech: MechanismNone}, "unrestricted"},
		{"nil", nil, "unrestricted"},
	} {
		t.Run(c.name, func(t *testing.T) {
			pt, err := c.p.OpenPort()
			if err != nil {
				t.Fatal(err)
			}
			defer pt.Close()
			want := c.want
			if strings.Contains(want, "%d") {
				want = fmt.Sprintf(want, pt.addr.Port)
			}
			if got := pt.Network(); got != want {
				t.Errorf("Network() = %q, want %q", got, want)
			}
			if pt.addr.IP.String() != "127.0.0.1" {
				t.Errorf("Addr() = %q, want one on 127.0.0.1", pt.Addr())
			}
		})
	}
}

// Closing the port closes a listener handed over already, and Accept then fails.
// CheckCloseEndsAccept checks that close, called while an Accept of pt's listener waits, ends it
// with net.ErrClosed (for the tests of package sandbox_test too).
func CheckCloseEndsAccept(t *testing.T, pt *Port, close func() error) {
	t.Helper()
	accepted := make(chan error, 1)
	go func() {
		_, err := pt.Listener().Accept()
		accepted <- err
	}()
	time.Sleep(50 * time.Millisecond)
	if err := close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-accepted:
		if !errors.Is(err, net.ErrClosed) {
			t.Errorf("Accept: %v, want net.ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Accept still waits after Close")
	}
}

func TestPortCloseAfterHandover(t *testing.T) {
	if !Detect().UserNamespaces {
		t.Skipf("user namespaces unavailable here: %s", Detect().UserNamespacesError)
	}
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	p := &Policy{mode: ModeAuto, mech: MechanismNamespaces, abi: Detect().LandlockABI, workTree: dir}
	pt, err := p.OpenPort()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/bin/true")
	cmd.Dir = dir
	cleanup, err := p.WrapPort(cmd, pt)
	if err != nil {
		t.Fatal(err)
	}
	err = cmd.Run()
	pt.Started()
	cleanup()
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-pt.ready:
	case <-time.After(10 * time.Second):
		t.Fatal("no handover")
	}
	if pt.err != nil {
		t.Fatalf("handover: %v", pt.err)
	}
	CheckCloseEndsAccept(t, pt, pt.Close)
	// Nothing listens in the namespace any longer: the handed over socket was the only one.
	if c, err := pt.ln.Accept(); err == nil {
		c.Close()
		t.Error("the handed over listener still accepts")
	}
}
