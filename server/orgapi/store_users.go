package orgapi

import (
	"errors"
	"strings"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"slipway/storage"
)

const (
	bucketUsers   = "users"
	idxOrgUsers   = "idx_org_users"   // org id ‖ user id → nil
	idxLoginEmail = "idx_login_email" // lower-case email → user id, basic-auth users only
)

var errNoAccount = errors.New("no account has this email")

// getUser reads a user; a missing one is storage.ErrNotFound.
func getUser(tx *bolt.Tx, id uuid.UUID) (*User, error) {
	var u User
	if err := storage.Get(tx, bucketUsers, storage.Key(id), &u); err != nil {
		return nil, err
	}
	return &u, nil
}

func userExists(tx *bolt.Tx, id uuid.UUID) bool {
	return tx.Bucket([]byte(bucketUsers)).Get(storage.Key(id)) != nil
}

// putUser writes a user with its membership index entry; every user write
// goes through here so the organization's member list never misses one.
func putUser(tx *bolt.Tx, u *User) error {
	if err := storage.Put(tx, bucketUsers, storage.Key(u.ID), u); err != nil {
		return err
	}
	return tx.Bucket([]byte(idxOrgUsers)).Put(storage.Key(u.OrgID, u.ID), nil)
}

// putLogin lets basic-auth user u log in with its email.
func putLogin(tx *bolt.Tx, u *User) error {
	return tx.Bucket([]byte(idxLoginEmail)).Put([]byte(u.Email), storage.Key(u.ID))
}

// loginTaken reports whether a basic-auth user logs in as email.
func loginTaken(tx *bolt.Tx, email string) bool {
	return tx.Bucket([]byte(idxLoginEmail)).Get([]byte(email)) != nil
}

// userByLogin finds the basic-auth user who logs in as account (a
// lower-case email); errNoAccount when there is none.
func userByLogin(tx *bolt.Tx, account string) (*User, error) {
	id := tx.Bucket([]byte(idxLoginEmail)).Get([]byte(account))
	if id == nil {
		return nil, errNoAccount
	}
	var u User
	if err := storage.Get(tx, bucketUsers, id, &u); err != nil {
		return nil, err
	}
	return &u, nil
}

// removeUser deletes a user with its login, its sessions and its index entry.
func removeUser(tx *bolt.Tx, u *User) error {
	if u.Password != nil {
		if err := tx.Bucket([]byte(idxLoginEmail)).Delete([]byte(strings.ToLower(u.Email))); err != nil {
			return err
		}
	}
	return errors.Join(dropSessions(tx, u.ID), deleteUserRecord(tx, u.OrgID, u.ID))
}

// deleteUserRecord deletes the user id of org and its index entry.
func deleteUserRecord(tx *bolt.Tx, org, id uuid.UUID) error {
	return errors.Join(storage.Delete(tx, bucketUsers, storage.Key(id)),
		tx.Bucket([]byte(idxOrgUsers)).Delete(storage.Key(org, id)))
}

// orgUsers reads the users of org, service identities included.
func orgUsers(tx *bolt.Tx, org uuid.UUID) ([]User, error) {
	return readIndexed[User](tx, idxOrgUsers, bucketUsers, org, "user")
}
