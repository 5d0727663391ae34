package runtime

import (
	"context"
	"fmt"
	"strconv"
)

// A deployment runs as one agent process (role "all", its state in a
// bbolt file or PostgreSQL) unless its resource_spec scales it: then it
// runs Scale.API API replicas and Scale.Queue queue workers, all over the
// deployment's PostgreSQL database and Redis prefix, which the control
// plane provisions (and refuses the spec without).

// Scale is how many agent processes a revision runs. The zero value is
// one agent doing everything, exactly as an unscaled deployment runs.
type Scale struct {
	API   int // API replicas; 0 and 1 both mean one
	Queue int // queue workers (role queue); 0: the API replicas execute runs
	// DBMaxConnections is the resource_spec's db_max_connections (0:
	// unset), shared out between the replicas (see Replica.Env).
	DBMaxConnections int
}

// ScaleOf is the replica plan of a (normalized) resource_spec:
//
//   - min_scale > 1 runs that many API replicas, and queue_min_scale
//     (which defaults to min_scale) queue workers;
//   - queue_min_scale ≥ 1 with min_scale ≤ 1 runs one API replica and
//     queue_min_scale queue workers, except when queue_min_scale is only
//     min_scale's value (1 or 0) copied by the default: min_scale 1 alone
//     (or min_scale 1, queue_min_scale 1) stays one process doing both,
//     which is what it always meant;
//   - anything else is one process.
//
// max_scale and queue_max_scale are not acted on: the replicas stay at
// their minimum (autoscaling is the swarm runtime's).
func ScaleOf(rs *ResourceSpec) Scale {
	if rs == nil {
		return Scale{}
	}
	api, queue := 1, 0
	if rs.MinScale != nil && *rs.MinScale > 1 {
		api = *rs.MinScale
	}
	if rs.QueueMinScale != nil && *rs.QueueMinScale >= 1 {
		defaulted := rs.MinScale != nil && *rs.QueueMinScale == *rs.MinScale
		if api > 1 || !defaulted {
			queue = *rs.QueueMinScale
		}
	}
	if api == 1 && queue == 0 {
		return Scale{}
	}
	s := Scale{API: api, Queue: queue}
	if rs.DBMaxConnections != nil && *rs.DBMaxConnections > 0 {
		s.DBMaxConnections = *rs.DBMaxConnections
	}
	return s
}

// Scaled says whether the plan runs more than one agent process, which
// needs state shared between them (PostgreSQL and Redis).
func (s Scale) Scaled() bool { return s.API > 1 || s.Queue > 0 }

// Replica is one agent process of a revision.
type Replica struct {
	// Name is stable across restarts and revisions: api-0, api-1, ...,
	// queue-0, ...; "" for an unscaled deployment's one agent.
	Name string
	Role string // all, api or queue (SLIPWAY_AGENT_ROLE)
	// Env is what this replica's agent is told besides Spec.AgentEnv
	// (role, worker id, its share of the database connections); nil for
	// an unscaled deployment.
	Env map[string]string
}

// API says whether the proxy sends this replica requests (queue workers
// serve only /ok and /metrics).
func (r Replica) API() bool { return r.Role != "queue" }

// Replicas lists the agent processes of the plan, API replicas first.
// The database connections (db_max_connections) are divided evenly,
// rounded down, so that together the replicas stay within the role's
// connection limit; every replica gets at least one (with fewer
// connections than replicas the limit is then what refuses the excess).
func (s Scale) Replicas() []Replica {
	if !s.Scaled() {
		return []Replica{{Role: "all"}}
	}
	n := s.API + s.Queue
	share := 0
	if s.DBMaxConnections > 0 {
		share = max(1, s.DBMaxConnections/n)
	}
	apiRole := "all"
	if s.Queue > 0 {
		apiRole = "api" // API replicas never execute runs when workers exist
	}
	out := make([]Replica, 0, n)
	add := func(prefix, role string, count int) {
		for i := range count {
			r := Replica{Name: fmt.Sprintf("%s-%d", prefix, i), Role: role}
			r.Env = map[string]string{"SLIPWAY_AGENT_ROLE": role, "SLIPWAY_AGENT_WORKER_ID": r.Name}
			if share > 0 {
				r.Env["SLIPWAY_AGENT_DB_MAX_CONNECTIONS"] = strconv.Itoa(share)
			}
			out = append(out, r)
		}
	}
	add("api", apiRole, max(s.API, 1))
	add("queue", "queue", s.Queue)
	return out
}

// PoolShare is each replica's share of db_max_connections (0: unset).
func (s Scale) PoolShare() int {
	if s.DBMaxConnections <= 0 {
		return 0
	}
	if !s.Scaled() {
		return s.DBMaxConnections
	}
	return max(1, s.DBMaxConnections/(max(s.API, 1)+s.Queue))
}

// Scaler is implemented by drivers that run a scaled revision
// (Spec.Scale) as several agent processes; the control plane refuses a
// scaled resource_spec on the others.
type Scaler interface {
	Scales() bool
}

// Balancer is implemented by drivers that serve a deployment from
// several API replicas: Endpoints lists the base URLs (as
// Driver.Endpoint) of those that pass their health checks now, for the
// proxy to spread requests over. One entry for an unscaled deployment.
type Balancer interface {
	Endpoints(deploymentID string) []string
}

// ReplicaEndpoint is one agent process of a scaled revision, API replica
// or queue worker, as the metrics relay reaches it.
type ReplicaEndpoint struct {
	Name string // api-0, queue-1, ...
	URL  string // as Driver.Endpoint: the token as the URL's password
}

// ReplicaLister is implemented by drivers that run scaled revisions:
// ReplicaEndpoints lists every agent of dep's running revision when it is
// scaled (nil otherwise), for the metrics relay, which reads each one
// (queue workers execute the runs, so their metrics matter most).
type ReplicaLister interface {
	ReplicaEndpoints(deploymentID string) []ReplicaEndpoint
}

// WorkerLister is implemented by drivers whose replicas can be lost with
// the machine they ran on (a swarm node): LiveWorkers lists the worker ids
// (SLIPWAY_AGENT_WORKER_ID) of dep's agents that exist now, running,
// starting or draining before they stop, of any revision; ok is false when the driver cannot tell (the
// manager did not answer) or dep runs no replicas. The control plane ends
// the database connections of the other workers, which a lost node leaves
// open at the server until TCP gives up on them.
type WorkerLister interface {
	LiveWorkers(ctx context.Context, deploymentID string) (workers []string, ok bool)
}
