package sandbox

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
)

// openHandover opens a port the command's init listens on in the command's network namespace and
// hands over on a unix socket: this process keeps one end, the command's process gets the other
// (WrapPort), and a goroutine waits for the listening socket on this process's end. Sequenced
// packets: the init's end closing without a packet reads as the end of the stream.
func (p *Policy) openHandover() (*Port, error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_SEQPACKET|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("sandbox: cannot open a gateway port: socketpair: %w", err)
	}
	own := os.NewFile(uintptr(fds[0]), "factory-sandbox-gateway")
	conn, err := net.FileConn(own) // a copy, which the runtime's poller watches: Close wakes a read
	_ = own.Close()
	if err != nil {
		_ = syscall.Close(fds[1])
		return nil, fmt.Errorf("sandbox: cannot open a gateway port: %w", err)
	}
	pt := newPort(p, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: gatewayPort}, true)
	pt.conn = conn.(*net.UnixConn)
	pt.child = os.NewFile(uintptr(fds[1]), "factory-sandbox-gateway")
	pt.recv.Add(1)
	go pt.receive()
	return pt, nil
}

// receive waits for the listening socket the init hands over, and sets pt.ln or pt.err.
func (pt *Port) receive() {
	defer pt.recv.Done()
	ln, err := receiveListener(pt.conn)
	_ = pt.conn.Close()
	if err != nil {
		select {
		case <-pt.done:
			err = pt.errClosed()
		default:
			err = fmt.Errorf("sandbox: gateway port %s: %w", pt.Addr(), err)
		}
	}
	pt.ln, pt.err = ln, err
	close(pt.ready)
}

// errNoHandover is the init's end closed without a socket sent.
var errNoHandover = errors.New("the command's sandbox init ended without handing the port over (the command did not start, or the sandbox failed to set up: its stderr says why)")

// receiveListener reads one packet from conn, with one descriptor, a listening TCP socket.
func receiveListener(conn *net.UnixConn) (net.Listener, error) {
	var data [1]byte
	// Room for more descriptors than the one expected, so that any extra is received and closed.
	oob := make([]byte, syscall.CmsgSpace(4*4))
	n, oobn, flags, _, err := conn.ReadMsgUnix(data[:], oob)
	if errors.Is(err, io.EOF) || err == nil && n == 0 && oobn == 0 {
		return nil, errNoHandover
	}
	if err != nil {
		return nil, fmt.Errorf("receive the listening socket: %w", err)
	}
	var fds []int
	msgs, err := syscall.ParseSocketControlMessage(oob[:oobn])
	for _, m := range msgs {
		if rights, err := syscall.ParseUnixRights(&m); err == nil {
			fds = append(fds, rights...)
		}
	}
	if err == nil && (len(fds) != 1 || flags&syscall.MSG_CTRUNC != 0) {
		err = fmt.Errorf("%d descriptors where one was expected", len(fds))
	}
	if err != nil {
		for _, fd := range fds {
			_ = syscall.Close(fd)
		}
		return nil, fmt.Errorf("receive the listening socket: %w", err)
	}
	f := os.NewFile(uintptr(fds[0]), "factory-sandbox-gateway-listener")
	defer f.Close()
	ln, err := net.FileListener(f)
	if err != nil {
		return nil, fmt.Errorf("receive the listening socket: %w", err)
	}
	return ln, nil
}
