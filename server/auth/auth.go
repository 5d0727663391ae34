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

// Require authenticates before running h. With needWorkspace, a principal
// without a workspace gets the 403 the official deploy client recognises
// ("requires workspace specification") and answers by sending X-Tenant-Id.
func Require(res Resolver, needWorkspace bool, h httpx.Handle) httprouter.Handle {
	return httpx.Adapt(func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
		p, err := res.Authenticate(r)
		if err != nil {
			return err
		}
		if needWorkspace && p.WorkspaceID == uuid.Nil {
			return httpx.Forbidden("This API key is organization-scoped and requires workspace specification: send the X-Tenant-Id header.")
		}
		if needWorkspace && r.Method != http.MethodGet && r.Method != http.MethodHead && !p.CanWrite() {
			return httpx.Forbidden("This credential has read-only access to the workspace.")
		}
		return h(w, r.WithContext(With(r.Context(), p)), ps)
	})
}

// RequireRead is Require with a workspace for endpoints that only read,
// whatever their method (the deploy client POSTs its log queries), so
// read-only credentials may use them.
func RequireRead(res Resolver, h httpx.Handle) httprouter.Handle {
	return httpx.Adapt(func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
		p, err := res.Authenticate(r)
		if err != nil {
			return err
		}
		if p.WorkspaceID == uuid.Nil {
			return httpx.Forbidden("This API key is organization-scoped and requires workspace specification: send the X-Tenant-Id header.")
		}
		return h(w, r.WithContext(With(r.Context(), p)), ps)
	})
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
