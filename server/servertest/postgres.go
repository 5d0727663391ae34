package servertest

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// PostgresSchemaURL is SLIPWAY_TEST_POSTGRES_URL on a fresh schema of its
// database (search_path), dropped when the test ends: an agent given it
// as SLIPWAY_AGENT_POSTGRES_URL starts on an empty store. Without the
// variable the test skips, or fails under CI=true (.ci/run sets it).
func PostgresSchemaURL(t testing.TB) string {
	t.Helper()
	url := os.Getenv("SLIPWAY_TEST_POSTGRES_URL")
	if url == "" {
		missing(t, "the PostgreSQL store's tests need SLIPWAY_TEST_POSTGRES_URL (a role that may create schemas)")
	}
	ctx := context.Background()
	schema := "t_" + strings.ReplaceAll(uuid.NewString(), "-", "")
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal("connect to SLIPWAY_TEST_POSTGRES_URL: the server does not answer or refuses the role")
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, "create schema "+schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Error("drop the test schema: cannot connect")
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "drop schema "+schema+" cascade"); err != nil {
			t.Error(err)
		}
	})
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	return url + sep + "search_path=" + schema
}
