package benchreport

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"
)

// Receiver is the target of the benchmarks' http jobs: an HTTP server on
// a free loopback port in the bench process.
type Receiver struct {
	srv  *http.Server
	ln   net.Listener
	done chan struct{}
}

// StartReceiver serves h on a free loopback port; a nil h answers 204 No
// Content to every request.
func StartReceiver(h http.Handler) (*Receiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("receiver: %w", err)
	}
	if h == nil {
		h = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	}
	r := &Receiver{ln: ln, done: make(chan struct{}), srv: &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: h,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context { return context.WithValue(ctx, connKey{}, c) }}}
	go func() {
		defer close(r.done)
		if err := r.srv.Serve(listenArrivals(ln)); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintln(os.Stderr, "receiver:", err)
		}
	}()
	return r, nil
}

// connKey is the request context key of its connection.
type connKey struct{}

// Arrival is when req reached the receiver's socket: the kernel's receive
// timestamp of the last bytes read for it before the handler was called
// (Linux), which leaves out the receiver's own wait for a CPU to read and
// parse it. ok is false where there is none (then use the handler's clock).
func Arrival(req *http.Request) (at time.Time, ok bool) {
	c, _ := req.Context().Value(connKey{}).(*arrivalConn)
	if c == nil {
		return time.Time{}, false
	}
	return c.arrived()
}

// URL is the address of path (starting with "/") on the receiver.
func (r *Receiver) URL(path string) string { return "http://" + r.ln.Addr().String() + path }

// Close stops the server and waits for it to return.
func (r *Receiver) Close() {
	_ = r.srv.Close()
	<-r.done
}
