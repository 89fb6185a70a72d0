package agent

import (
	"sync"
	"unicode/utf8"
)

// cappedOutput collects a run's stdout and stderr, keeping the first max
// bytes and remembering whether more was written. Writes never fail, so a
// handler is not disturbed by the cap. It is safe for concurrent writers,
// and readers can follow it live (ReadFrom) until it is closed.
type cappedOutput struct {
	mu        sync.Mutex
	max       int
	buf       []byte
	truncated bool
	closed    bool
	changed   chan struct{} // closed (and replaced) when buf grows or the output closes
}

func newCappedOutput(max int) *cappedOutput {
	return &cappedOutput{max: max, changed: make(chan struct{})}
}

// Write keeps what fits under the cap and reports the whole of p written.
func (o *cappedOutput) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	room := o.max - len(o.buf)
	n := len(o.buf)
	if len(p) > room {
		o.truncated = true
		o.buf = append(o.buf, p[:max(room, 0)]...)
	} else {
		o.buf = append(o.buf, p...)
	}
	if len(o.buf) != n {
		o.wakeLocked()
	}
	return len(p), nil
}

func (o *cappedOutput) wakeLocked() {
	close(o.changed)
	o.changed = make(chan struct{})
}

// Close marks the output complete; followers stop after reading the rest.
func (o *cappedOutput) Close() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.closed {
		o.closed = true
		o.wakeLocked()
	}
}

// ReadFrom returns a copy of the kept output from offset on, whether the
// output is complete, and a channel closed when there is more to read.
func (o *cappedOutput) ReadFrom(offset int) (chunk []byte, done bool, more <-chan struct{}) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if offset < len(o.buf) {
		chunk = append([]byte(nil), o.buf[offset:]...)
	}
	return chunk, o.closed, o.changed
}

// Result returns the kept output and whether some was dropped. A multi-byte
// character cut by the cap is removed so the output stays valid UTF-8.
func (o *cappedOutput) Result() (string, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	b := o.buf
	if o.truncated {
		b = trimPartialRune(b)
	}
	return string(b), o.truncated
}

// trimPartialRune drops an incomplete UTF-8 sequence at the end of b.
func trimPartialRune(b []byte) []byte {
	for i := 1; i <= utf8.UTFMax && i <= len(b); i++ {
		c := b[len(b)-i]
		if c < utf8.RuneSelf {
			return b // ASCII: nothing is cut
		}
		if utf8.RuneStart(c) {
			if !utf8.FullRune(b[len(b)-i:]) {
				return b[:len(b)-i]
			}
			return b
		}
	}
	return b
}
