package agent

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"slipway/storage"
)

// Searches and counts answer as the bbolt store's: the same records with
// the same data, every sort both ways, filters, offsets and limits.
func TestPostgresStoreSearchMatchesBolt(t *testing.T) {
	pg := openPGTestStore(t)
	bs, _ := openIndexStore(t)
	rng := rand.New(rand.NewPCG(1, 2))
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	statuses := []string{ThreadIdle, "busy", "error", "interrupted"}
	var threads []*threadRecord
	var assistants []*Assistant
	var crons []*Cron
	for i := 0; i < 60; i++ {
		th := newThreadRec("")
		// Equal times on purpose: the id breaks the tie.
		th.CreatedAt = base.Add(time.Duration(rng.IntN(20)) * time.Second)
		th.UpdatedAt = base.Add(time.Duration(rng.IntN(20)) * time.Minute)
		th.Status = statuses[rng.IntN(len(statuses))]
		th.Metadata = map[string]any{"k": fmt.Sprint(rng.IntN(3)), "n": float64(rng.IntN(2)), "obj": map[string]any{"x": float64(rng.IntN(2))}}
		th.Values = map[string]any{"v": float64(rng.IntN(3))}
		threads = append(threads, th)
		g := fmt.Sprint("Graph", rng.IntN(3))
		a := &Assistant{AssistantID: storage.NewID().String(), GraphID: g, Name: fmt.Sprint([]string{"alpha", "Beta", "gamma"}[rng.IntN(3)], i),
			Metadata: map[string]any{"team": fmt.Sprint(rng.IntN(2)), "tags": []any{"x"}}, Version: 1,
			CreatedAt: th.CreatedAt, UpdatedAt: th.UpdatedAt}
		assistants = append(assistants, a)
		tid := threads[rng.IntN(len(threads))].ThreadID
		var tp *string
		if rng.IntN(2) == 0 {
			tp = &tid
		}
		c := &Cron{CronID: storage.NewID().String(), AssistantID: assistants[rng.IntN(len(assistants))].AssistantID, ThreadID: tp,
			Enabled: rng.IntN(2) == 0, NextRunDate: base.Add(time.Duration(rng.IntN(5)) * time.Hour), Metadata: map[string]any{"m": float64(rng.IntN(2)), "o": []any{}},
			CreatedAt: th.CreatedAt, UpdatedAt: th.UpdatedAt}
		crons = append(crons, c)
	}
	for _, s := range []Store{pg, bs} {
		mustUpdate(t, s, func(tx Tx) error {
			for i := range threads {
				if err := errors.Join(tx.PutThread(threads[i]), tx.PutAssistant(assistants[i]), tx.PutCron(crons[i])); err != nil {
					return err
				}
			}
			return nil
		})
	}
	type answer struct {
		IDs []string
		N   int
		Err string
	}
	errText := func(err error) string {
		if err != nil {
			return err.Error()
		}
		return ""
	}
	compare := func(name string, ask func(tx ReadTx) answer) {
		t.Helper()
		var want, got answer
		mustView(t, bs, func(tx ReadTx) error { want = ask(tx); return nil })
		mustView(t, pg, func(tx ReadTx) error { got = ask(tx); return nil })
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n pg   %+v\n bolt %+v", name, got, want)
		}
	}
	for _, sortBy := range []string{"", "created_at", "updated_at", "thread_id", "status"} {
		for _, desc := range []bool{false, true} {
			for fi, f := range []ThreadFilter{
				{}, {Status: "busy"}, {Metadata: map[string]any{"k": "1"}}, {Metadata: map[string]any{"k": "1", "n": 1}},
				{Status: "idle", Metadata: map[string]any{"n": 0.0}}, {Values: map[string]any{"v": 2.0}},
				{Metadata: map[string]any{"obj": map[string]any{"x": 1.0}}, Limit: 4, Offset: 2},
				{Limit: 7, Offset: 5}, {IDs: []string{threads[3].ThreadID, threads[1].ThreadID, threads[3].ThreadID}},
				{Metadata: map[string]any{"missing": nil}, Limit: 3},
			} {
				f.SortBy, f.Desc = sortBy, desc
				compare(fmt.Sprintf("threads %d by %q desc=%v", fi, sortBy, desc), func(tx ReadTx) answer {
					rs, err := tx.SearchThreads(f)
					n, cerr := tx.CountThreads(f)
					var ids []string
					for _, r := range rs {
						ids = append(ids, r.ThreadID)
					}
					return answer{ids, n, errText(errors.Join(err, cerr))}
				})
			}
		}
	}
	for _, sortBy := range []string{"", "created_at", "updated_at", "assistant_id", "graph_id", "name"} {
		for _, desc := range []bool{false, true} {
			for qi, q := range []AssistantQuery{
				{}, {GraphID: "Graph1"}, {Name: "BET"}, {Metadata: map[string]any{"team": "1"}, Limit: 5, Offset: 1},
				{Metadata: map[string]any{"tags": []any{"x"}}, GraphID: "Graph2"}, {Limit: 3, Offset: 58},
			} {
				q.SortBy, q.Desc = sortBy, desc
				compare(fmt.Sprintf("assistants %d by %q desc=%v", qi, sortBy, desc), func(tx ReadTx) answer {
					as, err := tx.SearchAssistants(q)
					n, cerr := tx.CountAssistants(q)
					var ids []string
					for _, a := range as {
						ids = append(ids, a.AssistantID)
					}
					return answer{ids, n, errText(errors.Join(err, cerr))}
				})
			}
		}
	}
	on := true
	for _, sortBy := range []string{"", "cron_id", "assistant_id", "thread_id", "next_run_date", "end_time", "created_at", "updated_at"} {
		for _, desc := range []bool{false, true} {
			for fi, f := range []CronFilter{
				{}, {AssistantID: crons[0].AssistantID}, {ThreadID: threads[0].ThreadID}, {Enabled: &on, Limit: 4, Offset: 3},
				{Metadata: map[string]any{"m": 1.0}}, {Metadata: map[string]any{"o": []any{}}, Enabled: &on},
			} {
				f.SortBy, f.Desc = sortBy, desc
				compare(fmt.Sprintf("crons %d by %q desc=%v", fi, sortBy, desc), func(tx ReadTx) answer {
					cs, err := tx.SearchCrons(f)
					n, cerr := tx.CountCrons(f)
					var ids []string
					for _, c := range cs {
						ids = append(ids, c.CronID)
					}
					return answer{ids, n, errText(errors.Join(err, cerr))}
				})
			}
		}
	}
	compare("crons of an assistant and of a thread", func(tx ReadTx) answer {
		a, err1 := tx.CronsOf(crons[0].AssistantID, "")
		b, err2 := tx.CronsOf("", threads[0].ThreadID)
		return answer{append(a, b...), 0, errText(errors.Join(err1, err2))}
	})
	// Assistant versions and checkpoints past 9 (numbers, not texts, order
	// them), more than a batch of checkpoints.
	cpThread := storage.NewID().String()
	for _, s := range []Store{pg, bs} {
		mustUpdate(t, s, func(tx Tx) error {
			for v := 1; v <= 12; v++ {
				if err := tx.PutAssistantVersion(&Assistant{AssistantID: "versioned", Version: v}); err != nil {
					return err
				}
			}
			for seq := uint64(1); seq <= 70; seq++ {
				cp := &Checkpoint{Checkpoint: CheckpointRef{ThreadID: cpThread, CheckpointID: fmt.Sprintf("cp%03d", seq)}}
				if err := tx.PutCheckpoint(cpThread, seq, cp); err != nil {
					return err
				}
			}
			return nil
		})
	}
	compare("assistant versions and checkpoints", func(tx ReadTx) answer {
		vs, err := tx.AssistantVersions("versioned")
		var ids []string
		for _, v := range vs {
			ids = append(ids, fmt.Sprint("v", v.Version))
		}
		err2 := tx.CheckpointsNewestFirst(cpThread, func(cp *Checkpoint) (bool, error) {
			ids = append(ids, cp.Checkpoint.CheckpointID)
			return len(ids) < 50, nil
		})
		err3 := tx.CheckpointsBefore(cpThread, "cp040", func(cp *Checkpoint) (bool, error) {
			ids = append(ids, cp.Checkpoint.CheckpointID)
			return true, nil
		})
		err4 := tx.ForEachCheckpoint(cpThread, func(seq uint64, cp *Checkpoint) error {
			ids = append(ids, fmt.Sprint(seq, cp.Checkpoint.CheckpointID))
			return nil
		})
		return answer{ids, len(ids), errText(errors.Join(err, err2, err3, err4))}
	})
	// Store items and checkpoint rows, more than a batch of them, scanned
	// and stopped as on bbolt.
	for _, s := range []Store{pg, bs} {
		mustUpdate(t, s, func(tx Tx) error {
			for i := 0; i < 70; i++ {
				ns := []string{"a", fmt.Sprint("b", i%7)}
				if i%5 == 0 {
					ns = []string{fmt.Sprint("a", i)}
				}
				if err := tx.PutItem(&Item{Namespace: ns, Key: fmt.Sprint("k", i), Value: map[string]any{}}); err != nil {
					return err
				}
				if err := tx.PutCheckpointRow(lgKey("t1", "", lgKindCheckpoint, fmt.Sprintf("%03d", i)), []byte{byte(i)}); err != nil {
					return err
				}
			}
			return nil
		})
	}
	compare("items and checkpoint rows", func(tx ReadTx) answer {
		var keys []string
		err := tx.ScanItems([]string{"a"}, func(it *Item) (bool, error) {
			keys = append(keys, fmt.Sprint(it.Namespace, it.Key))
			return len(keys) < 60, nil
		})
		n := 0
		_ = tx.ForEachItemNamespace(func([]string) error { n++; return nil })
		return answer{keys, n, errText(err)}
	})
	rows := func(s Store) (out []string) {
		prefix := lgKey("t1", "", lgKindCheckpoint, "")
		if err := s.ViewCheckpointRows(context.Background(), "", func(lg checkpointRows) error {
			lg.scan(prefix, func(k, _ []byte) bool { out = append(out, string(k)); return len(out) < 40 })
			lg.scanBack(prefix, lgKey("t1", "", lgKindCheckpoint, "050"), func(k, _ []byte) bool {
				out = append(out, string(k))
				return len(out) < 80
			})
			k, _ := lg.last(prefix)
			out = append(out, string(k), string(lg.get(lgKey("t1", "", lgKindCheckpoint, "007"))))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	if got, want := rows(pg), rows(bs); !reflect.DeepEqual(got, want) {
		t.Errorf("checkpoint rows scanned:\n pg   %q\n bolt %q", got, want)
	}
	// Past the residual bound both refuse the search the same way.
	defer func(n int) { maxResidualScan = n }(maxResidualScan)
	maxResidualScan = 10
	compare("a residual filter past the bound", func(tx ReadTx) answer {
		rs, err := tx.SearchThreads(ThreadFilter{Values: map[string]any{"v": 9.0}})
		_, aerr := tx.SearchAssistants(AssistantQuery{Name: "zzz"})
		return answer{nil, len(rs), errText(errors.Join(err, aerr))}
	})
}
