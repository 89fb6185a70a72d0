package benchreport

import (
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// LeanReceiver is the speed bench's http receiver: a loopback HTTP/1.1
// server reduced to what the bench needs, so that the lateness it measures
// is the sender's and not its own. Its workers each wait on an epoll set
// of connections (no goroutine per connection), read every ready
// connection and stamp each complete request as it is parsed; they write
// the answers (204 No Content) only when no connection has anything left
// to read (with WithAnswerHold, once none has had anything for the quiet
// time): a request's arrival is not held behind the answers to others. It takes requests
// with a Content-Length body or none, keep-alive or not; anything else
// (a chunked body, a malformed head, over 64 KiB) is answered 400 and its
// connection closed.
type LeanReceiver struct {
	lfd, efd int
	addr     string
	workers  []*leanWorker
	wg       sync.WaitGroup
	once     sync.Once
}

// leanWorker owns the connections in its epoll set.
type leanWorker struct {
	r     *LeanReceiver
	ep    int
	fn    func(Arrived)
	mu    sync.Mutex // conns: a connection is added by the worker that accepted it
	conns map[int32]*leanConn
	// quiet, hold: see WithAnswerHold.
	quiet, hold time.Duration
}

// leanConn is one connection's unparsed input and pending answers.
type leanConn struct {
	fd     int
	in     []byte
	out    []byte
	socket time.Time // receive timestamp of the last bytes read
	close  bool      // close after out is written
	queued bool      // in its worker's pending
}

// StartLeanReceiver serves on a free loopback port with the given number
// of workers (at least 1), calling fn (from any worker) for every request.
func StartLeanReceiver(workers int, fn func(Arrived), opts ...LeanOption) (*LeanReceiver, error) {
	var o leanOptions
	for _, opt := range opts {
		opt(&o)
	}
	r := &LeanReceiver{lfd: -1, efd: -1}
	if err := r.listen(); err != nil {
		r.closeFDs()
		return nil, fmt.Errorf("lean receiver: %w", err)
	}
	for range max(workers, 1) {
		ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
		if err == nil {
			err = unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, r.lfd, &unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLEXCLUSIVE, Fd: int32(r.lfd)})
		}
		if err == nil {
			err = unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, r.efd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(r.efd)})
		}
		if err != nil {
			if ep >= 0 {
				_ = unix.Close(ep)
			}
			r.Close()
			return nil, fmt.Errorf("lean receiver: epoll: %w", err)
		}
		r.workers = append(r.workers, &leanWorker{r: r, ep: ep, fn: fn, conns: map[int32]*leanConn{}, quiet: o.quiet, hold: o.hold})
	}
	started := make(chan error, len(r.workers))
	for _, w := range r.workers {
		r.wg.Add(1)
		go w.run(o.nice, started)
	}
	var errs []error
	for range r.workers {
		errs = append(errs, <-started)
	}
	if err := errors.Join(errs...); err != nil {
		r.Close()
		return nil, fmt.Errorf("lean receiver: %w", err)
	}
	return r, nil
}

func (r *LeanReceiver) listen() error {
	var err error
	if r.lfd, err = unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0); err != nil {
		return err
	}
	// Receive timestamps on the listening socket too: the kernel turns its
	// stamping on (a global switch) a moment after the first socket asks.
	if err = unix.SetsockoptInt(r.lfd, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1); err != nil {
		return err
	}
	if err = unix.Bind(r.lfd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		return err
	}
	if err = unix.Listen(r.lfd, 4096); err != nil {
		return err
	}
	sa, err := unix.Getsockname(r.lfd)
	if err != nil {
		return err
	}
	in4, ok := sa.(*unix.SockaddrInet4)
	if !ok {
		return errors.New("not an IPv4 socket")
	}
	r.addr = "127.0.0.1:" + strconv.Itoa(in4.Port)
	r.efd, err = unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	return err
}

// URL is the address of path (starting with "/") on the receiver.
func (r *LeanReceiver) URL(path string) string { return "http://" + r.addr + path }

// Close stops the workers, closes every connection and the listening
// socket, and waits for the workers to return.
func (r *LeanReceiver) Close() {
	r.once.Do(func() {
		if r.efd >= 0 {
			_, _ = unix.Write(r.efd, []byte{1, 0, 0, 0, 0, 0, 0, 0})
		}
		r.wg.Wait()
		r.closeFDs()
	})
}

func (r *LeanReceiver) closeFDs() {
	for _, fd := range []int{r.lfd, r.efd} {
		if fd >= 0 {
			_ = unix.Close(fd)
		}
	}
}

// run is a worker's loop. With nice != 0 it first takes an OS thread of
// its own at that nice value (the thread ends with the worker: it is never
// unlocked), then reports on started whether it could.
func (w *leanWorker) run(nice int, started chan<- error) {
	defer w.r.wg.Done()
	if nice != 0 {
		runtime.LockOSThread()
		if err := unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), nice); err != nil {
			started <- fmt.Errorf("nice %d: %w", nice, err)
			_ = unix.Close(w.ep)
			return
		}
	}
	started <- nil
	defer func() {
		w.mu.Lock()
		for _, c := range w.conns {
			_ = unix.Close(c.fd)
		}
		w.conns = nil
		w.mu.Unlock()
		_ = unix.Close(w.ep)
	}()
	events := make([]unix.EpollEvent, 512)
	oob := make([]byte, unix.CmsgSpace(int(unsafe.Sizeof(unix.Timespec{})))*4)
	// pending are the connections with answers to write. They are written
	// only when no connection has more to read (with a quiet time, when
	// none has had anything for that long, or once the oldest has waited
	// hold): reading (and so stamping) the requests comes before answering
	// any of them.
	var (
		pending []*leanConn
		since   time.Time // when the oldest pending answer was queued
	)
	flush := func() {
		for _, c := range pending {
			c.queued = false
			if !c.flush() || c.close {
				w.drop(c)
			}
		}
		pending = pending[:0]
	}
	for {
		timeout := -1
		if len(pending) > 0 {
			timeout = 0
			if left := w.hold - time.Since(since); w.quiet > 0 && left > 0 {
				timeout = int(min(w.quiet, left).Milliseconds())
			}
		}
		n, err := unix.EpollWait(w.ep, events, timeout)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return
		}
		if n == 0 {
			flush()
			continue
		}
		for _, ev := range events[:n] {
			switch int(ev.Fd) {
			case w.r.efd:
				return
			case w.r.lfd:
				w.accept()
			default:
				w.mu.Lock()
				c := w.conns[ev.Fd]
				w.mu.Unlock()
				if c != nil {
					w.read(c, oob)
					if !c.queued {
						if len(pending) == 0 {
							since = time.Now()
						}
						c.queued = true
						pending = append(pending, c)
					}
				}
			}
		}
		if len(pending) > 0 && w.quiet > 0 && time.Since(since) >= w.hold {
			flush()
		}
	}
}

// accept takes every pending connection and hands each to the worker with
// the fewest connections.
func (w *leanWorker) accept() {
	for {
		fd, _, err := unix.Accept4(w.r.lfd, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return // EAGAIN: none left (another worker may have taken it)
		}
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1)
		_ = unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
		to := w.r.workers[0]
		for _, o := range w.r.workers[1:] {
			if o.count() < to.count() {
				to = o
			}
		}
		to.mu.Lock()
		if to.conns == nil { // that worker has stopped
			to.mu.Unlock()
			_ = unix.Close(fd)
			continue
		}
		to.conns[int32(fd)] = &leanConn{fd: fd, in: make([]byte, 0, 4<<10)}
		to.mu.Unlock()
		if err := unix.EpollCtl(to.ep, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP, Fd: int32(fd)}); err != nil {
			to.drop(&leanConn{fd: fd})
		}
	}
}

func (w *leanWorker) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.conns)
}

// drop closes c and forgets it, unless the worker has stopped and closed
// it already.
func (w *leanWorker) drop(c *leanConn) {
	w.mu.Lock()
	_, ok := w.conns[int32(c.fd)]
	delete(w.conns, int32(c.fd))
	w.mu.Unlock()
	if ok {
		_ = unix.Close(c.fd) // closing removes it from the epoll set
	}
}

// read reads what c has, then parses, stamps and hands over its
// complete requests, queueing their answers. End of input or an error
// marks c for closing once its answers are written.
func (w *leanWorker) read(c *leanConn, oob []byte) {
	w.take(c, oob)
	if c.close {
		// Nothing more is read from it: out of the epoll set, which would
		// report its end of input on every wait until it is closed.
		_ = unix.EpollCtl(w.ep, unix.EPOLL_CTL_DEL, c.fd, nil)
	}
}

// take is read's work: reads, then parses, stamps and hands over.
func (w *leanWorker) take(c *leanConn, oob []byte) {
	for {
		if len(c.in) == cap(c.in) {
			c.in = append(c.in, make([]byte, cap(c.in))...)[:len(c.in)]
		}
		room := cap(c.in) - len(c.in)
		n, oobn, _, _, err := unix.Recvmsg(c.fd, c.in[len(c.in):cap(c.in)], oob, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if errors.Is(err, unix.EAGAIN) {
			break
		}
		if err != nil || n == 0 {
			c.close = true
			break
		}
		c.in = c.in[:len(c.in)+n]
		if ts, ok := receiveTimestamp(oob[:oobn]); ok {
			c.socket = ts
		}
		if n < room {
			// The socket had less than the room: it was empty when read.
			// Not asking again saves a recvmsg that would say EAGAIN; the
			// epoll set is level-triggered, so what comes later (the end
			// of input included) is reported by the next wait.
			break
		}
	}
	for len(c.in) > 0 {
		req, ok, err := parseLeanRequest(c.in)
		if err != nil {
			c.out, c.close, c.in = append(c.out, leanBadRequest...), true, c.in[:0]
			return
		}
		if !ok {
			if len(c.in) >= maxLeanRequest {
				c.close = true
			}
			break
		}
		w.fn(Arrived{Path: req.path, FireID: req.fireID, At: time.Now(), Socket: c.socket})
		if req.close {
			c.out, c.close = append(c.out, leanNoContentClose...), true
			c.in = c.in[:0]
			return
		}
		c.out = append(c.out, leanNoContent...)
		c.in = c.in[:copy(c.in, c.in[req.size:])]
	}
}

// flush writes c's pending answers; false when the connection failed.
func (c *leanConn) flush() bool {
	for done := 0; done < len(c.out); {
		n, err := unix.Write(c.fd, c.out[done:])
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EAGAIN):
			// The client is not reading: wait for room, a second at most.
			p := []unix.PollFd{{Fd: int32(c.fd), Events: unix.POLLOUT}}
			if k, perr := unix.Poll(p, 1000); (perr != nil && !errors.Is(perr, unix.EINTR)) || (perr == nil && k == 0) {
				return false
			}
			continue
		case err != nil:
			return false
		}
		done += n
	}
	c.out = c.out[:0]
	return true
}

// receiveTimestamp is the SO_TIMESTAMPNS of a recvmsg's control messages.
func receiveTimestamp(oob []byte) (time.Time, bool) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return time.Time{}, false
	}
	for _, m := range msgs {
		if m.Header.Level == unix.SOL_SOCKET && m.Header.Type == unix.SO_TIMESTAMPNS &&
			len(m.Data) >= int(unsafe.Sizeof(unix.Timespec{})) {
			ts := (*unix.Timespec)(unsafe.Pointer(&m.Data[0]))
			return time.Unix(ts.Unix()), true
		}
	}
	return time.Time{}, false
}
