package server

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"slipway/config"
	"slipway/server/admin"
	"slipway/storage"
)

func testConfig(t *testing.T, dir string) config.Serve {
	t.Helper()
	cfg, err := config.LoadServe(map[string]string{"SLIPWAY_DATA_DIR": dir, "SLIPWAY_RUNTIME": "fake"})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestAppCloseEndsRequests: a request in flight sees its context end when
// the App closes, Close waits for it to return before closing the
// database, and a request after Close is refused with 503, not served
// against a closed database.
func TestAppCloseEndsRequests(t *testing.T) {
	x, err := New(context.Background(), testConfig(t, t.TempDir()), zerolog.Nop(), "dev")
	if err != nil {
		t.Fatal(err)
	}
	entered, returned := make(chan struct{}), make(chan struct{})
	h := x.bound(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-r.Context().Done()
		time.Sleep(50 * time.Millisecond) // Close must still be waiting
		close(returned)
	}))
	go h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
	<-entered
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-returned:
	default:
		t.Fatal("Close returned while a request was still being served")
	}
	rec := httptest.NewRecorder()
	x.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/ok", nil))
	if rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("request after Close: %d %s, want 503", rec.Code, rec.Body)
	}
	if err := x.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// TestNewOwnsItsDataDir: a second App on a data directory in use fails
// (the database lock) instead of sharing it; after Close the admin socket
// is gone and a new App opens the same directory with the same key.
func TestNewOwnsItsDataDir(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	x, err := New(context.Background(), cfg, zerolog.Nop(), "dev")
	if err != nil {
		t.Fatal(err)
	}
	key, err := os.ReadFile(filepath.Join(dir, "initial-api-key"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(context.Background(), cfg, zerolog.Nop(), "dev"); !errors.Is(err, storage.ErrInUse) {
		t.Fatalf("second App on the same data dir: %v, want storage.ErrInUse", err)
	}
	if code := admin.Main([]string{"org", "list"}, dir, io.Discard, io.Discard); code != 0 {
		t.Fatalf("admin socket of a running App: exit %d", code)
	}
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	if code := admin.Main([]string{"org", "list"}, dir, io.Discard, io.Discard); code != 1 {
		t.Fatalf("admin socket after Close: exit %d, want 1 (not running)", code)
	}
	y, err := New(context.Background(), cfg, zerolog.Nop(), "dev")
	if err != nil {
		t.Fatalf("reopen after Close: %v", err)
	}
	defer y.Close()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/api/v1/workspaces", nil)
	req.Header.Set("X-Api-Key", string(key[:len(key)-1]))
	y.Handler().ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("the first App's key after reopening: %d %s", rec.Code, rec.Body)
	}
}
