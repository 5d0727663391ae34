package agent

import (
	"bytes"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

const bThreads = "threads"

// threadReads are a unit of work's reads of threads. A thread's record
// carries its run queue (Active, Queue): admission, dispatch and the end
// of a run change it in the same unit of work as the runs they touch.
type threadReads interface {
	// GetThread returns the thread's record, or an error wrapping
	// ErrNotFound.
	GetThread(id string) (*threadRecord, error)
	// ThreadExists reports whether the thread exists, without decoding
	// its record (whose values grow with the conversation).
	ThreadExists(id string) bool
	// ThreadQueue returns the thread's running run ("" when idle) and its
	// queued runs in order, without decoding the rest of the record (the
	// dispatcher asks after every run); ErrNotFound when it is missing.
	ThreadQueue(id string) (active string, queue []string, err error)
	// ThreadGraph returns the host graph holding the thread's state (""
	// before its first run of one) and its metadata, without decoding its
	// values; ErrNotFound when it is missing.
	ThreadGraph(id string) (graph string, metadata map[string]any, err error)
	// ForEachThread calls fn for every thread, in id order (ids are
	// UUIDv7: creation order), until fn returns an error, which it
	// returns.
	ForEachThread(fn func(*threadRecord) error) error
	// ForEachBusyThread calls fn for every thread with a running or
	// queued run, reading only those (start-up recovery, bulk cancels).
	ForEachBusyThread(fn func(*threadRecord) error) error
	// CountBusy counts the runs queued and running on every thread,
	// reading only the busy threads' queues (metrics, at each scrape).
	CountBusy() (pending, running int, err error)
	// SearchThreads returns the page of threads f selects, in its order
	// (store_threadsearch.go says which filters and sorts are indexed).
	SearchThreads(f ThreadFilter) ([]*threadRecord, error)
	// CountThreads counts the threads f selects (its limit and offset
	// ignored).
	CountThreads(f ThreadFilter) (int, error)
}

// threadWrites are a unit of work's writes of threads.
type threadWrites interface {
	// PutThread creates or replaces the thread's record.
	PutThread(t *threadRecord) error
	// DeleteThreadRecord deletes the thread's record and its TTL entry (a
	// missing thread is no error). Its runs and checkpoints are deleted
	// by their own methods.
	DeleteThreadRecord(id string) error
}

func (t *boltTx) GetThread(id string) (*threadRecord, error) {
	raw := t.read(bThreads).get([]byte(id))
	if raw == nil {
		return nil, ErrNotFound
	}
	return decodeThread(raw)
}

func (t *boltTx) ThreadExists(id string) bool {
	return t.read(bThreads).get([]byte(id)) != nil
}

func (t *boltTx) ThreadQueue(id string) (string, []string, error) {
	var q struct {
		Active string   `json:"active"`
		Queue  []string `json:"queue"`
	}
	if err := getJSON(t.read(bThreads), id, &q); err != nil {
		return "", nil, err
	}
	return q.Active, q.Queue, nil
}

func (t *boltTx) ForEachThread(fn func(*threadRecord) error) error {
	if err := t.wholeDB(); err != nil {
		return err
	}
	return t.tx.Bucket([]byte(bThreads)).ForEach(func(_, v []byte) error {
		r, err := decodeThread(v)
		if err != nil {
			return err
		}
		return fn(r)
	})
}

func (t *boltTx) CountBusy() (pending, running int, err error) {
	if err := t.wholeDB(); err != nil {
		return 0, 0, err
	}
	err = t.tx.Bucket([]byte(bThreadsBusy)).ForEach(func(k, _ []byte) error {
		active, queue, err := t.ThreadQueue(string(k))
		if err != nil {
			return nil // deleted meanwhile (a journaled write not yet applied)
		}
		pending += len(queue)
		if active != "" {
			running++
		}
		return nil
	})
	return pending, running, err
}

func (t *boltTx) ForEachBusyThread(fn func(*threadRecord) error) error {
	if err := t.wholeDB(); err != nil {
		return err
	}
	// Ids first: fn may write the threads it is given (recovery does).
	var ids []string
	err := t.tx.Bucket([]byte(bThreadsBusy)).ForEach(func(k, _ []byte) error {
		ids = append(ids, string(k))
		return nil
	})
	if err != nil {
		return err
	}
	for _, id := range ids {
		r, err := t.GetThread(id)
		if err != nil {
			return fmt.Errorf("busy thread %s: %w", id, err)
		}
		if err := fn(r); err != nil {
			return err
		}
	}
	return nil
}

func (t *boltTx) PutThread(r *threadRecord) error {
	old := storedThreadRows(t.tx, r.ThreadID, t.tx.Bucket([]byte(bThreads)).Get([]byte(r.ThreadID)))
	if err := t.reindexThread(old, indexedOf(r)); err != nil {
		return fmt.Errorf("put thread: %w", err)
	}
	if err := putJSON(t.tx.Bucket([]byte(bThreads)), r.ThreadID, r); err != nil {
		return fmt.Errorf("put thread: %w", err)
	}
	t.touched(bThreads, []byte(r.ThreadID))
	return nil
}

func (t *boltTx) DeleteThreadRecord(id string) error {
	b := t.tx.Bucket([]byte(bThreads))
	raw := b.Get([]byte(id))
	if raw != nil && bytes.Contains(raw, []byte(`"ttl_policy"`)) {
		if err := t.unconfined(); err != nil {
			return err // its TTL entry is not the thread's own row
		}
	}
	if err := dropTTLEntry(t.tx, id, raw); err != nil {
		return err
	}
	if err := t.reindexThread(storedThreadRows(t.tx, id, raw), nil); err != nil {
		return fmt.Errorf("delete thread: %w", err)
	}
	t.touched(bThreads, []byte(id))
	return b.Delete([]byte(id))
}

// dropTTLEntry deletes the index entry of a thread about to be deleted
// (raw is its record). Records without a TTL are not decoded.
func dropTTLEntry(tx *bolt.Tx, id string, raw []byte) error {
	if raw == nil || !bytes.Contains(raw, []byte(`"ttl_policy"`)) {
		return nil
	}
	var r struct {
		TTL *ttlPolicy `json:"ttl_policy"`
	}
	if err := unmarshalStored(raw, &r); err != nil || r.TTL == nil {
		return err
	}
	return tx.Bucket([]byte(bThreadTTL)).Delete(ttlKey(r.TTL.Indexed, id))
}

func (t *boltTx) ThreadGraph(id string) (string, map[string]any, error) {
	var r struct {
		Graph    string         `json:"graph"`
		Metadata map[string]any `json:"metadata"`
	}
	if err := getJSON(t.read(bThreads), id, &r); err != nil {
		return "", nil, err
	}
	return r.Graph, r.Metadata, nil
}
