package docker

import (
	"slices"
	"sort"
	"testing"

	"slipway/runtime"
)

// The docker runtime runs scaled revisions and spreads requests over their
// API replicas.
var (
	_ runtime.Scaler        = (*Driver)(nil)
	_ runtime.Balancer      = (*Driver)(nil)
	_ runtime.ReplicaLister = (*Driver)(nil)
)

func TestReplicaNaming(t *testing.T) {
	replicas := runtime.Scale{API: 2, Queue: 1, DBMaxConnections: 6}.Replicas()
	for _, tc := range []struct {
		r                    runtime.Replica
		container, volume    string
		env                  []string
		labelName, labelRole string
	}{
		{replicas[0], "slipway-d-r-api-0", "slipway-d-data-api-0",
			[]string{"SLIPWAY_AGENT_DB_MAX_CONNECTIONS=2", "SLIPWAY_AGENT_ROLE=api", "SLIPWAY_AGENT_WORKER_ID=api-0"}, "api-0", "api"},
		{replicas[2], "slipway-d-r-queue-0", "slipway-d-data-queue-0",
			[]string{"SLIPWAY_AGENT_DB_MAX_CONNECTIONS=2", "SLIPWAY_AGENT_ROLE=queue", "SLIPWAY_AGENT_WORKER_ID=queue-0"}, "queue-0", "queue"},
	} {
		if got := replicaContainer("d", "r", tc.r); got != tc.container {
			t.Errorf("%s: container %q, want %q", tc.r.Name, got, tc.container)
		}
		if got := replicaVolume("d", tc.r); got != tc.volume {
			t.Errorf("%s: volume %q, want %q", tc.r.Name, got, tc.volume)
		}
		if got := replicaEnv(tc.r); !slices.Equal(got, tc.env) {
			t.Errorf("%s: env %q, want %q", tc.r.Name, got, tc.env)
		}
		l := map[string]string{}
		replicaLabels(l, tc.r)
		if l[LabelReplica] != tc.labelName || l[LabelReplicaRole] != tc.labelRole {
			t.Errorf("%s: labels %v", tc.r.Name, l)
		}
	}
	// The unscaled agent keeps its labels as they were.
	l := map[string]string{}
	replicaLabels(l, runtime.Replica{Role: "all"})
	if len(l) != 0 {
		t.Errorf("unscaled agent labelled %v", l)
	}
}

// TestQueueResources: workers get the queue_* fields, API replicas the
// spec's cpu and memory.
func TestQueueResources(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	i := func(v int) *int { return &v }
	rs := &runtime.ResourceSpec{CPU: f(1), MemoryMB: i(256), QueueCPU: f(0.5), QueueMemoryMB: i(128)}
	rs.Normalize()
	p := &plan{resources: planResources(rs), queue: queueResources(rs)}
	api, queue := p.replicaResources(runtime.Replica{Role: "api"}), p.replicaResources(runtime.Replica{Role: "queue"})
	if api.NanoCPUs != 2e9 || api.Memory != 512<<20 || api.MemoryReservation != 256<<20 || api.CPUShares != 1024 {
		t.Errorf("API replica resources %+v", api)
	}
	if queue.NanoCPUs != 1e9 || queue.Memory != 256<<20 || queue.MemoryReservation != 128<<20 || queue.CPUShares != 512 {
		t.Errorf("queue worker resources %+v", queue)
	}
	if got := queueResources(nil); got.NanoCPUs != 0 || got.Memory != 0 {
		t.Errorf("no spec: %+v", got)
	}
}

func TestReplicaOrder(t *testing.T) {
	names := []string{"queue-1", "api-10", "queue-0", "api-2", "api-0"}
	ls := make([]map[string]string, len(names))
	for i, n := range names {
		role := "api"
		if n[0] == 'q' {
			role = "queue"
		}
		ls[i] = map[string]string{LabelReplica: n, LabelReplicaRole: role}
	}
	sort.Slice(ls, func(i, j int) bool { return replicaLess(ls[i], ls[j]) })
	var got []string
	for _, l := range ls {
		got = append(got, l[LabelReplica])
	}
	if want := []string{"api-0", "api-2", "api-10", "queue-0", "queue-1"}; !slices.Equal(got, want) {
		t.Errorf("order %v, want %v", got, want)
	}
}

// TestEndpoints: the proxy gets the API replicas that are up, never the
// queue workers; an unscaled deployment its one endpoint.
func TestEndpoints(t *testing.T) {
	d := &Driver{}
	members := []*member{
		{name: "api-0", role: "api", container: "c0", endpoint: "http://a0", up: true},
		{name: "api-1", role: "api", container: "c1", endpoint: "http://a1", up: false},
		{name: "api-2", role: "api", container: "c2", endpoint: "http://a2", up: true},
		{name: "queue-0", role: "queue", container: "c3", endpoint: "http://q0", up: true},
	}
	d.deps = map[string]serving{
		"scaled": groupServing("r", members),
		"one":    {rev: "r", container: "c", endpoint: "http://one"},
	}
	for _, tc := range []struct {
		dep  string
		want []string
	}{
		{"scaled", []string{"http://a0", "http://a2"}},
		{"one", []string{"http://one"}},
		{"none", nil},
	} {
		if got := d.Endpoints(tc.dep); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.dep, got, tc.want)
		}
	}
	if got := d.ReplicaEndpoints("scaled"); len(got) != 4 || got[3].Name != "queue-0" || got[3].URL != "http://q0" {
		t.Errorf("replica endpoints %v", got)
	}
	if got := d.ReplicaEndpoints("one"); got != nil {
		t.Errorf("unscaled replica endpoints %v", got)
	}
	if !d.serves("scaled", "c3") || d.serves("scaled", "c9") || !d.serves("one", "c") {
		t.Error("serves does not know the group's containers")
	}
}
