package controlplane

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"slipway/storage"
	"slipway/storage/errs"
)

// The control plane's buckets (their layout is described in
// storage/schema.go, whose migrations create them by these names). Only
// the store files (store*.go) name them: a handler or the reconciler asks
// the store, which keeps every index in step with its record.
const (
	bucketDeployments       = "deployments"
	idxWorkspaceDeployments = "idx_ws_deployments"      // workspace ‖ deployment → its name (v11)
	idxDeploymentName       = "idx_deployment_name"     // workspace ‖ name → deployment
	idxPendingDeployments   = "idx_pending_deployments" // deployment → nil: the reconciler has work there
)

// A record the caller named that does not exist or is not visible to its
// workspace is an errs.NotFound whose message names it ("Deployment ID …
// not found."); a write that would take a unique name or key another
// record holds is an errs.Conflict. Both are the domain vocabulary's
// *errs.Error, answered by httpx.FromDomain (routes.go).
func notFound(label string, id uuid.UUID) error {
	return errs.New(errs.NotFound, "%s %s not found.", label, id)
}

func deploymentNotFound(id uuid.UUID) error { return notFound("Deployment ID", id) }
func revisionNotFound(id uuid.UUID) error   { return notFound("Revision ID", id) }
func listenerNotFound(id uuid.UUID) error   { return notFound("Listener ID", id) }
func tracingNotFound(id uuid.UUID) error    { return notFound("Tracing project", id) }

func conflict(format string, args ...any) error { return errs.New(errs.Conflict, format, args...) }

// readDeployment returns the deployment stored under id, whatever its
// workspace (storage.ErrNotFound when there is none).
func readDeployment(tx *bolt.Tx, id uuid.UUID) (*deploymentRecord, error) {
	var d deploymentRecord
	if err := storage.Get(tx, bucketDeployments, storage.Key(id), &d); err != nil {
		return nil, err
	}
	return &d, nil
}

// deploymentExists says whether workspace ws has deployment id.
func deploymentExists(tx *bolt.Tx, ws, id uuid.UUID) bool {
	return tx.Bucket([]byte(idxWorkspaceDeployments)).Get(storage.Key(ws, id)) != nil
}

// loadDeployment returns the deployment if it belongs to the workspace;
// another workspace's deployment is answered exactly like a missing one.
func loadDeployment(tx *bolt.Tx, ws, id uuid.UUID) (*deploymentRecord, error) {
	if !deploymentExists(tx, ws, id) {
		return nil, deploymentNotFound(id)
	}
	d, err := readDeployment(tx, id)
	if err != nil {
		return nil, fmt.Errorf("deployment %s: %w", id, err)
	}
	return d, nil
}

// putDeployment writes an existing deployment's record; its name, workspace
// and host indexes are written by insertDeployment, removeDeploymentRecords
// and moveHost.
func putDeployment(tx *bolt.Tx, d *deploymentRecord) error {
	deploymentsChanged(tx)
	return storage.Put(tx, bucketDeployments, storage.Key(uuid.MustParse(d.ID)), d)
}

// insertDeployment stores a new deployment of workspace ws with its indexes
// (name, workspace, custom host) and marks it pending for the reconciler.
// A name or host another deployment holds is an errs.Conflict.
func insertDeployment(tx *bolt.Tx, ws uuid.UUID, d *deploymentRecord) error {
	id := uuid.MustParse(d.ID)
	nameKey := storage.Key(ws, d.Name)
	names := tx.Bucket([]byte(idxDeploymentName))
	if names.Get(nameKey) != nil {
		return conflict("A deployment named %q already exists in this workspace.", d.Name)
	}
	if err := claimHost(tx, customHostOf(&d.Deployment), id); err != nil {
		return err
	}
	return errors.Join(
		putDeployment(tx, d),
		names.Put(nameKey, storage.Key(id)),
		indexName(tx, ws, id, d.Name, false),
		tx.Bucket([]byte(idxWorkspaceDeployments)).Put(storage.Key(ws, id), []byte(d.Name)),
		markPending(tx, d.ID),
	)
}

// eachWorkspaceDeployment calls fn with the deployments of ws, newest first
// when newest is set, until fn returns false.
func eachWorkspaceDeployment(tx *bolt.Tx, ws uuid.UUID, newest bool, fn func(*deploymentRecord) bool) error {
	var err error
	walkWorkspaceDeployments(tx, ws, newest, uuid.Nil, func(id uuid.UUID, _ []byte) bool {
		var d *deploymentRecord
		if d, err = readDeployment(tx, id); err != nil {
			err = fmt.Errorf("deployment %s: %w", id, err)
			return false
		}
		return fn(d)
	})
	return err
}

// walkWorkspaceDeployments calls fn with the id and name of each deployment
// of ws from the workspace index alone, newest first when newest is set,
// starting after the deployment after (uuid.Nil: from the first), until fn
// returns false. Nothing is decoded: a page that skips costs key reads.
func walkWorkspaceDeployments(tx *bolt.Tx, ws uuid.UUID, newest bool, after uuid.UUID, fn func(id uuid.UUID, name []byte) bool) {
	prefix := storage.Key(ws)
	c := tx.Bucket([]byte(idxWorkspaceDeployments)).Cursor()
	// Newest first starts at the last key below a bound (the cursor, or
	// the end of the workspace's keys); oldest first at the first key
	// above the cursor (or the workspace's first key).
	var k, v []byte
	switch {
	case newest:
		bound := storage.Key(ws, uuid.Max)
		if after != uuid.Nil {
			bound = storage.Key(ws, after)
		}
		if k, v = c.Seek(bound); k == nil {
			k, v = c.Last()
		} else if after != uuid.Nil || !bytes.Equal(k, bound) {
			k, v = c.Prev()
		}
	case after != uuid.Nil:
		if k, v = c.Seek(storage.Key(ws, after)); bytes.Equal(k, storage.Key(ws, after)) {
			k, v = c.Next()
		}
	default:
		k, v = c.Seek(prefix)
	}
	for ; k != nil && bytes.HasPrefix(k, prefix); k, v = step(c, newest) {
		if len(k) != len(prefix)+16 {
			continue
		}
		if !fn(uuid.UUID(k[len(prefix):]), v) {
			return
		}
	}
}

func step(c *bolt.Cursor, back bool) ([]byte, []byte) {
	if back {
		return c.Prev()
	}
	return c.Next()
}

// deploymentQuery selects a page of a workspace's deployments, newest
// first.
type deploymentQuery struct {
	NameContains string          // lower-case; matched against the index
	IDs          map[string]bool // nil: any
	// Match is the filters that need the record (status, type, image);
	// nil when there are none, so that skipping decodes nothing.
	Match         func(*deploymentRecord) bool
	After         uuid.UUID // the previous page's last deployment (a cursor), or uuid.Nil
	Offset, Limit int
}

// workspaceDeploymentPage returns the page q selects and whether another
// deployment matches after it. Its cost is the index entries it passes
// (for name_contains of three characters or more, the trigram postings of
// the name, see store_names.go; otherwise the workspace's index keys) and
// the records it returns (and, with record filters, the records it tests).
func workspaceDeploymentPage(tx *bolt.Tx, ws uuid.UUID, q deploymentQuery) (page []*deploymentRecord, more bool, err error) {
	skipped := 0
	visit := func(id uuid.UUID, name []byte) bool {
		if q.IDs != nil && !q.IDs[id.String()] ||
			q.NameContains != "" && !strings.Contains(strings.ToLower(string(name)), q.NameContains) {
			return true
		}
		var d *deploymentRecord
		if q.Match != nil {
			if d, err = readDeployment(tx, id); err != nil {
				err = fmt.Errorf("deployment %s: %w", id, err)
				return false
			}
			if !q.Match(d) {
				return true
			}
		}
		if skipped < q.Offset {
			skipped++
			return true
		}
		if len(page) == q.Limit {
			more = true
			return false
		}
		if d == nil {
			if d, err = readDeployment(tx, id); err != nil {
				err = fmt.Errorf("deployment %s: %w", id, err)
				return false
			}
		}
		page = append(page, d)
		return true
	}
	if len(q.NameContains) >= 3 {
		before := uuid.Max
		if q.After != uuid.Nil {
			before = q.After
		}
		names := tx.Bucket([]byte(idxWorkspaceDeployments))
		nameCandidates(tx, ws, q.NameContains, before, func(id uuid.UUID) bool {
			return visit(id, names.Get(storage.Key(ws, id)))
		})
		return page, more, err
	}
	walkWorkspaceDeployments(tx, ws, true, q.After, visit)
	return page, more, err
}

// eachDeployment calls fn with every deployment of the install.
func eachDeployment(tx *bolt.Tx, fn func(*deploymentRecord) error) error {
	return eachRecord(tx, bucketDeployments, fn)
}

// eachRecord calls fn with every record of bucket, decoded.
func eachRecord[T any](tx *bolt.Tx, bucket string, fn func(*T) error) error {
	return tx.Bucket([]byte(bucket)).ForEach(func(k, v []byte) error {
		var rec T
		if err := json.Unmarshal(v, &rec); err != nil {
			return fmt.Errorf("decode %s record %x: %w", bucket, k, err)
		}
		return fn(&rec)
	})
}

// deploymentIDByName returns the id of the workspace's deployment called
// name.
func deploymentIDByName(tx *bolt.Tx, ws uuid.UUID, name string) (uuid.UUID, bool) {
	raw := tx.Bucket([]byte(idxDeploymentName)).Get(storage.Key(ws, name))
	if len(raw) != 16 {
		return uuid.Nil, false
	}
	return uuid.UUID(raw), true
}

// WorkspaceDeploymentCount is how many deployments workspace ws owns, read
// in the caller's transaction (the organization API refuses to delete a
// workspace that still has some).
func WorkspaceDeploymentCount(tx *bolt.Tx, ws uuid.UUID) int {
	n := 0
	walkWorkspaceDeployments(tx, ws, false, uuid.Nil, func(uuid.UUID, []byte) bool { n++; return true })
	return n
}

// markPending tells the reconciler, in the same transaction as the change,
// that a deployment has work: a queued revision, a deletion, a new record.
func markPending(tx *bolt.Tx, depID string) error {
	return tx.Bucket([]byte(idxPendingDeployments)).Put(storage.Key(uuid.MustParse(depID)), nil)
}

// unmarkPending drops a deployment with no work left from the pending index.
func unmarkPending(tx *bolt.Tx, id uuid.UUID) error {
	return tx.Bucket([]byte(idxPendingDeployments)).Delete(storage.Key(id))
}

// pendingDeployments lists the deployments marked pending, oldest first.
func pendingDeployments(tx *bolt.Tx) ([]uuid.UUID, error) {
	var ids []uuid.UUID
	err := tx.Bucket([]byte(idxPendingDeployments)).ForEach(func(k, _ []byte) error {
		id, err := uuid.FromBytes(k)
		if err != nil {
			return fmt.Errorf("pending deployment key %x: %w", k, err)
		}
		ids = append(ids, id)
		return nil
	})
	return ids, err
}

// removeDeploymentRecords deletes deployment d and everything it owns: its
// revisions and their logs, its uploads' records, its agent output, its
// custom host, its indexes and, if its deletion asked for it, its tracing
// project. Uploaded files are the caller's to remove once this commits.
func removeDeploymentRecords(tx *bolt.Tx, d *deploymentRecord) error {
	id, ws := uuid.MustParse(d.ID), uuid.MustParse(d.TenantID)
	if err := errors.Join(deleteRevisions(tx, id), deleteUploads(tx, id)); err != nil {
		return err
	}
	if d.DeleteTracingProject {
		if err := deleteTracingProject(tx, ws, d.Name); err != nil {
			return err
		}
	}
	deploymentsChanged(tx)
	return errors.Join(deleteAgentLogs(tx, id),
		releaseHost(tx, customHostOf(&d.Deployment), id),
		unmarkPending(tx, id),
		storage.Delete(tx, bucketDeployments, storage.Key(id)),
		tx.Bucket([]byte(idxDeploymentName)).Delete(storage.Key(ws, d.Name)),
		tx.Bucket([]byte(idxWorkspaceDeployments)).Delete(storage.Key(ws, id)),
		indexName(tx, ws, id, d.Name, true),
	)
}

// deploymentUsingListener returns the id of a deployment of ws that names
// listener lid, or "".
func deploymentUsingListener(tx *bolt.Tx, ws uuid.UUID, lid string) (string, error) {
	var found string
	err := eachWorkspaceDeployment(tx, ws, false, func(d *deploymentRecord) bool {
		if d.SourceConfig.ListenerID != nil && *d.SourceConfig.ListenerID == lid {
			found = d.ID
		}
		return found == ""
	})
	return found, err
}

// deploymentRecorded says whether a deployment with id is on record, in
// any workspace.
func deploymentRecorded(tx *bolt.Tx, id uuid.UUID) bool {
	return tx.Bucket([]byte(bucketDeployments)).Get(storage.Key(id)) != nil
}
