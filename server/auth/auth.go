// Package auth carries the authenticated caller through a request. The
// credential is resolved once by middleware; handlers only read the
// Principal and ask it questions, so permission checks live in one place.
package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"net/http"

	"github.com/google/uuid"
	"github.com/julienschmidt/httprouter"

	"slipway/server/httpx"
)

// Credential kinds.
const (
	KindServiceKey = "service_key" // workspace or organization service key (X-Api-Key)
	KindPAT        = "pat"         // personal access token (X-Api-Key or Bearer)
	KindSession    = "session"     // basic-auth login session (Bearer)
)

// Organization roles.
const (
	OrgAdmin    = "Organization Admin"
	OrgOperator = "Organization Operator"
	OrgUser     = "Organization User"
	OrgViewer   = "Organization Viewer"
)

// Workspace roles.
const (
	WSAdmin  = "Admin"
	WSEditor = "Editor"
	WSViewer = "Viewer"
)

// Principal is who is calling, resolved from the credential.
type Principal struct {
	OrgID         uuid.UUID
	WorkspaceID   uuid.UUID // zero when the call names no workspace and the credential has no default
	UserID        uuid.UUID
	CredentialID  *uuid.UUID // nil for session authentication
	Kind          string
	OrgRole       string // empty for workspace-scoped credentials
	WorkspaceRole string // role in WorkspaceID
	ReadOnly      bool
	// Service is set when the acting identity is a service account (the
	// identity behind a service key) rather than a person.
	Service bool
}

// OrgManage reports the organization:manage permission. Workspace roles never grant it.
func (p *Principal) OrgManage() bool { return p.OrgRole == OrgAdmin || p.OrgRole == OrgOperator }

// CanWrite reports whether the principal may change resources in its workspace.
func (p *Principal) CanWrite() bool {
	if p.ReadOnly {
		return false
	}
	return p.OrgRole == OrgAdmin || p.WorkspaceRole == WSAdmin || p.WorkspaceRole == WSEditor
}

// CanAdminWorkspace reports whether the principal administers its workspace (keys, members).
func (p *Principal) CanAdminWorkspace() bool {
	return !p.ReadOnly && (p.OrgRole == OrgAdmin || p.WorkspaceRole == WSAdmin)
}

type ctxKey struct{}

// With returns ctx carrying p.
func With(ctx context.Context, p *Principal) context.Context {
	return context.WithValue(ctx, ctxKey{}, p)
}

// From returns the request's principal; middleware guarantees one on authenticated routes.
func From(r *http.Request) *Principal {
	p, _ := r.Context().Value(ctxKey{}).(*Principal)
	return p
}

// Resolver turns a request's credentials into a Principal or a 401/403 error.
type Resolver interface {
	Authenticate(r *http.Request) (*Principal, error)
}

// Access says what a route does to what it reaches, which decides whether
// a read-only credential may call it.
type Access uint8

const (
	// ByMethod is the default: GET and HEAD read, every other method writes.
	ByMethod Access = iota
	// Read declares a route that only reads whatever its method (the
	// deploy client POSTs its log queries).
	Read
	// AgentAPI declares a deployment's agent API, whose route names the
	// agent-relative path "path": GET and HEAD read, and so do the POSTs
	// that only query (searches, counts, a thread's history), so a
	// workspace Viewer can look at assistants and threads.
	AgentAPI
)

// Policy is what a route demands of an authenticated caller.
type Policy struct {
	// Workspace: the caller must act in a workspace; without one it gets
	// the 403 the official deploy client recognises ("requires workspace
	// specification") and answers by sending X-Tenant-Id.
	Workspace bool
	Access    Access
}

// Writes reports whether a request with method on a route of access a
// changes something: anything not declared read, and not GET or HEAD. On
// a deployment's agent API (AgentAPI), path is the agent-relative path:
// its queries are POSTs that only read (agentapi.go).
func (a Access) Writes(method, path string) bool {
	switch {
	case a == Read, method == http.MethodGet, method == http.MethodHead:
		return false
	case a == AgentAPI:
		return method != http.MethodPost || !agentQuery(path)
	}
	return true
}

// Authorize is the one place that decides, for every authenticated route,
// whether p may call it at all: a read-only credential never reaches a
// route that writes, whatever the handler checks afterwards, and in a
// workspace route a write needs a role that writes. Handlers then check
// the finer permissions (organization:manage, workspace Admin).
func Authorize(p *Principal, method, path string, pol Policy) error {
	if pol.Workspace && p.WorkspaceID == uuid.Nil {
		return httpx.Forbidden("This API key is organization-scoped and requires workspace specification: send the X-Tenant-Id header.")
	}
	if !pol.Access.Writes(method, path) {
		return nil
	}
	if p.ReadOnly {
		return httpx.Forbidden("This credential is read-only: it cannot call %s on this endpoint.", method)
	}
	if pol.Workspace && !p.CanWrite() {
		return httpx.Forbidden("This credential has read-only access to the workspace.")
	}
	return nil
}

// Guard authenticates the caller, then runs h under pol. The refusal of
// Authorize happens inside wrap (an operation's audit tracking, or nil),
// so a refused call of a tracked operation is recorded like any other
// refusal; a failed authentication is not, having no actor to record.
func Guard(res Resolver, pol Policy, wrap func(httpx.Handle) httpx.Handle, h httpx.Handle) httprouter.Handle {
	inner := func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
		// An agent API route names the agent-relative path "path".
		if err := Authorize(From(r), r.Method, ps.ByName("path"), pol); err != nil {
			return err
		}
		return h(w, r, ps)
	}
	if wrap != nil {
		inner = wrap(inner)
	}
	return httpx.Adapt(func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
		p, err := res.Authenticate(r)
		if err != nil {
			return err
		}
		return inner(w, r.WithContext(With(r.Context(), p)), ps)
	})
}

// Require is Guard for an untracked route whose access follows its method.
func Require(res Resolver, needWorkspace bool, h httpx.Handle) httprouter.Handle {
	return Guard(res, Policy{Workspace: needWorkspace}, nil, h)
}

// RequireRead is Require with a workspace for a route that only reads
// whatever its method, so read-only credentials may use it.
func RequireRead(res Resolver, h httpx.Handle) httprouter.Handle {
	return Guard(res, Policy{Workspace: true, Access: Read}, nil, h)
}

// NewKey returns a fresh API key with the given prefix ("slw_sk", "slw_pt").
func NewKey(prefix string) string {
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return prefix + "_" + hex.EncodeToString(b[:])
}

// Hash is how keys are stored and looked up. Keys are 192-bit random, so a
// fast hash is enough; a slow KDF would only cost every request.
func Hash(key string) []byte {
	h := sha256.Sum256([]byte(key))
	return h[:]
}

// ShortKey is the non-secret hint shown in listings.
func ShortKey(key string) string {
	if len(key) < 12 {
		return "****"
	}
	return key[:7] + "…" + key[len(key)-4:]
}
