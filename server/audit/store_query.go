package audit

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"slipway/storage"
)

// Query selects events of one organization. Start and End are inclusive
// epoch milliseconds; After, when set, is the position of the last event
// of the previous page.
type Query struct {
	Org       uuid.UUID
	Start     int64
	End       int64
	Limit     int
	Workspace string
	Ops       []string
	After     *Position
}

// Position is a place in an organization's time order: (time, seq) is
// unique and never reused, so paging neither skips nor repeats.
type Position struct {
	T int64  `json:"t"`
	S uint64 `json:"s"`
}

// EncodeCursor makes the opaque cursor (base64 of JSON) for a position.
func EncodeCursor(p Position) string {
	raw, _ := json.Marshal(p)
	return base64.RawURLEncoding.EncodeToString(raw)
}

// DecodeCursor parses a cursor made by EncodeCursor.
func DecodeCursor(s string) (*Position, error) {
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("cursor is not base64: %w", err)
	}
	var p Position
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("cursor is not valid: %w", err)
	}
	return &p, nil
}

// Page is one page of results.
type Page struct {
	Items []json.RawMessage
	Next  *Position // nil when there is nothing after this page

	// lastPos is the position of the last item (zero when empty).
	lastPos Position
}

// firstAtOrAfter finds the first sequence number of org whose time is at
// least t: seq order is time order within an organization, and the seqs
// from the oldest kept record to the head are contiguous (pruning removes a
// prefix), so a binary search reading 8-byte time prefixes is enough.
func firstAtOrAfter(tx *bolt.Tx, org uuid.UUID, t int64) (uint64, bool, error) {
	events := tx.Bucket([]byte(bucketEvents))
	h, found, err := getHead(tx, org)
	if err != nil || !found || h.Seq == 0 {
		return 0, false, err
	}
	k, _ := events.Cursor().Seek(org[:])
	if k == nil || !bytes.HasPrefix(k, org[:]) {
		return 0, false, nil
	}
	lo, hi := binary.BigEndian.Uint64(k[16:]), h.Seq+1 // answer in [lo, hi]; hi means none
	if lo == headSeq {
		return 0, false, nil
	}
	for lo < hi {
		mid := lo + (hi-lo)/2
		v := events.Get(storage.Key(org, storage.U64(mid)))
		if len(v) < 8 {
			return 0, false, fmt.Errorf("audit record %d of %s is missing", mid, org)
		}
		if recordTime(v) < t {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo, lo <= h.Seq, nil
}

// seqSource yields sequence numbers in increasing order from one key range
// whose keys end in an 8-byte seq.
type seqSource struct {
	c      *bolt.Cursor
	prefix []byte
	seq    uint64
	ok     bool
}

func (s *seqSource) load(k []byte) {
	s.ok = k != nil && bytes.HasPrefix(k, s.prefix) && len(k) == len(s.prefix)+8
	if s.ok {
		s.seq = binary.BigEndian.Uint64(k[len(s.prefix):])
		s.ok = s.seq != headSeq
	}
}

// openSources positions a cursor at sequence from on each source of q's
// events: the organization's events, or the index of each operation asked.
func openSources(tx *bolt.Tx, q Query, from uint64) []*seqSource {
	var srcs []*seqSource
	open := func(bucket string, prefix []byte) {
		s := &seqSource{c: tx.Bucket([]byte(bucket)).Cursor(), prefix: prefix}
		k, _ := s.c.Seek(storage.Key(prefix, storage.U64(from)))
		s.load(k)
		srcs = append(srcs, s)
	}
	if len(q.Ops) == 0 {
		open(bucketEvents, q.Org[:])
		return srcs
	}
	seen := map[string]bool{}
	for _, op := range q.Ops {
		if !seen[op] {
			seen[op] = true
			open(idxOp, storage.Key(q.Org, op, []byte{0}))
		}
	}
	return srcs
}

// lowestSource is the source whose next sequence number comes first, or
// nil when all are spent.
func lowestSource(srcs []*seqSource) *seqSource {
	var best *seqSource
	for _, s := range srcs {
		if s.ok && (best == nil || s.seq < best.seq) {
			best = s
		}
	}
	return best
}

// Run answers q by walking the organization's events in seq (= time) order,
// or by merging the operation index ranges of the requested operations. It
// reads only q.Org's keys.
func (l *Log) Run(tx *bolt.Tx, q Query) (Page, error) {
	var page Page
	from, any, err := firstAtOrAfter(tx, q.Org, q.Start)
	if err != nil || !any {
		return page, err
	}
	if q.After != nil && q.After.S+1 > from {
		from = q.After.S + 1
	}
	srcs := openSources(tx, q, from)
	events := tx.Bucket([]byte(bucketEvents))
	// The operation index is not covered by the chain's MACs: a hit is
	// shown only when its record exists and is of an operation asked for,
	// and once however many entries name it.
	asked := map[string]bool{}
	for _, op := range q.Ops {
		asked[op] = true
	}
	var last Position
	var done uint64 // the last seq read; seqs come in increasing order
	for {
		best := lowestSource(srcs)
		if best == nil {
			return page, nil
		}
		seq := best.seq
		raw := events.Get(storage.Key(q.Org, storage.U64(seq)))
		if seq <= done || raw == nil && len(q.Ops) > 0 {
			next, _ := best.c.Next()
			best.load(next)
			continue
		}
		if len(raw) < 8 {
			return page, fmt.Errorf("audit record %d of %s is missing", seq, q.Org)
		}
		t := recordTime(raw)
		if t > q.End {
			// Later seqs of this range are later in time too.
			best.ok = false
			continue
		}
		next, _ := best.c.Next()
		best.load(next)
		done = seq
		rec, err := decodeRecord(raw)
		if err != nil {
			return page, err
		}
		ev, b, err := rec.render()
		if err != nil {
			return page, err
		}
		if q.Workspace != "" && b.Actor.WorkspaceID != q.Workspace || len(asked) > 0 && !asked[b.Op] {
			continue
		}
		if len(page.Items) == q.Limit {
			page.Next = &last
			return page, nil
		}
		page.Items = append(page.Items, ev)
		last = Position{T: t, S: seq}
		page.lastPos = last
	}
}
