// Package spool owns the node's durable queue of undelivered run results: an
// append-only file in a directory, so that results a node finished but could
// not yet hand to a server survive a restart of the node.
//
// The file is a log of two kinds of lines:
//
//	R<RunResult JSON>\n    a result was queued (appended in queue order)
//	A<n>\n                 the first n queued results were delivered
//
// Replaying the log yields the undelivered results in their original order.
// When nothing is pending the file is truncated; when it grows large while
// results are still pending, the pending ones are copied to a new file that
// atomically replaces the old one. A torn last line (a crash mid-write) is
// ignored. Losing an "A" line only causes a result to be delivered twice,
// which the server tolerates (results are idempotent by fire id).
//
// The owner holds the oldest pending results in memory and may leave the
// newest ones in the log only ("spilled"), reading them back in order with
// Refill as it delivers the others: its memory stays bounded however long
// the servers are unreachable, and so does a restart's (OpenBounded).
//
// A Spool is not safe for concurrent use; its owner (the agent's reporter)
// serialises calls.
package spool

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"

	"github.com/cronix/cronix/cluster"
)

// FileName is the name of the log file inside the spool directory.
const FileName = "results.log"

// compactAbove is the file size above which a partly delivered log is
// rewritten with only its pending results (or twice the size of the last
// rewrite, when that is more: a backlog larger than this is not copied
// again at every acknowledgement).
const compactAbove = 64 << 20

// Spool is an open result log.
type Spool struct {
	dir     string
	path    string
	f       *os.File
	w       *bufio.Writer
	log     *slog.Logger
	pending int   // results appended and not yet acked
	queued  int   // results in the file (acked or not): compaction skips queued - pending
	size    int64 // bytes in the file, including buffered ones
	dirty   bool  // buffered or written bytes not yet fsynced
	// spilled counts the newest pending results that the owner does not
	// hold; spillAt is where the line of the first of them starts (or an
	// earlier line that is not a result).
	spilled   int
	spillAt   int64
	compactAt int64 // Ack compacts above this size
}

// Open opens (creating if needed) the spool in dir and returns it together
// with every result that was queued and never acknowledged, oldest first.
// Corrupt lines are skipped and logged; only I/O errors fail Open.
func Open(dir string, logger *slog.Logger) (*Spool, []cluster.RunResult, error) {
	return OpenBounded(dir, logger, 0, nil)
}

// OpenBounded is Open returning only the oldest pending results whose
// lines add up to at most maxBytes (at least one; 0: all of them). The
// others stay spilled, for Refill. visit, if not nil, is called with each
// pending result in order, the spilled ones included.
func OpenBounded(dir string, logger *slog.Logger, maxBytes int, visit func(*cluster.RunResult)) (*Spool, []cluster.RunResult, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if dir == "" {
		return nil, nil, errors.New("spool: empty directory")
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, nil, fmt.Errorf("spool: create %s: %w", dir, err)
	}
	path := filepath.Join(dir, FileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		return nil, nil, fmt.Errorf("spool: open %s: %w", path, err)
	}
	s := &Spool{dir: dir, path: path, f: f, w: bufio.NewWriterSize(f, 64<<10), log: logger, compactAt: compactAbove}
	held, good, err := s.replay(maxBytes, visit)
	if err != nil {
		_ = f.Close()
		return nil, nil, fmt.Errorf("spool: read %s: %w", path, err)
	}
	// Cut a torn tail so new lines start on a line boundary.
	if err := f.Truncate(good); err != nil {
		_ = f.Close()
		return nil, nil, fmt.Errorf("spool: truncate torn tail of %s: %w", path, err)
	}
	if _, err := f.Seek(good, io.SeekStart); err != nil {
		_ = f.Close()
		return nil, nil, fmt.Errorf("spool: seek %s: %w", path, err)
	}
	s.size = good
	if s.pending == 0 && good > 0 {
		if err := s.reset(); err != nil {
			_ = f.Close()
			return nil, nil, err
		}
	}
	return s, held, nil
}

// line is one complete line of the log: its kind, its body (without the
// newline) and where it starts and ends in the file.
type line struct {
	kind      byte
	body      []byte
	off, next int64
}

// scan calls fn with each complete line read from r, which starts at
// offset base of the file, until fn returns false, and returns the offset
// just after the last complete line read.
func scan(r io.Reader, base int64, logger *slog.Logger, fn func(l line) bool) (int64, error) {
	br := bufio.NewReaderSize(r, 256<<10)
	off := base
	for {
		raw, err := br.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			if len(raw) > 0 {
				logger.Warn("spool: ignoring torn last line", "bytes", len(raw))
			}
			return off, nil
		}
		if err != nil {
			return off, err
		}
		l := line{kind: raw[0], body: bytes.TrimSuffix(raw[1:], []byte{'\n'}), off: off, next: off + int64(len(raw))}
		off = l.next
		if !fn(l) {
			return off, nil
		}
	}
}

// decode returns the result of an R line; false for a corrupt one, which
// every reader skips alike (it is not counted as queued).
func decode(body []byte) (cluster.RunResult, bool) {
	var res cluster.RunResult
	return res, json.Unmarshal(body, &res) == nil
}

// replay reads the log: it sets pending, spilled and spillAt, and returns
// the oldest pending results up to maxBytes (see OpenBounded) and the
// offset just after the last complete line. It reads the file twice: the
// acknowledgements further on decide which results are pending.
func (s *Spool) replay(maxBytes int, visit func(*cluster.RunResult)) ([]cluster.RunResult, int64, error) {
	queued, head, skipped := 0, 0, 0
	good, err := scan(s.f, 0, s.log, func(l line) bool {
		switch l.kind {
		case 'R':
			if _, ok := decode(l.body); !ok {
				skipped++
				return true
			}
			queued++
		case 'A':
			n, err := strconv.Atoi(string(l.body))
			if err != nil || n < 0 {
				skipped++
				return true
			}
			head = min(head+n, queued)
		default:
			skipped++
		}
		return true
	})
	if err != nil {
		return nil, 0, err
	}
	if skipped > 0 {
		s.log.Warn("spool: skipped corrupt lines", "lines", skipped)
	}
	s.queued, s.pending = queued, queued-head
	var held []cluster.RunResult
	index, size := 0, 0
	_, err = scan(io.NewSectionReader(s.f, 0, good), 0, s.log, func(l line) bool {
		if l.kind != 'R' {
			return true
		}
		res, ok := decode(l.body)
		if !ok {
			return true
		}
		index++
		if index <= head {
			return true
		}
		if visit != nil {
			visit(&res)
		}
		if s.spilled == 0 && (maxBytes <= 0 || len(held) == 0 || size+len(l.body) <= maxBytes) {
			held = append(held, res)
			size += len(l.body)
			return true
		}
		if s.spilled == 0 {
			s.spillAt = l.off
		}
		s.spilled++
		return true
	})
	if err != nil {
		return nil, 0, err
	}
	return held, good, nil
}

// Pending is the number of appended results not yet acknowledged.
func (s *Spool) Pending() int { return s.pending }

// Spilled is the number of pending results left to the log (see Spill).
func (s *Spool) Spilled() int { return s.spilled }

// Append queues results at the end of the log. They are durable after the
// next Sync.
func (s *Spool) Append(results ...cluster.RunResult) error {
	for _, r := range results {
		b, err := Encode(r)
		if err != nil {
			return err
		}
		if err := s.AppendEncoded(b); err != nil {
			return err
		}
	}
	return nil
}

// Encode encodes a result for AppendEncoded. It touches no Spool, so the
// owner can encode before taking the lock it serialises calls with.
func Encode(r cluster.RunResult) ([]byte, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("spool: encode result %s: %w", r.FireID, err)
	}
	return b, nil
}

// AppendEncoded queues one result encoded by Encode at the end of the log.
// The owner holds it; once results were spilled, it must Spill instead
// until Refill has returned them all.
func (s *Spool) AppendEncoded(b []byte) error {
	if s.spilled > 0 {
		return errors.New("spool: append of a held result after spilled ones")
	}
	if err := s.write('R', b); err != nil {
		return err
	}
	s.queued++
	s.pending++
	return nil
}

// SpillEncoded queues one result encoded by Encode at the end of the log,
// to be read back by Refill: the owner does not hold it.
func (s *Spool) SpillEncoded(b []byte) error {
	at := s.size
	if err := s.write('R', b); err != nil {
		return err
	}
	if s.spilled == 0 {
		s.spillAt = at
	}
	s.spilled++
	s.queued++
	s.pending++
	return nil
}

// Refill returns the oldest spilled results whose lines add up to at most
// maxBytes (at least one; 0: all of them), which the owner holds from then
// on, in order after the ones it held before.
func (s *Spool) Refill(maxBytes int) ([]cluster.RunResult, error) {
	if s.spilled == 0 {
		return nil, nil
	}
	if s.f == nil {
		return nil, errors.New("spool: closed")
	}
	if err := s.w.Flush(); err != nil { // the lines to read may be buffered
		return nil, fmt.Errorf("spool: write %s: %w", s.path, err)
	}
	var out []cluster.RunResult
	size := 0
	next := s.spillAt
	_, err := scan(io.NewSectionReader(s.f, s.spillAt, s.size-s.spillAt), s.spillAt, s.log, func(l line) bool {
		if l.kind == 'R' {
			res, ok := decode(l.body)
			if ok {
				if len(out) > 0 && maxBytes > 0 && size+len(l.body) > maxBytes {
					return false
				}
				out = append(out, res)
				size += len(l.body)
			}
		}
		next = l.next
		return len(out) < s.spilled
	})
	if err != nil {
		return nil, fmt.Errorf("spool: read %s: %w", s.path, err)
	}
	s.spilled -= len(out)
	s.spillAt = next
	if s.spilled > 0 && next >= s.size {
		// Fewer results than were spilled: lines damaged on disk.
		s.log.Error("spool: spilled results missing from the log", "results", s.spilled)
		s.pending -= s.spilled
		s.queued -= s.spilled
		s.spilled = 0
	}
	return out, nil
}

// Sync makes every appended line durable (flush and fsync). It does nothing
// when nothing was written since the last Sync.
func (s *Spool) Sync() error {
	fsync, err := s.Flush()
	if err != nil {
		return err
	}
	if err := fsync(); err != nil {
		s.dirty = true
		return err
	}
	return nil
}

// Flush hands every appended line to the file (write(2)) and returns the
// fsync that makes them durable. The fsync may run without the owner's
// lock while further lines are appended (group commit: it covers what was
// flushed, and possibly more); the owner must not call Ack, Close or
// Flush until it returned, since they may replace or close the file.
func (s *Spool) Flush() (fsync func() error, err error) {
	if !s.dirty {
		return func() error { return nil }, nil
	}
	if err := s.w.Flush(); err != nil {
		return nil, fmt.Errorf("spool: write %s: %w", s.path, err)
	}
	s.dirty = false
	f, path := s.f, s.path
	return func() error {
		if err := f.Sync(); err != nil {
			return fmt.Errorf("spool: fsync %s: %w", path, err)
		}
		return nil
	}, nil
}

// Ack records that the first n pending results were delivered; they must
// be results the owner held (not spilled ones). When nothing is left
// pending the log is emptied; when it is large it is compacted.
func (s *Spool) Ack(n int) error {
	if n <= 0 {
		return nil
	}
	if held := s.pending - s.spilled; n > held {
		return fmt.Errorf("spool: ack of %d results with only %d pending and held", n, held)
	}
	s.pending -= n
	if s.pending == 0 {
		return s.reset()
	}
	if err := s.write('A', []byte(strconv.Itoa(n))); err != nil {
		return err
	}
	if s.size > s.compactAt {
		return s.compact()
	}
	return nil
}

// Close flushes, fsyncs and closes the log.
func (s *Spool) Close() error {
	if s.f == nil {
		return nil
	}
	err := s.Sync()
	if cerr := s.f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("spool: close %s: %w", s.path, cerr)
	}
	s.f = nil
	return err
}

func (s *Spool) write(kind byte, body []byte) error {
	if s.f == nil {
		return errors.New("spool: closed")
	}
	if err := s.w.WriteByte(kind); err != nil {
		return fmt.Errorf("spool: write %s: %w", s.path, err)
	}
	if _, err := s.w.Write(body); err != nil {
		return fmt.Errorf("spool: write %s: %w", s.path, err)
	}
	if err := s.w.WriteByte('\n'); err != nil {
		return fmt.Errorf("spool: write %s: %w", s.path, err)
	}
	s.size += int64(len(body)) + 2
	s.dirty = true
	return nil
}

// reset empties the log: everything in it was delivered.
func (s *Spool) reset() error {
	s.w.Reset(s.f)
	if err := s.f.Truncate(0); err != nil {
		return fmt.Errorf("spool: truncate %s: %w", s.path, err)
	}
	if _, err := s.f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("spool: seek %s: %w", s.path, err)
	}
	s.size, s.queued, s.spilled, s.spillAt, s.compactAt = 0, 0, 0, 0, compactAbove
	s.dirty = false
	return nil
}

// compact copies the lines of the pending results into a new file and
// renames it over the log, so the replacement is atomic. It streams, in one
// pass: the results are not held in memory.
func (s *Spool) compact() error {
	if err := s.Sync(); err != nil {
		return err
	}
	// The pending results are the last s.pending of the log's results.
	skip := s.queued - s.pending
	if skip < 0 {
		return fmt.Errorf("spool: %s holds %d results, fewer than the %d pending", s.path, s.queued, s.pending)
	}
	tmp := s.path + ".tmp"
	nf, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o640)
	if err != nil {
		return fmt.Errorf("spool: create %s: %w", tmp, err)
	}
	fail := func(err error) error {
		_ = nf.Close()
		_ = os.Remove(tmp)
		return err
	}
	nw := bufio.NewWriterSize(nf, 256<<10)
	held := s.pending - s.spilled
	var size, spillAt int64
	var werr error
	index := 0
	if _, err := scan(io.NewSectionReader(s.f, 0, s.size), 0, s.log, func(l line) bool {
		if l.kind != 'R' {
			return true
		}
		if _, ok := decode(l.body); !ok {
			return true
		}
		index++
		if index <= skip {
			return true
		}
		if index-skip == held+1 {
			spillAt = size
		}
		if werr = nw.WriteByte('R'); werr == nil {
			if _, werr = nw.Write(l.body); werr == nil {
				werr = nw.WriteByte('\n')
			}
		}
		size += int64(len(l.body)) + 2
		return werr == nil
	}); err != nil {
		return fail(fmt.Errorf("spool: reread %s: %w", s.path, err))
	}
	if werr == nil {
		werr = nw.Flush()
	}
	if werr == nil {
		werr = nf.Sync()
	}
	if werr != nil {
		return fail(fmt.Errorf("spool: write %s: %w", tmp, werr))
	}
	if err := os.Rename(tmp, s.path); err != nil {
		return fail(fmt.Errorf("spool: replace %s: %w", s.path, err))
	}
	if _, err := nf.Seek(size, io.SeekStart); err != nil {
		// The new file is the log now; without a position, stop using it.
		_ = nf.Close()
		_ = s.f.Close()
		s.f = nil
		return fmt.Errorf("spool: seek %s: %w", s.path, err)
	}
	_ = s.f.Close()
	s.f, s.size, s.queued, s.spillAt, s.dirty = nf, size, s.pending, spillAt, false
	s.w.Reset(nf)
	s.compactAt = max(compactAbove, 2*size)
	if d, err := os.Open(s.dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}
