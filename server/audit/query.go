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

	lastPos Position
}

// source walks one index range in (time, seq) order.
type source struct {
	c      *bolt.Cursor
	prefix []byte
	k      []byte
	pos    Position
}

func (s *source) load(k []byte, end int64) {
	s.k = nil
	if k == nil || !bytes.HasPrefix(k, s.prefix) || len(k) != len(s.prefix)+16 {
		return
	}
	t := int64(binary.BigEndian.Uint64(k[len(s.prefix):]))
	if t > end {
		return
	}
	s.k = k
	s.pos = Position{T: t, S: binary.BigEndian.Uint64(k[len(s.prefix)+8:])}
}

// Run answers q from the time index, or from the operation index merged
// across the requested operations. It reads only q.Org's keys.
func (l *Log) Run(tx *bolt.Tx, q Query) (Page, error) {
	var srcs []*source
	open := func(bucket string, prefix []byte) {
		s := &source{c: tx.Bucket([]byte(bucket)).Cursor(), prefix: prefix}
		from := Position{T: q.Start}
		if q.After != nil && q.After.T >= q.Start {
			from = Position{T: q.After.T, S: q.After.S + 1}
		}
		k, _ := s.c.Seek(storage.Key(prefix, storage.U64(uint64(from.T)), storage.U64(from.S)))
		s.load(k, q.End)
		srcs = append(srcs, s)
	}
	if len(q.Ops) == 0 {
		open(storage.IdxAuditTime, q.Org[:])
	} else {
		seen := map[string]bool{}
		for _, op := range q.Ops {
			if !seen[op] {
				seen[op] = true
				open(storage.IdxAuditOp, storage.Key(q.Org, op, []byte{0}))
			}
		}
	}
	events := tx.Bucket([]byte(storage.BucketAuditEvents))
	var page Page
	for {
		var best *source
		for _, s := range srcs {
			if s.k != nil && (best == nil || s.pos.T < best.pos.T || s.pos.T == best.pos.T && s.pos.S < best.pos.S) {
				best = s
			}
		}
		if best == nil {
			return page, nil
		}
		pos := best.pos
		next, _ := best.c.Next()
		best.load(next, q.End)
		raw := events.Get(storage.Key(q.Org, storage.U64(pos.S)))
		if raw == nil {
			continue // pruned between index and record: cannot happen in one transaction, but be safe
		}
		var rec record
		if err := json.Unmarshal(raw, &rec); err != nil {
			return page, fmt.Errorf("audit record %d: %w", pos.S, err)
		}
		if q.Workspace != "" && rec.WS != q.Workspace {
			continue
		}
		if len(page.Items) == q.Limit {
			last := page.lastPos
			page.Next = &last
			return page, nil
		}
		page.Items = append(page.Items, storage.Copy(rec.Event))
		page.lastPos = pos
	}
}
