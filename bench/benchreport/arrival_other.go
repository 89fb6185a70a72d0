//go:build !linux

package benchreport

import (
	"net"
	"time"
)

// listenArrivals: the kernel's receive timestamps are read on Linux only;
// elsewhere Arrival reports none and the handler's clock is used.
func listenArrivals(ln net.Listener) net.Listener { return ln }

type arrivalConn struct{ net.Conn }

func (c *arrivalConn) arrived() (time.Time, bool) { return time.Time{}, false }
