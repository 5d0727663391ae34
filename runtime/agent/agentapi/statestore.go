package agentapi

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"

	"slipway/config"
	"slipway/runtime/agent"
	"slipway/storage"
)

// openStore opens the agent's state: the PostgreSQL database of
// SLIPWAY_AGENT_POSTGRES_URL when it is set (store), else the bbolt file
// in the data directory (db). closeStore releases it once the engine has
// stopped.
func openStore(ctx context.Context, cfg config.Agent) (db *bolt.DB, store agent.Store, closeStore func(), err error) {
	if cfg.PostgresURL != "" {
		store, closeStore, err := agent.OpenPostgresStoreAs(ctx, cfg.PostgresURL, cfg.DBMaxConnections, cfg.WorkerID)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("SLIPWAY_AGENT_POSTGRES_URL: %w", err)
		}
		return nil, store, closeStore, nil
	}
	db, err = storage.Open(filepath.Join(cfg.DataDir, "agent.db"), 5*time.Second, agent.Migrations)
	if err != nil {
		return nil, nil, nil, err
	}
	return db, nil, func() { _ = db.Close() }, nil
}
