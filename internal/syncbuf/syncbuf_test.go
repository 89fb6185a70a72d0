package syncbuf_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/internal/syncbuf"
)

// TestConcurrentWritesAreKept: writes from many goroutines, read while they
// run (the race detector checks the locking), all arrive whole.
func TestConcurrentWritesAreKept(t *testing.T) {
	var b syncbuf.Buffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				_, _ = b.Write([]byte("line\n"))
				_ = b.String()
			}
		})
	}
	wg.Wait()
	require.Equal(t, 800, strings.Count(b.String(), "line\n"))
}
