package agent

import (
	"bytes"
	"time"

	"github.com/google/uuid"

	"slipway/storage"
)

// bThreadTTL indexes the threads that have a TTL by the expiry they had
// when the entry was written (ttl.go):
//
//	expiry (unix ns, big-endian uint64) ‖ thread id (16 bytes) → nil
const bThreadTTL = "idx_thread_ttl"

// ttlEntry is one entry of the TTL index: a thread and the expiry it was
// indexed under, in Unix nanoseconds (0 for an expiry before 1970).
type ttlEntry struct {
	At     uint64
	Thread string
}

func ttlEntryOf(expiry time.Time, thread string) ttlEntry {
	return ttlEntry{At: uint64(max(expiry.UnixNano(), 0)), Thread: thread}
}

// ttlReads are a unit of work's reads of the TTL index.
type ttlReads interface {
	// DueTTLEntries returns up to limit entries indexed at or before
	// until, earliest first.
	DueTTLEntries(until time.Time, limit int) ([]ttlEntry, error)
	// HasTTLEntry reports whether the entry is in the index.
	HasTTLEntry(e ttlEntry) bool
}

// ttlWrites are a unit of work's writes of the TTL index. (Deleting a
// thread's record deletes its entry: DeleteThreadRecord.)
type ttlWrites interface {
	PutTTLEntry(e ttlEntry) error
	DeleteTTLEntry(e ttlEntry) error
}

func ttlKey(expiry time.Time, thread string) []byte {
	return ttlEntryKey(ttlEntryOf(expiry, thread))
}

func ttlEntryKey(e ttlEntry) []byte {
	tid := uuid.MustParse(e.Thread)
	return append(storage.U64(e.At), tid[:]...)
}

func (t *boltTx) DueTTLEntries(until time.Time, limit int) ([]ttlEntry, error) {
	end := storage.U64(uint64(max(until.UnixNano(), 0)))
	var due []ttlEntry
	c := t.tx.Bucket([]byte(bThreadTTL)).Cursor()
	for k, _ := c.First(); k != nil && len(due) < limit; k, _ = c.Next() {
		if len(k) != 24 || bytes.Compare(k[:8], end) > 0 {
			break
		}
		due = append(due, ttlEntry{At: storage.U64ToInt(k[:8]), Thread: uuid.UUID(k[8:]).String()})
	}
	return due, nil
}

func (t *boltTx) HasTTLEntry(e ttlEntry) bool {
	return t.tx.Bucket([]byte(bThreadTTL)).Get(ttlEntryKey(e)) != nil
}

func (t *boltTx) PutTTLEntry(e ttlEntry) error {
	if err := t.unconfined(); err != nil {
		return err
	}
	return t.tx.Bucket([]byte(bThreadTTL)).Put(ttlEntryKey(e), nil)
}

func (t *boltTx) DeleteTTLEntry(e ttlEntry) error {
	if err := t.unconfined(); err != nil {
		return err
	}
	return t.tx.Bucket([]byte(bThreadTTL)).Delete(ttlEntryKey(e))
}
