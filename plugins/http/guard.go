package http

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"
)

// Environment variables through which the node tells the plugin which
// destinations it may reach (set from the node's --http-allow-loopback and
// --http-allow-private flags). "1" or "true" allows.
const (
	EnvAllowLoopback = "CRONIX_HTTP_ALLOW_LOOPBACK"
	EnvAllowPrivate  = "CRONIX_HTTP_ALLOW_PRIVATE"
)

// Guard decides which IP addresses a request may connect to. It is checked
// on the resolved address of every connection (the dialer's Control hook),
// so neither a DNS name resolving to a forbidden address nor a redirect can
// get around it. Link-local addresses (169.254.0.0/16 with the cloud
// metadata endpoint 169.254.169.254, fe80::/10), unspecified, multicast and
// broadcast addresses are always refused.
type Guard struct {
	// AllowLoopback allows 127.0.0.0/8 and ::1.
	AllowLoopback bool
	// AllowPrivate allows private ranges: 10.0.0.0/8, 172.16.0.0/12,
	// 192.168.0.0/16, 100.64.0.0/10 (carrier-grade NAT) and fc00::/7.
	AllowPrivate bool
}

// BlockedError is the error of a connection the Guard refused.
type BlockedError struct {
	// Addr is the refused address.
	Addr netip.Addr
	// Class names its range, e.g. "loopback".
	Class string
	// Hint tells how to allow it, or "" when it cannot be allowed.
	Hint string
}

func (e *BlockedError) Error() string {
	msg := fmt.Sprintf("refusing to connect to %s: %s address", e.Addr, e.Class)
	if e.Hint != "" {
		msg += " (" + e.Hint + ")"
	}
	return msg
}

var cgnat = netip.MustParsePrefix("100.64.0.0/10")

// Check returns a *BlockedError when addr may not be connected to.
func (g Guard) Check(addr netip.Addr) error {
	addr = addr.Unmap()
	block := func(class, hint string) error { return &BlockedError{Addr: addr, Class: class, Hint: hint} }
	switch {
	case !addr.IsValid():
		return block("invalid", "")
	case addr.IsUnspecified():
		return block("unspecified", "")
	case addr.IsLoopback():
		if !g.AllowLoopback {
			return block("loopback", "start the node with --http-allow-loopback to allow it")
		}
	case addr.IsLinkLocalUnicast():
		return block("link-local", "link-local and cloud metadata addresses are never allowed")
	case addr.IsMulticast() || addr.IsLinkLocalMulticast() || addr.IsInterfaceLocalMulticast():
		return block("multicast", "")
	case addr == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return block("broadcast", "")
	case addr.IsPrivate() || cgnat.Contains(addr):
		if !g.AllowPrivate {
			return block("private", "start the node with --http-allow-private to allow it")
		}
	}
	return nil
}

// control is a net.Dialer Control hook enforcing the Guard on the address
// actually being connected to.
func (g Guard) control(_, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return fmt.Errorf("dial address %q: %w", address, err)
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return fmt.Errorf("dial address %q is not an IP: %w", address, err)
	}
	return g.Check(ip)
}

// asBlocked finds a BlockedError in err's chain.
func asBlocked(err error) (*BlockedError, bool) {
	var b *BlockedError
	ok := errors.As(err, &b)
	return b, ok
}
