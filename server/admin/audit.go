package admin

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"
	"golang.org/x/sys/unix"

	"slipway/server/audit"
	"slipway/server/orgapi"
	"slipway/server/track"
)

// Every change made on the admin socket writes an OCSF API Activity event
// into the chain of the organization it changes, in the transaction that
// makes the change. The actor is the host administrator, who is no account
// of any organization: actor.user.uid is the nil UUID (audit.HostAdmin),
// its name "host administrator", type Admin (type_id 2), uid_alt the unix
// uid that connected to the socket (SO_PEERCRED), a null credential_uid;
// api.service.name is "slipway-admin" and src_endpoint.hostname the host's
// name, since a unix socket has no address.
//
// Operations: org create → create_organization, set-plan →
// update_payment_plan (the hosted service's name for a plan change),
// set-flag and unset-flag → update_organization_config, create-admin-key →
// create_service_key (what POST /api/v1/orgs/current/service-keys
// records), audit prune → delete_audit_logs (in each organization whose
// events it pruned). A refused change to an organization that exists is a
// Failure event in its chain; one that names no organization (a bad id,
// an unknown one, an invalid name for a new one) is in Slipway's log only.

type peerKey struct{}

// peerContext keeps the unix uid of the process at the other end of an
// admin socket connection, for the events its requests record.
func peerContext(ctx context.Context, c net.Conn) context.Context {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return ctx
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return ctx
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil || credErr != nil {
		return ctx
	}
	uid := int(cred.Uid)
	return context.WithValue(ctx, peerKey{}, uid)
}

// hostEntry is the event of op on org by the host administrator, for the
// admin request r answered with status.
func hostEntry(r *http.Request, op string, org uuid.UUID, ok bool, status int, detail string, res []audit.Resource) audit.Entry {
	a := audit.Actor{OrgID: org.String(), UserID: audit.HostAdmin, Host: true}
	if uid, found := r.Context().Value(peerKey{}).(int); found {
		a.HostUID = &uid
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	return audit.Entry{Op: op, OK: ok, Detail: detail, Actor: a, Resources: res,
		Request: audit.Request{Method: r.Method, Path: r.URL.Path, UserAgent: r.UserAgent(), Hostname: host, Status: status}}
}

// recorder returns the orgapi.Record of op for r: it appends the success
// event in the caller's transaction.
func (s *Server) recorder(r *http.Request, op string, status int) orgapi.Record {
	return func(tx *bolt.Tx, org uuid.UUID, res ...audit.Resource) error {
		return s.Log.Append(tx, hostEntry(r, op, org, true, status, "", res))
	}
}

// refused records op refused with err as a Failure event in org's chain
// when org exists, in a transaction of its own (there is no change to go
// with it), and logs it either way.
func (s *Server) refused(r *http.Request, op string, org uuid.UUID, err error) {
	status, detail := track.Describe(err)
	ev := s.Logger.Warn().Str("operation", op).Int("status", status).Str("detail", detail)
	if org == uuid.Nil {
		ev.Msg("admin: change refused")
		return
	}
	ev = ev.Str("organization_id", org.String())
	if _, gerr := s.Orgs.GetOrg(org); gerr != nil {
		ev.Msg("admin: change refused (no such organization: not audited)")
		return
	}
	ev.Msg("admin: change refused")
	entry := hostEntry(r, op, org, false, status, detail, []audit.Resource{audit.Res(org, "organization")})
	if werr := s.update(func(tx *bolt.Tx) error { return s.Log.Append(tx, entry) }); werr != nil {
		s.Logger.Error().Err(werr).Str("operation", op).Msg("audit: could not record a refused admin change")
	}
}

// update runs a durable write transaction through the API's committer.
func (s *Server) update(fn func(*bolt.Tx) error) error {
	if s.Update != nil {
		return s.Update(fn)
	}
	return s.DB.Update(fn)
}

// recordPrune returns the Retention hook that records `audit prune` in each
// organization whose events it pruned.
func (s *Server) recordPrune(r *http.Request, before time.Time) func(tx *bolt.Tx, org uuid.UUID, n int) error {
	return func(tx *bolt.Tx, org uuid.UUID, n int) error {
		res := audit.Resource{UID: org.String(), Type: "audit_log",
			Name: fmt.Sprintf("%d event(s) before %s", n, before.UTC().Format(time.RFC3339Nano))}
		return s.Log.Append(tx, hostEntry(r, "delete_audit_logs", org, true, http.StatusOK, "", []audit.Resource{res}))
	}
}
