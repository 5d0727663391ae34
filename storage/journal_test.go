package storage

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
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
	segs, _ := segments(dir)
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
	segs, _ = segments(dir)
	if len(segs) != 1 || segs[0] != j.seg {
		t.Fatalf("after release: segments %v, current %d", segs, j.seg)
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
	whole, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
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
		{"empty", nil, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := parseSegment(c.raw)
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
		total := 0
		for _, r := range parseSegment(raw) {
			total += journalFrame + len(r)
		}
		if total > len(raw) {
			t.Fatalf("records span %d bytes of %d", total, len(raw))
		}
	})
}
