package agentapi

import (
	"context"
	"os"
	"strings"
	"testing"

	"slipway/config"
)

// openStore picks PostgreSQL when SLIPWAY_AGENT_POSTGRES_URL is set and
// bbolt otherwise, and a connection string that fails never shows up in
// the error (it holds a password).
func TestOpenStoreSelection(t *testing.T) {
	ctx := context.Background()
	db, store, closeStore, err := openStore(ctx, config.Agent{DataDir: t.TempDir()})
	if err != nil || db == nil || store != nil {
		t.Fatalf("without a PostgreSQL URL: db %v store %v err %v, want bbolt", db, store, err)
	}
	closeStore()
	for _, bad := range []string{
		"postgres://slipway:s3cret-pw@127.0.0.1:1/none?connect_timeout=2",
		"postgres://slipway:s3cret-pw@[bad",
	} {
		_, _, _, err := openStore(ctx, config.Agent{DataDir: t.TempDir(), PostgresURL: bad})
		if err == nil || strings.Contains(err.Error(), "s3cret") || !strings.Contains(err.Error(), "SLIPWAY_AGENT_POSTGRES_URL") {
			t.Errorf("an unusable PostgreSQL URL: %v, want an error naming the variable and not the password", err)
		}
	}
	url := os.Getenv("SLIPWAY_TEST_POSTGRES_URL")
	if url == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("SLIPWAY_TEST_POSTGRES_URL is needed to open the PostgreSQL store")
		}
		t.Skip("the PostgreSQL half needs SLIPWAY_TEST_POSTGRES_URL; under CI=true this fails instead")
	}
	db, store, closeStore, err = openStore(ctx, config.Agent{DataDir: t.TempDir(), PostgresURL: url})
	if err != nil || db != nil || store == nil {
		t.Fatalf("with a PostgreSQL URL: db %v store %v err %v, want the PostgreSQL store", db, store, err)
	}
	closeStore()
}
