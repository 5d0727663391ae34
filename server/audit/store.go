// Package audit records tracked operations as OCSF 1.7.0 API Activity
// events, in the same bbolt transaction as the change they describe, chained
// per organization with an HMAC so that modification, deletion and
// reordering are detectable; and answers queries over them.
package audit

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"slipway/storage"
)

// Log writes and reads the audit log.
type Log struct {
	// Key is the chain's HMAC key, derived from the master key.
	Key     []byte
	Version string
	Now     func() time.Time
}

func (l *Log) now() time.Time {
	if l.Now != nil {
		return l.Now().UTC()
	}
	return time.Now().UTC()
}

// record is one stored event with its place in its organization's chain.
type record struct {
	Event json.RawMessage `json:"event"`
	Op    string          `json:"op"`
	WS    string          `json:"ws,omitempty"`
	Time  int64           `json:"time"`
	Prev  []byte          `json:"prev"`
	MAC   []byte          `json:"mac"`
}

// head is the end of an organization's chain.
type head struct {
	Seq  uint64 `json:"seq"`
	MAC  []byte `json:"mac"`
	Time int64  `json:"time"`
}

// anchor stands in for pruned records: the chain continues from it.
type anchor struct {
	Seq uint64 `json:"seq"` // last pruned sequence number
	MAC []byte `json:"mac"` // its MAC
	Sig []byte `json:"sig"` // HMAC over seq and mac, so the anchor itself cannot be forged
}

func (l *Log) mac(org uuid.UUID, seq uint64, prev, ev []byte) []byte {
	m := hmac.New(sha256.New, l.Key)
	m.Write(org[:])
	m.Write(storage.U64(seq))
	m.Write(prev)
	m.Write(ev)
	return m.Sum(nil)
}

func (l *Log) anchorSig(org uuid.UUID, a anchor) []byte {
	m := hmac.New(sha256.New, l.Key)
	m.Write([]byte("anchor"))
	m.Write(org[:])
	m.Write(storage.U64(a.Seq))
	m.Write(a.MAC)
	return m.Sum(nil)
}

// Entry is one event to append.
type Entry struct {
	Op        string
	OK        bool
	Detail    string // why it failed
	Actor     Actor
	Request   Request
	Resources []Resource
}

// Append writes one event at the end of its organization's chain, inside
// the caller's transaction. Its time never goes backwards within an
// organization, so a query cursor can never be overtaken by a late commit.
func (l *Log) Append(tx *bolt.Tx, e Entry) error {
	org, err := uuid.Parse(e.Actor.OrgID)
	if err != nil {
		return fmt.Errorf("audit: organization id %q: %w", e.Actor.OrgID, err)
	}
	if !Known(e.Op) {
		return fmt.Errorf("audit: unknown operation %q", e.Op)
	}
	heads := tx.Bucket([]byte(storage.BucketAuditHeads))
	var h head
	if raw := heads.Get(org[:]); raw != nil {
		if err := json.Unmarshal(raw, &h); err != nil {
			return fmt.Errorf("audit head: %w", err)
		}
	}
	t := l.now()
	if t.UnixMilli() < h.Time {
		t = time.UnixMilli(h.Time).UTC()
	}
	id := storage.NewID().String()
	ev, err := json.Marshal(build(id, t, e.Op, e.OK, e.Detail, e.Actor, e.Request, e.Resources, l.Version))
	if err != nil {
		return fmt.Errorf("audit event: %w", err)
	}
	seq := h.Seq + 1
	rec := record{Event: ev, Op: e.Op, WS: e.Actor.WorkspaceID, Time: t.UnixMilli(), Prev: h.MAC}
	rec.MAC = l.mac(org, seq, rec.Prev, ev)
	h = head{Seq: seq, MAC: rec.MAC, Time: rec.Time}
	if err := storage.Put(tx, storage.BucketAuditEvents, storage.Key(org, storage.U64(seq)), &rec); err != nil {
		return err
	}
	tk := storage.Key(org, storage.U64(uint64(rec.Time)), storage.U64(seq))
	ok := storage.Key(org, e.Op, []byte{0}, storage.U64(uint64(rec.Time)), storage.U64(seq))
	return errors.Join(
		tx.Bucket([]byte(storage.IdxAuditTime)).Put(tk, nil),
		tx.Bucket([]byte(storage.IdxAuditOp)).Put(ok, nil),
		storage.Put(tx, storage.BucketAuditHeads, org[:], &h),
	)
}

// Break describes the first place a chain does not verify.
type Break struct {
	Org    string `json:"organization_id"`
	Seq    uint64 `json:"seq"`
	Reason string `json:"reason"`
}

// VerifyReport is the outcome of walking every organization's chain.
type VerifyReport struct {
	Organizations int     `json:"organizations"`
	Events        int     `json:"events"`
	Breaks        []Break `json:"breaks"`
}

// Verify walks each organization's chain from its anchor (or the start) to
// its head and reports, per organization, the first record that was
// modified, removed, inserted or moved.
func (l *Log) Verify(tx *bolt.Tx) VerifyReport {
	var rep VerifyReport
	orgs := map[uuid.UUID]bool{}
	_ = tx.Bucket([]byte(storage.BucketAuditHeads)).ForEach(func(k, _ []byte) error {
		if id, err := uuid.FromBytes(k); err == nil {
			orgs[id] = true
		}
		return nil
	})
	// Events of an organization whose head was removed still count.
	_ = tx.Bucket([]byte(storage.BucketAuditEvents)).ForEach(func(k, _ []byte) error {
		if len(k) == 24 {
			if id, err := uuid.FromBytes(k[:16]); err == nil {
				orgs[id] = true
			}
		}
		return nil
	})
	for org := range orgs {
		rep.Organizations++
		n, br := l.verifyOrg(tx, org)
		rep.Events += n
		if br != nil {
			rep.Breaks = append(rep.Breaks, *br)
		}
	}
	return rep
}

func (l *Log) verifyOrg(tx *bolt.Tx, org uuid.UUID) (int, *Break) {
	fail := func(seq uint64, format string, args ...any) *Break {
		return &Break{Org: org.String(), Seq: seq, Reason: fmt.Sprintf(format, args...)}
	}
	var prev []byte
	var next uint64 = 1
	if raw := tx.Bucket([]byte(storage.BucketAuditAnchors)).Get(org[:]); raw != nil {
		var a anchor
		if err := json.Unmarshal(raw, &a); err != nil || !hmac.Equal(a.Sig, l.anchorSig(org, a)) {
			return 0, fail(0, "the retention anchor is not authentic")
		}
		prev, next = a.MAC, a.Seq+1
	}
	var h head
	hraw := tx.Bucket([]byte(storage.BucketAuditHeads)).Get(org[:])
	if hraw == nil || json.Unmarshal(hraw, &h) != nil {
		return 0, fail(0, "the chain head is missing or unreadable")
	}
	n := 0
	c := tx.Bucket([]byte(storage.BucketAuditEvents)).Cursor()
	var lastTime int64
	for k, v := c.Seek(org[:]); k != nil && bytes.HasPrefix(k, org[:]); k, v = c.Next() {
		seq := binary.BigEndian.Uint64(k[16:])
		if seq < next {
			return n, fail(seq, "record %d precedes the retention anchor", seq)
		}
		if seq > next {
			return n, fail(next, "record %d is missing", next)
		}
		var rec record
		if err := json.Unmarshal(v, &rec); err != nil {
			return n, fail(seq, "record %d is unreadable: %v", seq, err)
		}
		if !bytes.Equal(rec.Prev, prev) {
			return n, fail(seq, "record %d does not follow record %d (removed, inserted or reordered)", seq, seq-1)
		}
		if !hmac.Equal(rec.MAC, l.mac(org, seq, rec.Prev, rec.Event)) {
			return n, fail(seq, "record %d was modified", seq)
		}
		if rec.Time < lastTime {
			return n, fail(seq, "record %d goes back in time", seq)
		}
		lastTime = rec.Time
		prev, next = rec.MAC, seq+1
		n++
	}
	switch {
	case h.Seq != next-1:
		return n, fail(next, "record %d is missing (the chain head is at %d)", next, h.Seq)
	case !bytes.Equal(h.MAC, prev) && n > 0:
		return n, fail(h.Seq, "the chain head does not match record %d", h.Seq)
	}
	return n, nil
}

// Prune deletes an organization's events older than cutoff, leaving a
// signed anchor so the rest of the chain still verifies. Events are
// time-ordered within a chain, so the pruned ones are always a prefix.
func (l *Log) Prune(tx *bolt.Tx, org uuid.UUID, cutoff time.Time) (int, error) {
	events := tx.Bucket([]byte(storage.BucketAuditEvents))
	var a anchor
	var doomed [][]byte
	var recs []record
	c := events.Cursor()
	for k, v := c.Seek(org[:]); k != nil && bytes.HasPrefix(k, org[:]); k, v = c.Next() {
		var rec record
		if err := json.Unmarshal(v, &rec); err != nil {
			return 0, fmt.Errorf("audit record: %w", err)
		}
		if rec.Time >= cutoff.UnixMilli() {
			break
		}
		doomed = append(doomed, storage.Copy(k))
		recs = append(recs, rec)
		a.Seq, a.MAC = binary.BigEndian.Uint64(k[16:]), rec.MAC
	}
	if len(doomed) == 0 {
		return 0, nil
	}
	for i, k := range doomed {
		seq, rec := k[16:], recs[i]
		t := storage.U64(uint64(rec.Time))
		if err := errors.Join(events.Delete(k),
			tx.Bucket([]byte(storage.IdxAuditTime)).Delete(storage.Key(org, t, seq)),
			tx.Bucket([]byte(storage.IdxAuditOp)).Delete(storage.Key(org, rec.Op, []byte{0}, t, seq)),
		); err != nil {
			return 0, err
		}
	}
	a.Sig = l.anchorSig(org, a)
	return len(doomed), storage.Put(tx, storage.BucketAuditAnchors, org[:], &a)
}
