package controlplane

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"slipway/runtime"
	"slipway/runtime/agent"
)

// A replica lost with its node (a swarm node that died, or was cut off)
// never closes its PostgreSQL connections: the server holds them, against
// the role's CONNECTION LIMIT (db_max_connections), until TCP keepalive
// gives up on them, two hours by default. The replicas that replace it
// then find no connection free. So on a driver that can lose replicas
// (runtime.WorkerLister), the control plane ends, every sweepInterval,
// the connections to a deployment's database whose application_name
// names a worker that no longer exists (agent.AppNamePrefix + its worker
// id, which each replica's agent sets). The admin role may: it is a member
// of every deployment role (ensureAgentDB).
//
// The backends are read before the workers are listed: a worker whose
// connection is seen was created before the list was taken, so it is on
// it unless it is gone. sweepMinAge spares connections younger than that
// all the same.

const (
	sweepInterval = 10 * time.Second
	sweepMinAge   = 5 * time.Second
)

func (rc *Reconciler) sweepLoop(ctx context.Context, wl runtime.WorkerLister) {
	defer rc.wg.Done()
	t := time.NewTicker(sweepInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := rc.sweepAgentConnections(ctx, wl); err != nil && ctx.Err() == nil {
			rc.Log.Debug().Err(err).Msg("end lost replicas' database connections")
		}
	}
}

// sweepAgentConnections ends, for each deployment with an agent database,
// the connections of its workers that are gone.
func (rc *Reconciler) sweepAgentConnections(ctx context.Context, wl runtime.WorkerLister) error {
	dbs := map[string]string{} // database → deployment id
	err := rc.DB.View(func(tx *bolt.Tx) error {
		return eachDeployment(tx, func(d *deploymentRecord) error {
			if d.AgentDatabase != nil {
				dbs[d.AgentDatabase.Name] = d.ID
			}
			return nil
		})
	})
	if err != nil || len(dbs) == 0 {
		return err
	}
	ctx, c, done, err := rc.adminWork(ctx)
	if err != nil {
		return err
	}
	defer done()
	names := make([]string, 0, len(dbs))
	for n := range dbs {
		names = append(names, n)
	}
	rows, err := c.Query(ctx, `select pid, datname, application_name from pg_stat_activity
		where datname = any($1) and starts_with(application_name, $2) and backend_start < now() - $3::interval`,
		names, agent.AppNamePrefix, fmt.Sprintf("%d milliseconds", sweepMinAge.Milliseconds()))
	if err != nil {
		return errAgentDB("read the agents' connections", err)
	}
	type backend struct {
		pid    int32
		worker string
	}
	byDep := map[string][]backend{}
	for rows.Next() {
		var b backend
		var db, app string
		if err := rows.Scan(&b.pid, &db, &app); err != nil {
			rows.Close()
			return errAgentDB("read the agents' connections", err)
		}
		b.worker = strings.TrimPrefix(app, agent.AppNamePrefix)
		byDep[dbs[db]] = append(byDep[dbs[db]], b)
	}
	if err := rows.Err(); err != nil {
		return errAgentDB("read the agents' connections", err)
	}
	for dep, backends := range byDep {
		workers, ok := wl.LiveWorkers(ctx, dep)
		if !ok {
			continue
		}
		live := map[string]bool{}
		for _, w := range workers {
			live[w] = true
		}
		ended := map[string]int{}
		for _, b := range backends {
			if live[b.worker] {
				continue
			}
			var done bool
			if err := c.QueryRow(ctx, "select pg_terminate_backend($1)", b.pid).Scan(&done); err != nil {
				return errAgentDB("end a lost replica's connection", err)
			}
			if done {
				ended[b.worker]++
			}
		}
		if len(ended) > 0 {
			rc.reportSwept(dep, ended)
		}
	}
	return nil
}

// reportSwept writes what a sweep ended to Slipway's log and the
// deployment's.
func (rc *Reconciler) reportSwept(dep string, ended map[string]int) {
	workers := make([]string, 0, len(ended))
	n := 0
	for w, k := range ended {
		workers = append(workers, w)
		n += k
	}
	sort.Strings(workers)
	line := fmt.Sprintf("ended %d database connection(s) of replica(s) that are gone: %s", n, strings.Join(workers, ", "))
	rc.Log.Info().Str("deployment_id", dep).Strs("workers", workers).Int("connections", n).Msg("ended lost replicas' database connections")
	rc.logs.agent.Line(runtime.OutputLine{DeploymentID: dep, Stream: "stdout", Time: time.Now().UTC(), Text: "[slipway] " + line})
}
