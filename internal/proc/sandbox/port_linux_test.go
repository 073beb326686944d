package sandbox_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/factory-harness/factory/internal/proc"
	"github.com/factory-harness/factory/internal/proc/sandbox"
)

// needPython skips where python3, the HTTP and socket client of these tests, is missing.
func needPython(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed")
	}
}

// gateway serves HTTP on pt: each request's method, path and X-Test header go to the returned
// channel, and the response is "gateway says hi". The server stops with the test.
func gateway(t *testing.T, pt *sandbox.Port) <-chan string {
	t.Helper()
	got := make(chan string, 10)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Method + " " + r.URL.Path + " " + r.Header.Get("X-Test")
		fmt.Fprint(w, "gateway says hi")
	})}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(pt.Listener()) }()
	t.Cleanup(func() {
		_ = srv.Close()
		_ = pt.Close()
		if err := <-served; !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, net.ErrClosed) {
			t.Errorf("Serve: %v", err)
		}
	})
	return got
}

// openPort opens a port of p, closed with the test.
func openPort(t *testing.T, p *sandbox.Policy) *sandbox.Port {
	t.Helper()
	pt, err := p.OpenPort()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pt.Close() })
	return pt
}

// getScript is a Python program that GETs /hello at addr, with no proxy, and prints the body.
func getScript(addr string) string {
	return fmt.Sprintf(`python3 -c "
import urllib.request
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
req = urllib.request.Request('http://%s/hello', headers={'X-Test': 'from inside'})
print(opener.open(req, timeout=10).read().decode())"`, addr)
}

// runWithPort runs script with sh -c in dir under p with pt through proc.Run.
func runWithPort(t *testing.T, p *sandbox.Policy, pt *sandbox.Port, dir, script string) (proc.Result, string) {
	t.Helper()
	log := filepath.Join(t.TempDir(), "out.txt")
	res := proc.Run(context.Background(), proc.Spec{Argv: []string{"sh", "-c", script}, Dir: dir,
		Stdout: log, Stderr: log, Timeout: time.Minute, Sandbox: p, Port: pt})
	out, err := os.ReadFile(log)
	if err != nil && !errors.Is(err, os.ErrNotExist) { // none when Run refused the command
		t.Fatal(err)
	}
	return res, string(out)
}

// checkServed checks that the command's request reached the gateway and its answer came back.
func checkServed(t *testing.T, res proc.Result, out string, got <-chan string) {
	t.Helper()
	if res.ExitCode != 0 || !strings.Contains(out, "gateway says hi") {
		t.Errorf("exit %d (%s), output %q; want the gateway's answer", res.ExitCode, res.Err, out)
	}
	select {
	case req := <-got:
		if req != "GET /hello from inside" {
			t.Errorf("the gateway got %q, want GET /hello from inside", req)
		}
	default:
		t.Error("no request reached the gateway")
	}
}

// With the namespaces mechanism the command reaches the gateway on its own loopback, through
// proc.Run, and this process serves it.
func TestPortServesHTTP(t *testing.T) {
	needPython(t)
	f := newFixture(t)
	p := prepare(t, f)
	pt := openPort(t, p)
	if pt.Addr() != "127.0.0.1:7390" {
		t.Errorf("Addr() = %q, want 127.0.0.1:7390", pt.Addr())
	}
	if got, want := pt.Network(), "loopback only, with the gateway at 127.0.0.1:7390"; got != want {
		t.Errorf("Network() = %q, want %q", got, want)
	}
	got := gateway(t, pt)
	res, out := runWithPort(t, p, pt, f.repo, getScript(pt.Addr()))
	checkServed(t, res, out, got)
	// One command per port.
	if res, _ := runWithPort(t, p, pt, f.repo, "true"); !strings.Contains(res.Err, "already serves a command") {
		t.Errorf("a second command on the port: %+v; want it refused", res)
	}
}

// The command wrapped with a gateway port reaches the gateway and nothing else: not a server on
// the host's loopback, not another port of its own loopback, not the outside.
func TestPortReachesNothingElse(t *testing.T) {
	needPython(t)
	f := newFixture(t)
	p := prepare(t, f)
	host, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	reached := make(chan struct{}, 1)
	go func() {
		for {
			c, err := host.Accept()
			if err != nil {
				return
			}
			reached <- struct{}{}
			c.Close()
		}
	}()
	pt := openPort(t, p)
	got := gateway(t, pt)
	hostPort := host.Addr().(*net.TCPAddr).Port
	res, out := runWithPort(t, p, pt, f.repo, fmt.Sprintf(`python3 -c "
import socket
for host, port in [('127.0.0.1', %d), ('127.0.0.1', 7391), ('192.0.2.1', 80)]:
    try:
        socket.create_connection((host, port), timeout=5)
        print(host, port, 'connected')
    except OSError as e:
        print(host, port, e.strerror)
" && `, hostPort)+getScript(pt.Addr()))
	for _, want := range []string{
		fmt.Sprintf("127.0.0.1 %d Connection refused", hostPort),
		"127.0.0.1 7391 Connection refused",
		"192.0.2.1 80 Network is unreachable",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output %q; want %q", out, want)
		}
	}
	checkServed(t, res, out, got)
	select {
	case <-reached:
		t.Error("the command reached a listener on the host's loopback")
	default:
	}
}

// The init's end of the handover is not left to the command: it gets the descriptors an
// unconfined command gets.
func TestPortIsNotInherited(t *testing.T) {
	f := newFixture(t)
	p := prepare(t, f)
	pt := openPort(t, p)
	const script = "for fd in /proc/$$/fd/*; do printf '%s ' ${fd##*/}; done"
	res, confined := runWithPort(t, p, pt, f.repo, script)
	_, unconfined := sh(t, nil, f.repo, script)
	if res.ExitCode != 0 || confined != unconfined {
		t.Errorf("exit %d (%s); descriptors with the port %q, unconfined %q", res.ExitCode, res.Err, confined, unconfined)
	}
	// The listener was handed over all the same (before the command ran): Accept waits for a
	// connection.
	c, err := acceptWithin(pt, 500*time.Millisecond)
	if err == nil {
		c.Close()
		t.Error("Accept gave a connection nobody made")
	} else if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("Accept: %v; want it to wait for a connection", err)
	}
}

// acceptWithin calls Accept on pt's listener, and gives up after d with os.ErrDeadlineExceeded:
// Accept is not to hang.
func acceptWithin(pt *sandbox.Port, d time.Duration) (net.Conn, error) {
	type accepted struct {
		c   net.Conn
		err error
	}
	ch := make(chan accepted, 1)
	go func() {
		c, err := pt.Listener().Accept()
		ch <- accepted{c, err}
	}()
	select {
	case a := <-ch:
		return a.c, a.err
	case <-time.After(d):
		return nil, os.ErrDeadlineExceeded
	}
}

// A command that cannot start never hands the port over: Accept fails rather than waits, and
// fails with net.ErrClosed once the port is closed.
func TestPortAcceptFailsWhenTheCommandDoesNotStart(t *testing.T) {
	f := newFixture(t)
	p := prepare(t, f)
	pt := openPort(t, p)
	log := filepath.Join(t.TempDir(), "out.txt")
	res := proc.Run(context.Background(), proc.Spec{Argv: []string{"factory-no-such-program"}, Dir: f.repo,
		Stdout: log, Stderr: log, Timeout: time.Minute, Sandbox: p, Port: pt})
	if res.ExitCode != -1 || !strings.Contains(res.Err, "executable file not found") {
		t.Errorf("%+v; want a start failure", res)
	}
	c, err := acceptWithin(pt, 10*time.Second)
	switch {
	case err == nil:
		c.Close()
		t.Error("Accept gave a connection nobody made")
	case errors.Is(err, os.ErrDeadlineExceeded):
		t.Error("Accept still waits after the command failed to start")
	case !strings.Contains(err.Error(), "without handing the port over"):
		t.Errorf("Accept: %v; want it to say the port was not handed over", err)
	}
	if err := pt.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if _, err := pt.Listener().Accept(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Accept after Close: %v; want net.ErrClosed", err)
	}
}

// With PrivatePIDs the parent makes the namespaces at the fork, and the init still hands the
// port over from the command's network namespace.
func TestPortWithPrivatePIDs(t *testing.T) {
	needPython(t)
	f := newFixture(t)
	p := prepareWith(t, f, sandbox.Request{PrivatePIDs: true})
	pt := openPort(t, p)
	got := gateway(t, pt)
	res, out := runWithPort(t, p, pt, f.repo, getScript(pt.Addr()))
	checkServed(t, res, out, got)
}

// With HostNetwork the port is a listener on the host's loopback, which Landlock lets the command
// reach, as it does ConnectPorts, and no other port.
func TestPortWithHostNetwork(t *testing.T) {
	needPython(t)
	if abi := sandbox.Detect().LandlockABI; abi < 4 {
		t.Skipf("Landlock ABI %d < 4 cannot restrict TCP connections", abi)
	}
	f := newFixture(t)
	p := prepareWith(t, f, sandbox.Request{HostNetwork: true, ConnectPorts: []uint16{4242}})
	pt := openPort(t, p)
	if pt.Addr() == "127.0.0.1:7390" || !strings.HasPrefix(pt.Addr(), "127.0.0.1:") {
		t.Errorf("Addr() = %q, want a free port on the host's 127.0.0.1", pt.Addr())
	}
	port := strings.TrimPrefix(pt.Addr(), "127.0.0.1:")
	if got, want := pt.Network(), "host, TCP connect only to port 4242, "+port+" (Landlock)"; got != want {
		t.Errorf("Network() = %q, want %q", got, want)
	}
	other, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	got := gateway(t, pt)
	res, out := runWithPort(t, p, pt, f.repo, fmt.Sprintf(`python3 -c "
import socket
try:
    socket.create_connection(('127.0.0.1', %d), timeout=5)
    print('other connected')
except OSError as e:
    print('other', e.strerror)
" && `, other.Addr().(*net.TCPAddr).Port)+getScript(pt.Addr()))
	if !strings.Contains(out, "other Permission denied") {
		t.Errorf("output %q; want the other host port denied", out)
	}
	checkServed(t, res, out, got)
}

// Without confinement the port is a plain listener on the host's loopback.
func TestPortUnconfined(t *testing.T) {
	needPython(t)
	f := newFixture(t)
	var p *sandbox.Policy
	pt := openPort(t, p)
	if got := pt.Network(); got != "unrestricted" {
		t.Errorf("Network() = %q, want unrestricted", got)
	}
	got := gateway(t, pt)
	res, out := runWithPort(t, p, pt, f.repo, getScript(pt.Addr()))
	checkServed(t, res, out, got)
	// A port serves the policy that opened it.
	other, err := sandbox.Prepare(sandbox.Request{Mode: sandbox.ModeOff})
	if err != nil {
		t.Fatal(err)
	}
	if res, _ := runWithPort(t, other, openPort(t, nil), f.repo, "true"); !strings.Contains(res.Err, "opened by another policy") {
		t.Errorf("a port of another policy: %+v; want it refused", res)
	}
}

// Closing the port ends an Accept that waits for a handover, and Serve with it.
func TestPortCloseEndsAccept(t *testing.T) {
	f := newFixture(t)
	p := prepare(t, f)
	pt, err := p.OpenPort()
	if err != nil {
		t.Fatal(err)
	}
	sandbox.CheckCloseEndsAccept(t, pt, pt.Listener().Close)
}
