package agent

import (
	"bytes"
	"fmt"
	"sort"
	"strings"

	bolt "go.etcd.io/bbolt"

	"slipway/storage"
)

// The agent database (<SLIPWAY_AGENT_DATA_DIR>/agent.db):
//
//	meta              version → schema version
//	assistants        assistant id → Assistant
//	threads           thread id → threadRecord (state, active run, queue)
//	runs              run id → runRecord
//	idx_thread_runs   thread id ‖ run id (16 bytes each) → nil
//	checkpoints       thread id ‖ uint64 seq → Checkpoint
//	store             namespace (joined by 0x1f) ‖ 0x00 ‖ key → Item
//	assistant_versions assistant id ‖ 0x00 ‖ uint32 version → Assistant (every version kept)
//	lg                language-host graphs' checkpoints (hostcheckpoints.go)
//	crons             cron id → Cron (crons.go)
//	idx_thread_ttl    expiry ‖ thread id → nil, threads with a TTL (ttl.go)
//	idx_threads_*     thread search, count and busy indexes (store_threadindex.go)
//	idx_assistants_*  assistant search and count indexes (store_assistantindex.go)
//	idx_crons_*       cron search, count, schedule indexes (store_cronindex.go)
var Migrations = []storage.Migration{
	{Version: 1, Name: "initial buckets", Apply: func(tx *bolt.Tx) error {
		return storage.CreateBuckets(tx, bAssistants, bThreads, bRuns, bThreadRuns, bCheckpoints, bStore)
	}},
	{Version: 2, Name: "assistant versions", Apply: func(tx *bolt.Tx) error {
		if err := storage.CreateBuckets(tx, bAssistantVersions); err != nil {
			return err
		}
		// Existing assistants keep their current version as their history.
		var all []Assistant
		err := tx.Bucket([]byte(bAssistants)).ForEach(func(_, v []byte) error {
			var a Assistant
			if err := unmarshalStored(v, &a); err != nil {
				return err
			}
			all = append(all, a)
			return nil
		})
		if err != nil {
			return err
		}
		for i := range all {
			if err := (&boltTx{tx: tx}).PutAssistantVersion(&all[i]); err != nil {
				return err
			}
		}
		return nil
	}},
	{Version: 3, Name: "language-host checkpoints", Apply: func(tx *bolt.Tx) error {
		return storage.CreateBuckets(tx, bLGCheckpoints, bLGBlobs, bLGWrites)
	}},
	{Version: 4, Name: "crons", Apply: func(tx *bolt.Tx) error {
		return storage.CreateBuckets(tx, bCrons)
	}},
	{Version: 5, Name: "language-host checkpoints in one bucket", Apply: mergeLGBuckets},
	{Version: 6, Name: "thread TTL index", Apply: func(tx *bolt.Tx) error {
		return storage.CreateBuckets(tx, bThreadTTL)
	}},
	{Version: 7, Name: "thread search and busy indexes", Apply: buildThreadIndexes},
	{Version: 8, Name: "assistant search indexes", Apply: buildAssistantIndexes},
	{Version: 9, Name: "cron search and schedule indexes", Apply: buildCronIndexes},
	{Version: 10, Name: "packed checkpoint rows of idle threads", Apply: func(tx *bolt.Tx) error {
		return storage.CreateBuckets(tx, bLGPacked)
	}},
}

// mergeLGBuckets moves the rows of the three buckets language-host
// checkpoints used to live in (lg_checkpoints, lg_blobs, lg_writes) into
// the one lg bucket, values unchanged (JSON rows stay readable). One
// bucket keyed by thread first keeps a thread's checkpoint, its new
// channel values and its pending writes on the same pages: a commit of a
// superstep rewrites one path of the tree, not three.
func mergeLGBuckets(tx *bolt.Tx) error {
	lg, err := tx.CreateBucketIfNotExists([]byte(bLG))
	if err != nil {
		return err
	}
	// Rows are put in key order into leaves filled full: appending is
	// bbolt's cheap case, and the new tree is as small as it can be. The
	// values stay in the old pages (valid until the commit) until put.
	type row struct{ k, v []byte }
	var rows []row
	var old [][]byte
	for _, o := range []struct{ name, kind string }{
		{bLGCheckpoints, lgKindCheckpoint}, {bLGBlobs, lgKindBlob}, {bLGWrites, lgKindWrite},
	} {
		b := tx.Bucket([]byte(o.name))
		if b == nil {
			continue
		}
		old = append(old, []byte(o.name))
		err := b.ForEach(func(k, v []byte) error {
			// thread ‖ 0 ‖ ns ‖ 0 ‖ rest: neither thread nor ns has a NUL.
			parts := strings.SplitN(string(k), "\x00", 3)
			if len(parts) != 3 {
				return fmt.Errorf("%s: malformed key", o.name)
			}
			rows = append(rows, row{append(lgKey(parts[0], parts[1], o.kind, ""), parts[2]...), v})
			return nil
		})
		if err != nil {
			return err
		}
	}
	sort.Slice(rows, func(i, j int) bool { return bytes.Compare(rows[i].k, rows[j].k) < 0 })
	lg.FillPercent = 1
	for _, r := range rows {
		if err := lg.Put(r.k, r.v); err != nil {
			return err
		}
	}
	for _, name := range old {
		if err := tx.DeleteBucket(name); err != nil {
			return err
		}
	}
	return nil
}
