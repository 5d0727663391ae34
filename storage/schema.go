package storage

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"slipway/storage/errs"
)

// The control-plane database (<data dir>/slipway.db). Every record is JSON;
// ids are UUIDv7 (16 raw bytes in keys) so cursor order is creation order.
// Index buckets map a composite key to nil (or to an id) and are written in
// the same transaction as the record they index. A domain's store declares
// the names of the buckets it owns, unexported, and alone reads and writes
// them (storage/ownership_test.go keeps it so); the migrations below name
// buckets literally, since they are frozen history. The owners:
//
//	server/orgapi/store*.go        orgs, workspaces, users, api keys, members, logins, sessions,
//	                               roles, invitations, workspace secrets, TTL settings
//	server/controlplane/store*.go  deployments, revisions, listeners, uploads, tracing projects,
//	                               custom hosts, the pending-work index, revision and agent logs
//	server/audit/store*.go         audit events, their operation index, anchors, forwarding, seals
//	this package                   meta (schema version, instance id)
//
//	meta                      version → uint64 schema version;
//	                          instance_id → this install's identity, 32 hex characters (v7, see InstanceID)
//	orgs                      org id → Org
//	workspaces                workspace id → Workspace
//	idx_org_workspaces        org id ‖ workspace id → nil
//	users                     user id → User
//	api_keys                  key id → APIKey (sha256 of the key, never the key)
//	idx_api_key_hash          sha256(key) → key id
//	deployments               deployment id → Deployment (secrets sealed)
//	idx_ws_deployments        workspace id ‖ deployment id → the deployment's name (v11; nil before)
//	idx_deployment_name       workspace id ‖ name → deployment id
//	idx_ws_deployment_trigrams workspace id ‖ 3 bytes of the lower-cased name ‖ deployment id → nil:
//	                          every three-character piece of each name, for name_contains (v11)
//	idx_pending_deployments   deployment id → nil: the reconciler has work there (v2)
//	audit_events              org id ‖ uint64 seq → uint64 time ms ‖ record {b: event facts, prev, mac} (v3);
//	                          org id ‖ 0xFF×8 → the chain head {seq, mac, time, seal (v6)}. Time never
//	                          decreases along an organization's seq, so this key order is the
//	                          (organization, time) index.
//	idx_audit_op              org id ‖ operation ‖ 0x00 ‖ uint64 seq → nil: (organization,
//	                          operation, time) order for the same reason (v3)
//	audit_anchors             org id → signed anchor left by retention pruning (v3)
//	audit_forward             org id → forwarder state {through, after {t, uid}, attempts, next_attempt, ...} (v4)
//	audit_seals               "manifest" → 0x01 ‖ chains ‖ appended ‖ since ‖ mac: the number of chains and
//	                          the sum of their head sequences, under an HMAC; with each head's
//	                          seal (an HMAC over org, seq, mac, time) it makes truncating a chain
//	                          or deleting it whole detectable (v6, see auditseal.go)
//	revisions                 revision id → Revision
//	idx_deployment_revisions  deployment id ‖ revision id → nil
//	listeners                 listener id → Listener
//	idx_ws_listeners          workspace id ‖ listener id → nil
//	idx_listener_compute      workspace id ‖ compute id → listener id
//	revision_logs             revision id ‖ uint64 seq → LogEntry (build and deploy output)
//	uploads                   upload id → Upload (sha256 of its token)
//	tracing_projects          project id → TracingProject
//	idx_tracing_project_name  workspace id ‖ name → project id
//	idx_org_users             org id ‖ user id → nil: the organization's members (v5)
//	idx_login_email           lower-case email → user id of the basic-auth user who logs in with it (v5)
//	sessions                  sha256(session token) → Session of a basic-auth login (v5)
//	roles                     role id → Role: custom workspace roles (built-ins are not stored) (v5)
//	idx_org_roles             org id ‖ role id → nil (v5)
//	pending_members           invite id → PendingMember: an invitation not yet accepted (v5)
//	idx_org_pending           org id ‖ invite id → nil (v5)
//	workspace_secrets         workspace id ‖ secret key → value sealed under the master key (v5)
//	ttl_settings              org id ‖ (workspace id, or 16 zero bytes for the organization) →
//	                          TTLSettings, incl. the organization's audit-log retention (v5)
//	idx_custom_host           HostKey(custom_url) → deployment id: the one deployment a host
//	                          routes to, across the whole install (v7)
//	agent_logs                deployment id → bucket: the deployment's agent output, a ring (v9):
//	                            uint64 seq → LogEntry (phase "agent", its revision and stream)
//	                            "size"     → uint64 bytes of the entries kept; the oldest go
//	                                         first when a flush takes it over the bound

// ControlPlaneDense are the control-plane buckets whose keys grow at the
// end (a UUIDv7 id or a sequence number last, or alone): the writers'
// Committer splits their leaves full (see Densify).
var ControlPlaneDense = []string{
	"orgs", "workspaces", "idx_org_workspaces", "users", "idx_org_users", "api_keys",
	"deployments", "idx_ws_deployments", "revisions", "idx_deployment_revisions", "revision_logs",
	"listeners", "idx_ws_listeners", "uploads", "tracing_projects", "roles", "idx_org_roles",
	"pending_members", "idx_org_pending", "audit_events", "idx_audit_op",
}

// ControlPlaneMigrations is the ordered history of the control-plane schema.
// Append only: a released migration never changes.
var ControlPlaneMigrations = []Migration{
	{Version: 1, Name: "initial buckets", Apply: func(tx *bolt.Tx) error {
		return CreateBuckets(tx, "orgs", "workspaces", "idx_org_workspaces", "users",
			"api_keys", "idx_api_key_hash", "deployments", "idx_ws_deployments", "idx_deployment_name",
			"revisions", "idx_deployment_revisions", "listeners", "idx_ws_listeners",
			"idx_listener_compute", "revision_logs", "uploads", "tracing_projects", "idx_tracing_project_name")
	}},
	{Version: 2, Name: "pending-work index", Apply: func(tx *bolt.Tx) error {
		// The reconciler used to scan every deployment; now it reads this
		// index. Every existing deployment starts pending and is settled
		// by the first scan.
		if err := CreateBuckets(tx, "idx_pending_deployments"); err != nil {
			return err
		}
		idx := tx.Bucket([]byte("idx_pending_deployments"))
		return tx.Bucket([]byte("deployments")).ForEach(func(k, _ []byte) error {
			return idx.Put(k, nil)
		})
	}},
	{Version: 3, Name: "audit log", Apply: func(tx *bolt.Tx) error {
		return CreateBuckets(tx, "audit_events", "idx_audit_op", "audit_anchors")
	}},
	{Version: 4, Name: "audit forwarding state", Apply: func(tx *bolt.Tx) error {
		// Per organization: the last window and event the forwarder
		// delivered, and the retry state of the window after it.
		return CreateBuckets(tx, "audit_forward")
	}},
	{Version: 5, Name: "organization members, roles, sessions, secrets and retention", Apply: func(tx *bolt.Tx) error {
		if err := CreateBuckets(tx, "idx_org_users", "idx_login_email", "sessions", "roles", "idx_org_roles",
			"pending_members", "idx_org_pending", "workspace_secrets", "ttl_settings"); err != nil {
			return err
		}
		// Members used to be found by scanning every user; index the
		// existing ones under their organization.
		idx := tx.Bucket([]byte("idx_org_users"))
		return tx.Bucket([]byte("users")).ForEach(func(k, v []byte) error {
			var u struct {
				OrgID uuid.UUID `json:"organization_id"`
			}
			if err := json.Unmarshal(v, &u); err != nil {
				return fmt.Errorf("user %x: %w", k, err)
			}
			return idx.Put(Key(u.OrgID, k), nil)
		})
	}},
	{Version: 6, Name: "audit chain head seals and manifest", Keyed: sealAuditChains},
	{Version: 7, Name: "custom host index", Apply: func(tx *bolt.Tx) error {
		// Hosts used to be found by scanning deployments, and the newest
		// claim of a host won. Each host now belongs to one deployment;
		// where several claimed one, the oldest (keys are creation-ordered
		// UUIDv7) keeps it and the others' custom_url no longer routes.
		if err := CreateBuckets(tx, "idx_custom_host"); err != nil {
			return err
		}
		idx := tx.Bucket([]byte("idx_custom_host"))
		return tx.Bucket([]byte("deployments")).ForEach(func(k, v []byte) error {
			var d struct {
				Status       string `json:"status"`
				SourceConfig struct {
					CustomURL *string `json:"custom_url"`
				} `json:"source_config"`
			}
			if err := json.Unmarshal(v, &d); err != nil {
				return fmt.Errorf("deployment %x: %w", k, err)
			}
			if d.SourceConfig.CustomURL == nil || d.Status == "AWAITING_DELETE" {
				return nil
			}
			h := HostKey(*d.SourceConfig.CustomURL)
			if h == "" || idx.Get([]byte(h)) != nil {
				return nil
			}
			return idx.Put([]byte(h), Copy(k))
		})
	}},
	{Version: 8, Name: "install identity", Apply: func(tx *bolt.Tx) error {
		// Created with the data dir, or on upgrade, once: it names this
		// install's objects in shared runtimes (a Docker engine) and moves
		// with the database.
		b, err := tx.CreateBucketIfNotExists(metaBucket)
		if err != nil {
			return err
		}
		if b.Get(instanceKey) != nil {
			return nil
		}
		var id [16]byte
		if _, err := rand.Read(id[:]); err != nil {
			return fmt.Errorf("instance id: %w", err)
		}
		return b.Put(instanceKey, []byte(hex.EncodeToString(id[:])))
	}},
	{Version: 9, Name: "agent output", Apply: func(tx *bolt.Tx) error {
		// Deployments before this version kept no agent output: each
		// gets its ring on its first line.
		return CreateBuckets(tx, "agent_logs")
	}},
	{Version: 10, Name: "service identities of revoked keys", Apply: removeOrphanServiceUsers},
	{Version: 11, Name: "deployment names in the workspace index, and their trigrams", Apply: func(tx *bolt.Tx) error {
		// A list filtered by name (the deploy client's lookup) or paged
		// by offset read every deployment it passed; with the name beside
		// the id in the workspace's index it reads keys only, and with the
		// name's trigrams a substring finds its deployments without
		// reading every name.
		idx, deps := tx.Bucket([]byte("idx_ws_deployments")), tx.Bucket([]byte("deployments"))
		type entry struct{ key, name []byte }
		var named []entry
		err := idx.ForEach(func(k, _ []byte) error {
			if len(k) != 32 {
				return nil
			}
			var d struct {
				Name string `json:"name"`
			}
			v := deps.Get(k[16:])
			if v == nil {
				return nil
			}
			if err := json.Unmarshal(v, &d); err != nil {
				return fmt.Errorf("deployment %x: %w", k[16:], err)
			}
			named = append(named, entry{Copy(k), []byte(d.Name)})
			return nil
		})
		if err != nil {
			return err
		}
		idx.FillPercent = 0.9 // keys grow at the end (UUIDv7)
		if err := CreateBuckets(tx, "idx_ws_deployment_trigrams"); err != nil {
			return err
		}
		grams := tx.Bucket([]byte("idx_ws_deployment_trigrams"))
		for _, e := range named {
			if err := idx.Put(e.key, e.name); err != nil {
				return err
			}
			// Each three-character piece of the name (see
			// server/controlplane/store_names.go), for name_contains.
			name := bytes.ToLower(e.name)
			for i := 0; i+3 <= len(name); i++ {
				k := append(append(Copy(e.key[:16]), name[i:i+3]...), e.key[16:]...)
				if err := grams.Put(k, nil); err != nil {
					return err
				}
			}
		}
		return nil
	}},
}

// removeOrphanServiceUsers deletes the service identities no key names any
// more: until this version, revoking a workspace service key (or deleting
// its workspace) left the key's service user behind, one member more per
// key ever revoked. A service user exists only for its key.
func removeOrphanServiceUsers(tx *bolt.Tx) error {
	named := map[string]bool{}
	err := tx.Bucket([]byte("api_keys")).ForEach(func(k, v []byte) error {
		var key struct {
			UserID uuid.UUID `json:"user_id"`
		}
		if err := json.Unmarshal(v, &key); err != nil {
			return fmt.Errorf("api key %x: %w", k, err)
		}
		named[string(key.UserID[:])] = true
		return nil
	})
	if err != nil {
		return err
	}
	var doomed [][]byte // user id ‖ org id: not deleted while iterating
	users := tx.Bucket([]byte("users"))
	err = users.ForEach(func(k, v []byte) error {
		var u struct {
			OrgID   uuid.UUID `json:"organization_id"`
			Service bool      `json:"service"`
		}
		if err := json.Unmarshal(v, &u); err != nil {
			return fmt.Errorf("user %x: %w", k, err)
		}
		if u.Service && !named[string(k)] {
			doomed = append(doomed, append(Copy(k), u.OrgID[:]...))
		}
		return nil
	})
	if err != nil {
		return err
	}
	members := tx.Bucket([]byte("idx_org_users"))
	for _, d := range doomed {
		id, org := d[:len(d)-16], d[len(d)-16:]
		if err := errors.Join(users.Delete(id), members.Delete(append(Copy(org), id...))); err != nil {
			return fmt.Errorf("remove service user %x: %w", id, err)
		}
	}
	return nil
}

var instanceKey = []byte("instance_id")

// InstanceID is this install's identity, stored in the database (migration
// 8): a random id that labels everything the install creates outside its
// data dir, so that two installs sharing a Docker engine never take each
// other's objects for their own. A data dir that moves keeps it.
func InstanceID(db *bolt.DB) (string, error) {
	var id string
	err := db.View(func(tx *bolt.Tx) error {
		if b := tx.Bucket(metaBucket); b != nil {
			id = string(b.Get(instanceKey))
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("read the instance id: %w", err)
	}
	if id == "" {
		return "", errors.New("the database has no instance id (migration 8 not applied)")
	}
	return id, nil
}

// ErrNotFound is returned by Get when the key is absent: the domain
// vocabulary's errs.NotFound itself, so one errors.Is check serves both.
var ErrNotFound = errs.NotFound

// Get decodes the JSON record at bucket/key into v.
func Get(tx *bolt.Tx, bucket string, key []byte, v any) error {
	raw := tx.Bucket([]byte(bucket)).Get(key)
	if raw == nil {
		return ErrNotFound
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("decode %s record: %w", bucket, err)
	}
	return nil
}

// Put encodes v as JSON at bucket/key.
func Put(tx *bolt.Tx, bucket string, key []byte, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s record: %w", bucket, err)
	}
	return tx.Bucket([]byte(bucket)).Put(key, raw)
}

// Delete removes bucket/key.
func Delete(tx *bolt.Tx, bucket string, key []byte) error {
	return tx.Bucket([]byte(bucket)).Delete(key)
}

// Key concatenates key parts (ids as 16 bytes, strings as bytes).
func Key(parts ...any) []byte {
	var b bytes.Buffer
	for _, p := range parts {
		switch v := p.(type) {
		case uuid.UUID:
			b.Write(v[:])
		case string:
			b.WriteString(v)
		case []byte:
			b.Write(v)
		default:
			panic(fmt.Sprintf("storage.Key: unsupported part %T", p))
		}
	}
	return b.Bytes()
}

// PrefixIDs returns the ids that follow prefix in an index bucket whose keys
// are prefix ‖ 16-byte id, in key order (creation order for UUIDv7), newest
// first when reverse is set.
func PrefixIDs(tx *bolt.Tx, bucket string, prefix []byte, reverse bool) []uuid.UUID {
	c := tx.Bucket([]byte(bucket)).Cursor()
	var out []uuid.UUID
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		if len(k) != len(prefix)+16 {
			continue
		}
		var id uuid.UUID
		copy(id[:], k[len(prefix):])
		out = append(out, id)
	}
	if reverse {
		for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
			out[i], out[j] = out[j], out[i]
		}
	}
	return out
}
