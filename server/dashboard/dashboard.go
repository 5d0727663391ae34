// Package dashboard is the web dashboard `slipway serve` answers at /: a
// page and a small script of its own, embedded in the binary, that call
// the same JSON API as every other client. The only routes of its own sign
// a browser in and out, turning a login session or an API key into the
// HttpOnly cookie that auth.CookieCredential accepts, so the dashboard has
// no way around the API's authorization or its audit events.
package dashboard

import (
	"bytes"
	"crypto/rand"
	"embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/julienschmidt/httprouter"

	"slipway/server/auth"
	"slipway/server/httpx"
	"slipway/server/track"
)

//go:embed assets
var assets embed.FS

// Policy is the Content-Security-Policy of every dashboard response: only
// the dashboard's own files, no inline script or style, no framing.
const Policy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// Dashboard serves the dashboard's page, files and sign-in routes.
type Dashboard struct {
	// API is the server's own handler: sign-in and sign-out call
	// POST /api/v1/login and /api/v1/logout through it, in process, so
	// their throttling and checks are the API's.
	API http.Handler
	// Auth authenticates the dashboard's own routes.
	Auth auth.Resolver
	// Audit records sign-in and sign-out with an API key (audit.go).
	Audit *track.Recorder
	// Keys checks an API key pasted at sign-in, throttled like a password
	// login (the server's orgapi.Store); nil: Auth checks it, unthrottled.
	Keys KeyChecker
}

// KeyChecker checks an API key pasted at sign-in. A refusal is an error
// for httpx (401, or 429 with Retry-After set on w).
type KeyChecker interface {
	CheckSignInKey(w http.ResponseWriter, r *http.Request, key string) (*auth.Principal, error)
}

// Routes registers the dashboard on rt: the page at / and its files
// under /ui/assets/, and the session routes under /ui/session.
func (d *Dashboard) Routes(rt *httpx.Router) {
	static, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	files := http.StripPrefix("/ui/assets/", http.FileServer(http.FS(static)))
	rt.GET("/", headers(func(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-cache")
		w.Write(indexHTML)
	}))
	rt.GET("/ui/assets/*file", headers(func(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
		w.Header().Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	}))
	rt.GET("/ui/session", headers(auth.Require(d.Auth, false, d.whoami)))
	rt.POST("/ui/session", headers(httpx.Adapt(d.signIn)))
	rt.POST("/ui/signout", headers(httpx.Adapt(d.signOut)))
}

var indexHTML = func() []byte {
	b, err := assets.ReadFile("assets/index.html")
	if err != nil {
		panic(err)
	}
	return b
}()

// headers adds the dashboard's security headers to h's responses.
func headers(h httprouter.Handle) httprouter.Handle {
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", Policy)
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("Referrer-Policy", "same-origin")
		hd.Set("Cross-Origin-Opener-Policy", "same-origin")
		h(w, r, ps)
	}
}

// whoami: GET /ui/session tells the page who is signed in and what they
// may do, so it can leave out the controls the API would refuse. The API
// still decides: hiding a button is a courtesy, not the check.
func (d *Dashboard) whoami(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	p := auth.From(r)
	out := map[string]any{
		"kind": p.Kind, "organization_id": p.OrgID, "user_id": p.UserID,
		"organization_role": p.OrgRole, "workspace_role": p.WorkspaceRole, "read_only": p.ReadOnly,
		"can_write": p.CanWrite(), "can_manage_organization": p.OrgManage(),
		"can_admin_workspace": p.CanAdminWorkspace(), "workspace_id": nil,
	}
	if p.WorkspaceID != uuid.Nil {
		out["workspace_id"] = p.WorkspaceID
	}
	httpx.WriteJSON(w, http.StatusOK, out)
	return nil
}

// signIn: POST /ui/session with {"email", "password"} (a basic-auth user:
// the API's login makes the session) or {"api_key"} sets the cookies.
func (d *Dashboard) signIn(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	// A page of another site must not sign the browser in as someone else.
	if err := auth.SameOrigin(r); err != nil {
		return err
	}
	var req struct {
		Email    *string `json:"email"`
		Password *string `json:"password"`
		APIKey   *string `json:"api_key"`
	}
	if err := httpx.DecodeJSON(r, &req, true); err != nil {
		return err
	}
	var credential string
	var expires time.Time
	switch {
	case req.APIKey != nil:
		key := strings.TrimSpace(*req.APIKey)
		if key == "" {
			return httpx.Invalid("value_error", "An API key is required.", "body", "api_key")
		}
		p, err := d.checkKey(w, r, key)
		if err != nil {
			d.keyRefused(r, err)
			return err
		}
		if err := d.recordKey(r, p, "login"); err != nil {
			return err
		}
		credential = key
	case req.Email == nil:
		return httpx.Invalid("missing", "Field required", "body", "email")
	case req.Password == nil:
		return httpx.Invalid("missing", "Field required", "body", "password")
	default:
		body, _ := json.Marshal(map[string]string{"email": *req.Email, "password": *req.Password})
		res := d.call(r, "/api/v1/login", body, nil)
		if res.Code != http.StatusOK {
			copyResponse(w, res)
			return nil
		}
		var session struct {
			Token     string    `json:"access_token"`
			ExpiresAt time.Time `json:"expires_at"`
		}
		if err := json.Unmarshal(res.Body.Bytes(), &session); err != nil || session.Token == "" {
			return fmt.Errorf("read the login's answer: %v", err)
		}
		credential, expires = session.Token, session.ExpiresAt
	}
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		return fmt.Errorf("csrf token: %w", err)
	}
	setCookies(w, r, credential, hex.EncodeToString(b[:]), expires)
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"signed_in": true})
	return nil
}

// checkKey checks an API key pasted at sign-in.
func (d *Dashboard) checkKey(w http.ResponseWriter, r *http.Request, key string) (*auth.Principal, error) {
	if d.Keys != nil {
		return d.Keys.CheckSignInKey(w, r, key)
	}
	return d.credentialOf(r, key)
}

// signOut: POST /ui/signout ends a login session (through the API's
// logout) and clears the cookies. An API key is only forgotten by the
// browser; it stays valid until revoked.
func (d *Dashboard) signOut(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	key, _, err := auth.CookieCredential(r)
	if err != nil {
		return err
	}
	// A credential that no longer authenticates (a session ended, a key
	// revoked) has nothing to end or record: the cookies just go.
	if p, perr := d.credentialOf(r, key); perr == nil {
		if p.Kind != auth.KindSession {
			// An API key has no session to end; the browser forgets it.
			if err := d.recordKey(r, p, "logout"); err != nil {
				return err
			}
		} else if res := d.call(r, "/api/v1/logout", nil, map[string]string{"Authorization": "Bearer " + key}); res.Code != http.StatusOK &&
			res.Code != http.StatusUnauthorized {
			// 401: ended meanwhile.
			copyResponse(w, res)
			return nil
		}
	}
	clearCookies(w, r)
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"signed_in": false})
	return nil
}

// call POSTs body to path on the server's own API for r's client (its
// address, for the login throttle), with only the given headers.
func (d *Dashboard) call(r *http.Request, path string, body []byte, hdr map[string]string) *httptest.ResponseRecorder {
	// Its audit events name the route the browser called (track.Via).
	in := r.Clone(track.Via(r.Context(), r))
	in.Method, in.URL.Path, in.URL.RawPath, in.URL.RawQuery, in.RequestURI = http.MethodPost, path, "", "", ""
	in.Body = io.NopCloser(bytes.NewReader(body))
	in.ContentLength = int64(len(body))
	fwd := in.Header.Values("X-Forwarded-For")
	in.Header = http.Header{"Content-Type": {"application/json"}}
	if len(fwd) > 0 {
		in.Header["X-Forwarded-For"] = fwd
	}
	for k, v := range hdr {
		in.Header.Set(k, v)
	}
	res := httptest.NewRecorder()
	d.API.ServeHTTP(res, in)
	return res
}

func copyResponse(w http.ResponseWriter, res *httptest.ResponseRecorder) {
	for k, v := range res.Header() {
		if k == "Content-Security-Policy" {
			continue
		}
		w.Header()[k] = v
	}
	w.WriteHeader(res.Code)
	w.Write(res.Body.Bytes())
}
