package benchreport

import (
	"bytes"
	"errors"
	"strconv"
	"time"
)

// Arrived is one request as the lean receiver read it.
type Arrived struct {
	// Path is the request target up to any '?'.
	Path string
	// FireID is the X-Cronix-Fire-Id header ("" without one).
	FireID string
	// At is when the receiver had read the whole request: its arrival at
	// the receiver, before any response is written.
	At time.Time
	// Socket is the kernel's receive timestamp (SO_TIMESTAMPNS) of the
	// last bytes read for it; zero where there is none.
	Socket time.Time
}

// maxLeanRequest bounds one request (head and body) the lean receiver
// buffers; a longer one closes its connection.
const maxLeanRequest = 64 << 10

// errLeanRequest is a request the lean receiver does not take: its
// connection is answered 400 and closed.
var errLeanRequest = errors.New("lean receiver: malformed or unsupported request")

// leanRequest is one parsed request.
type leanRequest struct {
	path, fireID string
	// size is the bytes the request takes in the buffer (head and body).
	size int
	// close: the client asked for the connection to be closed after the
	// response (Connection: close, or HTTP/1.0 without keep-alive).
	close bool
}

// parseLeanRequest parses the first HTTP/1.x request in b. It returns
// ok=false (and no error) while b holds only part of it. Bodies are taken by
// Content-Length; a chunked body, a request over maxLeanRequest or a
// malformed head is errLeanRequest.
func parseLeanRequest(b []byte) (req leanRequest, ok bool, err error) {
	end := bytes.Index(b, []byte("\r\n\r\n"))
	if end < 0 {
		if len(b) > maxLeanRequest {
			return req, false, errLeanRequest
		}
		return req, false, nil
	}
	head := b[:end]
	line, rest, _ := bytes.Cut(head, []byte("\r\n"))
	method, line, ok1 := bytes.Cut(line, []byte(" "))
	target, version, ok2 := bytes.Cut(line, []byte(" "))
	if !ok1 || !ok2 || len(method) == 0 || len(target) == 0 || !bytes.HasPrefix(version, []byte("HTTP/1.")) {
		return req, false, errLeanRequest
	}
	if p, _, _ := bytes.Cut(target, []byte("?")); len(p) > 0 {
		req.path = string(p)
	}
	req.close = string(version) == "HTTP/1.0"
	length := 0
	for len(rest) > 0 {
		var h []byte
		h, rest, _ = bytes.Cut(rest, []byte("\r\n"))
		name, value, found := bytes.Cut(h, []byte(":"))
		if !found {
			return req, false, errLeanRequest
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("X-Cronix-Fire-Id")):
			req.fireID = string(value)
		case bytes.EqualFold(name, []byte("Content-Length")):
			n, err := strconv.Atoi(string(value))
			if err != nil || n < 0 {
				return req, false, errLeanRequest
			}
			length = n
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			if !bytes.EqualFold(value, []byte("identity")) {
				return req, false, errLeanRequest
			}
		case bytes.EqualFold(name, []byte("Connection")):
			switch {
			case bytes.EqualFold(value, []byte("close")):
				req.close = true
			case bytes.EqualFold(value, []byte("keep-alive")):
				req.close = false
			}
		}
	}
	req.size = end + 4 + length
	if req.size > maxLeanRequest {
		return req, false, errLeanRequest
	}
	if len(b) < req.size {
		return req, false, nil
	}
	return req, true, nil
}

// Responses of the lean receiver.
var (
	leanNoContent      = []byte("HTTP/1.1 204 No Content\r\n\r\n")
	leanNoContentClose = []byte("HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n")
	leanBadRequest     = []byte("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
)

// LeanOption sets an option of StartLeanReceiver.
type LeanOption func(*leanOptions)

type leanOptions struct {
	nice        int
	quiet, hold time.Duration
}

// WithAnswerHold holds a worker's answers until none of its connections has
// had anything to read for quiet (rounded down to whole milliseconds), or
// until the oldest has waited hold, whichever comes first. 0 (the default)
// writes them as soon as nothing is ready to read.
func WithAnswerHold(quiet, hold time.Duration) LeanOption {
	return func(o *leanOptions) { o.quiet, o.hold = quiet, hold }
}

// WithNice runs each of the receiver's workers on an OS thread of its own
// at nice value n (Linux only; a negative n needs CAP_SYS_NICE, and
// StartLeanReceiver fails without it). With a negative n the receiver
// reads requests as they come although the processes sending them keep
// both cores busy, so its arrival times stay close to the kernel's receive
// timestamps instead of including its own wait for a CPU; on a machine
// whose cores it shares with the senders it takes that CPU from them, and
// their requests reach the socket later (docs/performance.md, stop 51).
// 0 leaves the workers as goroutines on Go's threads.
func WithNice(n int) LeanOption { return func(o *leanOptions) { o.nice = n } }
