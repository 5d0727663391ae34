package admin_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"slipway/server/apptest"
	"slipway/storage"
)

// deleteOrgKeys removes every key of org from the named buckets.
func deleteOrgKeys(tx *bolt.Tx, org uuid.UUID, buckets ...string) error {
	for _, name := range buckets {
		b := tx.Bucket([]byte(name))
		var doomed [][]byte
		c := b.Cursor()
		for k, _ := c.Seek(org[:]); k != nil && bytes.HasPrefix(k, org[:]); k, _ = c.Next() {
			doomed = append(doomed, storage.Copy(k))
		}
		for _, k := range doomed {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
	}
	return nil
}

// TestAdminAuditVerifyTruncation attacks the ends of the chains in copies
// of a stopped server's database: the last 3 records of an organization's
// chain removed with its head rewritten, or with the head rolled back to
// the authentic one it had 3 events earlier; an organization's chain
// deleted whole; the manifest deleted. `slipway admin audit verify` exits
// 1 naming each; the untouched, restarted and pruned database verifies.
func TestAdminAuditVerifyTruncation(t *testing.T) {
	s := apptest.New(t, nil)
	acme := strings.TrimSpace(mustAdmin(t, s.DataDir, "org", "create", "--name", "Acme", "--plan", "enterprise"))
	acmeKey := strings.TrimSpace(mustAdmin(t, s.DataDir, "org", "create-admin-key", acme))
	var org string
	for id, o := range listOrgs(t, s.DataDir) {
		if o.DisplayName == "Default" {
			org = id
		}
	}
	orgID := uuid.MustParse(org)
	headKey := storage.Key(orgID, storage.U64(storage.AuditHeadSeq))
	for i := 1; i <= 3; i++ {
		createDeployment(t, s, s.Key, fmt.Sprintf("d%d", i))
	}
	createDeployment(t, s, acmeKey, "a1")
	// The head as it was after 3 events: authentic, but old.
	s.Stop()
	var oldHead []byte
	editTx(t, s.DataDir, func(tx *bolt.Tx) error {
		oldHead = storage.Copy(tx.Bucket([]byte("audit_events")).Get(headKey))
		return nil
	})
	s.Restart()
	for i := 4; i <= 6; i++ {
		createDeployment(t, s, s.Key, fmt.Sprintf("d%d", i))
	}
	createDeployment(t, s, acmeKey, "a2")
	out := mustAdmin(t, s.DataDir, "audit", "verify")
	// Acme's chain starts with create_organization and create_service_key.
	if !strings.Contains(out, "intact: 2 organization(s), 10 event(s)") || !strings.Contains(out, "sealed since") {
		t.Fatalf("before tampering: %s", out)
	}
	s.Stop()

	truncate := func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("audit_events"))
		for seq := uint64(4); seq <= 6; seq++ {
			if err := b.Delete(storage.Key(orgID, storage.U64(seq))); err != nil {
				return err
			}
		}
		return nil
	}
	cases := []struct {
		name   string
		mutate func(tx *bolt.Tx) error
		want   []string // lines of the verify output
	}{
		{"untouched", func(*bolt.Tx) error { return nil }, nil},
		{"last 3 removed, head rewritten", func(tx *bolt.Tx) error {
			if err := truncate(tx); err != nil {
				return err
			}
			b := tx.Bucket([]byte("audit_events"))
			var rec struct {
				MAC []byte `json:"mac"`
			}
			raw := b.Get(storage.Key(orgID, storage.U64(3)))
			if err := json.Unmarshal(raw[8:], &rec); err != nil {
				return err
			}
			t3 := int64(storage.U64ToInt(raw))
			return storage.Put(tx, "audit_events", headKey, map[string]any{"seq": 3, "mac": rec.MAC, "time": t3})
		}, []string{"organization " + org + ": first broken record seq 3: the chain head at record 3 is not authentic",
			"every organization: the manifest records 10 event(s) appended, the chain heads account for 7"}},
		{"last 3 removed, head rolled back", func(tx *bolt.Tx) error {
			if err := truncate(tx); err != nil {
				return err
			}
			return tx.Bucket([]byte("audit_events")).Put(headKey, oldHead)
			// The index still lists the records cut off: it names the chain.
		}, []string{"organization " + org + ": first broken record seq 4: operation index: an entry under create_deployment names record 4, which the chain does not hold",
			"every organization: the manifest records 10 event(s) appended, the chain heads account for 7: a chain was truncated or its head rolled back"}},
		{"chain deleted whole", func(tx *bolt.Tx) error {
			return deleteOrgKeys(tx, orgID, "audit_events", "idx_audit_op", "audit_forward")
		}, []string{"every organization: the manifest records 2 organization chain(s), 1 have a head: a chain was deleted whole"}},
		{"chain deleted, index left", func(tx *bolt.Tx) error {
			return deleteOrgKeys(tx, orgID, "audit_events")
		}, []string{"organization " + org + ": first broken record seq 0: the organization's chain is missing",
			"every organization: the manifest records 2 organization chain(s), 1 have a head"}},
		{"manifest deleted", func(tx *bolt.Tx) error {
			return tx.Bucket([]byte("audit_seals")).Delete(storage.AuditManifestKey)
		}, []string{"every organization: the audit manifest is missing"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyDir(t, s.DataDir)
			editTx(t, dir, tc.mutate)
			c := apptest.New(t, map[string]string{"SLIPWAY_DATA_DIR": dir})
			out, errOut, code := runAdmin(t, dir, "audit", "verify")
			if tc.want == nil {
				if code != 0 || !strings.Contains(out, "intact") {
					t.Fatalf("untouched copy: exit %d\n%s%s", code, out, errOut)
				}
				// Restarted, pruned, and written to again: still intact.
				c.Restart()
				time.Sleep(5 * time.Millisecond)
				mustAdmin(t, dir, "audit", "prune", "--before", time.Now().UTC().Format(time.RFC3339Nano))
				createDeployment(t, c, c.Key, "d7")
				// d7 and each organization's delete_audit_logs event.
				if out := mustAdmin(t, dir, "audit", "verify"); !strings.Contains(out, "intact: 2 organization(s), 3 event(s)") {
					t.Fatalf("after a restart and pruning: %s", out)
				}
				return
			}
			if code != 1 || strings.Count(out, "\n  ") != len(tc.want) {
				t.Fatalf("verify: exit %d, want 1 with %d break(s)\n%s%s", code, len(tc.want), out, errOut)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Fatalf("verify output lacks %q:\n%s", w, out)
				}
			}
			// Later writes do not hide the damage.
			createDeployment(t, c, c.Key, "d7")
			if _, _, code := runAdmin(t, dir, "audit", "verify"); code != 1 {
				t.Fatalf("verify after another write: exit %d", code)
			}
		})
	}
}
