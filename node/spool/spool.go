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
// results are still pending, the pending ones are rewritten to a new file
// that atomically replaces the old one. A torn last line (a crash mid-write)
// is ignored. Losing an "A" line only causes a result to be delivered twice,
// which the server tolerates (results are idempotent by fire id).
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
// rewritten with only its pending results.
const compactAbove = 64 << 20

// Spool is an open result log.
type Spool struct {
	dir     string
	path    string
	f       *os.File
	w       *bufio.Writer
	log     *slog.Logger
	pending int   // results appended and not yet acked
	size    int64 // bytes in the file, including buffered ones
	dirty   bool  // buffered or written bytes not yet fsynced
}

// Open opens (creating if needed) the spool in dir and returns it together
// with the results that were queued and never acknowledged, oldest first.
// Corrupt lines are skipped and logged; only I/O errors fail Open.
func Open(dir string, logger *slog.Logger) (*Spool, []cluster.RunResult, error) {
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
	pending, good, err := replay(f, logger)
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
	s := &Spool{dir: dir, path: path, f: f, w: bufio.NewWriterSize(f, 64<<10), log: logger,
		pending: len(pending), size: good}
	if len(pending) == 0 && good > 0 {
		if err := s.reset(); err != nil {
			_ = f.Close()
			return nil, nil, err
		}
	}
	return s, pending, nil
}

// replay reads the log and returns the pending results and the offset just
// after the last complete line.
func replay(r io.Reader, logger *slog.Logger) ([]cluster.RunResult, int64, error) {
	br := bufio.NewReaderSize(r, 256<<10)
	var (
		queue   []cluster.RunResult
		head    int
		offset  int64
		skipped int
	)
	for {
		line, err := br.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			if len(line) > 0 {
				logger.Warn("spool: ignoring torn last line", "bytes", len(line))
			}
			break
		}
		if err != nil {
			return nil, 0, err
		}
		offset += int64(len(line))
		body := bytes.TrimSuffix(line[1:], []byte{'\n'})
		switch line[0] {
		case 'R':
			var res cluster.RunResult
			if err := json.Unmarshal(body, &res); err != nil {
				skipped++
				continue
			}
			queue = append(queue, res)
		case 'A':
			n, err := strconv.Atoi(string(body))
			if err != nil || n < 0 {
				skipped++
				continue
			}
			head = min(head+n, len(queue))
		default:
			skipped++
		}
	}
	if skipped > 0 {
		logger.Warn("spool: skipped corrupt lines", "lines", skipped)
	}
	return append([]cluster.RunResult(nil), queue[head:]...), offset, nil
}

// Pending is the number of appended results not yet acknowledged.
func (s *Spool) Pending() int { return s.pending }

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
func (s *Spool) AppendEncoded(b []byte) error {
	if err := s.write('R', b); err != nil {
		return err
	}
	s.pending++
	return nil
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

// Ack records that the first n pending results were delivered. When nothing
// is left pending the log is emptied; when it is large it is compacted.
func (s *Spool) Ack(n int) error {
	if n <= 0 {
		return nil
	}
	if n > s.pending {
		return fmt.Errorf("spool: ack of %d results with only %d pending", n, s.pending)
	}
	s.pending -= n
	if s.pending == 0 {
		return s.reset()
	}
	if err := s.write('A', []byte(strconv.Itoa(n))); err != nil {
		return err
	}
	if s.size > compactAbove {
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
	s.size = 0
	s.dirty = false
	return nil
}

// compact rewrites the pending results into a new file and renames it over
// the log, so the replacement is atomic.
func (s *Spool) compact() error {
	if err := s.Sync(); err != nil {
		return err
	}
	if _, err := s.f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("spool: seek %s: %w", s.path, err)
	}
	pending, _, err := replay(s.f, s.log)
	if err != nil {
		return fmt.Errorf("spool: reread %s: %w", s.path, err)
	}
	tmp := s.path + ".tmp"
	nf, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o640)
	if err != nil {
		return fmt.Errorf("spool: create %s: %w", tmp, err)
	}
	old := s.f
	s.f, s.size, s.pending, s.dirty = nf, 0, 0, false
	s.w.Reset(nf)
	fail := func(err error) error {
		_ = nf.Close()
		_ = os.Remove(tmp)
		s.f = old
		s.w.Reset(old)
		// Positions are re-derived from the old file, which is intact.
		if end, serr := old.Seek(0, io.SeekEnd); serr == nil {
			s.size = end
		}
		s.pending = len(pending)
		return err
	}
	if err := s.Append(pending...); err != nil {
		return fail(err)
	}
	if err := s.Sync(); err != nil {
		return fail(err)
	}
	if err := os.Rename(tmp, s.path); err != nil {
		return fail(fmt.Errorf("spool: replace %s: %w", s.path, err))
	}
	_ = old.Close()
	if d, err := os.Open(s.dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}
