package benchreport

import (
	"errors"
	"io"
	"net"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// arrivalListener turns on the kernel's receive timestamps
// (SO_TIMESTAMPNS) of each accepted TCP connection, whose reads then note
// when the bytes they return reached the socket: the requests' arrival,
// without the receiver's own wait for a CPU to read and parse them.
type arrivalListener struct{ net.Listener }

func listenArrivals(ln net.Listener) net.Listener {
	// Set on the listening socket too: the kernel starts stamping received
	// packets (a global switch it turns on a moment later) before the
	// first connection arrives.
	if tl, ok := ln.(*net.TCPListener); ok {
		if raw, err := tl.SyscallConn(); err == nil {
			_ = raw.Control(func(fd uintptr) {
				_ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_TIMESTAMPNS, 1)
			})
		}
	}
	return arrivalListener{ln}
}

func (l arrivalListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c, nil
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return c, nil //nolint:nilerr // no timestamps: the handler's clock is used
	}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_TIMESTAMPNS, 1)
	}); err != nil || serr != nil {
		return c, nil //nolint:nilerr // as above
	}
	return &arrivalConn{TCPConn: tc, raw: raw, oob: make([]byte, syscall.CmsgSpace(int(unsafe.Sizeof(syscall.Timespec{}))))}, nil
}

// arrivalConn is a connection whose reads record the receive timestamp of
// the last bytes they returned.
type arrivalConn struct {
	*net.TCPConn
	raw  syscall.RawConn
	oob  []byte
	last atomic.Int64 // Unix ns; 0 = none yet
}

func (c *arrivalConn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	var n, oobn int
	var rerr error
	err := c.raw.Read(func(fd uintptr) bool {
		for {
			n, oobn, _, _, rerr = syscall.Recvmsg(int(fd), p, c.oob, 0)
			if !errors.Is(rerr, syscall.EINTR) {
				return !errors.Is(rerr, syscall.EAGAIN)
			}
		}
	})
	if err != nil {
		return 0, err
	}
	if rerr != nil {
		return 0, &net.OpError{Op: "read", Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: rerr}
	}
	if n == 0 {
		return 0, io.EOF
	}
	if ts, ok := receiveTimestamp(c.oob[:oobn]); ok {
		c.last.Store(ts.UnixNano())
	}
	return n, nil
}

// arrived is when the last bytes read from c reached its socket.
func (c *arrivalConn) arrived() (time.Time, bool) {
	ns := c.last.Load()
	if ns == 0 {
		return time.Time{}, false
	}
	return time.Unix(0, ns), true
}
