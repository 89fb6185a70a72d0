package report

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRetentionRestsNineTimesItsBatch: the pause after a retention batch is
// RetentionPause for fast batches and nine times the batch's duration for
// slow ones, so retention holds the write lock at most a tenth of the time.
func TestRetentionRestsNineTimesItsBatch(t *testing.T) {
	s := &Service{}
	s.cfg.setDefaults()
	require.Equal(t, DefaultRetentionPause, s.rest(0))
	require.Equal(t, DefaultRetentionPause, s.rest(time.Millisecond))
	require.Equal(t, 90*time.Millisecond, s.rest(10*time.Millisecond))
	took := 40 * time.Millisecond
	rest := s.rest(took)
	require.LessOrEqual(t, float64(took)/float64(took+rest), 0.1)
}
