package agent

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Assistant indexes, kept by PutAssistant and DeleteAssistant in the same
// transaction as the record (assistants are never written by a journaled
// unit), read by assistant search and count as threads' are
// (store_threadsearch.go):
//
//	idx_assistants_created    created ‖ id → nil
//	idx_assistants_updated    updated ‖ id → nil
//	idx_assistants_graph      uvarint len ‖ graph id ‖ created ‖ id → nil (the graph_id filter)
//	idx_assistants_graphsort  sortText(graph id) ‖ 0x00 ‖ id → nil (sort_by graph_id)
//	idx_assistants_name       sortText(name) ‖ 0x00 ‖ id → nil (sort_by name)
//	idx_assistants_meta       metaPrefix(key, value) ‖ created ‖ id → nil
//	idx_assistants_attr       id → created ‖ updated ‖ uvarint len ‖ graph id ‖ sortText(name)
const (
	bAsstCreated   = "idx_assistants_created"
	bAsstUpdated   = "idx_assistants_updated"
	bAsstGraph     = "idx_assistants_graph"
	bAsstGraphSort = "idx_assistants_graphsort"
	bAsstName      = "idx_assistants_name"
	bAsstMeta      = "idx_assistants_meta"
	bAsstAttr      = "idx_assistants_attr"
)

var assistantIndexBuckets = []string{bAsstCreated, bAsstUpdated, bAsstGraph, bAsstGraphSort, bAsstName, bAsstMeta, bAsstAttr}

// maxSortText bounds the bytes of a name or graph id that sorting compares.
const maxSortText = 256

// sortText is s as names and graph ids sort (case-insensitively, as the
// reference servers): lower-cased, its first maxSortText bytes, NUL bytes
// raised to 0x01 so the 0x00 after it ends it.
func sortText(s string) []byte {
	b := []byte(strings.ToLower(s))
	if len(b) > maxSortText {
		b = b[:maxSortText]
	}
	for i, c := range b {
		if c == 0 {
			b[i] = 1
		}
	}
	return b
}

// assistantIndexed is what the indexes hold of an assistant.
type assistantIndexed struct {
	AssistantID string         `json:"assistant_id"`
	GraphID     string         `json:"graph_id"`
	Name        string         `json:"name"`
	Metadata    map[string]any `json:"metadata"`
	CreatedAt   time.Time      `json:"created_at"`
	UpdatedAt   time.Time      `json:"updated_at"`
}

func graphPrefix(g string) []byte {
	return append(binary.AppendUvarint(nil, uint64(len(g))), g...)
}

func assistantIndexRows(x *assistantIndexed) []idxRow {
	id := []byte(x.AssistantID)
	created, updated := timeKey(x.CreatedAt), timeKey(x.UpdatedAt)
	doc := cat(created, id)
	rows := []idxRow{
		{bAsstCreated, doc, nil},
		{bAsstUpdated, cat(updated, id), nil},
		{bAsstGraph, cat(graphPrefix(x.GraphID), doc), nil},
		{bAsstGraphSort, cat(sortText(x.GraphID), []byte{0}, id), nil},
		{bAsstName, cat(sortText(x.Name), []byte{0}, id), nil},
		{bAsstAttr, id, cat(created, updated, graphPrefix(x.GraphID), sortText(x.Name))},
	}
	for k, v := range x.Metadata {
		if enc, ok := metaIndexable(k, v); ok {
			rows = append(rows, idxRow{bAsstMeta, cat(metaPrefix(k, enc), doc), nil})
		}
	}
	return rows
}

// storedAssistantRows are the index rows of the stored record raw (nil:
// none). A record that does not decode has none: the migration leaves it
// out (no search listed it before either) and it can still be replaced
// or deleted.
func storedAssistantRows(raw []byte) []idxRow {
	if raw == nil {
		return nil
	}
	var x assistantIndexed
	if err := unmarshalStored(raw, &x); err != nil {
		return nil
	}
	return assistantIndexRows(&x)
}

func (t *boltTx) reindexAssistant(id string, next *Assistant) error {
	before := storedAssistantRows(t.tx.Bucket([]byte(bAssistants)).Get([]byte(id)))
	var after []idxRow
	if next != nil {
		after = assistantIndexRows(&assistantIndexed{AssistantID: next.AssistantID, GraphID: next.GraphID, Name: next.Name,
			Metadata: next.Metadata, CreatedAt: next.CreatedAt, UpdatedAt: next.UpdatedAt})
	}
	return writeIndexDiff(t.tx, before, after, func(string, []byte) {})
}

// buildAssistantIndexes is the migration that indexes existing assistants.
func buildAssistantIndexes(tx *bolt.Tx) error {
	for _, name := range assistantIndexBuckets {
		if _, err := tx.CreateBucketIfNotExists([]byte(name)); err != nil {
			return fmt.Errorf("create bucket %s: %w", name, err)
		}
	}
	return tx.Bucket([]byte(bAssistants)).ForEach(func(_, v []byte) error {
		return writeIndexDiff(tx, nil, storedAssistantRows(v), func(string, []byte) {})
	})
}

// assistantQuery is an assistant search planned over a transaction; its
// plan is the thread search's (store_threadsearch.go): the graph_id and
// metadata postings intersected in created ‖ id order; other orders from
// the gathered intersection (at most collectBound) or by walking their
// index; the name filter (a substring) and metadata entries no posting
// serves tested on at most maxResidualScan decoded records.
type assistantQuery struct {
	tx       *bolt.Tx
	q        AssistantQuery
	metas    [][]byte
	residual map[string]any
	decoded  int
}

func newAssistantQuery(tx *bolt.Tx, q AssistantQuery) *assistantQuery {
	aq := &assistantQuery{tx: tx, q: q, residual: map[string]any{}}
	keys := make([]string, 0, len(q.Metadata))
	for k := range q.Metadata {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if enc, ok := metaIndexable(k, q.Metadata[k]); ok {
			aq.metas = append(aq.metas, metaPrefix(k, enc))
		} else {
			aq.residual[k] = q.Metadata[k]
		}
	}
	return aq
}

func (a *assistantQuery) posting(bucket string, prefix []byte) *posting {
	return &posting{c: a.tx.Bucket([]byte(bucket)).Cursor(), prefix: prefix, desc: a.q.Desc}
}

func (a *assistantQuery) filterPostings() []*posting {
	var ps []*posting
	if a.q.GraphID != "" {
		ps = append(ps, a.posting(bAsstGraph, graphPrefix(a.q.GraphID)))
	}
	for _, m := range a.metas {
		ps = append(ps, a.posting(bAsstMeta, m))
	}
	return ps
}

func (a *assistantQuery) hasResidual() bool { return a.q.Name != "" || len(a.residual) > 0 }

// attrs reads an assistant's index attributes.
func (a *assistantQuery) attrs(id []byte) (created, updated []byte, graph string, name []byte, ok bool) {
	v := a.tx.Bucket([]byte(bAsstAttr)).Get(id)
	if len(v) < 16 {
		return nil, nil, "", nil, false
	}
	created, updated, rest := v[:8], v[8:16], v[16:]
	n, k := binary.Uvarint(rest)
	if k <= 0 || uint64(len(rest)-k) < n {
		return nil, nil, "", nil, false
	}
	return created, updated, string(rest[k : k+int(n)]), rest[k+int(n):], true
}

func (a *assistantQuery) sortKey(id []byte) ([]byte, error) {
	created, updated, graph, name, ok := a.attrs(id)
	if !ok {
		return nil, fmt.Errorf("assistant %s has no index attributes", id)
	}
	switch a.q.SortBy {
	case "assistant_id":
		return id, nil
	case "updated_at":
		return cat(updated, id), nil
	case "graph_id":
		return cat(sortText(graph), []byte{0}, id), nil
	case "name":
		return cat(name, []byte{0}, id), nil
	}
	return cat(created, id), nil
}

// walkSortIndex calls fn with every assistant's id in the query's order
// (not created_at, which leapfrog serves).
func (a *assistantQuery) walkSortIndex(fn func(id []byte) bool) {
	var p *posting
	idOf := func(k []byte) []byte { return k[bytes.LastIndexByte(k, 0)+1:] }
	switch a.q.SortBy {
	case "assistant_id":
		p, idOf = a.posting(bAssistants, nil), func(k []byte) []byte { return k }
	case "updated_at":
		p, idOf = a.posting(bAsstUpdated, nil), func(k []byte) []byte { return k[8:] }
	case "graph_id":
		p = a.posting(bAsstGraphSort, nil)
	default:
		p = a.posting(bAsstName, nil)
	}
	for k, ok := p.first(); ok && fn(idOf(k)); k, ok = p.next() {
	}
}

func (a *assistantQuery) candidates(fn func(id []byte) bool) error {
	ps := a.filterPostings()
	if a.q.SortBy == "" || a.q.SortBy == "created_at" {
		if len(ps) == 0 {
			ps = []*posting{a.posting(bAsstCreated, nil)}
		}
		leapfrog(ps, func(doc []byte) bool { return fn(doc[8:]) })
		return nil
	}
	if len(ps) == 0 {
		a.walkSortIndex(fn)
		return nil
	}
	var ids [][]byte
	leapfrog(ps, func(doc []byte) bool {
		ids = append(ids, doc[8:])
		return len(ids) <= collectBound
	})
	if len(ids) <= collectBound {
		return inKeyOrder(ids, a.sortKey, a.q.Desc, fn)
	}
	meta := a.tx.Bucket([]byte(bAsstMeta)).Cursor()
	var err error
	a.walkSortIndex(func(id []byte) bool {
		created, _, graph, _, ok := a.attrs(id)
		if !ok {
			err = fmt.Errorf("assistant %s has no index attributes", id)
			return false
		}
		if a.q.GraphID != "" && graph != a.q.GraphID {
			return true
		}
		for _, m := range a.metas {
			if !has(meta, cat(m, created, id)) {
				return true
			}
		}
		return fn(id)
	})
	return err
}

func (a *assistantQuery) record(id []byte) (*Assistant, error) {
	raw := a.tx.Bucket([]byte(bAssistants)).Get(id)
	if raw == nil {
		return nil, nil
	}
	var as Assistant
	if err := unmarshalStored(raw, &as); err != nil {
		return nil, fmt.Errorf("decode assistant: %w", err)
	}
	return &as, nil
}

func (a *assistantQuery) residualOK(id []byte) (*Assistant, bool, error) {
	if a.decoded++; a.decoded > maxResidualScan {
		return nil, false, fmt.Errorf("%w: the name filter (or a metadata filter on an object, array, null or long value) "+
			"would read more than %d assistants; narrow the search with graph_id or metadata filters on strings, numbers or booleans",
			ErrInvalid, maxResidualScan)
	}
	as, err := a.record(id)
	if err != nil || as == nil {
		return nil, false, err
	}
	ok := (a.q.Name == "" || strings.Contains(strings.ToLower(as.Name), strings.ToLower(a.q.Name))) && matches(as.Metadata, a.residual)
	return as, ok, nil
}

// each calls fn with the ids of the assistants q selects, in order, and
// the record when a residual filter decoded it (else nil).
func (a *assistantQuery) each(fn func(id []byte, as *Assistant) (bool, error)) error {
	var err error
	cerr := a.candidates(func(id []byte) bool {
		var as *Assistant
		if a.hasResidual() {
			var ok bool
			if as, ok, err = a.residualOK(id); err != nil {
				return false
			} else if !ok {
				return true
			}
		}
		var more bool
		more, err = fn(id, as)
		return more && err == nil
	})
	if err == nil {
		err = cerr
	}
	return err
}

func (t *boltTx) SearchAssistants(q AssistantQuery) ([]Assistant, error) {
	a := newAssistantQuery(t.tx, q)
	return pageOf(q.Offset, q.Limit, a.each, a.record)
}

func (t *boltTx) CountAssistants(q AssistantQuery) (int, error) {
	q.SortBy = "" // any order counts the same: the cheapest
	n := 0
	err := newAssistantQuery(t.tx, q).each(func([]byte, *Assistant) (bool, error) { n++; return true, nil })
	return n, err
}
