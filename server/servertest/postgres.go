package servertest

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
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
	url, err := PostgresSchemas(t)()
	if err != nil {
		t.Fatal(err)
	}
	return url
}

// PostgresSchemas returns a function that makes a fresh schema of
// SLIPWAY_TEST_POSTGRES_URL's database and answers the URL on it, for
// suites that start agents of their own (it may be called from any
// goroutine); every schema it made is dropped when the test ends. Without
// the variable the test skips, or fails under CI=true.
func PostgresSchemas(t testing.TB) func() (string, error) {
	t.Helper()
	base := os.Getenv("SLIPWAY_TEST_POSTGRES_URL")
	if base == "" {
		missing(t, "the PostgreSQL store's tests need SLIPWAY_TEST_POSTGRES_URL (a role that may create schemas)")
	}
	var mu sync.Mutex
	var made []string
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		if len(made) == 0 {
			return
		}
		ctx := context.Background()
		c, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Error("drop the test schemas: cannot connect")
			return
		}
		defer c.Close(ctx)
		for _, s := range made {
			if _, err := c.Exec(ctx, "drop schema "+s+" cascade"); err != nil {
				t.Error(err)
			}
		}
	})
	return func() (string, error) {
		ctx := context.Background()
		schema := "t_" + strings.ReplaceAll(uuid.NewString(), "-", "")
		c, err := pgx.Connect(ctx, base)
		if err != nil {
			return "", errors.New("connect to SLIPWAY_TEST_POSTGRES_URL: the server does not answer or refuses the role")
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "create schema "+schema); err != nil {
			return "", err
		}
		mu.Lock()
		made = append(made, schema)
		mu.Unlock()
		sep := "?"
		if strings.Contains(base, "?") {
			sep = "&"
		}
		return base + sep + "search_path=" + schema, nil
	}
}

// PostgresCount answers a counting query (one integer) on url: a test's
// check that an agent's state landed in its database.
func PostgresCount(t testing.TB, url, query string) int {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal("connect to the agent's schema")
	}
	defer c.Close(ctx)
	var n int
	if err := c.QueryRow(ctx, query).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}
