// Package audit records tracked operations as OCSF 1.7.0 API Activity
// events, in the same bbolt transaction as the change they describe, chained
// per organization with an HMAC so that modification, deletion and
// reordering are detectable, with sealed chain heads and a manifest over
// them so that truncating a chain or deleting it whole is too; and answers
// queries over them. Its retention prunes them and its forwarder delivers
// them to a collector.
//
// It knows nothing of serving HTTP: the middleware that marks handlers as
// tracked operations and records their events is server/track. The audit
// buckets are named here and in store_*.go, and only those files touch them.
package audit

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"sync"
	"time"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"slipway/storage"
)

// The audit log's buckets (storage/schema.go's migrations create them).
const (
	// bucketEvents: org id ‖ uint64 seq → uint64 time ms ‖ record; org id ‖
	// 0xFF×8 → the chain head.
	bucketEvents = "audit_events"
	// idxOp: org id ‖ operation ‖ 0x00 ‖ uint64 seq → nil.
	idxOp = "idx_audit_op"
	// bucketAnchors: org id → the signed anchor left by retention pruning.
	bucketAnchors = "audit_anchors"
	// bucketForward: org id → the forwarder's ForwardState.
	bucketForward = "audit_forward"
	// bucketSeals: "manifest" → the manifest over every chain head.
	bucketSeals = "audit_seals"
)

// Log writes and reads the audit log.
type Log struct {
	// Key is the chain's HMAC key, derived from the master key.
	Key     []byte
	Version string
	Now     func() time.Time
	// Appended, when set, is called once per event whose append was
	// committed (metrics count them; a rolled-back write is not counted).
	Appended func()

	// macs holds HMACs keyed with Key: an event takes three MACs, and
	// keying an HMAC costs more than the few bytes each then hashes.
	macs sync.Pool
}

// keyed returns an HMAC-SHA256 keyed with l.Key, to give back with
// l.macs.Put; it is reset by whoever writes to it.
func (l *Log) keyed() hash.Hash {
	if h, ok := l.macs.Get().(hash.Hash); ok {
		return h
	}
	return hmac.New(sha256.New, l.Key)
}

func (l *Log) now() time.Time {
	if l.Now != nil {
		return l.Now().UTC()
	}
	return time.Now().UTC()
}

// record is one stored event: the facts of the operation (body) and its
// place in its organization's chain. The OCSF event is rendered from the
// body when read, so the log stores a few hundred bytes per event rather
// than the full document, and the MAC covers exactly the stored bytes. It
// is stored behind an 8-byte big-endian time, so a time lookup reads only
// that prefix.
type record struct {
	Body json.RawMessage `json:"b"`
	Prev []byte          `json:"prev"`
	MAC  []byte          `json:"mac"`
	Time int64           `json:"-"`
}

// body is what an event records; Render turns it into OCSF.
type body struct {
	ID        string     `json:"id"`
	Version   string     `json:"v"`
	Op        string     `json:"op"`
	OK        bool       `json:"ok"`
	Detail    string     `json:"detail,omitempty"`
	Actor     Actor      `json:"actor"`
	Request   Request    `json:"req"`
	Resources []Resource `json:"res,omitempty"`
}

func encodeRecord(rec *record) ([]byte, error) {
	raw, err := json.Marshal(rec)
	if err != nil {
		return nil, fmt.Errorf("audit record: %w", err)
	}
	return append(storage.U64(uint64(rec.Time)), raw...), nil
}

func decodeRecord(v []byte) (record, error) {
	var rec record
	if len(v) < 8 {
		return rec, errors.New("audit record too short")
	}
	if err := json.Unmarshal(v[8:], &rec); err != nil {
		return rec, fmt.Errorf("audit record: %w", err)
	}
	rec.Time = recordTime(v)
	return rec, nil
}

func (rec *record) body() (body, error) {
	var b body
	if err := json.Unmarshal(rec.Body, &b); err != nil {
		return b, fmt.Errorf("audit record body: %w", err)
	}
	return b, nil
}

// render returns the OCSF 1.7.0 API Activity event of a stored record.
func (rec *record) render() (json.RawMessage, body, error) {
	b, err := rec.body()
	if err != nil {
		return nil, b, err
	}
	ev, err := json.Marshal(build(b.ID, time.UnixMilli(rec.Time).UTC(), b.Op, b.OK, b.Detail, b.Actor, b.Request, b.Resources, b.Version))
	return ev, b, err
}

func recordTime(v []byte) int64 { return int64(binary.BigEndian.Uint64(v[:8])) }

// headSeq is the key suffix of an organization's chain head.
const headSeq = storage.AuditHeadSeq

// head is the end of an organization's chain, sealed (storage/auditseal.go).
type head = storage.AuditHead

func getHead(tx *bolt.Tx, org uuid.UUID) (head, bool, error) {
	var h head
	raw := tx.Bucket([]byte(bucketEvents)).Get(storage.Key(org, storage.U64(headSeq)))
	if raw == nil {
		return h, false, nil
	}
	if err := json.Unmarshal(raw, &h); err != nil {
		return h, true, fmt.Errorf("audit head: %w", err)
	}
	return h, true, nil
}

// getManifest reads the manifest of every chain head; found is false in a
// database that has never had an event.
func getManifest(tx *bolt.Tx) (storage.AuditManifest, bool, error) {
	v := tx.Bucket([]byte(bucketSeals)).Get(storage.AuditManifestKey)
	if v == nil {
		return storage.AuditManifest{}, false, nil
	}
	m, err := storage.DecodeAuditManifest(v)
	return m, true, err
}

// putManifest writes the manifest.
func putManifest(tx *bolt.Tx, m *storage.AuditManifest) error {
	v, err := m.Encode()
	if err != nil {
		return err
	}
	return tx.Bucket([]byte(bucketSeals)).Put(storage.AuditManifestKey, v)
}

// sealHead returns the seal of an organization's chain head.
func (l *Log) sealHead(org uuid.UUID, h *head) []byte {
	m := l.keyed()
	defer l.macs.Put(m)
	return h.Sign(m, org)
}

// sealManifest returns the MAC of the manifest.
func (l *Log) sealManifest(mf *storage.AuditManifest) []byte {
	m := l.keyed()
	defer l.macs.Put(m)
	return mf.Sign(m)
}

// anchor stands in for pruned records: the chain continues from it.
type anchor struct {
	Seq uint64 `json:"seq"` // last pruned sequence number
	MAC []byte `json:"mac"` // its MAC
	Sig []byte `json:"sig"` // HMAC over seq and mac, so the anchor itself cannot be forged
}

func (l *Log) mac(org uuid.UUID, seq uint64, t int64, prev, ev []byte) []byte {
	m := l.keyed()
	defer l.macs.Put(m)
	m.Reset()
	m.Write(org[:])
	m.Write(storage.U64(seq))
	m.Write(storage.U64(uint64(t)))
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
// organization, so a query cursor can never be overtaken by a late commit
// and seq order is time order.
func (l *Log) Append(tx *bolt.Tx, e Entry) error {
	org, err := uuid.Parse(e.Actor.OrgID)
	if err != nil {
		return fmt.Errorf("audit: organization id %q: %w", e.Actor.OrgID, err)
	}
	if !Known(e.Op) {
		return fmt.Errorf("audit: unknown operation %q", e.Op)
	}
	h, hasHead, err := getHead(tx, org)
	if err != nil {
		return err
	}
	t := l.now()
	if t.UnixMilli() < h.Time {
		t = time.UnixMilli(h.Time).UTC()
	}
	b, err := json.Marshal(body{ID: storage.NewID().String(), Version: l.Version, Op: e.Op, OK: e.OK, Detail: e.Detail,
		Actor: e.Actor, Request: e.Request, Resources: e.Resources})
	if err != nil {
		return fmt.Errorf("audit event: %w", err)
	}
	seq := h.Seq + 1
	rec := record{Body: b, Time: t.UnixMilli(), Prev: h.MAC}
	rec.MAC = l.mac(org, seq, rec.Time, rec.Prev, b)
	raw, err := encodeRecord(&rec)
	if err != nil {
		return err
	}
	// The new head and the manifest are sealed in this transaction, so
	// they always agree with the chain. Neither is checked here: a head
	// or manifest that was tampered with still disagrees with the others
	// after this append, and Verify says so. An unreadable manifest is
	// started afresh rather than failing every audited write; the fresh
	// one does not add up either.
	m, found, err := getManifest(tx)
	if err != nil || !found {
		m = storage.AuditManifest{Since: rec.Time}
	}
	if !hasHead {
		m.Chains++
	}
	m.Appended++
	m.MAC = l.sealManifest(&m)
	nh := head{Seq: seq, MAC: rec.MAC, Time: rec.Time}
	nh.Seal = l.sealHead(org, &nh)
	events := tx.Bucket([]byte(bucketEvents))
	err = errors.Join(
		events.Put(storage.Key(org, storage.U64(seq)), raw),
		storage.Put(tx, bucketEvents, storage.Key(org, storage.U64(headSeq)), &nh),
		tx.Bucket([]byte(idxOp)).Put(indexKey(org, e.Op, seq), nil),
		putManifest(tx, &m),
	)
	if err == nil && l.Appended != nil {
		tx.OnCommit(l.Appended)
	}
	return err
}

// Break describes the first place a chain does not verify. A break of the
// manifest, which covers every chain, has no organization.
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
	// SealedSince is when the chain heads began to be sealed: truncating
	// or deleting a chain is detectable from then on.
	SealedSince *time.Time `json:"sealed_since,omitempty"`
}

// Verify walks each organization's chain from its anchor (or the start) to
// its head and reports, per organization, the first record that was
// modified, removed, inserted or moved, or a head that is not authentic;
// then checks the heads against the manifest, which catches a chain
// truncated to an older authentic head or deleted whole.
func (l *Log) Verify(tx *bolt.Tx) VerifyReport {
	var rep VerifyReport
	// Every organization with a head, any event or an anchor has a chain
	// to check.
	orgs := map[uuid.UUID]bool{}
	_ = tx.Bucket([]byte(bucketEvents)).ForEach(func(k, _ []byte) error {
		if len(k) == 24 {
			if id, err := uuid.FromBytes(k[:16]); err == nil {
				orgs[id] = true
			}
		}
		return nil
	})
	_ = tx.Bucket([]byte(bucketAnchors)).ForEach(func(k, _ []byte) error {
		if id, err := uuid.FromBytes(k); err == nil {
			orgs[id] = true
		}
		return nil
	})
	var chains, appended uint64
	for org := range orgs {
		rep.Organizations++
		n, br := l.verifyOrg(tx, org)
		rep.Events += n
		if br == nil {
			// The index is checked against a chain that verifies: a
			// broken chain is reported as such, and its index would only
			// repeat the break.
			br = verifyIndex(tx, org)
		}
		if br != nil {
			rep.Breaks = append(rep.Breaks, *br)
		}
		if h, found, err := getHead(tx, org); found && err == nil {
			chains++
			appended += h.Seq
		}
	}
	// A chain deleted whole leaves nothing above to walk; its operation
	// index entries, unless deleted too, still name its organization.
	for _, org := range indexedOrgs(tx) {
		if !orgs[org] {
			rep.Breaks = append(rep.Breaks, Break{Org: org.String(),
				Reason: "the organization's chain is missing (deleted whole); its operation index remains"})
		}
	}
	if br := l.verifyManifest(tx, &rep, chains, appended); br != nil {
		rep.Breaks = append(rep.Breaks, *br)
	}
	return rep
}

// verifyManifest checks the number of chains and the sum of their head
// sequences against the manifest.
func (l *Log) verifyManifest(tx *bolt.Tx, rep *VerifyReport, chains, appended uint64) *Break {
	m, found, err := getManifest(tx)
	switch {
	case err != nil:
		return &Break{Reason: fmt.Sprintf("the audit manifest is unreadable: %v", err)}
	case !found && rep.Organizations == 0:
		return nil // no event was ever recorded
	case !found:
		return &Break{Reason: "the audit manifest is missing (deleted)"}
	case !hmac.Equal(m.MAC, l.sealManifest(&m)):
		return &Break{Reason: "the audit manifest is not authentic (modified)"}
	}
	since := time.UnixMilli(m.Since).UTC()
	rep.SealedSince = &since
	// Heads cannot be forged, only deleted or replaced by older ones: so
	// fewer chains or events than recorded means deletion or truncation,
	// more means the manifest itself is an older copy.
	switch {
	case chains < m.Chains:
		return &Break{Reason: fmt.Sprintf("the manifest records %d organization chain(s), %d have a head: a chain was deleted whole", m.Chains, chains)}
	case appended < m.Appended:
		return &Break{Reason: fmt.Sprintf("the manifest records %d event(s) appended, the chain heads account for %d: "+
			"a chain was truncated or its head rolled back to an older one", m.Appended, appended)}
	case chains != m.Chains || appended != m.Appended:
		return &Break{Reason: fmt.Sprintf("the manifest records %d chain(s) and %d event(s) appended, the heads %d and %d: "+
			"the manifest was rolled back to an older copy", m.Chains, m.Appended, chains, appended)}
	}
	return nil
}

func indexedOrgs(tx *bolt.Tx) []uuid.UUID {
	// Operation names are ASCII, so org ‖ 0xFF sorts after them all.
	return orgsIn(tx.Bucket([]byte(idxOp)), func(id uuid.UUID) []byte { return storage.Key(id, []byte{0xFF}) })
}

// orgsIn lists the organizations whose ids prefix b's keys, in id order,
// skipping from one organization's range to the next: past(id) is a key
// that sorts after all of id's.
func orgsIn(b *bolt.Bucket, past func(uuid.UUID) []byte) []uuid.UUID {
	var out []uuid.UUID
	c := b.Cursor()
	for k, _ := c.First(); k != nil; {
		if len(k) < 16 {
			k, _ = c.Next()
			continue
		}
		id, _ := uuid.FromBytes(k[:16])
		out = append(out, id)
		k, _ = c.Seek(past(id))
	}
	return out
}

func (l *Log) verifyOrg(tx *bolt.Tx, org uuid.UUID) (int, *Break) {
	fail := func(seq uint64, format string, args ...any) *Break {
		return &Break{Org: org.String(), Seq: seq, Reason: fmt.Sprintf(format, args...)}
	}
	var prev []byte
	var next uint64 = 1
	anchored := false
	if raw := tx.Bucket([]byte(bucketAnchors)).Get(org[:]); raw != nil {
		var a anchor
		if err := json.Unmarshal(raw, &a); err != nil || !hmac.Equal(a.Sig, l.anchorSig(org, a)) {
			return 0, fail(0, "the retention anchor is not authentic")
		}
		prev, next, anchored = a.MAC, a.Seq+1, true
	}
	h, found, err := getHead(tx, org)
	if !found || err != nil {
		return 0, fail(0, "the chain head is missing or unreadable")
	}
	n := 0
	c := tx.Bucket([]byte(bucketEvents)).Cursor()
	var lastTime int64
	for k, v := c.Seek(org[:]); k != nil && bytes.HasPrefix(k, org[:]); k, v = c.Next() {
		seq := binary.BigEndian.Uint64(k[16:])
		if seq == headSeq {
			break
		}
		if seq < next {
			return n, fail(seq, "record %d precedes the retention anchor", seq)
		}
		if seq > next {
			return n, fail(next, "record %d is missing", next)
		}
		if seq > h.Seq {
			return n, fail(seq, "record %d is past the chain head (at %d): the head was rolled back", seq, h.Seq)
		}
		rec, err := decodeRecord(v)
		if err != nil {
			return n, fail(seq, "record %d is unreadable: %v", seq, err)
		}
		if !bytes.Equal(rec.Prev, prev) {
			return n, fail(seq, "record %d does not follow record %d (removed, inserted or reordered)", seq, seq-1)
		}
		if !hmac.Equal(rec.MAC, l.mac(org, seq, rec.Time, rec.Prev, rec.Body)) {
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
	case !bytes.Equal(h.MAC, prev) && (n > 0 || anchored):
		return n, fail(h.Seq, "the chain head does not match record %d", h.Seq)
	case !hmac.Equal(h.Seal, l.sealHead(org, &h)):
		return n, fail(h.Seq, "the chain head at record %d is not authentic: records after it were removed, or the head was rewritten", h.Seq)
	}
	return n, nil
}

// Prune deletes an organization's events older than cutoff, leaving a
// signed anchor so the rest of the chain still verifies. Events are
// time-ordered within a chain, so the pruned ones are always a prefix.
func (l *Log) Prune(tx *bolt.Tx, org uuid.UUID, cutoff time.Time) (int, error) {
	events := tx.Bucket([]byte(bucketEvents))
	var a anchor
	var doomed [][]byte
	c := events.Cursor()
	for k, v := c.Seek(org[:]); k != nil && bytes.HasPrefix(k, org[:]); k, v = c.Next() {
		seq := binary.BigEndian.Uint64(k[16:])
		if seq == headSeq || len(v) < 8 || recordTime(v) >= cutoff.UnixMilli() {
			break
		}
		rec, err := decodeRecord(v)
		if err != nil {
			return 0, err
		}
		doomed = append(doomed, storage.Copy(k))
		a.Seq, a.MAC = seq, rec.MAC
	}
	if len(doomed) == 0 {
		return 0, nil
	}
	for _, k := range doomed {
		if err := events.Delete(k); err != nil {
			return 0, err
		}
	}
	if err := pruneIndex(tx, org, a.Seq); err != nil {
		return 0, err
	}
	a.Sig = l.anchorSig(org, a)
	return len(doomed), storage.Put(tx, bucketAnchors, org[:], &a)
}

// Orgs lists the organizations that have audit events, in id order. It
// skips from one organization's key range to the next instead of reading
// every event.
func Orgs(tx *bolt.Tx) []uuid.UUID {
	// The head key (…‖0xFF×8) is the last key of the organization.
	return orgsIn(tx.Bucket([]byte(bucketEvents)), func(id uuid.UUID) []byte {
		return storage.Key(id, storage.U64(headSeq), []byte{0})
	})
}
