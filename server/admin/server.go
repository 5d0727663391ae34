// Package admin is host-level administration of a running `slipway serve`:
// a small JSON-over-HTTP API on a unix socket, and the client behind
// `slipway admin ...`. The server holds the database lock, so
// administration goes through it rather than the file.
//
// The socket is <data dir>/admin/admin.sock (mode 0600) in a directory
// only Slipway's user can traverse (0700), and every request must carry
// the token the server writes at start-up to <data dir>/admin/token
// (0600). The directory keeps deployment code that runs under another uid
// out; the token keeps out deployment code that shares Slipway's uid (a
// non-root Slipway), for which Landlock denies reading the data directory
// but, before Landlock ABI v9, not connecting to a unix socket in it.
package admin

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/julienschmidt/httprouter"
	"github.com/rs/zerolog"
	bolt "go.etcd.io/bbolt"

	"slipway/server/audit"
	"slipway/server/httpx"
	"slipway/server/orgapi"
)

// Dir is the admin directory in the data directory; SocketName and
// TokenName are the socket's and the token's file names in it.
const (
	Dir        = "admin"
	SocketName = "admin.sock"
	TokenName  = "token"
)

// Server answers the admin API.
type Server struct {
	DB        *bolt.DB
	Orgs      *orgapi.Store
	Log       *audit.Log
	Retention *audit.Retention
	Forwarder *audit.Forwarder
	Logger    zerolog.Logger
	Now       func() time.Time
	// Update runs a durable write transaction: the API's group-committing
	// writer, for the audit events of refused changes (DB.Update if nil).
	Update func(func(*bolt.Tx) error) error
	// Instance is the install's id; PruneImages (nil without the docker
	// runtime) removes the images no deployment uses (images.go).
	Instance    string
	PruneImages func(context.Context) ([]string, error)

	token string // set by Listen; every request must present it
}

func (s *Server) now() time.Time {
	if s.Now != nil {
		return s.Now().UTC()
	}
	return time.Now().UTC()
}

// Handler is the admin API.
func (s *Server) Handler() http.Handler {
	rt := httprouter.New()
	h := func(f httpx.Handle) httprouter.Handle {
		return func(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
			r.Body = http.MaxBytesReader(w, r.Body, 1<<16)
			err := f(w, r, p)
			if err == nil {
				return
			}
			var he *httpx.Error
			var ve *httpx.ValidationError
			if errors.As(err, &he) || errors.As(err, &ve) {
				httpx.WriteError(w, r, err)
				return
			}
			// Only the host's owner reaches this socket: say what failed.
			s.Logger.Error().Err(err).Str("path", r.URL.Path).Msg("admin request failed")
			httpx.WriteJSON(w, http.StatusInternalServerError, map[string]any{"detail": err.Error()})
		}
	}
	rt.GET("/v1/orgs", h(s.listOrgs))
	rt.POST("/v1/orgs", h(s.createOrg))
	rt.PUT("/v1/orgs/:org/plan", h(s.setPlan))
	rt.PUT("/v1/orgs/:org/flags/:flag", h(s.setFlag))
	rt.DELETE("/v1/orgs/:org/flags/:flag", h(s.unsetFlag))
	rt.POST("/v1/orgs/:org/admin-keys", h(s.createAdminKey))
	rt.GET("/v1/audit/verify", h(s.verify))
	rt.POST("/v1/audit/prune", h(s.prune))
	rt.POST("/v1/audit/reindex", h(s.reindex))
	rt.GET("/v1/audit/forward", h(s.forwardStatus))
	rt.GET("/v1/instance", h(s.instance))
	rt.POST("/v1/images/prune", h(s.pruneImages))
	rt.NotFound = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		httpx.WriteJSON(w, http.StatusNotFound, map[string]any{"detail": "No such admin endpoint: " + r.Method + " " + r.URL.Path})
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, bearer := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !bearer || s.token == "" || subtle.ConstantTimeCompare([]byte(got), []byte(s.token)) != 1 {
			httpx.WriteJSON(w, http.StatusUnauthorized, map[string]any{"detail": "The admin token is missing or wrong: use `slipway admin`, which reads it from the data directory."})
			return
		}
		rt.ServeHTTP(w, r)
	})
}

// newToken writes a fresh token to <admin dir>/token (0600) and returns it.
// A new one each start: a token that leaked dies with the server.
func newToken(dir string) (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	tok := hex.EncodeToString(b)
	f, err := os.CreateTemp(dir, ".token-*")
	if err != nil {
		return "", fmt.Errorf("admin token: %w", err)
	}
	defer os.Remove(f.Name())
	_, err = f.WriteString(tok + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), filepath.Join(dir, TokenName))
	}
	if err != nil {
		return "", fmt.Errorf("admin token: %w", err)
	}
	return tok, nil
}

// adminDir creates <dataDir>/admin, a real directory (not a symlink) that
// only Slipway's user may traverse.
func adminDir(dataDir string) (string, error) {
	dir := filepath.Join(dataDir, Dir)
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("admin directory: %w", err)
	}
	st, err := os.Lstat(dir)
	if err != nil {
		return "", fmt.Errorf("admin directory: %w", err)
	}
	if !st.IsDir() {
		return "", fmt.Errorf("admin directory %s is not a directory", dir)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return "", fmt.Errorf("admin directory: %w", err)
	}
	return dir, nil
}

// Listen binds <dataDir>/admin/admin.sock with mode 0600 in a 0700
// directory, writes a new token, and serves the admin API on it until ctx
// ends; the socket is removed on return. A socket left by a process that
// died is replaced; one a live server answers on is not (the database lock
// normally rules that out already).
func (s *Server) Listen(ctx context.Context, dataDir string) (stop func(), err error) {
	// Earlier versions bound <dataDir>/admin.sock; a leftover goes.
	if old := filepath.Join(dataDir, SocketName); isSocket(old) {
		_ = os.Remove(old)
	}
	dir, err := adminDir(dataDir)
	if err != nil {
		return nil, err
	}
	if s.token, err = newToken(dir); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, SocketName)
	if _, err := os.Lstat(path); err == nil {
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("admin socket %s: another slipway server is answering on it", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("remove stale admin socket: %w", err)
		}
	}
	// Bind under a temporary name, restrict it, then move it into place,
	// so the socket is never reachable with looser permissions.
	tmp := filepath.Join(dir, fmt.Sprintf(".%s.%d", SocketName, os.Getpid()))
	_ = os.Remove(tmp)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: tmp, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("admin socket: %w", err)
	}
	ln.SetUnlinkOnClose(false)
	if err := os.Chmod(tmp, 0o600); err != nil {
		ln.Close()
		os.Remove(tmp)
		return nil, fmt.Errorf("admin socket: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		ln.Close()
		os.Remove(tmp)
		return nil, fmt.Errorf("admin socket: %w", err)
	}
	srv := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ConnContext:       peerContext, // who connected, for the audit events
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.Logger.Error().Err(err).Msg("admin socket")
		}
	}()
	return func() {
		shut, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(shut)
		<-done
		_ = os.Remove(path)
	}, nil
}

func isSocket(path string) bool {
	st, err := os.Lstat(path)
	return err == nil && st.Mode()&os.ModeSocket != 0
}

func orgParam(ps httprouter.Params) (uuid.UUID, error) {
	id, err := uuid.Parse(ps.ByName("org"))
	if err != nil {
		return uuid.Nil, httpx.BadRequest("%q is not an organization id (a UUID).", ps.ByName("org"))
	}
	return id, nil
}

// OrgView is an organization as the admin API shows it.
type OrgView struct {
	orgapi.Org
	AuditLogsEnabled bool `json:"audit_logs_enabled"`
}

func (s *Server) view(o orgapi.Org) OrgView {
	return OrgView{Org: o, AuditLogsEnabled: o.Plan == "enterprise" && s.Orgs.AuditLogsEnabled(&o)}
}

func (s *Server) listOrgs(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	orgs, err := s.Orgs.ListOrgs()
	if err != nil {
		return err
	}
	out := make([]OrgView, 0, len(orgs))
	for _, o := range orgs {
		out = append(out, s.view(o))
	}
	httpx.WriteJSON(w, http.StatusOK, out)
	return nil
}

// CreateOrgRequest is the body of POST /v1/orgs.
type CreateOrgRequest struct {
	Name     string `json:"name"`
	Plan     string `json:"plan"`
	Personal bool   `json:"personal"`
}

func (s *Server) createOrg(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	var req CreateOrgRequest
	if err := httpx.DecodeJSON(r, &req, true); err != nil {
		return err
	}
	org, err := s.Orgs.CreateOrg(req.Name, req.Plan, req.Personal, s.recorder(r, "create_organization", http.StatusCreated))
	if err != nil {
		s.refused(r, "create_organization", uuid.Nil, err)
		return err
	}
	s.Logger.Info().Str("organization_id", org.ID.String()).Str("plan", org.Plan).Bool("personal", org.IsPersonal).
		Msg("admin: organization created")
	httpx.WriteJSON(w, http.StatusCreated, s.view(org))
	return nil
}

func (s *Server) setPlan(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	id, err := orgParam(ps)
	if err != nil {
		return err
	}
	const op = "update_payment_plan"
	var req struct {
		Plan string `json:"plan"`
	}
	if err := httpx.DecodeJSON(r, &req, true); err != nil {
		s.refused(r, op, id, err)
		return err
	}
	org, err := s.Orgs.SetPlan(id, req.Plan, s.recorder(r, op, http.StatusOK))
	if err != nil {
		s.refused(r, op, id, err)
		return err
	}
	s.Logger.Info().Str("organization_id", id.String()).Str("plan", org.Plan).Msg("admin: plan set")
	httpx.WriteJSON(w, http.StatusOK, s.view(org))
	return nil
}

func (s *Server) setFlag(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	id, err := orgParam(ps)
	if err != nil {
		return err
	}
	var req struct {
		Value *bool `json:"value"`
	}
	err = httpx.DecodeJSON(r, &req, true)
	if err == nil && req.Value == nil {
		err = httpx.BadRequest("value must be true or false (to unset a flag, DELETE it).")
	}
	if err != nil {
		s.refused(r, flagOp, id, err)
		return err
	}
	return s.changeFlag(w, r, id, ps.ByName("flag"), req.Value)
}

// flagOp is the operation of set-flag and unset-flag.
const flagOp = "update_organization_config"

func (s *Server) unsetFlag(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	id, err := orgParam(ps)
	if err != nil {
		return err
	}
	return s.changeFlag(w, r, id, ps.ByName("flag"), nil)
}

func (s *Server) changeFlag(w http.ResponseWriter, r *http.Request, id uuid.UUID, flag string, v *bool) error {
	org, err := s.Orgs.SetFlag(id, flag, v, s.recorder(r, flagOp, http.StatusOK))
	if err != nil {
		s.refused(r, flagOp, id, err)
		return err
	}
	ev := s.Logger.Info().Str("organization_id", id.String()).Str("flag", flag)
	if v == nil {
		ev.Msg("admin: flag unset")
	} else {
		ev.Bool("value", *v).Msg("admin: flag set")
	}
	httpx.WriteJSON(w, http.StatusOK, s.view(org))
	return nil
}

// AdminKeyResponse is the answer to POST /v1/orgs/:org/admin-keys.
type AdminKeyResponse struct {
	ID                 uuid.UUID  `json:"id"`
	OrgID              uuid.UUID  `json:"organization_id"`
	DefaultWorkspaceID *uuid.UUID `json:"default_workspace_id"`
	ShortKey           string     `json:"short_key"`
	Key                string     `json:"key"`
}

func (s *Server) createAdminKey(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	id, err := orgParam(ps)
	if err != nil {
		return err
	}
	key, k, err := s.Orgs.CreateOrgAdminKey(id, s.recorder(r, "create_service_key", http.StatusCreated))
	if err != nil {
		s.refused(r, "create_service_key", id, err)
		return err
	}
	s.Logger.Info().Str("organization_id", id.String()).Str("key_id", k.ID.String()).Str("short_key", k.ShortKey).
		Msg("admin: organization admin key created")
	httpx.WriteJSON(w, http.StatusCreated, AdminKeyResponse{ID: k.ID, OrgID: k.OrgID,
		DefaultWorkspaceID: k.DefaultWorkspaceID, ShortKey: k.ShortKey, Key: key})
	return nil
}

func (s *Server) verify(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	var rep audit.VerifyReport
	if err := s.DB.View(func(tx *bolt.Tx) error { rep = s.Log.Verify(tx); return nil }); err != nil {
		return err
	}
	if rep.Breaks == nil {
		rep.Breaks = []audit.Break{}
	}
	sort.Slice(rep.Breaks, func(i, j int) bool { return rep.Breaks[i].Org < rep.Breaks[j].Org })
	httpx.WriteJSON(w, http.StatusOK, rep)
	return nil
}

// PruneRequest is the body of POST /v1/audit/prune.
type PruneRequest struct {
	Before time.Time `json:"before"`
	Org    string    `json:"organization_id,omitempty"`
}

// PruneResponse says how many events were pruned per organization.
type PruneResponse struct {
	Before time.Time      `json:"before"`
	Pruned map[string]int `json:"pruned"`
}

func (s *Server) prune(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	var req PruneRequest
	if err := httpx.DecodeJSON(r, &req, true); err != nil {
		return err
	}
	if req.Before.IsZero() {
		return httpx.BadRequest("before is required (RFC 3339).")
	}
	if req.Before.After(s.now()) {
		return httpx.BadRequest("before (%s) is in the future.", req.Before.Format(time.RFC3339))
	}
	var orgs []uuid.UUID
	if req.Org != "" {
		id, err := uuid.Parse(req.Org)
		if err != nil {
			return httpx.BadRequest("%q is not an organization id (a UUID).", req.Org)
		}
		orgs = []uuid.UUID{id}
	}
	pruned, err := s.Retention.PruneBefore(req.Before, s.recordPrune(r, req.Before), orgs...)
	out := PruneResponse{Before: req.Before.UTC(), Pruned: map[string]int{}}
	for org, n := range pruned {
		out.Pruned[org.String()] = n
	}
	if err != nil {
		return err
	}
	s.Logger.Info().Time("before", req.Before).Interface("pruned", out.Pruned).Msg("admin: audit events pruned")
	httpx.WriteJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) forwardStatus(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	st, err := s.Forwarder.Status()
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, st)
	return nil
}
