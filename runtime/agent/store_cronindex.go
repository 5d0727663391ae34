package agent

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Cron indexes, kept by PutCron and DeleteCron in the same transaction as
// the record (crons are never journaled), read by cron search and count
// as threads' are (store_threadsearch.go), and by deletions for a
// thread's or an assistant's crons:
//
//	idx_crons_sort    field ‖ sort text ‖ 0x00 ‖ id → nil, a range per sort_by
//	                  field (cronSortFields); times as fixed-width UTC text
//	idx_crons_filter  kind ‖ value ‖ doc → nil, postings of assistant_id,
//	                  thread_id, enabled and scalar metadata entries; a doc
//	                  is the created_at sort text ‖ 0x00 ‖ id
//	idx_crons_attr    id → the cron's sort texts, enabled and metadata
//	                  posting prefixes (what replaces its rows and what a
//	                  walk tests, without decoding the record)
//
// The sort texts are the ones search always compared (text ‖ 0x00 ‖ id),
// so the order is unchanged: ties by id in the sort's direction.
const (
	bCronSort   = "idx_crons_sort"
	bCronFilter = "idx_crons_filter"
	bCronAttr   = "idx_crons_attr"
)

var cronIndexBuckets = []string{bCronSort, bCronFilter, bCronAttr}

// cronSortFields are the sort_by fields in attribute order, with their
// range's byte in idx_crons_sort (cron_id is the crons bucket's order).
var cronSortFields = []struct {
	name string
	code byte
}{{"created_at", 'c'}, {"updated_at", 'u'}, {"next_run_date", 'n'}, {"end_time", 'e'}, {"assistant_id", 'a'}, {"thread_id", 't'}}

const (
	cronPostAssistant byte = 'A'
	cronPostThread    byte = 'T'
	cronPostEnabled   byte = 'E'
	cronPostMeta      byte = 'M'
)

func cronTS(t *time.Time) string {
	if t == nil {
		return ""
	}
	return t.UTC().Format("2006-01-02T15:04:05.000000000Z")
}

// cronAttr is what the indexes hold of a cron.
type cronAttr struct {
	texts   [6][]byte // by cronSortFields
	enabled bool
	metas   [][]byte
}

func cronAttrOf(c *Cron) cronAttr {
	var a cronAttr
	thread := ""
	if c.ThreadID != nil {
		thread = *c.ThreadID
	}
	for i, s := range []string{cronTS(&c.CreatedAt), cronTS(&c.UpdatedAt), cronTS(&c.NextRunDate), cronTS(c.EndTime), c.AssistantID, thread} {
		a.texts[i] = []byte(s)
	}
	a.enabled = c.Enabled
	for k, v := range c.Metadata {
		if enc, ok := metaIndexable(k, v); ok {
			a.metas = append(a.metas, metaPrefix(k, enc))
		}
	}
	slices.SortFunc(a.metas, bytes.Compare)
	return a
}

func lp(b, v []byte) []byte { return append(binary.AppendUvarint(b, uint64(len(v))), v...) }

func (a cronAttr) encode() []byte {
	var b []byte
	for _, t := range a.texts {
		b = lp(b, t)
	}
	if a.enabled {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	for _, m := range a.metas {
		b = lp(b, m)
	}
	return b
}

func decodeCronAttr(v []byte) (cronAttr, bool) {
	var a cronAttr
	next := func() ([]byte, bool) {
		n, k := binary.Uvarint(v)
		if k <= 0 || uint64(len(v)-k) < n {
			return nil, false
		}
		b := v[k : k+int(n)]
		v = v[k+int(n):]
		return b, true
	}
	for i := range a.texts {
		t, ok := next()
		if !ok {
			return a, false
		}
		a.texts[i] = t
	}
	if len(v) == 0 {
		return a, false
	}
	a.enabled, v = v[0] == 1, v[1:]
	for len(v) > 0 {
		m, ok := next()
		if !ok {
			return a, false
		}
		a.metas = append(a.metas, m)
	}
	return a, true
}

func (a cronAttr) doc(id []byte) []byte { return cat(a.texts[0], []byte{0}, id) }

func cronPosting(kind byte, value []byte) []byte { return lp([]byte{kind}, value) }

func cronEnabledPosting(on bool) []byte {
	if on {
		return []byte{cronPostEnabled, 1}
	}
	return []byte{cronPostEnabled, 0}
}

func cronIndexRows(id []byte, a cronAttr) []idxRow {
	doc := a.doc(id)
	rows := []idxRow{{bCronAttr, id, a.encode()}}
	for i, f := range cronSortFields {
		rows = append(rows, idxRow{bCronSort, cat([]byte{f.code}, a.texts[i], []byte{0}, id), nil})
	}
	rows = append(rows, idxRow{bCronFilter, cat(cronPosting(cronPostAssistant, a.texts[4]), doc), nil},
		idxRow{bCronFilter, cat(cronEnabledPosting(a.enabled), doc), nil})
	if len(a.texts[5]) > 0 {
		rows = append(rows, idxRow{bCronFilter, cat(cronPosting(cronPostThread, a.texts[5]), doc), nil})
	}
	for _, m := range a.metas {
		rows = append(rows, idxRow{bCronFilter, cat([]byte{cronPostMeta}, m, doc), nil})
	}
	return rows
}

// storedCronRows are cron id's index rows as stored (nil: none).
func storedCronRows(tx *bolt.Tx, id string) ([]idxRow, error) {
	if v := tx.Bucket([]byte(bCronAttr)).Get([]byte(id)); v != nil {
		if a, ok := decodeCronAttr(v); ok {
			return cronIndexRows([]byte(id), a), nil
		}
	}
	raw := tx.Bucket([]byte(bCrons)).Get([]byte(id))
	if raw == nil {
		return nil, nil
	}
	var c Cron
	if err := unmarshalStored(raw, &c); err != nil {
		return nil, nil // unindexed (buildCronIndexes): nothing to replace
	}
	return cronIndexRows([]byte(id), cronAttrOf(&c)), nil
}

func (t *boltTx) reindexCron(id string, next *Cron) error {
	before, err := storedCronRows(t.tx, id)
	if err != nil {
		return err
	}
	var after []idxRow
	if next != nil {
		after = cronIndexRows([]byte(id), cronAttrOf(next))
	}
	return writeIndexDiff(t.tx, before, after, func(string, []byte) {})
}

// buildCronIndexes is the migration that indexes existing crons.
func buildCronIndexes(tx *bolt.Tx) error {
	for _, name := range cronIndexBuckets {
		if _, err := tx.CreateBucketIfNotExists([]byte(name)); err != nil {
			return fmt.Errorf("create bucket %s: %w", name, err)
		}
	}
	return tx.Bucket([]byte(bCrons)).ForEach(func(k, v []byte) error {
		var c Cron
		if err := unmarshalStored(v, &c); err != nil {
			return nil // an undecodable cron stays unindexed: searches never listed it either
		}
		return writeIndexDiff(tx, nil, cronIndexRows(k, cronAttrOf(&c)), func(string, []byte) {})
	})
}

// cronQuery is a cron search planned over a transaction (the plan of
// store_threadsearch.go).
type cronQuery struct {
	tx       *bolt.Tx
	f        CronFilter
	desc     bool
	field    int // index in cronSortFields; -1: cron_id
	metas    [][]byte
	residual map[string]any
	decoded  int
}

func newCronQuery(tx *bolt.Tx, f CronFilter) *cronQuery {
	q := &cronQuery{tx: tx, f: f, desc: f.Desc || f.SortBy == "", residual: map[string]any{}}
	for i, sf := range cronSortFields {
		if sf.name == f.SortBy {
			q.field = i
		}
	}
	if f.SortBy == "cron_id" {
		q.field = -1
	}
	keys := make([]string, 0, len(f.Metadata))
	for k := range f.Metadata {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if enc, ok := metaIndexable(k, f.Metadata[k]); ok {
			q.metas = append(q.metas, cat([]byte{cronPostMeta}, metaPrefix(k, enc)))
		} else {
			q.residual[k] = f.Metadata[k]
		}
	}
	return q
}

func (q *cronQuery) posting(bucket string, prefix []byte) *posting {
	return &posting{c: q.tx.Bucket([]byte(bucket)).Cursor(), prefix: prefix, desc: q.desc}
}

func (q *cronQuery) filterPrefixes() [][]byte {
	var ps [][]byte
	if q.f.AssistantID != "" {
		ps = append(ps, cronPosting(cronPostAssistant, []byte(q.f.AssistantID)))
	}
	if q.f.ThreadID != "" {
		ps = append(ps, cronPosting(cronPostThread, []byte(q.f.ThreadID)))
	}
	if q.f.Enabled != nil {
		ps = append(ps, cronEnabledPosting(*q.f.Enabled))
	}
	return append(ps, q.metas...)
}

func idAfterNUL(k []byte) []byte { return k[bytes.LastIndexByte(k, 0)+1:] }

// walk calls fn with every cron's id in the sort's order.
func (q *cronQuery) walk(fn func(id []byte) bool) {
	if q.field < 0 {
		p := q.posting(bCrons, nil)
		for k, ok := p.first(); ok && fn(k); k, ok = p.next() {
		}
		return
	}
	p := q.posting(bCronSort, []byte{cronSortFields[q.field].code})
	for d, ok := p.first(); ok && fn(idAfterNUL(d)); d, ok = p.next() {
	}
}

func (q *cronQuery) attr(id []byte) (cronAttr, error) {
	a, ok := decodeCronAttr(q.tx.Bucket([]byte(bCronAttr)).Get(id))
	if !ok {
		return a, fmt.Errorf("cron %s has no index attributes", id)
	}
	return a, nil
}

func (q *cronQuery) candidates(fn func(id []byte) bool) error {
	prefixes := q.filterPrefixes()
	ps := make([]*posting, 0, len(prefixes))
	for _, p := range prefixes {
		ps = append(ps, q.posting(bCronFilter, p))
	}
	if q.field == 0 && len(ps) > 0 {
		leapfrog(ps, func(doc []byte) bool { return fn(idAfterNUL(doc)) })
		return nil
	}
	if len(ps) == 0 {
		q.walk(fn)
		return nil
	}
	var ids [][]byte
	leapfrog(ps, func(doc []byte) bool {
		ids = append(ids, idAfterNUL(doc))
		return len(ids) <= collectBound
	})
	if len(ids) <= collectBound {
		return inKeyOrder(ids, func(id []byte) ([]byte, error) {
			if q.field < 0 {
				return id, nil
			}
			a, err := q.attr(id)
			if err != nil {
				return nil, err
			}
			return cat(a.texts[q.field], []byte{0}, id), nil
		}, q.desc, fn)
	}
	filter := q.tx.Bucket([]byte(bCronFilter)).Cursor()
	var err error
	q.walk(func(id []byte) bool {
		var a cronAttr
		if a, err = q.attr(id); err != nil {
			return false
		}
		doc := a.doc(id)
		for _, p := range prefixes {
			if !has(filter, cat(p, doc)) {
				return true
			}
		}
		return fn(id)
	})
	return err
}

func (q *cronQuery) record(id []byte) (*Cron, error) {
	raw := q.tx.Bucket([]byte(bCrons)).Get(id)
	if raw == nil {
		return nil, nil
	}
	var c Cron
	if err := unmarshalStored(raw, &c); err != nil {
		return nil, fmt.Errorf("decode cron: %w", err)
	}
	return &c, nil
}

// each calls fn with the ids of the crons q selects, in order, and the
// record when a residual metadata filter decoded it (else nil).
func (q *cronQuery) each(fn func(id []byte, c *Cron) (bool, error)) error {
	var err error
	cerr := q.candidates(func(id []byte) bool {
		var c *Cron
		if len(q.residual) > 0 {
			if q.decoded++; q.decoded > maxResidualScan {
				err = fmt.Errorf("%w: a metadata filter on an object, array, null or long value would read more than %d crons; "+
					"narrow the search with assistant_id, thread_id or metadata filters on strings, numbers or booleans", ErrInvalid, maxResidualScan)
				return false
			}
			if c, err = q.record(id); err != nil {
				return false
			}
			if c == nil || !matches(c.Metadata, q.residual) {
				return true
			}
		}
		var more bool
		more, err = fn(id, c)
		return more && err == nil
	})
	if err == nil {
		err = cerr
	}
	return err
}

func (t *boltTx) SearchCrons(f CronFilter) ([]Cron, error) {
	q := newCronQuery(t.tx, f)
	return pageOf(f.Offset, f.Limit, q.each, q.record)
}

func (t *boltTx) CountCrons(f CronFilter) (int, error) {
	f.SortBy = "cron_id"
	n := 0
	err := newCronQuery(t.tx, f).each(func([]byte, *Cron) (bool, error) { n++; return true, nil })
	return n, err
}

func (t *boltTx) CronsOf(assistant, thread string) ([]string, error) {
	prefix := cronPosting(cronPostAssistant, []byte(assistant))
	if thread != "" {
		prefix = cronPosting(cronPostThread, []byte(thread))
	}
	var ids []string
	c := t.tx.Bucket([]byte(bCronFilter)).Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		ids = append(ids, string(idAfterNUL(k[len(prefix):])))
	}
	return ids, nil
}
