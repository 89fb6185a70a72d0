package plugintest

import (
	"bytes"
	"sync"
)

// Output is a goroutine-safe io.Writer that keeps everything a handler
// writes, for passing as Run's out in tests (handlers may write from
// several goroutines, e.g. a process's stdout and stderr).
type Output struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (o *Output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.Write(p)
}

// String returns everything written so far.
func (o *Output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}
