package agent

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
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

// TestSystemAssistantsFollowTheGraphs: an agent started without a graph it
// served before (a rollback to a revision that predates the graph) drops
// that graph's system assistant, as the reference does at start, and keeps
// the assistants users made; the graph's return brings its system
// assistant back.
func TestSystemAssistantsFollowTheGraphs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agent.db")
	start := func(graphs ...string) (*Engine, func()) {
		t.Helper()
		db, err := storage.Open(path, time.Second, Migrations)
		if err != nil {
			t.Fatal(err)
		}
		gs := map[string]Graph{}
		for _, g := range graphs {
			gs[g] = Echo{}
		}
		ctx, cancel := context.WithCancel(t.Context())
		e := &Engine{DB: db, Graphs: gs, Workers: 1, Timeout: time.Minute, Log: zerolog.Nop()}
		if err := e.Start(ctx); err != nil {
			t.Fatal(err)
		}
		return e, func() { cancel(); e.Wait(); db.Close() }
	}
	graphsOf := func(e *Engine) []string {
		t.Helper()
		list, _, err := e.SearchAssistants(AssistantQuery{SortBy: "graph_id", Metadata: map[string]any{"created_by": "system"}})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, a := range list {
			out = append(out, a.GraphID)
		}
		return out
	}
	e, stop := start("agent", "extra")
	if _, err := e.CreateAssistant(Assistant{GraphID: "extra", Name: "mine", Metadata: map[string]any{}}, ""); err != nil {
		t.Fatal(err)
	}
	stop()

	e, stop = start("agent")
	if got := graphsOf(e); !slices.Equal(got, []string{"agent"}) {
		t.Fatalf("system assistants without the graph: %v, want [agent]", got)
	}
	if _, err := e.GetAssistant(AssistantID("extra")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the missing graph's system assistant: %v, want not found", err)
	}
	if mine, _, _ := e.SearchAssistants(AssistantQuery{Name: "mine"}); len(mine) != 1 {
		t.Fatalf("a user's assistant of the missing graph was dropped: %v", mine)
	}
	stop()

	e, stop = start("agent", "extra")
	defer stop()
	if got := graphsOf(e); !slices.Equal(got, []string{"agent", "extra"}) {
		t.Fatalf("system assistants after the graph came back: %v", got)
	}
}
