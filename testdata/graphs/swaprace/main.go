// Command swaprace is a command graph for the containment tests: the code
// of a deployment's serving revision attacking the deployment's next
// revision while Slipway builds it, as an Editor of the workspace could
// deploy it. It learns the next revision's id from Slipway's API (with the
// key it is given: the network is shared), watches for
// revisions/<next>/app to appear and be handed to its own uid, and then
// swaps each target (a file Slipway opens there, or a directory on its
// way) for a link into Slipway's data directory (runtime/build/swaprace).
//
// Input: {"api": URL, "key": API key, "deployment_id": id,
// "targets": [swaprace.Target...], "timeout_ms": n, "known": [revision
// ids that are not the next one]}. It writes
// $HOME/swaprace.ready once it is polling, and answers with one values
// event {"report": {...}}: what of the deployment's directory it could
// list, whether it ever saw the next revision's directory, and what each
// swap did. It never prints what it reads.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"slipway/runtime/build/swaprace"
)

type input struct {
	API          string            `json:"api"`
	Key          string            `json:"key"`
	DeploymentID string            `json:"deployment_id"`
	Targets      []swaprace.Target `json:"targets"`
	TimeoutMS    int               `json:"timeout_ms"`
	// Known are revisions that came before: the next is none of them.
	Known []string `json:"known"`
}

type report struct {
	OwnRevision  string            `json:"own_revision"`
	NextRevision string            `json:"next_revision"`
	Listed       map[string]string `json:"listed"` // directory → its entries, or why not
	SawNext      bool              `json:"saw_next"`
	HandedOver   bool              `json:"handed_over"`
	Results      []swaprace.Result `json:"results"`
	Error        string            `json:"error,omitempty"`
}

func main() {
	var req struct {
		Input input `json:"input"`
	}
	if err := json.NewDecoder(os.Stdin).Decode(&req); err != nil {
		fmt.Fprintln(os.Stderr, "swaprace: bad request:", err)
		os.Exit(2)
	}
	r := run(req.Input)
	b, _ := json.Marshal(map[string]any{"event": "values", "data": map[string]any{"report": r}})
	fmt.Println(string(b))
}

func run(in input) (r report) {
	r.Listed = map[string]string{}
	home := os.Getenv("HOME")
	depDir := filepath.Dir(home)
	revs := filepath.Join(depDir, "revisions")
	cwd, _ := os.Getwd()
	// The graph runs from its configuration's directory, .../revisions/<rev>/app.
	if rel, err := filepath.Rel(revs, cwd); err == nil {
		r.OwnRevision, _, _ = strings.Cut(filepath.ToSlash(rel), "/")
	}
	list := func() {
		for _, d := range []string{depDir, revs} {
			entries, err := os.ReadDir(d)
			if err != nil {
				r.Listed[d] = "error: " + err.Error()
				continue
			}
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			r.Listed[d] = strings.Join(names, " ")
		}
	}
	list()
	deadline := time.Now().Add(time.Duration(in.TimeoutMS) * time.Millisecond)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	if err := os.WriteFile(filepath.Join(home, "swaprace.ready"), nil, 0o600); err != nil {
		r.Error = "ready marker: " + err.Error()
		return r
	}
	// The next revision, as the API names it.
	for r.NextRevision == "" {
		if d, err := deployment(ctx, in); err == nil && d.Latest != "" && d.Latest != r.OwnRevision && !slices.Contains(in.Known, d.Latest) {
			r.NextRevision = d.Latest
			break
		}
		select {
		case <-ctx.Done():
			r.Error = "no next revision before the deadline"
			return r
		case <-time.After(5 * time.Millisecond):
		}
	}
	next := filepath.Join(revs, r.NextRevision)
	// Whether its directory is ever there for this revision's code.
	var saw atomic.Bool
	watchCtx, stopWatch := context.WithCancel(ctx)
	go func() {
		for watchCtx.Err() == nil {
			if _, err := os.Lstat(next); err == nil {
				saw.Store(true)
			}
			time.Sleep(500 * time.Microsecond)
		}
	}()
	// The race ends once the next revision's build is over.
	raceCtx, stopRace := context.WithCancel(ctx)
	go func() {
		defer stopRace()
		for raceCtx.Err() == nil {
			if rev, err := revision(raceCtx, in, r.NextRevision); err == nil && terminal(rev.Status) {
				time.Sleep(100 * time.Millisecond)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	r.Results, r.HandedOver = swaprace.Race(raceCtx, filepath.Join(next, "app"), in.Targets, swaprace.Options{Owner: os.Getuid()})
	stopWatch()
	r.SawNext = saw.Load() || r.HandedOver
	list()
	return r
}

func terminal(status string) bool {
	switch status {
	case "DEPLOYED", "BUILD_FAILED", "DEPLOY_FAILED", "CREATE_FAILED", "SKIPPED":
		return true
	}
	return false
}

type dep struct {
	Latest string `json:"latest_revision_id"`
}

type rev struct {
	Status string `json:"status"`
}

func deployment(ctx context.Context, in input) (dep, error) {
	var d dep
	return d, get(ctx, in, "/v2/deployments/"+in.DeploymentID, &d)
}

func revision(ctx context.Context, in input, id string) (rev, error) {
	var r rev
	return r, get(ctx, in, "/v2/deployments/"+in.DeploymentID+"/revisions/"+id, &r)
}

func get(ctx context.Context, in input, path string, into any) error {
	req, err := http.NewRequestWithContext(ctx, "GET", in.API+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("X-Api-Key", in.Key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("GET %s: %d", path, resp.StatusCode)
	}
	return json.NewDecoder(resp.Body).Decode(into)
}
