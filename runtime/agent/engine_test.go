package agent

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"
	bolt "go.etcd.io/bbolt"

	"slipway/storage"
)

// TestMigrateAssistantVersions opens a database written at schema 1 (one
// assistant, patched to version 3) with every migration: the assistant's
// current version becomes its history, and patches continue from it.
func TestMigrateAssistantVersions(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agent.db")
	db, err := storage.Open(path, time.Second, Migrations[:1])
	if err != nil {
		t.Fatal(err)
	}
	old := Assistant{AssistantID: "a1", GraphID: "echo", Name: "old", Version: 3, Metadata: map[string]any{}}
	if err := db.Update(func(tx *bolt.Tx) error { return putJSON(tx.Bucket([]byte(bAssistants)), "a1", &old) }); err != nil {
		t.Fatal(err)
	}
	db.Close()

	db, err = storage.Open(path, time.Second, Migrations)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	e := &Engine{DB: db, Graphs: map[string]Graph{"echo": Echo{}}, Workers: 1, Timeout: time.Minute, Log: zerolog.Nop()}
	if err := e.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	vs, err := e.AssistantVersions("a1", nil, 10, 0)
	if err != nil || len(vs) != 1 || vs[0].Version != 3 || vs[0].Name != "old" {
		t.Fatalf("versions after migration: %v %v", vs, err)
	}
	if p, err := e.PatchAssistant("a1", Assistant{Name: "new"}); err != nil || p.Version != 4 {
		t.Fatalf("patch: %+v %v", p, err)
	}
	if vs, _ := e.AssistantVersions(AssistantID("echo"), nil, 10, 0); len(vs) != 1 || vs[0].Version != 1 {
		t.Fatalf("default assistant's versions: %v", vs)
	}
}
