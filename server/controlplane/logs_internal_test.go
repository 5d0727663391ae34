package controlplane

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/rs/zerolog"
	bolt "go.etcd.io/bbolt"

	"slipway/runtime"
	"slipway/storage"
)

func testService(t *testing.T, limit int) *Service {
	t.Helper()
	db, err := storage.Open(filepath.Join(t.TempDir(), "db"), time.Second, storage.ControlPlaneMigrations)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return &Service{DB: db, Writer: &storage.Committer{DB: db}, Log: zerolog.Nop(), AgentLogLimit: limit}
}

// addDeployment stores a bare deployment record: agent output is kept
// only for deployments on record.
func addDeployment(t *testing.T, s *Service) uuid.UUID {
	t.Helper()
	id := storage.NewID()
	if err := s.DB.Update(func(tx *bolt.Tx) error {
		return putDeployment(tx, &deploymentRecord{Deployment: Deployment{ID: id.String()}})
	}); err != nil {
		t.Fatal(err)
	}
	return id
}

func ringOf(t *testing.T, s *Service, dep uuid.UUID) (msgs []string, size uint64) {
	t.Helper()
	_ = s.DB.View(func(tx *bolt.Tx) error {
		es, _, err := readAgentLogs(tx, dep, nil, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			msgs = append(msgs, e.Message)
		}
		size, _ = agentLogRing(tx, dep)
		return nil
	})
	return msgs, size
}

// TestAgentLogRing writes agent output through the batching writer and
// checks what each deployment's ring keeps: the newest lines within the
// bound (the newest line always), byte count consistent with the entries,
// and nothing for a deployment that is not on record.
func TestAgentLogRing(t *testing.T) {
	entrySize := func(msg string) int {
		raw, _ := json.Marshal(LogEntry{ID: 1, Timestamp: time.Now().UTC(), Level: "info", Message: msg, Phase: "agent",
			Stream: "stdout", RevisionID: uuid.NewString()})
		return len(raw)
	}
	one := entrySize("line 00")
	cases := []struct {
		name    string
		limit   int
		lines   []string
		flushes int // flush after every n lines (0: once at the end)
		want    []string
	}{
		{"under the bound keeps all", 10 * one, []string{"line 00", "line 01", "line 02"}, 0, []string{"line 00", "line 01", "line 02"}},
		{"over the bound drops the oldest", 3*one + one/2, []string{"line 00", "line 01", "line 02", "line 03", "line 04"}, 0,
			[]string{"line 02", "line 03", "line 04"}},
		{"across flushes", 2*one + one/2, []string{"line 00", "line 01", "line 02", "line 03"}, 1, []string{"line 02", "line 03"}},
		{"a line bigger than the bound stays alone", one, []string{"line 00", strings.Repeat("x", 4*one)}, 0,
			[]string{strings.Repeat("x", 4*one)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := testService(t, tc.limit)
			dep := addDeployment(t, s)
			a := s.agentLog()
			rev := uuid.NewString()
			for i, l := range tc.lines {
				a.Line(runtime.OutputLine{DeploymentID: dep.String(), RevisionID: rev, Stream: "stdout", Time: time.Now().UTC(), Text: l})
				if tc.flushes > 0 && (i+1)%tc.flushes == 0 {
					a.Flush()
				}
			}
			a.Flush()
			got, size := ringOf(t, s, dep)
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("ring holds %q, want %q", got, tc.want)
			}
			var sum uint64
			_ = s.DB.View(func(tx *bolt.Tx) error {
				_, sum = agentLogRing(tx, dep)
				return nil
			})
			if size != sum {
				t.Fatalf("recorded size %d, entries hold %d", size, sum)
			}
		})
	}
	t.Run("unknown deployment keeps nothing", func(t *testing.T) {
		s := testService(t, 1<<20)
		gone := storage.NewID()
		s.agentLog().Line(runtime.OutputLine{DeploymentID: gone.String(), Text: "late"})
		s.agentLog().Flush()
		if got, _ := ringOf(t, s, gone); len(got) != 0 {
			t.Fatalf("kept %q for a deployment not on record", got)
		}
	})
	t.Run("buffer overflow is counted, not blocking", func(t *testing.T) {
		s := testService(t, 64<<20)
		dep := addDeployment(t, s)
		big := strings.Repeat("y", runtime.MaxOutputLine)
		n := pendingLimit/len(big) + 10
		for i := 0; i < n; i++ {
			s.agentLog().Line(runtime.OutputLine{DeploymentID: dep.String(), Text: big})
		}
		s.agentLog().Flush()
		got, _ := ringOf(t, s, dep)
		if last := got[len(got)-1]; !strings.Contains(last, "10 lines of agent output were dropped") {
			t.Fatalf("last line %q", last)
		}
	})
}

// TestHubFanOut checks the subscriber fan-out: every subscriber of a
// topic gets its lines in order, other topics' lines never, and one that
// does not take its lines is dropped once more than its bound wait,
// without blocking the publisher or the other subscribers.
func TestHubFanOut(t *testing.T) {
	cases := []struct {
		name      string
		buffer    int
		published int
		wantDrop  bool
	}{
		{"fits the buffer", 8, 8, false},
		{"overflows the buffer", 8, 9, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var h hub
			stalled := h.Subscribe(tc.buffer, "a")
			other := h.Subscribe(tc.buffer, "b")
			var wg sync.WaitGroup
			var got []int64
			reader := h.Subscribe(1, "a", "b")
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range reader.Ready {
					lines, ok := reader.Take()
					if !ok {
						t.Error("the reader was dropped")
						return
					}
					for _, e := range lines {
						got = append(got, e.ID)
					}
					if len(got) == tc.published {
						return
					}
				}
			}()
			done := make(chan struct{})
			go func() {
				defer close(done)
				for i := 1; i <= tc.published; i++ {
					// Wait until the reader has room: it must not be dropped.
					for reader.pending() != 0 {
						time.Sleep(time.Millisecond)
					}
					h.Publish("a", LogEntry{ID: int64(i)})
				}
			}()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("the publisher blocked")
			}
			wg.Wait()
			for i, id := range got {
				if id != int64(i+1) {
					t.Fatalf("reader got %v, want 1..%d in order", got, tc.published)
				}
			}
			if other.pending() != 0 {
				t.Fatal("a subscriber of another topic got lines")
			}
			dropped := h.subscribers("a") == 1 // only the reader is left
			if dropped != tc.wantDrop {
				t.Fatalf("stalled subscriber dropped: %v, want %v", dropped, tc.wantDrop)
			}
			lines, ok := stalled.Take()
			if ok == tc.wantDrop {
				t.Fatalf("Take on the stalled subscriber: ok %v, want %v", ok, !tc.wantDrop)
			}
			if !tc.wantDrop {
				// It got what fitted its bound, in order.
				for i, e := range lines {
					if e.ID != int64(i+1) {
						t.Fatalf("stalled subscriber got %d, want %d", e.ID, i+1)
					}
				}
				if len(lines) != tc.buffer {
					t.Fatalf("stalled subscriber got %d lines, want %d", len(lines), tc.buffer)
				}
			}
			stalled.Close()
			reader.Close()
			other.Close()
			reader.Close() // twice is fine
			if h.subscribers("a")+h.subscribers("b") != 0 {
				t.Fatal("subscriptions left after Close")
			}
		})
	}
}

// TestLogCursor checks the stream's event ids: they resume exactly.
func TestLogCursor(t *testing.T) {
	cases := []struct {
		in   logCursor
		e    LogEntry
		want bool
		out  string
	}{
		{logCursor{}, LogEntry{ID: 1, Phase: "build"}, true, "1-0"},
		{logCursor{rev: 5}, LogEntry{ID: 5, Phase: "deploy"}, false, "5-0"},
		{logCursor{rev: 5}, LogEntry{ID: 3, Phase: "agent"}, true, "5-3"},
		{logCursor{rev: 5, agent: 3}, LogEntry{ID: 2, Phase: "agent"}, false, "5-3"},
	}
	for _, tc := range cases {
		c := tc.in
		if got := c.advance(tc.e); got != tc.want || c.String() != tc.out {
			t.Errorf("%v + %v: %v %s, want %v %s", tc.in, tc.e, got, c, tc.want, tc.out)
		}
	}
}
