package store

import (
	"context"
	"sync"
	"time"

	"github.com/cronix/cronix/internal/waitctx"
)

// SQLite in WAL mode appends every page a commit changes to the WAL and
// copies the pages back into the database file in a checkpoint. By default
// the commit that takes the WAL past 1,000 pages runs the checkpoint itself
// before it returns, holding the write lock (and this process's write
// gate). At 3,000 fires per second a tick's run insert changes about 3,000
// index pages, so every insert and every results batch paid a checkpoint
// and its fsync: measured on a 2-core EPYC with 540,000 runs in the table,
// a second's 3,000 inserts and 3,000 results took 750 ms of the writer's
// time, and 480 ms with this checkpointer.
//
// A store on a SQLite file therefore checkpoints from a goroutine of its
// own, every checkpointEvery, in PASSIVE mode: it copies what no reader
// still needs and never takes the write lock, so writers go on beside it
// (it passes the write gate, see mayWrite). A commit still checkpoints when
// the WAL passes walFallbackPages, which bounds the WAL of a process whose
// checkpointer has stopped or falls behind (and of other processes on the
// same file). Durability is unchanged: a commit is durable once in the WAL.

const (
	// checkpointEvery is the checkpointer's period.
	checkpointEvery = time.Second
	// walFallbackPages is wal_autocheckpoint: about 40 MB of 4-KiB pages.
	walFallbackPages = 10000
	// passiveCheckpoint is the checkpointer's statement.
	passiveCheckpoint = "PRAGMA wal_checkpoint(PASSIVE)"
)

// startCheckpoints starts the checkpointer; s.stopCheckpoints stops it.
func (s *Store) startCheckpoints(every time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		// Off the second's burst of fires and results, as the alert
		// scanner (waitctx.OffBeat).
		last := time.Now()
		for waitctx.Until(ctx, waitctx.OffBeat(last, time.Now(), every, waitctx.HalfSecond)) {
			last = time.Now()
			// A failed pass (another process checkpointing, the store
			// closing) is the next one's to do; the fallback bounds the WAL.
			_ = s.checkpoint(ctx)
		}
	})
	s.stopCheckpoints = func() {
		cancel()
		wg.Wait()
	}
}

// checkpoint runs one passive checkpoint.
func (s *Store) checkpoint(ctx context.Context) error {
	var busy, frames, checkpointed int
	err := s.db.QueryRowContext(ctx, passiveCheckpoint).Scan(&busy, &frames, &checkpointed)
	return wrap(err, "checkpoint the WAL")
}
