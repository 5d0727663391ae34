package runtime

import (
	"reflect"
	"testing"
)

func TestScaleOf(t *testing.T) {
	i := func(v int) *int { return &v }
	for _, tc := range []struct {
		name string
		rs   *ResourceSpec // as given; normalized below, as the control plane stores it
		want Scale
	}{
		{"none", nil, Scale{}},
		{"empty", &ResourceSpec{}, Scale{}},
		{"min_scale 1 (queue defaults to 1)", &ResourceSpec{MinScale: i(1)}, Scale{}},
		{"min_scale 1, queue 1 given", &ResourceSpec{MinScale: i(1), QueueMinScale: i(1)}, Scale{}},
		{"min_scale 0", &ResourceSpec{MinScale: i(0)}, Scale{}},
		{"min_scale 2 (queue defaults to 2)", &ResourceSpec{MinScale: i(2)}, Scale{API: 2, Queue: 2}},
		{"min_scale 3, queue 0", &ResourceSpec{MinScale: i(3), QueueMinScale: i(0)}, Scale{API: 3}},
		{"queue 1 alone", &ResourceSpec{QueueMinScale: i(1)}, Scale{API: 1, Queue: 1}},
		{"min_scale 1, queue 2", &ResourceSpec{MinScale: i(1), QueueMinScale: i(2)}, Scale{API: 1, Queue: 2}},
		{"min_scale 0, queue 1", &ResourceSpec{MinScale: i(0), QueueMinScale: i(1)}, Scale{API: 1, Queue: 1}},
		{"db connections", &ResourceSpec{MinScale: i(2), QueueMinScale: i(2), DBMaxConnections: i(10)}, Scale{API: 2, Queue: 2, DBMaxConnections: 10}},
	} {
		tc.rs.Normalize()
		if got := ScaleOf(tc.rs); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestReplicas(t *testing.T) {
	type r struct{ name, role, conns string }
	flat := func(rs []Replica) (out []r) {
		for _, x := range rs {
			out = append(out, r{x.Name, x.Role, x.Env["SLIPWAY_AGENT_DB_MAX_CONNECTIONS"]})
			if x.Env != nil && (x.Env["SLIPWAY_AGENT_ROLE"] != x.Role || x.Env["SLIPWAY_AGENT_WORKER_ID"] != x.Name) {
				t.Errorf("replica %s: env %v", x.Name, x.Env)
			}
		}
		return out
	}
	for _, tc := range []struct {
		s     Scale
		want  []r
		share int
	}{
		{Scale{}, []r{{"", "all", ""}}, 0},
		{Scale{DBMaxConnections: 7}, []r{{"", "all", ""}}, 0},
		{Scale{API: 2}, []r{{"api-0", "all", ""}, {"api-1", "all", ""}}, 0},
		{Scale{API: 2, Queue: 2, DBMaxConnections: 10}, []r{{"api-0", "api", "2"}, {"api-1", "api", "2"}, {"queue-0", "queue", "2"}, {"queue-1", "queue", "2"}}, 2},
		{Scale{API: 1, Queue: 1, DBMaxConnections: 1}, []r{{"api-0", "api", "1"}, {"queue-0", "queue", "1"}}, 1},
	} {
		if got := flat(tc.s.Replicas()); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%+v: %v, want %v", tc.s, got, tc.want)
		}
		if tc.s.Scaled() {
			if got := tc.s.PoolShare(); got != tc.share {
				t.Errorf("%+v: pool share %d, want %d", tc.s, got, tc.share)
			}
		}
	}
}
