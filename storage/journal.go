package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// Journal is a group-committed append-only log: a record is durable when
// Append returns, and records appended concurrently share one write and
// one fdatasync. It makes small, frequent writes durable without a bbolt
// commit each (which rewrites whole pages of every bucket it touches and
// flushes twice); the owner applies the records to its database later,
// in commits it makes anyway, and then releases them.
//
// Records live in segment files (journal-<n>.log) in one directory. Each
// record carries the owner's sequence number; a segment is removed once it
// is no longer the one appended to and the owner has released every
// sequence number in it (ReleaseThrough). On start the owner reads what is left
// (ReadJournal), applies it durably, and only then opens the journal,
// which removes the old segments.
//
// A record is framed as length (uint32) ‖ CRC-32C of the payload
// (uint32) ‖ payload, little-endian. A torn tail (a crash during a write
// that was never acknowledged) ends the reading of its segment.
type Journal struct {
	dir     string
	maxSize int64

	mu      sync.Mutex
	f       *os.File
	seg     uint64
	size    int64
	maxSeq  map[uint64]uint64 // segment → the greatest sequence number in it
	queue   []*JournalTicket
	running bool
	err     error // a failed write or flush: the journal refuses further appends
}

// JournalTicket is an enqueued record; Wait returns once it is durable.
type JournalTicket struct {
	j    *Journal
	rec  []byte
	seq  uint64
	done chan error
}

// ErrJournalRecord refuses a record the frame cannot hold (or an empty one).
var ErrJournalRecord = errors.New("journal record too large")

const (
	journalFrame    = 8
	journalMaxRec   = 64 << 20
	journalSegBytes = 16 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func segmentName(n uint64) string { return fmt.Sprintf("journal-%016x.log", n) }

// segments lists dir's segment numbers in order.
func segments(dir string) ([]uint64, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read journal directory: %w", err)
	}
	var out []uint64
	for _, e := range entries {
		name := e.Name()
		if !strings.HasPrefix(name, "journal-") || !strings.HasSuffix(name, ".log") {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(name, "journal-"), ".log"), 16, 64)
		if err != nil {
			continue
		}
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out, nil
}

// ReadJournal returns the records left in dir, oldest first.
func ReadJournal(dir string) ([][]byte, error) {
	segs, err := segments(dir)
	if err != nil {
		return nil, err
	}
	var out [][]byte
	for _, n := range segs {
		raw, err := os.ReadFile(filepath.Join(dir, segmentName(n)))
		if err != nil {
			return nil, fmt.Errorf("read journal segment: %w", err)
		}
		out = append(out, parseSegment(raw)...)
	}
	return out, nil
}

// parseSegment splits a segment into its records, stopping at the first
// frame that is incomplete or fails its checksum.
func parseSegment(raw []byte) [][]byte {
	var out [][]byte
	for len(raw) >= journalFrame {
		n := binary.LittleEndian.Uint32(raw)
		sum := binary.LittleEndian.Uint32(raw[4:])
		// An empty record is never written: zeros are no record.
		if n == 0 || n > journalMaxRec || int64(len(raw)-journalFrame) < int64(n) {
			break
		}
		rec := raw[journalFrame : journalFrame+int(n)]
		if crc32.Checksum(rec, castagnoli) != sum {
			break
		}
		out = append(out, append([]byte(nil), rec...))
		raw = raw[journalFrame+int(n):]
	}
	return out
}

// OpenJournal removes dir's old segments (the caller has applied them)
// and starts a new one.
func OpenJournal(dir string) (*Journal, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create journal directory: %w", err)
	}
	segs, err := segments(dir)
	if err != nil {
		return nil, err
	}
	j := &Journal{dir: dir, maxSize: journalSegBytes, maxSeq: map[uint64]uint64{}}
	next := uint64(1)
	if len(segs) > 0 {
		next = segs[len(segs)-1] + 1
	}
	if err := j.rotate(next); err != nil {
		return nil, err
	}
	for _, n := range segs {
		if err := os.Remove(filepath.Join(dir, segmentName(n))); err != nil {
			return nil, fmt.Errorf("remove applied journal segment: %w", err)
		}
	}
	return j, syncDir(dir)
}

// rotate starts segment n; the caller holds no appends in flight.
func (j *Journal) rotate(n uint64) error {
	f, err := os.OpenFile(filepath.Join(j.dir, segmentName(n)), os.O_CREATE|os.O_EXCL|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("create journal segment: %w", err)
	}
	if err := syncDir(j.dir); err != nil {
		f.Close()
		return err
	}
	if j.f != nil {
		j.f.Close()
	}
	j.f, j.seg, j.size = f, n, 0
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open journal directory: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync journal directory: %w", err)
	}
	return nil
}

// Append makes rec durable; seq orders it for ReleaseThrough.
func (j *Journal) Append(rec []byte, seq uint64) error {
	t, err := j.Enqueue(rec, seq)
	if err != nil {
		return err
	}
	return t.Wait()
}

// Enqueue queues rec behind every record enqueued before it (records
// reach the file in the order they were enqueued, so a caller holding its
// own lock around Enqueue orders them as it orders its state); Wait on the
// ticket makes it durable.
func (j *Journal) Enqueue(rec []byte, seq uint64) (*JournalTicket, error) {
	if len(rec) == 0 || len(rec) > journalMaxRec {
		return nil, ErrJournalRecord
	}
	t := &JournalTicket{j: j, rec: rec, seq: seq, done: make(chan error, 1)}
	j.mu.Lock()
	j.queue = append(j.queue, t)
	j.mu.Unlock()
	return t, nil
}

// Wait returns once the ticket's record is durable (or could not be made
// so). The first waiter finding no flush in flight writes and flushes
// everything queued, its own record and others'; records queued meanwhile
// go in the next flush.
func (t *JournalTicket) Wait() error {
	j := t.j
	j.mu.Lock()
	if j.running {
		j.mu.Unlock()
		return <-t.done
	}
	j.running = true
	for len(j.queue) > 0 {
		group := j.queue
		j.queue = nil
		err := j.err
		if err == nil && j.size >= j.maxSize {
			err = j.rotate(j.seg + 1)
		}
		f, seg := j.f, j.seg
		if err == nil {
			for _, c := range group {
				j.maxSeq[seg] = max(j.maxSeq[seg], c.seq)
			}
		}
		// Written outside the lock, so records queued meanwhile wait for
		// the next flush rather than for this one's lock.
		j.mu.Unlock()
		var n int64
		if err == nil {
			n, err = writeGroup(f, group)
		}
		j.mu.Lock()
		j.size += n
		if err != nil {
			// Whatever reached the file is not acknowledged; a later
			// append must not make it look so.
			j.err = fmt.Errorf("journal: %w", err)
		}
		for _, c := range group {
			c.done <- err
		}
	}
	j.running = false
	j.mu.Unlock()
	return <-t.done
}

func writeGroup(f *os.File, group []*JournalTicket) (int64, error) {
	size := 0
	for _, c := range group {
		size += journalFrame + len(c.rec)
	}
	buf := make([]byte, 0, size)
	for _, c := range group {
		buf = binary.LittleEndian.AppendUint32(buf, uint32(len(c.rec)))
		buf = binary.LittleEndian.AppendUint32(buf, crc32.Checksum(c.rec, castagnoli))
		buf = append(buf, c.rec...)
	}
	if _, err := f.Write(buf); err != nil {
		return int64(size), fmt.Errorf("write: %w", err)
	}
	if err := fdatasync(f); err != nil {
		return int64(size), fmt.Errorf("flush: %w", err)
	}
	return int64(size), nil
}

// ReleaseThrough says every record numbered up to seq is applied durably
// elsewhere: segments holding only such records, other than the one
// appended to, are removed.
func (j *Journal) ReleaseThrough(seq uint64) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for seg, m := range j.maxSeq {
		if seg != j.seg && m <= seq {
			delete(j.maxSeq, seg)
			_ = os.Remove(filepath.Join(j.dir, segmentName(seg)))
		}
	}
}

// Close closes the segment appended to; records not released stay for
// the next ReadJournal.
func (j *Journal) Close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f == nil {
		return nil
	}
	err := j.f.Close()
	j.f = nil
	if j.err == nil {
		j.err = io.ErrClosedPipe
	}
	return err
}
