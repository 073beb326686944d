package sandbox

import (
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"sync"
)

// gatewayPort is a Port's number with the namespaces mechanism. The command's network namespace is
// fresh, with nothing listening in it, so any port is free; this one is far from the ports servers
// and tests pick by default (3000, 5000, 8000, 8080), which the command may still listen on.
const gatewayPort = 7390

// A Port is a TCP port on 127.0.0.1, as one confined command sees it, whose connections this
// process accepts: a gateway through which the command reaches one server of this process's, such
// as a proxy of package registries, and with the namespaces mechanism nothing else on the network.
//
// With the namespaces mechanism (and no HostNetwork) the command's init listens on the port in the
// command's own network namespace and hands the listening socket over to this process as the command
// starts: a socket belongs to the namespace it was made in, so the command dials it on its own
// loopback while this process accepts outside. With the host's network (HostNetwork, or Landlock
// alone) this process listens on the host's 127.0.0.1 at a free port, and Landlock (ABI 4 and
// later) allows the command's TCP connections to that port and the policy's ConnectPorts only (to
// those ports on any address); below ABI 4 the network is unrestricted. Where nothing confines the
// command it is a plain listener on the host. Network says which.
//
// A Port serves the one command it is wrapped with (Policy.WrapPort, or proc.Spec.Port), of the
// policy that opened it; the caller closes it. It is safe for concurrent use.
type Port struct {
	policy *Policy
	addr   *net.TCPAddr
	inNS   bool // the init hands the socket over from the command's network namespace

	done  chan struct{} // closed by Close
	ready chan struct{} // closed once ln or err is set, and neither changes after
	ln    net.Listener
	err   error
	recv  sync.WaitGroup // the goroutine that receives the socket the init hands over

	mu     sync.Mutex
	used   bool
	closed bool
	conn   *net.UnixConn // this process's end of the handover
	child  *os.File      // the command's end, until the command started
}

// OpenPort prepares a port for the next command wrapped with it (WrapPort): Addr, known at once, is
// where the command dials it (give it in the command's environment), and Listener accepts its
// connections. A nil policy, which does not confine, gives a listener on the host's 127.0.0.1.
// Close the port when done with it.
func (p *Policy) OpenPort() (*Port, error) {
	if p.Confined() && p.mech == MechanismNamespaces && !p.hostNet {
		return p.openHandover()
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("sandbox: cannot open a gateway port: %w", err)
	}
	pt := newPort(p, ln.Addr().(*net.TCPAddr), false)
	pt.ln = ln
	close(pt.ready)
	return pt, nil
}

func newPort(p *Policy, addr *net.TCPAddr, inNS bool) *Port {
	return &Port{policy: p, addr: addr, inNS: inNS, done: make(chan struct{}), ready: make(chan struct{})}
}

// Addr is the port's address as the command must dial it: "127.0.0.1:N".
func (pt *Port) Addr() string { return pt.addr.String() }

// Network says what the command wrapped with pt can reach on the network, as Summary.Network does
// for the policy's other commands.
func (pt *Port) Network() string {
	switch {
	case pt.inNS:
		return "loopback only, with the gateway at " + pt.Addr()
	case !pt.policy.Confined():
		return "unrestricted"
	}
	return pt.policy.network(true, pt.hostPorts())
}

// hostPorts are the ports a command with the host's network may connect to: the policy's
// ConnectPorts, if it has the host's network, and pt's.
func (pt *Port) hostPorts() []uint16 {
	var ports []uint16
	if pt.policy != nil && pt.policy.hostNet {
		ports = slices.Clone(pt.policy.ports)
	}
	return append(ports, uint16(pt.addr.Port))
}

// Listener accepts the command's connections to the port. With the namespaces mechanism Accept
// waits until the command's init has handed the port over, and fails once the init ended without
// (the command could not start, or the sandbox failed: the command's stderr says why); otherwise it
// works at once. It fails with net.ErrClosed once the port is closed. Closing the listener closes
// the port.
func (pt *Port) Listener() net.Listener { return portListener{pt} }

// use marks pt as the port of a command wrapped with p, and returns the command's end of the
// handover (nil but with the namespaces mechanism). A nil pt is no port.
func (pt *Port) use(p *Policy) (*os.File, error) {
	if pt == nil {
		return nil, nil
	}
	pt.mu.Lock()
	defer pt.mu.Unlock()
	switch {
	case pt.policy != p:
		return nil, fmt.Errorf("sandbox: gateway port %s was opened by another policy", pt.Addr())
	case pt.closed:
		return nil, fmt.Errorf("sandbox: gateway port %s is closed", pt.Addr())
	case pt.used, pt.inNS && pt.child == nil: // Started before: the command's end is gone
		return nil, fmt.Errorf("sandbox: gateway port %s already serves a command: open one per command", pt.Addr())
	}
	pt.used = true
	return pt.child, nil
}

// Started tells pt that the command wrapped with it has started, or failed to: this process closes
// its copy of the command's end of the handover, so that Accept fails as soon as the init ends
// without handing the port over, rather than when the port is closed. Call it once cmd.Start has
// returned (proc.Run does); the cleanup WrapPort returns calls it too. A nil pt does nothing.
func (pt *Port) Started() {
	if pt == nil {
		return
	}
	pt.mu.Lock()
	child := pt.child
	pt.child = nil
	pt.mu.Unlock()
	if child != nil {
		_ = child.Close()
	}
}

// Close stops accepting the command's connections, and ends Accept calls.
func (pt *Port) Close() error {
	pt.mu.Lock()
	if pt.closed {
		pt.mu.Unlock()
		return nil
	}
	pt.closed = true
	close(pt.done)
	child, conn := pt.child, pt.conn
	pt.child = nil
	pt.mu.Unlock()
	if child != nil {
		_ = child.Close()
	}
	if conn != nil {
		_ = conn.Close() // ends the receiving goroutine
	}
	pt.recv.Wait()
	// ln is set for good now: the receiving goroutine has ended, or there is none.
	if pt.ln != nil {
		if err := pt.ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			return fmt.Errorf("sandbox: close gateway port %s: %w", pt.Addr(), err)
		}
	}
	return nil
}

// errClosed is Accept's error once pt is closed, as a closed net.Listener's.
func (pt *Port) errClosed() error {
	return &net.OpError{Op: "accept", Net: "tcp", Addr: pt.addr, Err: net.ErrClosed}
}

// portListener is a Port's Listener.
type portListener struct{ pt *Port }

func (l portListener) Accept() (net.Conn, error) {
	select {
	case <-l.pt.ready:
	case <-l.pt.done:
	}
	// Closed wins over the handover's result, which may be ready too.
	select {
	case <-l.pt.done:
		return nil, l.pt.errClosed()
	default:
	}
	if l.pt.err != nil {
		return nil, l.pt.err
	}
	return l.pt.ln.Accept()
}

func (l portListener) Close() error { return l.pt.Close() }

func (l portListener) Addr() net.Addr { return l.pt.addr }
