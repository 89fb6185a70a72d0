package spool

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/cluster"
)

func results(from, to int) []cluster.RunResult {
	var rs []cluster.RunResult
	for i := from; i < to; i++ {
		rs = append(rs, cluster.RunResult{FireID: fmt.Sprintf("1-%d", i), JobID: 1, Status: cluster.StatusSuccess, Output: "out"})
	}
	return rs
}

func fireIDs(rs []cluster.RunResult) []string {
	ids := make([]string, len(rs))
	for i, r := range rs {
		ids[i] = r.FireID
	}
	return ids
}

// openNew opens a spool in a new directory.
func openNew(t *testing.T) (*Spool, string) {
	t.Helper()
	dir := t.TempDir()
	s, pending, err := Open(dir, nil)
	require.NoError(t, err)
	require.Empty(t, pending)
	return s, dir
}

// requireEmptied checks that the closed spool in dir holds nothing: a fully
// delivered log is emptied.
func requireEmptied(t *testing.T, dir string) {
	t.Helper()
	st, err := os.Stat(filepath.Join(dir, FileName))
	require.NoError(t, err)
	require.Zero(t, st.Size(), "a fully delivered log is emptied")
	_, pending, err := Open(dir, nil)
	require.NoError(t, err)
	require.Empty(t, pending)
}

func TestReopenReturnsUnackedInOrder(t *testing.T) {
	t.Parallel()
	s, dir := openNew(t)

	require.NoError(t, s.Append(results(0, 5)...))
	require.NoError(t, s.Sync())
	require.NoError(t, s.Ack(2))
	require.NoError(t, s.Append(results(5, 7)...))
	require.NoError(t, s.Ack(1))
	require.Equal(t, 4, s.Pending())
	require.NoError(t, s.Close())

	s, pending, err := Open(dir, nil)
	require.NoError(t, err)
	require.Equal(t, fireIDs(results(3, 7)), fireIDs(pending))
	require.Equal(t, 4, s.Pending())
	require.NoError(t, s.Ack(4))
	require.NoError(t, s.Close())
	requireEmptied(t, dir)
}

func TestTornTailIsIgnored(t *testing.T) {
	t.Parallel()
	s, dir := openNew(t)
	require.NoError(t, s.Append(results(0, 2)...))
	require.NoError(t, s.Close())

	// A crash in the middle of writing a third line.
	f, err := os.OpenFile(filepath.Join(dir, FileName), os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.WriteString(`R{"fire_id":"1-2","sta`)
	require.NoError(t, err)
	require.NoError(t, f.Close())

	s, pending, err := Open(dir, nil)
	require.NoError(t, err)
	require.Equal(t, []string{"1-0", "1-1"}, fireIDs(pending))
	// New lines start cleanly after the cut.
	require.NoError(t, s.Append(results(9, 10)...))
	require.NoError(t, s.Close())
	_, pending, err = Open(dir, nil)
	require.NoError(t, err)
	require.Equal(t, []string{"1-0", "1-1", "1-9"}, fireIDs(pending))
}

func TestCompactKeepsPending(t *testing.T) {
	t.Parallel()
	s, dir := openNew(t)
	require.NoError(t, s.Append(results(0, 10)...))
	require.NoError(t, s.Ack(4))
	require.NoError(t, s.compact())
	require.Equal(t, 6, s.Pending())
	require.NoError(t, s.Append(results(10, 11)...))
	require.NoError(t, s.Ack(1))
	require.NoError(t, s.Close())

	s, pending, err := Open(dir, nil)
	require.NoError(t, err)
	require.Equal(t, fireIDs(results(5, 11)), fireIDs(pending))

	// After a restart the log's results are counted from the file.
	require.NoError(t, s.Ack(2))
	require.NoError(t, s.compact())
	require.NoError(t, s.Close())
	_, pending, err = Open(dir, nil)
	require.NoError(t, err)
	require.Equal(t, fireIDs(results(7, 11)), fireIDs(pending))
}

func TestAckMoreThanPendingFails(t *testing.T) {
	t.Parallel()
	s, _ := openNew(t)
	t.Cleanup(func() { _ = s.Close() })
	require.NoError(t, s.Append(results(0, 1)...))
	require.Error(t, s.Ack(2))
}

// TestFlushThenFsyncOutsideTheOwnersLock: Flush hands what was appended to
// the file; appends may go on before the returned fsync runs, and the
// next Sync covers them.
func TestFlushThenFsyncOutsideTheOwnersLock(t *testing.T) {
	t.Parallel()
	s, dir := openNew(t)
	for _, r := range results(0, 3) {
		b, err := Encode(r)
		require.NoError(t, err)
		require.NoError(t, s.AppendEncoded(b))
	}
	fsync, err := s.Flush()
	require.NoError(t, err)
	require.NoError(t, s.Append(results(3, 5)...)) // while the fsync would run
	require.NoError(t, fsync())
	_, inFile, err := Open(dir, nil) // what the file holds now
	require.NoError(t, err)
	require.Equal(t, fireIDs(results(0, 3)), fireIDs(inFile), "flushed lines are in the file, later ones still buffered")

	require.NoError(t, s.Sync())
	require.NoError(t, s.Close())
	_, all, err := Open(dir, nil)
	require.NoError(t, err)
	require.Equal(t, fireIDs(results(0, 5)), fireIDs(all))

	nothing, err := s.Flush() // nothing written since: a no-op
	require.NoError(t, err)
	require.NoError(t, nothing())
}

func spill(t *testing.T, s *Spool, rs []cluster.RunResult) {
	t.Helper()
	for _, r := range rs {
		b, err := Encode(r)
		require.NoError(t, err)
		require.NoError(t, s.SpillEncoded(b))
	}
}

// lineBytes is the size Refill and OpenBounded count for one of results'.
func lineBytes(t *testing.T) int {
	t.Helper()
	b, err := Encode(results(0, 1)[0])
	require.NoError(t, err)
	return len(b)
}

// TestSpilledResultsComeBackInOrder: results spilled after held ones are
// read back by Refill in order, a bounded number at a time, and only held
// results can be acknowledged.
func TestSpilledResultsComeBackInOrder(t *testing.T) {
	t.Parallel()
	s, dir := openNew(t)
	require.NoError(t, s.Append(results(0, 3)...))
	spill(t, s, results(3, 10))
	require.Equal(t, 10, s.Pending())
	require.Equal(t, 7, s.Spilled())
	require.Error(t, s.Append(results(99, 100)...), "a held result cannot follow spilled ones")
	require.Error(t, s.Ack(4), "spilled results are not held, so not delivered")

	require.NoError(t, s.Ack(2))
	got, err := s.Refill(2 * lineBytes(t))
	require.NoError(t, err)
	require.Equal(t, fireIDs(results(3, 5)), fireIDs(got))
	require.Equal(t, 5, s.Spilled())
	spill(t, s, results(10, 12)) // still spilling: appended after the others
	got, err = s.Refill(0)
	require.NoError(t, err)
	require.Equal(t, fireIDs(results(5, 12)), fireIDs(got))
	require.Zero(t, s.Spilled())
	nothing, err := s.Refill(0)
	require.NoError(t, err)
	require.Empty(t, nothing)
	require.NoError(t, s.Append(results(12, 13)...), "held again once nothing is spilled")
	require.NoError(t, s.Ack(11))
	require.Equal(t, 0, s.Pending())
	require.NoError(t, s.Close())
	requireEmptied(t, dir)
}

// TestOpenBoundedHoldsTheOldest: a restart reads back only the oldest
// pending results up to the bound, visits all of them, and leaves the rest
// spilled.
func TestOpenBoundedHoldsTheOldest(t *testing.T) {
	t.Parallel()
	s, dir := openNew(t)
	require.NoError(t, s.Append(results(0, 10)...))
	require.NoError(t, s.Ack(2))
	require.NoError(t, s.Close())

	var visited []string
	s, held, err := OpenBounded(dir, nil, 3*lineBytes(t), func(r *cluster.RunResult) { visited = append(visited, r.FireID) })
	require.NoError(t, err)
	require.Equal(t, fireIDs(results(2, 5)), fireIDs(held))
	require.Equal(t, fireIDs(results(2, 10)), visited)
	require.Equal(t, 8, s.Pending())
	require.Equal(t, 5, s.Spilled())
	spill(t, s, results(10, 11))
	require.NoError(t, s.Ack(3))
	rest, err := s.Refill(0)
	require.NoError(t, err)
	require.Equal(t, fireIDs(results(5, 11)), fireIDs(rest))
	require.NoError(t, s.Ack(6))
	require.NoError(t, s.Close())
	requireEmptied(t, dir)
}

// TestCompactKeepsSpilled: compaction copies the pending lines, held and
// spilled, and Refill goes on from the right line of the new file.
func TestCompactKeepsSpilled(t *testing.T) {
	t.Parallel()
	s, dir := openNew(t)
	require.NoError(t, s.Append(results(0, 4)...))
	spill(t, s, results(4, 10))
	require.NoError(t, s.Ack(2))
	before := s.size
	require.NoError(t, s.compact())
	require.Less(t, s.size, before)
	require.Equal(t, 8, s.Pending())
	require.Equal(t, 6, s.Spilled())
	got, err := s.Refill(2 * lineBytes(t))
	require.NoError(t, err)
	require.Equal(t, fireIDs(results(4, 6)), fireIDs(got))
	require.NoError(t, s.Close())

	// The file holds what was pending: the two held, then the rest in order.
	_, all, err := Open(dir, nil)
	require.NoError(t, err)
	require.Equal(t, fireIDs(results(2, 10)), fireIDs(all))
}
