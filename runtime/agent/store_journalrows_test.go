package agent

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"slipway/storage"
)

func delta(d int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(d)) }

// TestCoalesceRows: the flush applies coalesced rows; the database they
// leave is the one the rows applied one by one leave, from the same
// start, and the rows coalescing may drop are dropped.
func TestCoalesceRows(t *testing.T) {
	put := func(b, k, v string) wbRow { return wbRow{bucket: b, mode: rowPut, key: []byte(k), val: []byte(v)} }
	del := func(b, k string) wbRow { return wbRow{bucket: b, mode: rowDelete, key: []byte(k)} }
	add := func(k string, d int64) wbRow {
		return wbRow{bucket: bThreadsCount, mode: rowAdd, key: []byte(k), val: delta(d)}
	}
	putNew := func(b, k, v string) wbRow { return wbRow{bucket: b, mode: rowPutNew, key: []byte(k), val: []byte(v)} }
	cases := []struct {
		name string
		rows []wbRow
		want int // rows left
	}{
		{"a row rewritten keeps its last value", []wbRow{put(bThreads, "t1", "a"), put(bThreads, "t1", "b"), put(bThreads, "t1", "c")}, 1},
		{"put then delete is a delete", []wbRow{put(bThreadsStatus, "idle/t1", ""), del(bThreadsStatus, "idle/t1")}, 1},
		{"delete then put is a put", []wbRow{del(bRuns, "r1"), put(bRuns, "r1", "x")}, 1},
		{"deltas are summed", []wbRow{add("busy", 1), add("idle", 1), add("busy", -1), add("busy", 1)}, 2},
		{"deltas that cancel leave nothing", []wbRow{add("busy", 1), add("busy", -1)}, 0},
		{"a put unless new keeps its key's rows", []wbRow{put(bThreads, "t1", "a"), putNew(bThreads, "t1", "b"), put(bThreads, "t1", "c"), putNew(bThreads, "t2", "d")}, 4},
		{"a put beside deltas keeps its key's rows", []wbRow{add("busy", 2), put(bThreadsCount, "busy", string(delta(7))), add("busy", 1)}, 3},
		{"a malformed delta is applied as written", []wbRow{add("busy", 1), {bucket: bThreadsCount, mode: rowAdd, key: []byte("busy"), val: []byte("x")}}, 2},
		{"checkpoint rows are all kept", []wbRow{put(bLG, "t1\x00a", "1"), put(bLG, "t1\x00a", "2"), del(bLG, "t1\x00a")}, 3},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 50 {
		var rows []wbRow
		for range 40 {
			k := fmt.Sprint("k", rng.IntN(6))
			switch rng.IntN(5) {
			case 0:
				rows = append(rows, del(bThreads, k))
			case 1:
				rows = append(rows, add(k, int64(rng.IntN(5)-2)))
			case 2:
				rows = append(rows, putNew(bRuns, k, fmt.Sprint(rng.IntN(3))))
			default:
				rows = append(rows, put([]string{bThreads, bRuns}[rng.IntN(2)], k, fmt.Sprint(rng.IntN(3))))
			}
		}
		cases = append(cases, struct {
			name string
			rows []wbRow
			want int
		}{fmt.Sprint("random ", i), rows, -1})
	}
	open := func(name string) *bolt.DB {
		db, err := storage.Open(filepath.Join(t.TempDir(), name), time.Second, Migrations)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		// The same start for both: rows coalescing must not assume absent.
		if err := db.Update(func(tx *bolt.Tx) error {
			return applyRows(tx, []wbRow{put(bThreads, "k1", "old"), put(bRuns, "k2", "old"), add("k3", 4), add("busy", 1)})
		}); err != nil {
			t.Fatal(err)
		}
		return db
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			short := coalesce(c.rows)
			if c.want >= 0 && len(short) != c.want {
				t.Errorf("%d rows left, want %d: %+v", len(short), c.want, short)
			}
			one, all := open("one"), open("all")
			errOne := one.Update(func(tx *bolt.Tx) error { return applyRows(tx, c.rows) })
			errAll := all.Update(func(tx *bolt.Tx) error { return applyRows(tx, short) })
			if (errOne == nil) != (errAll == nil) {
				t.Fatalf("one by one: %v; coalesced: %v", errOne, errAll)
			}
			a, b := dumpBuckets(t, &boltStore{db: one}), dumpBuckets(t, &boltStore{db: all})
			if fmt.Sprint(a) != fmt.Sprint(b) {
				t.Errorf("one by one left %v\ncoalesced left %v", a, b)
			}
		})
	}
}
