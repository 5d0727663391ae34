package controlplane

import (
	"archive/tar"
	"compress/gzip"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/julienschmidt/httprouter"
	bolt "go.etcd.io/bbolt"

	"slipway/runtime/build"
	"slipway/server/auth"
	"slipway/server/httpx"
	"slipway/storage"
)

// uploadTTL is how long an upload URL stays valid, as the hosted service's
// signed object-store URLs do.
const uploadTTL = 15 * time.Minute

// Upload is an issued upload URL and, once PUT, the archive it received.
type Upload struct {
	ID           uuid.UUID `json:"id"`
	DeploymentID uuid.UUID `json:"deployment_id"`
	WorkspaceID  uuid.UUID `json:"workspace_id"`
	TokenHash    []byte    `json:"token_hash"`
	ExpiresAt    time.Time `json:"expires_at"`
	Claimed      bool      `json:"claimed"` // a PUT is in progress or done: the URL is spent
	Completed    bool      `json:"completed"`
	Size         int64     `json:"size"`
	SHA256       string    `json:"sha256"`
	CreatedAt    time.Time `json:"created_at"`
}

// ObjectPath is the value clients pass back as source_tarball_path.
func (u *Upload) ObjectPath() string {
	return "uploads/" + u.DeploymentID.String() + "/" + u.ID.String() + ".tar.gz"
}

// uploadPath is where the archive at objectPath (an Upload's ObjectPath)
// lives under dataDir.
func uploadPath(dataDir, objectPath string) string {
	return filepath.Join(dataDir, filepath.FromSlash(objectPath))
}

func (s *Service) uploadToken(id uuid.UUID, exp time.Time) string {
	m := hmac.New(sha256.New, s.Sealer.Key("slipway upload urls v1"))
	fmt.Fprintf(m, "%s|%d", id, exp.Unix())
	return hex.EncodeToString(m.Sum(nil))
}

// createUploadURL: POST /v2/deployments/{id}/upload-url (and the spec's
// /deployments/{id}/upload-url).
func (s *Service) createUploadURL(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	p := auth.From(r)
	depID, err := httpx.ParseID(ps.ByName("id"), "path", "deployment_id")
	if err != nil {
		return err
	}
	now := s.now()
	u := Upload{ID: storage.NewID(), DeploymentID: depID, WorkspaceID: p.WorkspaceID,
		ExpiresAt: now.Add(uploadTTL).Truncate(time.Second), CreatedAt: now}
	token := s.uploadToken(u.ID, u.ExpiresAt)
	u.TokenHash = auth.Hash(token)
	err = s.update(func(tx *bolt.Tx) error {
		if !deploymentExists(tx, p.WorkspaceID, depID) {
			return deploymentNotFound(depID)
		}
		return putUpload(tx, &u)
	})
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{
		"upload_url":  fmt.Sprintf("%s/v2/uploads/%s?expires=%d&signature=%s", s.PublicURL, u.ID, u.ExpiresAt.Unix(), token),
		"object_path": u.ObjectPath(),
		"expires_at":  u.ExpiresAt,
	})
	return nil
}

// putUpload: PUT /v2/uploads/{id}?expires=..&signature=.. — authenticated by
// the signature alone, like a pre-signed object-store URL, and single use.
func (s *Service) putUpload(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	denied := httpx.Forbidden("The upload URL is invalid, expired or already used; request a new one.")
	id, err := uuid.Parse(ps.ByName("id"))
	if err != nil {
		return denied
	}
	sig := r.URL.Query().Get("signature")
	var u *Upload
	err = s.update(func(tx *bolt.Tx) (err error) {
		if u, err = getUpload(tx, id); err != nil {
			return denied
		}
		want := s.uploadToken(u.ID, u.ExpiresAt)
		if !hmac.Equal([]byte(sig), []byte(want)) || !s.now().Before(u.ExpiresAt) || u.Claimed {
			return denied
		}
		// The deployment may have been deleted since the URL was issued.
		if !deploymentExists(tx, u.WorkspaceID, u.DeploymentID) {
			return denied
		}
		u.Claimed = true
		return putUpload(tx, u)
	})
	if err != nil {
		return err
	}
	size, sum, err := s.receiveArchive(r.Body, uploadPath(s.DataDir, u.ObjectPath()))
	if err != nil {
		// Give the URL back so the client can retry a broken transfer.
		_ = s.update(func(tx *bolt.Tx) error {
			u.Claimed = false
			return putUpload(tx, u)
		})
		return err
	}
	err = s.update(func(tx *bolt.Tx) error {
		u.Completed, u.Size, u.SHA256 = true, size, sum
		return putUpload(tx, u)
	})
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"object_path": u.ObjectPath(), "size": size, "sha256": sum})
	return nil
}

// receiveArchive streams body to dst through a size cap, checking that it
// is a gzip'd tar as it goes, and only renames it into place when whole.
func (s *Service) receiveArchive(body io.Reader, dst string) (int64, string, error) {
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return 0, "", fmt.Errorf("upload directory: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".upload-*")
	if err != nil {
		return 0, "", fmt.Errorf("upload temp file: %w", err)
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	limited := &io.LimitedReader{R: body, N: s.MaxUpload + 1}
	h := sha256.New()
	pr, pw := io.Pipe()
	checked := make(chan error, 1)
	go func() { checked <- checkTarGz(pr) }()
	n, copyErr := io.Copy(io.MultiWriter(tmp, h, pw), limited)
	pw.CloseWithError(copyErr)
	checkErr := <-checked
	switch {
	case n > s.MaxUpload:
		return 0, "", httpx.Errorf(http.StatusRequestEntityTooLarge,
			"The archive exceeds the upload limit of %d MB (SLIPWAY_MAX_UPLOAD_MB).", s.MaxUpload>>20)
	case copyErr != nil:
		return 0, "", httpx.BadRequest("The upload was interrupted: %v", copyErr)
	case n == 0:
		return 0, "", httpx.BadRequest("The upload is empty; send a gzip-compressed tar archive.")
	case errors.Is(checkErr, build.ErrUnsafe):
		return 0, "", httpx.BadRequest("The archive was refused: %v", checkErr)
	case checkErr != nil:
		return 0, "", httpx.BadRequest("The upload is not a gzip-compressed tar archive: %v", checkErr)
	}
	if err := errors.Join(tmp.Sync(), tmp.Close()); err != nil {
		return 0, "", fmt.Errorf("write upload: %w", err)
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return 0, "", fmt.Errorf("store upload: %w", err)
	}
	return n, hex.EncodeToString(h.Sum(nil)), nil
}

// checkTarGz reads a whole gzip'd tar stream and reports whether it parses:
// to the end of the gzip stream, whose trailer must match, with nothing
// after the tar, and with names the unpacker accepts (build.CheckHeader).
// Entry contents and links are checked later, when the runtime unpacks the
// archive.
func checkTarGz(r io.Reader) error {
	defer io.Copy(io.Discard, r) //nolint:errcheck // drain so the writer never blocks
	zr, err := gzip.NewReader(r)
	if err != nil {
		return fmt.Errorf("gzip: %w", err)
	}
	tr := tar.NewReader(zr)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return build.FinishArchive(zr)
		}
		if err != nil {
			return fmt.Errorf("tar: %w", err)
		}
		if err := build.CheckHeader(hdr); err != nil {
			return err
		}
	}
}

// checkTarballPath accepts only the object path of a completed upload
// issued for this deployment (422 at loc otherwise).
func checkTarballPath(tx *bolt.Tx, dep uuid.UUID, path string, loc ...any) error {
	bad := httpx.Invalid("value_error",
		"source_tarball_path must be the object_path returned by POST /v2/deployments/{deployment_id}/upload-url for this deployment, after the archive was uploaded", loc...)
	rest, ok := strings.CutPrefix(path, "uploads/"+dep.String()+"/")
	if !ok {
		return bad
	}
	id, err := uuid.Parse(strings.TrimSuffix(rest, ".tar.gz"))
	if err != nil {
		return bad
	}
	if u, err := getUpload(tx, id); err != nil || u.DeploymentID != dep || !u.Completed {
		return bad
	}
	return nil
}
