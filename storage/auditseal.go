package storage

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"time"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"
)

// The audit chain's record format is the audit package's; what is defined
// here is the part a migration must be able to write: the authenticated
// chain heads and the manifest over them.
//
// Each record's MAC covers its predecessor's, so editing, removing or
// reordering a record inside a chain breaks it; but the end of a chain is
// just its last record. Without more, removing the last records and
// rewriting the head, or removing a chain whole, leaves something that
// verifies. So each head carries a seal (an HMAC over organization, head
// sequence, head MAC and time) and the manifest counts the chains and the
// events ever appended to them (the sum of their head sequences), under an
// HMAC. Both are rewritten in the transaction of every append. A head cannot
// be rewritten without the key, and an older authentic head (or a deleted
// chain) no longer adds up to the manifest.

// AuditChainPurpose derives the audit chain's HMAC key from the master key.
const AuditChainPurpose = "slipway audit chain v1"

// AuditManifestKey is the manifest's key in the audit_seals bucket.
var AuditManifestKey = []byte("manifest")

// AuditHeadSeq is the key suffix of an organization's chain head, stored
// after its events so that appending usually dirties a single leaf page.
const AuditHeadSeq = ^uint64(0)

// AuditHead is the end of an organization's chain: the sequence number,
// MAC and time of its last record, and the seal that authenticates them.
type AuditHead struct {
	Seq  uint64 `json:"seq"`
	MAC  []byte `json:"mac"`
	Time int64  `json:"time"`
	Seal []byte `json:"seal,omitempty"`
}

// Sign returns the head's seal. mac is an HMAC-SHA256 keyed with the chain
// key; it is reset first, so the caller may reuse one (keying an HMAC costs
// more than the few bytes it then hashes).
func (h *AuditHead) Sign(mac hash.Hash, org uuid.UUID) []byte {
	m := mac
	m.Reset()
	m.Write([]byte("slipway audit head\x00"))
	m.Write(org[:])
	m.Write(U64(h.Seq))
	m.Write(U64(uint64(h.Time)))
	m.Write(h.MAC)
	return m.Sum(nil)
}

// AuditManifest summarizes every organization's chain head. It is read
// and written with every event, so it is stored in a fixed binary form
// (version 1 ‖ chains ‖ appended ‖ since ‖ mac) rather than JSON.
type AuditManifest struct {
	// Chains is the number of organizations with a chain head.
	Chains uint64
	// Appended is the number of events ever appended, the sum of every
	// head's sequence number: pruning leaves it alone, truncating a chain
	// or rolling its head back to an older one lowers the heads' sum.
	Appended uint64
	// Since is when the heads began to be sealed (Unix ms): the upgrade
	// from a version without seals, or the first event. Tampering before
	// then is not detectable.
	Since int64
	MAC   []byte
}

const auditManifestLen = 1 + 3*8 + sha256.Size

// DecodeAuditManifest decodes a stored manifest.
func DecodeAuditManifest(v []byte) (m AuditManifest, err error) {
	if len(v) != auditManifestLen || v[0] != 1 {
		return m, fmt.Errorf("audit manifest: %d bytes of an unknown format", len(v))
	}
	m.Chains = U64ToInt(v[1:])
	m.Appended = U64ToInt(v[9:])
	m.Since = int64(U64ToInt(v[17:]))
	m.MAC = Copy(v[25:])
	return m, nil
}

// Encode returns the manifest's stored form.
func (m *AuditManifest) Encode() ([]byte, error) {
	if len(m.MAC) != sha256.Size {
		return nil, fmt.Errorf("audit manifest: MAC of %d bytes", len(m.MAC))
	}
	v := make([]byte, 0, auditManifestLen)
	v = append(v, 1)
	v = append(v, U64(m.Chains)...)
	v = append(v, U64(m.Appended)...)
	v = append(v, U64(uint64(m.Since))...)
	v = append(v, m.MAC...)
	return v, nil
}

// Sign returns the manifest's MAC; mac is reset first, as for AuditHead.
func (m *AuditManifest) Sign(mac hash.Hash) []byte {
	h := mac
	h.Reset()
	h.Write([]byte("slipway audit manifest\x00"))
	h.Write(U64(m.Chains))
	h.Write(U64(m.Appended))
	h.Write(U64(uint64(m.Since)))
	return h.Sum(nil)
}

// IsAuditHeadKey reports whether an audit_events key is a chain head's.
func IsAuditHeadKey(k []byte) bool {
	return len(k) == 24 && bytes.Equal(k[16:], U64(AuditHeadSeq))
}

// sealAuditChains is migration 6: it seals the head of every chain an
// earlier version wrote and writes the manifest over them, so a database
// from before the seals opens and verifies, and is protected from then on.
// A database with no chain yet needs no key; its manifest is written with
// the first event.
func sealAuditChains(tx *bolt.Tx, keys Keys) error {
	if err := CreateBuckets(tx, "audit_seals"); err != nil {
		return err
	}
	events := tx.Bucket([]byte("audit_events"))
	type found struct {
		key  []byte
		head AuditHead
	}
	var heads []found
	err := events.ForEach(func(k, v []byte) error {
		if !IsAuditHeadKey(k) {
			return nil
		}
		var h AuditHead
		if err := json.Unmarshal(v, &h); err != nil {
			return fmt.Errorf("audit head of organization %x: %w", k[:16], err)
		}
		heads = append(heads, found{Copy(k), h})
		return nil
	})
	if err != nil || len(heads) == 0 {
		return err
	}
	if keys == nil {
		return errors.New("sealing the audit chains needs the master key")
	}
	mac := hmac.New(sha256.New, keys(AuditChainPurpose))
	m := AuditManifest{Since: time.Now().UnixMilli()}
	for _, f := range heads {
		org, _ := uuid.FromBytes(f.key[:16])
		f.head.Seal = f.head.Sign(mac, org)
		m.Chains++
		m.Appended += f.head.Seq
		if err := Put(tx, "audit_events", f.key, &f.head); err != nil {
			return err
		}
	}
	m.MAC = m.Sign(mac)
	v, err := m.Encode()
	if err != nil {
		return err
	}
	return tx.Bucket([]byte("audit_seals")).Put(AuditManifestKey, v)
}
