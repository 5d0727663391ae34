package storage

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

func TestJournalAppendReadRelease(t *testing.T) {
	dir := t.TempDir()
	j, err := OpenJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	j.maxSize = 64 // a new segment every few records
	// Half the records one after another (a segment fills every few),
	// half at once (they share flushes). Record i has sequence i+1.
	var wg sync.WaitGroup
	appendOne := func(i int) {
		if err := j.Append(fmt.Appendf(nil, "record %02d", i), uint64(i+1)); err != nil {
			t.Error(err)
		}
	}
	for i := range 20 {
		appendOne(i)
	}
	for i := 20; i < 40; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			appendOne(i)
		}()
	}
	wg.Wait()
	recs, err := ReadJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 40 {
		t.Fatalf("read %d records, want 40", len(recs))
	}
	seen := map[string]bool{}
	for _, r := range recs {
		seen[string(r)] = true
	}
	if len(seen) != 40 {
		t.Fatalf("records not distinct: %d", len(seen))
	}
	// The first 20 went in order: the first records are theirs.
	if string(recs[0]) != "record 00" || string(recs[19]) != "record 19" {
		t.Fatalf("order: %q … %q", recs[0], recs[19])
	}
	segs, _, _ := segments(dir)
	if len(segs) < 4 {
		t.Fatalf("want rotation into several segments, have %v", segs)
	}
	// Releasing through 10 removes the segments holding only 1..10.
	j.ReleaseThrough(10)
	left, err := ReadJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) >= 40 || len(left) < 30 || string(left[len(left)-1]) != string(recs[39]) {
		t.Fatalf("after releasing through 10: %d records left", len(left))
	}
	for _, r := range left[:len(left)-30] {
		if string(r) > "record 10" {
			t.Fatalf("a released segment held %q", r)
		}
	}
	// Releasing everything removes every segment but the current one.
	j.ReleaseThrough(40)
	segs, spares, _ := segments(dir)
	if len(segs) != 1 || segs[0].n != j.seg {
		t.Fatalf("after release: segments %v, current %d", segs, j.seg)
	}
	if len(spares) != journalSpares {
		t.Fatalf("after release: spares %v, want %d kept", spares, journalSpares)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if err := j.Append([]byte("late"), 41); err == nil {
		t.Fatal("append after Close succeeded")
	}
}

func TestJournalReopenDropsAppliedSegments(t *testing.T) {
	dir := t.TempDir()
	j, err := OpenJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{"a", "b", "c"} {
		if err := j.Append([]byte(r), 1); err != nil {
			t.Fatal(err)
		}
	}
	j.Close()
	recs, err := ReadJournal(dir)
	if err != nil || len(recs) != 3 || string(recs[2]) != "c" {
		t.Fatalf("records %q, %v", recs, err)
	}
	j2, err := OpenJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer j2.Close()
	if recs, _ := ReadJournal(dir); len(recs) != 0 {
		t.Fatalf("reopened journal still holds %q", recs)
	}
	if err := j2.Append([]byte("d"), 1); err != nil {
		t.Fatal(err)
	}
	if recs, _ := ReadJournal(dir); len(recs) != 1 || string(recs[0]) != "d" {
		t.Fatalf("records after reopen %q", recs)
	}
}

// A crash during a write leaves a torn or garbled tail: the records
// before it are read, nothing after.
func TestJournalTornTail(t *testing.T) {
	dir := t.TempDir()
	j, err := OpenJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{"first", "second"} {
		if err := j.Append([]byte(r), 1); err != nil {
			t.Fatal(err)
		}
	}
	j.Close()
	path := filepath.Join(dir, segmentName(j.seg))
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// The segment is a zeroed chunk; its records are at the start.
	if len(raw) != journalChunk {
		t.Fatalf("segment is %d bytes, want one chunk (%d)", len(raw), journalChunk)
	}
	whole := raw[:2*journalFrame+len("first")+len("second")]
	// The same records framed for another segment: what a reused
	// segment holds after its new records.
	stale := append([]byte{}, whole...)
	binary.LittleEndian.PutUint32(stale[4:], frameSum(j.seg+7, []byte("first")))
	cases := []struct {
		name string
		raw  []byte
		want int
	}{
		{"whole", whole, 2},
		{"torn in the second frame", whole[:len(whole)-3], 1},
		{"torn in the second header", whole[:journalFrame+len("first")+4], 1},
		{"second payload flipped", append(append([]byte{}, whole[:len(whole)-1]...), whole[len(whole)-1]^1), 1},
		{"zeros after", append(append([]byte{}, whole...), make([]byte, 64)...), 2},
		{"an older segment's records after", append(append([]byte{}, whole...), stale...), 2},
		{"framed for another segment", stale, 0},
		{"empty", nil, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := parseSegment(c.raw, segFile{n: j.seg}.checksum)
			if len(got) != c.want {
				t.Fatalf("read %d records, want %d", len(got), c.want)
			}
			if c.want > 0 && !bytes.Equal(got[0], []byte("first")) {
				t.Fatalf("first record %q", got[0])
			}
		})
	}
}

func FuzzParseSegment(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{5, 0, 0, 0, 0, 0, 0, 0, 'h', 'e', 'l', 'l', 'o'})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 1, 2, 3, 4})
	f.Fuzz(func(t *testing.T, raw []byte) {
		for _, seg := range []segFile{{n: 1}, {n: 1, legacy: true}} {
			total := 0
			for _, r := range parseSegment(raw, seg.checksum) {
				total += journalFrame + len(r)
			}
			if total > len(raw) {
				t.Fatalf("records span %d bytes of %d", total, len(raw))
			}
		}
	})
}

// A retired segment is reused by the next rotation: no file is created,
// and reading the reused segment returns its new records only, not the
// older ones still in its bytes after them.
func TestJournalReusesSegments(t *testing.T) {
	dir := t.TempDir()
	j, err := OpenJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	j.maxSize = 64
	for i := range 12 {
		if err := j.Append(fmt.Appendf(nil, "old record %02d", i), uint64(i+1)); err != nil {
			t.Fatal(err)
		}
	}
	j.ReleaseThrough(12)
	_, spares, _ := segments(dir)
	if len(spares) != journalSpares {
		t.Fatalf("spares %v", spares)
	}
	reused := filepath.Join(dir, spares[0])
	before, err := os.Stat(reused)
	if err != nil {
		t.Fatal(err)
	}
	// Fill the current segment: the next append rotates into the spare.
	for i := 12; i < 20 && len(j.spares) == journalSpares; i++ {
		if err := j.Append([]byte("n"), uint64(i+1)); err != nil {
			t.Fatal(err)
		}
	}
	if len(j.spares) != journalSpares-1 {
		t.Fatalf("no spare was reused: %v", j.spares)
	}
	after, err := os.Stat(filepath.Join(dir, segmentName(j.seg)))
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(before, after) {
		t.Fatal("the new segment is a new file, not the spare")
	}
	raw, err := os.ReadFile(filepath.Join(dir, segmentName(j.seg)))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(raw, []byte("old record")) {
		t.Fatal("the reused segment holds no old records: the test proves nothing")
	}
	recs := parseSegment(raw, segFile{n: j.seg}.checksum)
	if len(recs) == 0 {
		t.Fatal("the reused segment's new record was not read")
	}
	for _, r := range recs {
		if string(r) != "n" {
			t.Fatalf("a reused segment's old record was read: %q", r)
		}
	}
}

// Segments of the format before reuse (journal-<n>.log, checksums of the
// payload alone) are read, and removed once applied.
func TestJournalReadsLegacySegments(t *testing.T) {
	dir := t.TempDir()
	var raw []byte
	for _, r := range []string{"a", "bb"} {
		raw = binary.LittleEndian.AppendUint32(raw, uint32(len(r)))
		raw = binary.LittleEndian.AppendUint32(raw, crc32.Checksum([]byte(r), castagnoli))
		raw = append(raw, r...)
	}
	legacy := filepath.Join(dir, "journal-0000000000000003.log")
	if err := os.WriteFile(legacy, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	recs, err := ReadJournal(dir)
	if err != nil || len(recs) != 2 || string(recs[1]) != "bb" {
		t.Fatalf("records %q, %v", recs, err)
	}
	j, err := OpenJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if j.seg != 4 {
		t.Fatalf("new segment %d, want 4 (after the legacy one)", j.seg)
	}
	if _, err := os.Stat(legacy); !os.IsNotExist(err) {
		t.Fatalf("the applied legacy segment is still there: %v", err)
	}
}

// Flushes overlap (journalFlushes) and segments rotate under them: every
// acknowledged record is read back, each once, and in each writer's order.
func TestJournalConcurrentFlushesKeepEveryRecord(t *testing.T) {
	dir := t.TempDir()
	j, err := OpenJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	j.maxSize = 4 << 10 // a rotation every few dozen records
	const writers, each = 8, 200
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if err := j.Append(fmt.Appendf(nil, "w%d %03d", w, i), uint64(w*each+i+1)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	recs, err := ReadJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != writers*each {
		t.Fatalf("read %d records, want %d", len(recs), writers*each)
	}
	next := make([]int, writers)
	for _, r := range recs {
		var w, i int
		if _, err := fmt.Sscanf(string(r), "w%d %d", &w, &i); err != nil {
			t.Fatalf("record %q: %v", r, err)
		}
		if i != next[w] {
			t.Fatalf("writer %d: record %d read after %d", w, i, next[w]-1)
		}
		next[w]++
	}
}

// A batched waiter (a run's checkpoint) that finds a flush under way
// waits for it and goes in the next flush with the others that came
// meanwhile; a plain waiter (a run's admission) starts a flush beside it.
func TestJournalBatchedWait(t *testing.T) {
	for _, tc := range []struct {
		name        string
		wait        func(*JournalTicket) error
		waiters     int
		wantSyncs   int
		wantOverlap bool
	}{
		{"batched waiters share the next flush", (*JournalTicket).WaitBatched, 2, 2, false},
		{"a plain waiter flushes beside the one under way", (*JournalTicket).Wait, 1, 2, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			syncs, inFlight, overlap := 0, 0, false
			started, release := make(chan struct{}), make(chan struct{})
			defer func(old func(*os.File) error) { syncFile = old }(syncFile)
			syncFile = func(f *os.File) error {
				mu.Lock()
				syncs++
				first := syncs == 1
				inFlight++
				overlap = overlap || inFlight > 1
				mu.Unlock()
				if first {
					close(started)
					<-release
				}
				mu.Lock()
				inFlight--
				mu.Unlock()
				return fdatasync(f)
			}
			dir := t.TempDir()
			j, err := OpenJournal(dir)
			if err != nil {
				t.Fatal(err)
			}
			errs := make(chan error, 1+tc.waiters)
			go func() { errs <- j.Append([]byte("first"), 1) }()
			<-started
			for i := range tc.waiters {
				tk, err := j.Enqueue(fmt.Appendf(nil, "next %d", i), uint64(2+i))
				if err != nil {
					t.Fatal(err)
				}
				go func() { errs <- tc.wait(tk) }()
			}
			remaining := 1 + tc.waiters
			if !tc.wantOverlap {
				// Both waiters have decided not to flush before the first
				// flush may end.
				for {
					j.mu.Lock()
					n := j.parked
					j.mu.Unlock()
					if n == tc.waiters {
						break
					}
					mu.Lock()
					more := syncs > 1
					mu.Unlock()
					if more {
						close(release)
						t.Fatal("a batched waiter started a flush beside the one under way")
					}
					runtime.Gosched()
				}
			} else {
				// The plain waiter's own flush ends while the first's is held.
				if err := <-errs; err != nil {
					t.Fatal(err)
				}
				remaining--
			}
			close(release)
			for range remaining {
				if err := <-errs; err != nil {
					t.Fatal(err)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if syncs != tc.wantSyncs || overlap != tc.wantOverlap {
				t.Fatalf("%d flushes, overlapping %v; want %d, %v", syncs, overlap, tc.wantSyncs, tc.wantOverlap)
			}
			if err := j.Close(); err != nil {
				t.Fatal(err)
			}
			recs, err := ReadJournal(dir)
			if err != nil {
				t.Fatal(err)
			}
			if len(recs) != 1+tc.waiters {
				t.Fatalf("read %d records, want %d", len(recs), 1+tc.waiters)
			}
		})
	}
}
