package agent

import (
	"math"
	"time"
)

// pgAt is an entry's expiry as the bigint column holds it (Unix ns; the
// index's uint64 never exceeds it, timeKey's range).
func pgAt(at uint64) int64 { return int64(min(at, math.MaxInt64)) }

func (t *pgTx) DueTTLEntries(until time.Time, limit int) ([]ttlEntry, error) {
	end := pgAt(uint64(max(until.UnixNano(), 0)))
	if t.err != nil {
		return nil, t.err
	}
	rows, err := t.tx.Query(t.ctx, "select e.at, e.thread_id::text from thread_ttl e where e.at <= $1 order by e.at, e.thread_id limit $2", end, limit)
	if err != nil {
		return nil, t.fail("due TTL entries", err)
	}
	defer rows.Close()
	var due []ttlEntry
	for rows.Next() {
		var at int64
		var th string
		if err := rows.Scan(&at, &th); err != nil {
			return nil, t.fail("due TTL entries", err)
		}
		due = append(due, ttlEntry{At: uint64(at), Thread: th})
	}
	return due, t.fail("due TTL entries", rows.Err())
}

func (t *pgTx) HasTTLEntry(e ttlEntry) bool {
	if _, err := pgUUID(e.Thread); err != nil {
		return false
	}
	var one int
	return t.one("TTL entry", "select 1 from thread_ttl where at = $1 and thread_id = $2", []any{pgAt(e.At), e.Thread}, &one) == nil
}

func (t *pgTx) PutTTLEntry(e ttlEntry) error {
	if err := t.unconfined(); err != nil {
		return err
	}
	return t.exec("put TTL entry", "insert into thread_ttl (at, thread_id) values ($1, $2) on conflict do nothing", pgAt(e.At), e.Thread)
}

func (t *pgTx) DeleteTTLEntry(e ttlEntry) error {
	if err := t.unconfined(); err != nil {
		return err
	}
	return t.exec("delete TTL entry", "delete from thread_ttl where at = $1 and thread_id = $2", pgAt(e.At), e.Thread)
}
