package agent

import (
	"bytes"
	"fmt"
	"slices"

	bolt "go.etcd.io/bbolt"
)

// Thread search over the indexes (store_threadindex.go). The cost of a
// search is O((offset + limit) · log n) for every sort (created_at, the
// default; updated_at; thread_id; status; both directions) and for the
// indexed filters (status; metadata entries whose value is a string,
// number or boolean; ids, by point lookups), alone or combined:
//
//   - Status and metadata postings are in created ‖ id order, so with the
//     default sort, or by status (status ‖ created ‖ id), the filters are
//     intersected by leapfrog seeks and the page is read in order.
//   - By updated_at or thread_id with filters, the intersection is
//     gathered when it has at most collectBound threads and sorted by
//     their index attributes; when larger, the sort's index is walked and
//     each thread tested against the postings by point seeks (at least
//     collectBound of n threads match, so a page is found in O(limit ·
//     n / collectBound) steps).
//
// Records are decoded only for the page, and for filters no index serves
// (values; metadata whose filter value is an object, array or null, or is
// too long): those are tested on the records the indexed filters select,
// at most maxResidualScan of them per request; a search that would decode
// more is refused (ErrInvalid) instead of scanning the database.
// maxResidualScan is a var so tests can reach it on a small database.
var maxResidualScan = 10_000

// collectBound is a var so tests can take the walking path on a small
// database.
var collectBound = 4096

// errResidualScan is a filter no index serves scanning too far.
func errResidualScan() error {
	return fmt.Errorf("%w: the values filter (or a metadata filter on an object, array, null or long value) "+
		"would read more than %d threads; narrow the search with status or metadata filters on strings, numbers or booleans",
		ErrInvalid, maxResidualScan)
}

// posting is a range of index keys sharing prefix, read in one direction;
// a doc is what follows the prefix (created ‖ id in every posting).
type posting struct {
	c      *bolt.Cursor
	prefix []byte
	desc   bool
}

func (p *posting) doc(k []byte) ([]byte, bool) {
	if k == nil || !bytes.HasPrefix(k, p.prefix) {
		return nil, false
	}
	return k[len(p.prefix):], true
}

func (p *posting) first() ([]byte, bool) {
	if !p.desc {
		k, _ := p.c.Seek(p.prefix)
		return p.doc(k)
	}
	var k []byte
	if end := prefixEnd(p.prefix); end == nil {
		k, _ = p.c.Last()
	} else if k, _ = p.c.Seek(end); k == nil {
		k, _ = p.c.Last()
	} else {
		k, _ = p.c.Prev()
	}
	return p.doc(k)
}

func (p *posting) next() ([]byte, bool) {
	var k []byte
	if p.desc {
		k, _ = p.c.Prev()
	} else {
		k, _ = p.c.Next()
	}
	return p.doc(k)
}

// seek moves to the first doc at or after d in the posting's direction.
func (p *posting) seek(d []byte) ([]byte, bool) {
	target := cat(p.prefix, d)
	k, _ := p.c.Seek(target)
	if p.desc {
		if k == nil {
			k, _ = p.c.Last()
		} else if !bytes.Equal(k, target) {
			k, _ = p.c.Prev()
		}
	}
	return p.doc(k)
}

// leapfrog calls fn with the docs every posting holds, in order, until fn
// returns false.
func leapfrog(ps []*posting, fn func(doc []byte) bool) {
	x, ok := ps[0].first()
	for ok {
		agreed := true
		for _, p := range ps[1:] {
			y, ok2 := p.seek(x)
			if !ok2 {
				return
			}
			if !bytes.Equal(y, x) {
				x, ok = ps[0].seek(y)
				agreed = false
				break
			}
		}
		if !agreed {
			continue
		}
		if !fn(x) {
			return
		}
		x, ok = ps[0].next()
	}
}

// threadQuery is a search planned over a transaction.
type threadQuery struct {
	tx       *bolt.Tx
	f        ThreadFilter
	metas    [][]byte       // postings prefixes of the indexed metadata entries
	residual map[string]any // metadata entries no posting serves
	decoded  int            // records decoded for residual filters
}

func newThreadQuery(tx *bolt.Tx, f ThreadFilter) *threadQuery {
	q := &threadQuery{tx: tx, f: f, residual: map[string]any{}}
	keys := make([]string, 0, len(f.Metadata))
	for k := range f.Metadata {
		keys = append(keys, k)
	}
	slices.Sort(keys) // a deterministic plan
	for _, k := range keys {
		if enc, ok := metaIndexable(k, f.Metadata[k]); ok {
			q.metas = append(q.metas, metaPrefix(k, enc))
		} else {
			q.residual[k] = f.Metadata[k]
		}
	}
	return q
}

func (q *threadQuery) hasResidual() bool { return len(q.residual) > 0 || len(q.f.Values) > 0 }

func (q *threadQuery) posting(bucket string, prefix []byte) *posting {
	return &posting{c: q.tx.Bucket([]byte(bucket)).Cursor(), prefix: prefix, desc: q.f.Desc}
}

func (q *threadQuery) metaPostings() []*posting {
	ps := make([]*posting, 0, len(q.metas))
	for _, m := range q.metas {
		ps = append(ps, q.posting(bThreadsMeta, m))
	}
	return ps
}

// record decodes thread id's record (nil when it is gone).
func (q *threadQuery) record(id string) (*threadRecord, error) {
	raw := q.tx.Bucket([]byte(bThreads)).Get([]byte(id))
	if raw == nil {
		return nil, nil
	}
	return decodeThread(raw)
}

// matchesAll tests every filter on a record (the ids path).
func (q *threadQuery) matchesAll(r *threadRecord) bool {
	return (q.f.Status == "" || r.Status == q.f.Status) && matches(r.Metadata, q.f.Metadata) && matches(r.Values, q.f.Values)
}

// sortKey is the byte string thread records sort by under the query's
// order: the same keys the indexes hold.
func sortKey(by string, id string, created, updated []byte, status string) []byte {
	switch by {
	case "thread_id":
		return []byte(id)
	case "updated_at":
		return cat(updated, []byte(id))
	case "status":
		return cat([]byte(status), []byte{0}, created, []byte(id))
	}
	return cat(created, []byte(id))
}

// attrs reads a thread's index attributes.
func (q *threadQuery) attrs(id []byte) (created, updated []byte, status string, ok bool) {
	a, ok := decodeThreadAttr(q.tx.Bucket([]byte(bThreadsAttr)).Get(id))
	return a.created, a.updated, a.status, ok
}

// has reports whether an index key exists (index rows have empty values,
// which Get does not tell from absent ones).
func has(c *bolt.Cursor, key []byte) bool {
	k, _ := c.Seek(key)
	return k != nil && bytes.Equal(k, key)
}

// candidates calls fn with the ids of the threads the indexed filters
// select, in the query's order, until fn returns false.
func (q *threadQuery) candidates(fn func(id []byte) bool) error {
	f := q.f
	switch f.SortBy {
	case "status":
		statuses := []string{f.Status}
		if f.Status == "" {
			statuses = q.statuses()
		}
		if f.Desc {
			slices.Reverse(statuses)
		}
		for _, s := range statuses {
			stop := false
			ps := append([]*posting{q.posting(bThreadsStatus, cat([]byte(s), []byte{0}))}, q.metaPostings()...)
			leapfrog(ps, func(doc []byte) bool {
				stop = !fn(doc[8:])
				return !stop
			})
			if stop {
				break
			}
		}
		return nil
	case "updated_at", "thread_id":
		if f.Status == "" && len(q.metas) == 0 {
			q.walkSortIndex(fn)
			return nil
		}
		return q.sortedIntersection(fn)
	}
	leapfrog(q.filterPostings(bThreadsCreated), func(doc []byte) bool { return fn(doc[8:]) })
	return nil
}

// filterPostings are the status and metadata postings, or, without
// filters, the whole of index bucket all.
func (q *threadQuery) filterPostings(all string) []*posting {
	ps := q.metaPostings()
	if q.f.Status != "" {
		ps = append([]*posting{q.posting(bThreadsStatus, cat([]byte(q.f.Status), []byte{0}))}, ps...)
	}
	if len(ps) == 0 {
		ps = []*posting{q.posting(all, nil)}
	}
	return ps
}

// statuses are the statuses threads have, in byte order: one seek each.
func (q *threadQuery) statuses() []string {
	var out []string
	c := q.tx.Bucket([]byte(bThreadsStatus)).Cursor()
	for k, _ := c.First(); k != nil; {
		i := bytes.IndexByte(k, 0)
		if i < 0 {
			break
		}
		out = append(out, string(k[:i]))
		k, _ = c.Seek(cat(k[:i], []byte{1}))
	}
	return out
}

// walkSortIndex calls fn with every thread's id in updated_at or
// thread_id order.
func (q *threadQuery) walkSortIndex(fn func(id []byte) bool) {
	if q.f.SortBy == "thread_id" {
		p := q.posting(bThreads, nil)
		// The threads bucket's keys are the ids; its values (the records)
		// are not decoded.
		for k, ok := p.first(); ok && fn(k); k, ok = p.next() {
		}
		return
	}
	p := q.posting(bThreadsUpdated, nil)
	for d, ok := p.first(); ok && fn(d[8:]); d, ok = p.next() {
	}
}

// sortedIntersection serves updated_at and thread_id orders with
// filters: see the top of the file.
func (q *threadQuery) sortedIntersection(fn func(id []byte) bool) error {
	var ids [][]byte
	leapfrog(q.filterPostings(bThreadsCreated), func(doc []byte) bool {
		ids = append(ids, doc[8:])
		return len(ids) <= collectBound
	})
	if len(ids) <= collectBound {
		return inKeyOrder(ids, func(id []byte) ([]byte, error) {
			created, updated, status, ok := q.attrs(id)
			if !ok {
				return nil, fmt.Errorf("thread %s has no index attributes", id)
			}
			return sortKey(q.f.SortBy, string(id), created, updated, status), nil
		}, q.f.Desc, fn)
	}
	meta := q.tx.Bucket([]byte(bThreadsMeta)).Cursor()
	var err error
	q.walkSortIndex(func(id []byte) bool {
		created, _, status, ok := q.attrs(id)
		if !ok {
			err = fmt.Errorf("thread %s has no index attributes", id)
			return false
		}
		if q.f.Status != "" && status != q.f.Status {
			return true
		}
		for _, m := range q.metas {
			if !has(meta, cat(m, created, id)) {
				return true
			}
		}
		return fn(id)
	})
	return err
}

// residualOK decodes a candidate and tests the filters no index serves.
func (q *threadQuery) residualOK(id []byte) (*threadRecord, bool, error) {
	if q.decoded++; q.decoded > maxResidualScan {
		return nil, false, errResidualScan()
	}
	r, err := q.record(string(id))
	if err != nil || r == nil {
		return nil, false, err
	}
	return r, matches(r.Metadata, q.residual) && matches(r.Values, q.f.Values), nil
}

// byIDs serves a search with ids: point lookups, sorted in memory.
func (q *threadQuery) byIDs() ([]*threadRecord, error) {
	var out []*threadRecord
	seen := map[string]bool{}
	for _, id := range q.f.IDs {
		if seen[id] {
			continue
		}
		seen[id] = true
		r, err := q.record(id)
		if err != nil {
			return nil, err
		}
		if r != nil && q.matchesAll(r) {
			out = append(out, r)
		}
	}
	key := func(r *threadRecord) []byte {
		return sortKey(q.f.SortBy, r.ThreadID, timeKey(r.CreatedAt), timeKey(r.UpdatedAt), r.Status)
	}
	slices.SortFunc(out, func(a, b *threadRecord) int {
		if q.f.Desc {
			return bytes.Compare(key(b), key(a))
		}
		return bytes.Compare(key(a), key(b))
	})
	return out, nil
}

func page[T any](all []T, offset, limit int) []T {
	all = all[min(offset, len(all)):]
	if limit > 0 && len(all) > limit {
		all = all[:limit]
	}
	return all
}

func (t *boltTx) SearchThreads(f ThreadFilter) ([]*threadRecord, error) {
	if err := t.wholeDB(); err != nil {
		return nil, err
	}
	q := newThreadQuery(t.tx, f)
	if len(f.IDs) > 0 {
		all, err := q.byIDs()
		return page(all, f.Offset, f.Limit), err
	}
	var out []*threadRecord
	skip := f.Offset
	var err error
	cerr := q.candidates(func(id []byte) bool {
		var r *threadRecord
		if q.hasResidual() {
			var ok bool
			if r, ok, err = q.residualOK(id); err != nil {
				return false
			} else if !ok {
				return true
			}
		}
		if skip > 0 {
			skip--
			return true
		}
		if r == nil {
			if r, err = q.record(string(id)); err != nil {
				return false
			}
		}
		if r != nil {
			out = append(out, r)
		}
		return f.Limit <= 0 || len(out) < f.Limit
	})
	if err == nil {
		err = cerr
	}
	return out, err
}

func (t *boltTx) CountThreads(f ThreadFilter) (int, error) {
	if err := t.wholeDB(); err != nil {
		return 0, err
	}
	q := newThreadQuery(t.tx, f)
	if len(f.IDs) == 0 && len(q.metas) == 0 && !q.hasResidual() {
		// Unfiltered or by status alone: a counter.
		if f.Status == "" {
			return readCounter(t.tx, countTotal), nil
		}
		return readCounter(t.tx, countStatus(f.Status)), nil
	}
	if len(f.IDs) > 0 {
		all, err := q.byIDs()
		return len(all), err
	}
	f.SortBy, q.f.SortBy = "", "" // any order counts the same: the cheapest
	n := 0
	var err error
	cerr := q.candidates(func(id []byte) bool {
		if q.hasResidual() {
			var ok bool
			if _, ok, err = q.residualOK(id); err != nil {
				return false
			} else if !ok {
				return true
			}
		}
		n++
		return true
	})
	if err == nil {
		err = cerr
	}
	return n, err
}
