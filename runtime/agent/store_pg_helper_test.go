package agent

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"slipway/storage"
)

// pgTestURL is the PostgreSQL the PostgreSQL store's tests use; without
// one they skip, or fail under CI=true (where .ci/run starts one).
func pgTestURL(t testing.TB) string {
	t.Helper()
	url := os.Getenv("SLIPWAY_TEST_POSTGRES_URL")
	if url == "" {
		msg := "the PostgreSQL store's tests need SLIPWAY_TEST_POSTGRES_URL (a role that may create schemas)"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg + "; under CI=true this fails instead")
	}
	return url
}

// pgTestSchema creates an empty schema, dropped when the test ends, and
// returns a pool configuration whose connections use it.
func pgTestSchema(t testing.TB) *pgxpool.Config {
	t.Helper()
	url := pgTestURL(t)
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("connect to SLIPWAY_TEST_POSTGRES_URL: %v", redactPG(err))
	}
	schema := "t_" + strings.ReplaceAll(storage.NewID().String(), "-", "")
	if _, err := admin.Exec(ctx, "create schema "+schema); err != nil {
		t.Fatal(err)
	}
	_ = admin.Close(ctx)
	t.Cleanup(func() {
		c, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Errorf("drop the test schema: %v", redactPG(err))
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, fmt.Sprintf("drop schema %s cascade", schema)); err != nil {
			t.Errorf("drop the test schema: %v", err)
		}
	})
	cfg, err := parsePGConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	cfg.MaxConns = 8
	return cfg
}

// openPGTestStore opens a PostgreSQL store on a fresh schema.
func openPGTestStore(t testing.TB) *pgStore {
	t.Helper()
	s, err := openPGStore(context.Background(), pgTestSchema(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}
