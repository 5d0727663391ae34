package agent

import (
	"context"
	"slices"
	"testing"
)

// TestListRunsReadsOnlyItsPage lists the runs of a thread with 300 of them
// (two statuses) by pages, with and without a status filter: each page is
// the newest-first slice the whole list gives, and a page without a filter
// decodes the runs it returns and the ones it skips, not the thread's 300.
func TestListRunsReadsOnlyItsPage(t *testing.T) { testListRunsReadsOnlyItsPage(t, startEngine) }

func testListRunsReadsOnlyItsPage(t *testing.T, start func(*testing.T) *Engine) {
	e := start(t)
	th, err := e.CreateThread("", nil, "")
	if err != nil {
		t.Fatal(err)
	}
	var newest []Run // newest first
	err = e.store.Update(context.Background(), func(tx Tx) error {
		for i := 0; i < 300; i++ {
			r := newRunRec(th.ThreadID)
			r.Status = RunSuccess
			if i%3 == 0 {
				r.Status = RunError
			}
			if err := tx.PutRun(r); err != nil {
				return err
			}
			if err := tx.IndexRun(th.ThreadID, r.RunID); err != nil {
				return err
			}
			newest = append([]Run{r.Run}, newest...)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ids := func(rs []Run) []string {
		var out []string
		for _, r := range rs {
			out = append(out, r.RunID)
		}
		return out
	}
	for _, tc := range []struct {
		limit, offset int
		status        string
	}{{10, 0, ""}, {10, 25, ""}, {7, 295, ""}, {10, 400, ""}, {5, 3, RunError}, {50, 80, RunError}, {0, 0, ""}} {
		var want []Run
		for _, r := range newest {
			if tc.status == "" || r.Status == tc.status {
				want = append(want, r)
			}
		}
		want = want[min(tc.offset, len(want)):min(tc.offset+tc.limit, len(want))]
		before := runDecodes.Load()
		got, err := e.ListRuns(th.ThreadID, tc.limit, tc.offset, tc.status)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(ids(got), ids(want)) {
			t.Errorf("limit %d offset %d status %q: %d runs, want %d (or not newest first)", tc.limit, tc.offset, tc.status, len(got), len(want))
		}
		if read := runDecodes.Load() - before; tc.status == "" && read > int64(min(tc.offset+tc.limit, 300)) {
			t.Errorf("limit %d offset %d: decoded %d runs for a page of %d", tc.limit, tc.offset, read, len(got))
		}
	}
}

// Join waits for a run to end and returns the thread's values: how the
// tests wait for a run. The API's join answers from the run's events
// (agentapi) and, once it has ended, from JoinEnded.
func (e *Engine) Join(ctx context.Context, threadID, runID string) (map[string]any, error) {
	if _, err := e.GetRun(threadID, runID); err != nil {
		return nil, err
	}
	if e.distributed() {
		if err := e.waitRemote(ctx, runID); err != nil {
			return nil, err
		}
	} else if lr := e.liveRun(runID); lr != nil {
		if err := e.waitEnd(ctx, threadID, runID, lr); err != nil {
			return nil, err
		}
	}
	st, err := e.GetState(threadID, "")
	if err != nil {
		return nil, err
	}
	return st.Values, nil
}

// waitEnd waits until the run is no longer pending or running.
func (e *Engine) waitEnd(ctx context.Context, threadID, runID string, lr *liveRun) error {
	for {
		select {
		case <-lr.done:
			return nil
		case <-lr.events.closedCh():
			// Closed without running: a pending run was cancelled.
			r, err := e.GetRun(threadID, runID)
			if err != nil || (r.Status != RunPending && r.Status != RunRunning) {
				return nil
			}
			select {
			case <-lr.done:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
