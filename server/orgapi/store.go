package orgapi

import (
	"errors"
	"fmt"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"slipway/storage"
	"slipway/storage/errs"
)

// The organization API's store: every bucket it owns is named in a
// store*.go file and written only by the functions beside it, which keep
// the bucket's indexes right. They take the caller's transaction, so a
// change and its audit event commit together, and they return domain
// errors (the domain vocabulary's *errs.Error, a message written for the
// caller), which httpError (routes.go) turns into HTTP answers.

// notFound: the thing named does not exist (404).
func notFound(format string, args ...any) error { return errs.New(errs.NotFound, format, args...) }

// conflict: it exists already (409).
func conflict(format string, args ...any) error { return errs.New(errs.Conflict, format, args...) }

// refused: the state forbids the change (400).
func refused(format string, args ...any) error { return errs.New(errs.BadRequest, format, args...) }

// denied: the caller may not do this (403).
func denied(format string, args ...any) error { return errs.New(errs.Forbidden, format, args...) }

// readIndexed reads, in index order, the records of bucket that the index
// idx lists under org (keys org id ‖ record id); what names a record in
// errors.
func readIndexed[T any](tx *bolt.Tx, idx, bucket string, org uuid.UUID, what string) ([]T, error) {
	var out []T
	for _, id := range storage.PrefixIDs(tx, idx, storage.Key(org), false) {
		var v T
		if err := storage.Get(tx, bucket, storage.Key(id), &v); err != nil {
			return nil, fmt.Errorf("%s %s: %w", what, id, err)
		}
		out = append(out, v)
	}
	return out, nil
}

// ---- organizations ----

const bucketOrgs = "orgs"

// readOrg reads an organization; a missing one is storage.ErrNotFound.
func readOrg(tx *bolt.Tx, id uuid.UUID) (*Org, error) {
	var org Org
	if err := storage.Get(tx, bucketOrgs, storage.Key(id), &org); err != nil {
		return nil, fmt.Errorf("organization %s: %w", id, err)
	}
	return &org, nil
}

// getOrg reads an organization into org; a missing one is a notFound.
func getOrg(tx *bolt.Tx, id uuid.UUID, org *Org) error {
	err := storage.Get(tx, bucketOrgs, storage.Key(id), org)
	if errors.Is(err, storage.ErrNotFound) {
		return notFound("Organization %s not found.", id)
	}
	return err
}

func putOrg(tx *bolt.Tx, org *Org) error {
	return storage.Put(tx, bucketOrgs, storage.Key(org.ID), org)
}

// hasOrgs reports whether any organization exists.
func hasOrgs(tx *bolt.Tx) bool {
	k, _ := tx.Bucket([]byte(bucketOrgs)).Cursor().First()
	return k != nil
}

// allOrgs returns every organization in key order.
func allOrgs(tx *bolt.Tx) ([]Org, error) {
	var out []Org
	err := tx.Bucket([]byte(bucketOrgs)).ForEach(func(_, v []byte) error {
		var o Org
		if err := jsonUnmarshal(v, &o); err != nil {
			return fmt.Errorf("organization record: %w", err)
		}
		out = append(out, o)
		return nil
	})
	return out, err
}
