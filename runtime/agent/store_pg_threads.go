package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/google/uuid"
)

// pgMetas are a record's metadata posting prefixes (the bbolt store's
// postings, metaPrefix), sorted: the GIN-indexed column filters compare.
func pgMetas(md map[string]any) [][]byte {
	metas := [][]byte{}
	for k, v := range md {
		if enc, ok := metaIndexable(k, v); ok {
			metas = append(metas, metaPrefix(k, enc))
		}
	}
	slices.SortFunc(metas, bytes.Compare)
	return metas
}

func (t *pgTx) GetThread(id string) (*threadRecord, error) {
	raw, err := t.body("get thread", "select body from threads where thread_id = $1", id)
	if err != nil {
		return nil, err
	}
	return decodeThread(raw)
}

func (t *pgTx) ThreadExists(id string) bool {
	var one int
	return t.one("thread exists", "select 1 from threads where thread_id = $1", []any{id}, &one) == nil
}

func (t *pgTx) ThreadQueue(id string) (string, []string, error) {
	var active string
	var queue []string
	if err := t.one("thread queue", "select active, queue from threads where thread_id = $1", []any{id}, &active, &queue); err != nil {
		return "", nil, err
	}
	if len(queue) == 0 {
		queue = nil
	}
	return active, queue, nil
}

func (t *pgTx) ThreadGraph(id string) (string, map[string]any, error) {
	raw, err := t.body("thread graph", "select body from threads where thread_id = $1", id)
	if err != nil {
		return "", nil, err
	}
	var r struct {
		Graph    string         `json:"graph"`
		Metadata map[string]any `json:"metadata"`
	}
	if err := unmarshalStored(raw, &r); err != nil {
		return "", nil, fmt.Errorf("decode thread: %w", err)
	}
	return r.Graph, r.Metadata, nil
}

// eachThread calls fn for the threads a keyset query selects, in id
// order, a batch at a time (fn may write the threads it is given).
func (t *pgTx) eachThread(where string, fn func(*threadRecord) error) error {
	after := ""
	for {
		ids, raws, err := t.pairs("scan threads",
			"select thread_id, body from threads where thread_id > $1"+where+" order by thread_id limit 256", after)
		if err != nil {
			return err
		}
		for _, raw := range raws {
			r, err := decodeThread(raw)
			if err != nil {
				return err
			}
			if err := fn(r); err != nil {
				return err
			}
		}
		if len(ids) < 256 {
			return nil
		}
		after = ids[len(ids)-1]
	}
}

func (t *pgTx) ForEachThread(fn func(*threadRecord) error) error { return t.eachThread("", fn) }

func (t *pgTx) CountBusy() (pending, running int, err error) {
	err = t.one("count busy threads", `select coalesce(sum(cardinality(queue)), 0), count(*) filter (where active <> '')
		from threads where busy`, nil, &pending, &running)
	return pending, running, err
}

func (t *pgTx) ForEachBusyThread(fn func(*threadRecord) error) error {
	return t.eachThread(" and busy", fn)
}

func (t *pgTx) PutThread(r *threadRecord) error {
	raw, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("put thread: %w", err)
	}
	created, updated := timeKey(r.CreatedAt), timeKey(r.UpdatedAt)
	id := []byte(r.ThreadID)
	queue := r.Queue
	if queue == nil {
		queue = []string{}
	}
	return t.exec("put thread", `insert into threads (thread_id, body, status, active, queue, busy, k_created, k_updated, k_status, metas)
		values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
		on conflict (thread_id) do update set body = excluded.body, status = excluded.status, active = excluded.active,
			queue = excluded.queue, busy = excluded.busy, k_created = excluded.k_created, k_updated = excluded.k_updated,
			k_status = excluded.k_status, metas = excluded.metas`,
		r.ThreadID, raw, r.Status, r.Active, queue, r.Active != "" || len(r.Queue) > 0,
		cat(created, id), cat(updated, id), cat([]byte(r.Status), []byte{0}, created, id), pgMetas(r.Metadata))
}

func (t *pgTx) DeleteThreadRecord(id string) error {
	raw, err := t.body("delete thread", "select body from threads where thread_id = $1", id)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if bytes.Contains(raw, []byte(`"ttl_policy"`)) {
		if err := t.unconfined(); err != nil {
			return err // its TTL entry is not the thread's own row
		}
		var r struct {
			TTL *ttlPolicy `json:"ttl_policy"`
		}
		if err := unmarshalStored(raw, &r); err != nil {
			return fmt.Errorf("delete thread: %w", err)
		}
		if r.TTL != nil {
			if err := t.DeleteTTLEntry(ttlEntryOf(r.TTL.Indexed, id)); err != nil {
				return err
			}
		}
	}
	return t.exec("delete thread", "delete from threads where thread_id = $1", id)
}

// pgSearch is a search planned as the bbolt store plans it (its indexed
// filters and residual ones split by metaIndexable), over one table:
// where and args select by the indexed filters, order is a column of
// bbolt index keys; residual tests the rest on decoded records, at most
// maxResidualScan of them, so a search answers (or is refused) exactly
// as on bbolt.
// decodeAll decodes a page of records' bodies.
func decodeAll[T any](raws [][]byte, decode func([]byte) (*T, error)) ([]T, error) {
	out := make([]T, 0, len(raws))
	for _, raw := range raws {
		v, err := decode(raw)
		if err != nil {
			return nil, err
		}
		out = append(out, *v)
	}
	return out, nil
}

// metadata filters on the metadata pairs the "metas" GIN index holds
// (scalar values, as the bbolt store's postings) and returns the others,
// which the search tests on each record (residual).
func (s *pgSearch) metadata(md map[string]any) (residual map[string]any) {
	residual = map[string]any{}
	var metas [][]byte
	for k, v := range md {
		if enc, ok := metaIndexable(k, v); ok {
			metas = append(metas, metaPrefix(k, enc))
		} else {
			residual[k] = v
		}
	}
	if len(metas) > 0 {
		s.filter("metas @> $%d", metas)
	}
	return residual
}

type pgSearch struct {
	table, id, where, order string
	args                    []any
	desc                    bool
	residual                func(raw []byte) (bool, error) // nil: none
	refuse                  func() error                   // the error past maxResidualScan
}

// filter adds an indexed filter on the next argument.
func (q *pgSearch) filter(cond string, arg any) {
	q.args = append(q.args, arg)
	q.where += fmt.Sprintf(" and "+cond, len(q.args))
}

// page returns the bodies of the selected records, in order, skipping
// offset, at most limit (0: all).
func (q *pgSearch) page(t *pgTx, offset, limit int) ([][]byte, error) {
	order := q.order
	if q.desc {
		order += " desc"
	}
	sql := "select " + q.id + ", body from " + q.table + " where true" + q.where + " order by " + order
	if q.residual == nil {
		if offset > 0 {
			sql += fmt.Sprintf(" offset %d", offset)
		}
		if limit > 0 {
			sql += fmt.Sprintf(" limit %d", limit)
		}
		_, raws, err := t.pairs("search "+q.table, sql, q.args...)
		return raws, err
	}
	// Residual filters: the candidates in order, a batch at a time (the
	// order column is unique: it ends with the id), decoded and tested
	// as the bbolt store does, at most maxResidualScan of them.
	var out [][]byte
	var after any
	decoded := 0
	for {
		args, cond := q.args, ""
		if after != nil {
			args = append(append([]any{}, q.args...), after)
			cmp := ">"
			if q.desc {
				cmp = "<"
			}
			cond = fmt.Sprintf(" and %s %s $%d", q.order, cmp, len(args))
		}
		keys, raws, err := t.keyed("search "+q.table, "select "+q.order+", body from "+q.table+" where true"+q.where+cond+
			" order by "+order+fmt.Sprintf(" limit %d", pgBatch), args...)
		if err != nil {
			return nil, err
		}
		for _, raw := range raws {
			if decoded++; decoded > maxResidualScan {
				return nil, q.refuse()
			}
			ok, err := q.residual(raw)
			if err != nil {
				return nil, err
			}
			if !ok {
				continue
			}
			if offset > 0 {
				offset--
				continue
			}
			out = append(out, raw)
			if limit > 0 && len(out) == limit {
				return out, nil
			}
		}
		if len(raws) < pgBatch {
			return out, nil
		}
		// The next batch after the last key (a text id column takes a
		// string, a bytea key column bytes).
		if last := keys[len(keys)-1]; q.order == q.id {
			after = string(last)
		} else {
			after = last
		}
	}
}

// keyed reads a query's (key, body) rows, keys as bytes.
func (t *pgTx) keyed(what, sql string, args ...any) ([][]byte, [][]byte, error) {
	if t.err != nil {
		return nil, nil, t.err
	}
	rows, err := t.tx.Query(t.ctx, sql, args...)
	if err != nil {
		return nil, nil, t.fail(what, err)
	}
	defer rows.Close()
	var keys, bodies [][]byte
	for rows.Next() {
		var k, b []byte
		if err := rows.Scan(&k, &b); err != nil {
			return nil, nil, t.fail(what, err)
		}
		keys, bodies = append(keys, k), append(bodies, b)
	}
	return keys, bodies, t.fail(what, rows.Err())
}

// count counts the selected records (the bbolt store's count: the
// residual bound applies as to a search).
func (q *pgSearch) count(t *pgTx) (int, error) {
	if q.residual == nil {
		var n int
		err := t.one("count "+q.table, "select count(*) from "+q.table+" where true"+q.where, q.args, &n)
		return n, err
	}
	raws, err := q.page(t, 0, 0)
	return len(raws), err
}

func (t *pgTx) threadSearch(f ThreadFilter) *pgSearch {
	q := &pgSearch{table: "threads", id: "thread_id", desc: f.Desc, refuse: errResidualScan}
	switch f.SortBy {
	case "thread_id":
		q.order = "thread_id"
	case "updated_at":
		q.order = "k_updated"
	case "status":
		q.order = "k_status"
	default:
		q.order = "k_created"
	}
	if f.Status != "" {
		q.filter("status = $%d", f.Status)
	}
	residual := q.metadata(f.Metadata)
	if len(residual) > 0 || len(f.Values) > 0 {
		q.residual = func(raw []byte) (bool, error) {
			r, err := decodeThread(raw)
			if err != nil {
				return false, err
			}
			return matches(r.Metadata, residual) && matches(r.Values, f.Values), nil
		}
	}
	return q
}

// threadsByIDs serves a search with ids as the bbolt store does: point
// lookups, every filter tested, sorted in memory.
func (t *pgTx) threadsByIDs(f ThreadFilter) ([]*threadRecord, error) {
	var out []*threadRecord
	seen := map[string]bool{}
	for _, id := range f.IDs {
		if seen[id] {
			continue
		}
		seen[id] = true
		r, err := t.GetThread(id)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if (f.Status == "" || r.Status == f.Status) && matches(r.Metadata, f.Metadata) && matches(r.Values, f.Values) {
			out = append(out, r)
		}
	}
	key := func(r *threadRecord) []byte {
		return sortKey(f.SortBy, r.ThreadID, timeKey(r.CreatedAt), timeKey(r.UpdatedAt), r.Status)
	}
	slices.SortFunc(out, func(a, b *threadRecord) int {
		if f.Desc {
			return bytes.Compare(key(b), key(a))
		}
		return bytes.Compare(key(a), key(b))
	})
	return out, nil
}

func (t *pgTx) SearchThreads(f ThreadFilter) ([]*threadRecord, error) {
	if len(f.IDs) > 0 {
		all, err := t.threadsByIDs(f)
		return page(all, f.Offset, f.Limit), err
	}
	raws, err := t.threadSearch(f).page(t, f.Offset, f.Limit)
	if err != nil {
		return nil, err
	}
	out := make([]*threadRecord, 0, len(raws))
	for _, raw := range raws {
		r, err := decodeThread(raw)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

func (t *pgTx) CountThreads(f ThreadFilter) (int, error) {
	if len(f.IDs) > 0 {
		all, err := t.threadsByIDs(f)
		return len(all), err
	}
	f.SortBy = "" // any order counts the same
	return t.threadSearch(f).count(t)
}

// pgUUID parses a thread or run id for the uuid-keyed tables; a malformed
// one names nothing there.
func pgUUID(id string) (uuid.UUID, error) {
	u, err := uuid.Parse(id)
	if err != nil {
		return u, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	return u, nil
}
