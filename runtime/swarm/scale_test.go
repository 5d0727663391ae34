package swarm

import (
	"slices"
	"testing"

	"github.com/moby/moby/api/types/swarm"

	"slipway/runtime"
	"slipway/runtime/docker"
)

// TestScaledServiceSpecs: a scaled revision's API service runs min_scale
// tasks as role api (all without queue workers), the queue service
// queue_min_scale tasks as role queue, each task with a worker id of its
// own from Swarm's templates, and both roll out start-first on PostgreSQL.
func TestScaledServiceSpecs(t *testing.T) {
	for _, tc := range []struct {
		name                string
		scale               runtime.Scale
		apiRole             string
		apiTasks, queueTask uint64
		conns               string
	}{
		{"api and queue", runtime.Scale{API: 2, Queue: 3, DBMaxConnections: 10}, "api", 2, 3, "2"},
		{"api only", runtime.Scale{API: 3}, "all", 3, 0, ""},
		{"one api, workers", runtime.Scale{API: 1, Queue: 2}, "api", 1, 2, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := testDriver()
			s := runtime.Spec{DeploymentID: "dep", DeploymentName: "name", RevisionID: "rev", Source: "internal_source", Scale: tc.scale,
				AgentEnv: map[string]string{"SLIPWAY_AGENT_POSTGRES_URL": "postgres://u:p@db/x", "SLIPWAY_AGENT_REDIS_URL": "redis://u:p@r"}}
			p, err := docker.PlanAgent(s, "", 2048)
			if err != nil {
				t.Fatal(err)
			}
			api := d.serviceSpec(s, p, taskSpec{image: "img", token: "tok"})
			withRole(&api, s, apiRole(s), max(s.Scale.API, 1))
			env := func(e []string, k string) string {
				for _, kv := range e {
					if len(kv) > len(k) && kv[:len(k)+1] == k+"=" {
						return kv[len(k)+1:]
					}
				}
				return "<unset>"
			}
			ce := api.TaskTemplate.ContainerSpec.Env
			if got := *api.Mode.Replicated.Replicas; got != tc.apiTasks || api.Name != "slipway-"+s.DeploymentID {
				t.Errorf("API service %s: %d tasks, want %d", api.Name, got, tc.apiTasks)
			}
			if env(ce, "SLIPWAY_AGENT_ROLE") != tc.apiRole || env(ce, "SLIPWAY_AGENT_WORKER_ID") != "api-{{.Task.Slot}}-{{.Task.ID}}" {
				t.Errorf("API env: role %s, worker %s", env(ce, "SLIPWAY_AGENT_ROLE"), env(ce, "SLIPWAY_AGENT_WORKER_ID"))
			}
			if tc.conns != "" && env(ce, "SLIPWAY_AGENT_DB_MAX_CONNECTIONS") != tc.conns {
				t.Errorf("API connections: %s, want %s", env(ce, "SLIPWAY_AGENT_DB_MAX_CONNECTIONS"), tc.conns)
			}
			if api.UpdateConfig.Order != "start-first" {
				t.Errorf("API update order %s", api.UpdateConfig.Order)
			}
			if tc.queueTask == 0 {
				return
			}
			q := queueSpec(api, s)
			qe := q.TaskTemplate.ContainerSpec.Env
			if got := *q.Mode.Replicated.Replicas; got != tc.queueTask || q.Name != "slipway-"+s.DeploymentID+"-queue" {
				t.Errorf("queue service %s: %d tasks, want %d", q.Name, got, tc.queueTask)
			}
			if env(qe, "SLIPWAY_AGENT_ROLE") != "queue" || env(qe, "SLIPWAY_AGENT_WORKER_ID") != "queue-{{.Task.Slot}}-{{.Task.ID}}" {
				t.Errorf("queue env: role %s, worker %s", env(qe, "SLIPWAY_AGENT_ROLE"), env(qe, "SLIPWAY_AGENT_WORKER_ID"))
			}
			// The queue spec is a copy: the API service's is unchanged.
			if env(api.TaskTemplate.ContainerSpec.Env, "SLIPWAY_AGENT_ROLE") != tc.apiRole || *api.Mode.Replicated.Replicas != tc.apiTasks {
				t.Error("deriving the queue spec changed the API spec")
			}
			for _, k := range []string{"SLIPWAY_AGENT_POSTGRES_URL", "SLIPWAY_AGENT_REDIS_URL", "SLIPWAY_AGENT_TOKEN"} {
				if env(qe, k) != env(ce, k) || env(qe, k) == "<unset>" {
					t.Errorf("queue %s = %q, API %q", k, env(qe, k), env(ce, k))
				}
			}
			if slices.Equal(qe, ce) {
				t.Error("queue and API env are the same")
			}
		})
	}
}

// TestLiveWorkerIDs: a replica told to shut down still counts while it
// runs on a node that is up (it drains its requests over its connections);
// one on a lost node counts only while Swarm wants it running.
func TestLiveWorkerIDs(t *testing.T) {
	task := func(id string, slot int, role string, desired, state swarm.TaskState, node string) swarm.Task {
		var tk swarm.Task
		tk.ID, tk.Slot, tk.NodeID, tk.DesiredState, tk.Status.State = id, slot, node, desired, state
		tk.Spec.ContainerSpec = &swarm.ContainerSpec{Env: []string{"SLIPWAY_AGENT_ROLE=" + role}}
		return tk
	}
	up := map[string]bool{"n1": true, "n2": false}
	run, shut := swarm.TaskStateRunning, swarm.TaskStateShutdown
	tests := []struct {
		name string
		task swarm.Task
		live bool
	}{
		{"wanted and running", task("a", 1, "api", run, run, "n1"), true},
		{"wanted, still starting", task("b", 2, "api", run, swarm.TaskStateStarting, "n1"), true},
		{"draining on a node that is up", task("c", 3, "queue", shut, run, "n1"), true},
		{"stopped after draining", task("d", 3, "queue", shut, swarm.TaskStateComplete, "n1"), false},
		{"shut down on a lost node", task("e", 4, "api", shut, run, "n2"), false},
		{"wanted on a lost node", task("f", 5, "api", run, run, "n2"), true},
		{"on a node that left", task("g", 6, "api", shut, run, "n3"), false},
		{"failed", task("h", 7, "queue", shut, swarm.TaskStateFailed, "n1"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := liveWorkerIDs([]swarm.Task{tt.task}, up)
			if (len(got) == 1) != tt.live {
				t.Fatalf("live = %v, want %v", got, tt.live)
			}
		})
	}
	got := liveWorkerIDs([]swarm.Task{task("a", 1, "api", run, run, "n1"), task("c", 3, "queue", shut, run, "n1")}, up)
	if want := []string{"api-1-a", "queue-3-c"}; !slices.Equal(got, want) {
		t.Fatalf("ids = %v, want %v", got, want)
	}
}
