// Package track is the audit log's HTTP middleware: Recorder.Track marks
// a handler as a tracked operation, Success records its event inside the
// transaction that makes its change, and a refusal is recorded on its own.
//
// It stands beside the other middleware (auth's Guard, which takes it as
// its wrap, and httpx's Chain) as a package of its own because it needs
// all three of audit (to append), auth (the actor is the request's
// principal) and httpx (a refusal's status): inside audit it would tie the
// chain to HTTP, inside auth it would tie the credential check to the
// audit log, and httpx cannot import auth, which imports httpx.
package track

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"sort"
	"sync"

	"github.com/google/uuid"
	"github.com/julienschmidt/httprouter"
	bolt "go.etcd.io/bbolt"

	"slipway/server/audit"
	"slipway/server/auth"
	"slipway/server/httpx"
)

// Recorder ties the audit log to HTTP handlers.
type Recorder struct {
	Log *audit.Log
	// Update runs a durable write transaction (the same group-committing
	// writer the handlers use).
	Update func(func(*bolt.Tx) error) error
	// Trusted are the proxies whose X-Forwarded-For is believed.
	Trusted []netip.Prefix

	mu      sync.Mutex
	tracked map[string]bool
}

// Tracked lists, sorted, the operations Track has wrapped handlers for:
// what this server exposes, so a test can insist that each one is covered.
func (rc *Recorder) Tracked() []string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	out := make([]string, 0, len(rc.tracked))
	for op := range rc.tracked {
		out = append(out, op)
	}
	sort.Strings(out)
	return out
}

type slotKey struct{}

type slot struct {
	rec *Recorder
	op  string
}

// Track marks h as the tracked operation op. The handler records its
// success with Success inside the transaction that makes its change; when
// it returns an error instead (refused by validation, permissions or
// state), Track records a Failure event on its own, since there is no
// change to go with it. Track runs inside auth.Require: a caller whose
// credentials could not be established (401) has no actor to record.
func (rc *Recorder) Track(op string, h httpx.Handle) httpx.Handle {
	if !audit.Known(op) {
		panic(fmt.Sprintf("audit: %q is not an operation of the spec", op))
	}
	rc.mu.Lock()
	if rc.tracked == nil {
		rc.tracked = map[string]bool{}
	}
	rc.tracked[op] = true
	rc.mu.Unlock()
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
		r = r.WithContext(context.WithValue(r.Context(), slotKey{}, &slot{rec: rc, op: op}))
		err := h(w, r, ps)
		if err == nil {
			return nil
		}
		status, detail := describe(err)
		entry := rc.entry(r, op, false, status, nil)
		entry.Detail = detail
		if werr := rc.Update(func(tx *bolt.Tx) error { return rc.Log.Append(tx, entry) }); werr != nil {
			httpx.LogFrom(r).Error().Err(werr).Str("operation", op).Msg("audit: could not record a refused operation")
		}
		return err
	}
}

// Success records the tracked operation of r as successful, inside tx, the
// transaction that makes the change: the change and its event commit or
// fail together.
func Success(tx *bolt.Tx, r *http.Request, status int, resources ...audit.Resource) error {
	s, ok := r.Context().Value(slotKey{}).(*slot)
	if !ok {
		return errors.New("audit: Success called on a request that is not tracked")
	}
	return s.rec.Log.Append(tx, s.rec.entry(r, s.op, true, status, resources))
}

// Refused records a refused attempt by a caller who has no principal in
// org's log: a refused login names the account it claimed as the actor
// (with no credential) and as the resource.
func (rc *Recorder) Refused(r *http.Request, op string, org, user uuid.UUID, status int, detail string) error {
	p := &auth.Principal{OrgID: org, UserID: user}
	return rc.Update(func(tx *bolt.Tx) error {
		return rc.AppendFor(tx, r, p, op, false, status, detail, audit.Res(user, "user"))
	})
}

// AppendFor records op for r inside tx with p as the actor rather than
// r's principal: a login, whose request has no principal yet, names the
// account that signed in; a sign-out the credential it ends.
func (rc *Recorder) AppendFor(tx *bolt.Tx, r *http.Request, p *auth.Principal, op string, ok bool, status int,
	detail string, res ...audit.Resource) error {
	if !audit.Known(op) {
		return fmt.Errorf("audit: %q is not an operation", op)
	}
	e := rc.entryFor(r, p, op, ok, status, res)
	e.Detail = detail
	return rc.Log.Append(tx, e)
}

func (rc *Recorder) entry(r *http.Request, op string, ok bool, status int, res []audit.Resource) audit.Entry {
	return rc.entryFor(r, auth.From(r), op, ok, status, res)
}

func (rc *Recorder) entryFor(r *http.Request, p *auth.Principal, op string, ok bool, status int, res []audit.Resource) audit.Entry {
	ip, port, hops := ClientAddress(r, rc.Trusted)
	method, path, ua := r.Method, r.URL.Path, r.UserAgent()
	if v, found := r.Context().Value(viaKey{}).(via); found {
		method, path, ua = v.method, v.path, v.ua
	}
	e := audit.Entry{Op: op, OK: ok, Resources: res,
		Request: audit.Request{ID: httpx.RequestID(r), Method: method, Path: path, UserAgent: ua,
			ClientIP: ip, Port: port, Forwarded: hops, Status: status}}
	if p != nil {
		e.Actor = audit.Actor{OrgID: p.OrgID.String(), UserID: p.UserID.String(), Service: p.Service}
		if p.WorkspaceID != uuid.Nil {
			e.Actor.WorkspaceID = p.WorkspaceID.String()
		}
		if p.CredentialID != nil {
			c := p.CredentialID.String()
			e.Actor.CredentialID = &c
		}
	}
	return e
}

type viaKey struct{}

// via is the request a client made, for an in-process request made on its
// behalf.
type via struct{ method, path, ua string }

// Via returns ctx for an in-process request made on r's behalf (the
// dashboard's sign-in calling the API's login): events recorded for that
// request name r's method, path and user agent, the route the client
// called, rather than the internal one.
func Via(ctx context.Context, r *http.Request) context.Context {
	return context.WithValue(ctx, viaKey{}, via{method: r.Method, path: r.URL.Path, ua: r.UserAgent()})
}

// Describe turns a handler error into the response status and a detail
// safe to keep (error details never carry secret values).
func Describe(err error) (int, string) { return describe(err) }

// describe turns a handler error into the response status and a detail
// safe to keep (error details never carry secret values).
func describe(err error) (int, string) {
	var he *httpx.Error
	var ve *httpx.ValidationError
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &ve):
		return http.StatusUnprocessableEntity, ve.Error()
	case errors.As(err, &he):
		return he.Status, he.Detail
	case errors.As(err, &mbe):
		return http.StatusRequestEntityTooLarge, "request body too large"
	}
	return http.StatusInternalServerError, "internal error"
}
