package servertest

import (
	"context"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
)

// PostgresAdminURL is SLIPWAY_TEST_POSTGRES_URL for a test that gives it
// to Slipway as SLIPWAY_POSTGRES_URL: its role must be able to create
// roles and databases (.ci/run grants both). Without the variable the test
// skips, or fails under CI=true; a role without those rights fails it.
func PostgresAdminURL(t testing.TB) string {
	t.Helper()
	url := os.Getenv("SLIPWAY_TEST_POSTGRES_URL")
	if url == "" {
		missing(t, "provisioning agent databases needs SLIPWAY_TEST_POSTGRES_URL (a role with CREATEROLE and CREATEDB)")
	}
	ctx := context.Background()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal("connect to SLIPWAY_TEST_POSTGRES_URL: the server does not answer or refuses the role")
	}
	defer c.Close(ctx)
	var createRole, createDB bool
	if err := c.QueryRow(ctx, "select rolcreaterole or rolsuper, rolcreatedb or rolsuper from pg_roles where rolname = current_user").
		Scan(&createRole, &createDB); err != nil {
		t.Fatal(err)
	}
	if !createRole || !createDB {
		t.Fatal("the role of SLIPWAY_TEST_POSTGRES_URL needs CREATEROLE and CREATEDB (.ci/run grants them)")
	}
	return url
}

// DropAgentDatabase drops database and role name if a failed test left
// them on the server of admin (a passing test finds them gone already).
func DropAgentDatabase(t testing.TB, admin, name string) {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Error("drop the agent database: cannot connect")
		return
	}
	defer c.Close(ctx)
	id := pgx.Identifier{name}.Sanitize()
	for _, q := range []string{"drop database if exists " + id + " with (force)", "drop role if exists " + id} {
		if _, err := c.Exec(ctx, q); err != nil {
			t.Error(err)
		}
	}
}
