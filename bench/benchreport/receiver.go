package benchreport

import (
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
	r := &Receiver{ln: ln, done: make(chan struct{}), srv: &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: h}}
	go func() {
		defer close(r.done)
		if err := r.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintln(os.Stderr, "receiver:", err)
		}
	}()
	return r, nil
}

// URL is the address of path (starting with "/") on the receiver.
func (r *Receiver) URL(path string) string { return "http://" + r.ln.Addr().String() + path }

// Close stops the server and waits for it to return.
func (r *Receiver) Close() {
	_ = r.srv.Close()
	<-r.done
}
