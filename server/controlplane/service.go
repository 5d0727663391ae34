package controlplane

import (
	"time"

	"github.com/rs/zerolog"
	bolt "go.etcd.io/bbolt"

	"slipway/runtime"
	"slipway/storage"
)

// Service is the control plane: it owns deployments, revisions, listeners,
// uploads and tracing projects in the control-plane database, and drives
// the runtime driver toward what they describe.
type Service struct {
	DB        *bolt.DB
	Sealer    *storage.Sealer
	Driver    runtime.Driver
	PublicURL string
	DataDir   string
	MaxUpload int64 // bytes
	Log       zerolog.Logger
	Now       func() time.Time

	rec *reconciler
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now().UTC()
	}
	return time.Now().UTC()
}
