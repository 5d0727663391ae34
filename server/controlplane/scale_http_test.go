package controlplane_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"slipway/server/apptest"
	"slipway/server/servertest"
)

// TestScaleRefusedWithoutSharedState: a resource_spec that runs more than
// one agent process is refused with a 422 at the field that scales it,
// naming the settings to configure, unless both SLIPWAY_POSTGRES_URL and
// SLIPWAY_REDIS_URL are set; specs that run one process pass whatever is
// configured. Nothing here connects to either server (the fake runtime
// deploys nothing), so unreachable URLs do.
func TestScaleRefusedWithoutSharedState(t *testing.T) {
	const pg, rd = "postgres://a:b@127.0.0.1:1/postgres", "redis://127.0.0.1:1"
	servers := map[string]*servertest.Server{}
	server := func(env map[string]string) *servertest.Server {
		key := fmt.Sprint(env)
		if servers[key] == nil {
			servers[key] = apptest.New(t, env)
		}
		return servers[key]
	}
	none, pgOnly, redisOnly, both := map[string]string{}, map[string]string{"SLIPWAY_POSTGRES_URL": pg},
		map[string]string{"SLIPWAY_REDIS_URL": rd}, map[string]string{"SLIPWAY_POSTGRES_URL": pg, "SLIPWAY_REDIS_URL": rd}
	i := 0
	for _, tc := range []struct {
		name    string
		env     map[string]string
		rs      map[string]any
		field   string // "" : accepted
		missing string // what the message says is not set
	}{
		{"min_scale 2, nothing configured", none, map[string]any{"min_scale": 2}, "min_scale", "SLIPWAY_POSTGRES_URL and SLIPWAY_REDIS_URL are not set"},
		{"queue workers, nothing configured", none, map[string]any{"queue_min_scale": 1}, "queue_min_scale", "SLIPWAY_POSTGRES_URL and SLIPWAY_REDIS_URL are not set"},
		{"queue workers beside min_scale 1", none, map[string]any{"min_scale": 1, "queue_min_scale": 2}, "queue_min_scale", "SLIPWAY_POSTGRES_URL and SLIPWAY_REDIS_URL are not set"},
		{"min_scale 2, PostgreSQL only", pgOnly, map[string]any{"min_scale": 2, "max_scale": 4}, "min_scale", "SLIPWAY_REDIS_URL is not set"},
		{"min_scale 3, Redis only", redisOnly, map[string]any{"min_scale": 3, "queue_min_scale": 0}, "min_scale", "SLIPWAY_POSTGRES_URL is not set"},
		{"min_scale 1 alone is one process", none, map[string]any{"min_scale": 1, "max_scale": 3}, "", ""},
		{"min_scale 0 is one process", none, map[string]any{"min_scale": 0}, "", ""},
		{"no resource_spec", none, nil, "", ""},
		{"both configured", both, map[string]any{"min_scale": 2, "queue_min_scale": 2}, "", ""},
	} {
		i++
		t.Run(tc.name, func(t *testing.T) {
			s := server(tc.env)
			sc := map[string]any{}
			if tc.rs != nil {
				sc["resource_spec"] = tc.rs
			}
			name := fmt.Sprintf("scale-%d", i)
			r := s.Do("POST", "/v2/deployments", map[string]any{"name": name, "source": "external_docker", "source_config": sc,
				"source_revision_config": map[string]any{"image_uri": "example/agent:1"}, "secrets": []any{}})
			if tc.field == "" {
				mustStatus(t, r, 201)
				return
			}
			checkScale422(t, r, tc.field, tc.missing)
		})
	}

	// PATCH: the same rule on a new resource_spec.
	s := server(none)
	d := s.Do("POST", "/v2/deployments", map[string]any{"name": "patched", "source": "external_docker", "source_config": map[string]any{},
		"source_revision_config": map[string]any{"image_uri": "example/agent:1"}, "secrets": []any{}})
	mustStatus(t, d, 201)
	r := s.Do("PATCH", "/v2/deployments/"+d.Map()["id"].(string), map[string]any{"source_config": map[string]any{"resource_spec": map[string]any{"min_scale": 4}}})
	checkScale422(t, r, "min_scale", "SLIPWAY_POSTGRES_URL and SLIPWAY_REDIS_URL are not set")
}

func checkScale422(t *testing.T, r *servertest.Response, field, missing string) {
	t.Helper()
	if r.Status != 422 {
		t.Fatalf("status %d, want 422: %s", r.Status, r.Body)
	}
	var body struct {
		Detail []struct {
			Loc  []any  `json:"loc"`
			Msg  string `json:"msg"`
			Type string `json:"type"`
		} `json:"detail"`
	}
	if err := json.Unmarshal(r.Body, &body); err != nil || len(body.Detail) != 1 {
		t.Fatalf("422 body %s (%v)", r.Body, err)
	}
	e := body.Detail[0]
	if want := []any{"body", "source_config", "resource_spec", field}; !reflect.DeepEqual(e.Loc, want) || e.Type != "value_error" {
		t.Fatalf("loc %v type %q, want %v value_error", e.Loc, e.Type, want)
	}
	if !strings.Contains(e.Msg, "configure Slipway with SLIPWAY_POSTGRES_URL and SLIPWAY_REDIS_URL") || !strings.Contains(e.Msg, missing) {
		t.Fatalf("msg %q does not say what to configure (%s)", e.Msg, missing)
	}
}

// TestAgentRedisLifecycle follows a scaled deployment's Redis user on a
// real Redis and PostgreSQL (the fake runtime stands in for the agents):
// created on the first deploy with its prefix, the same user after a
// redeploy; an unscaled deployment gets none; deleting the scaled
// deployment leaves no user and no key under its prefix, and no database
// or role.
func TestAgentRedisLifecycle(t *testing.T) {
	pg := servertest.PostgresAdminURL(t)
	rd := servertest.RedisAdminURL(t)
	s := apptest.New(t, map[string]string{"SLIPWAY_POSTGRES_URL": pg, "SLIPWAY_REDIS_URL": rd})
	admin := servertest.RedisClient(t, rd)
	ctx := context.Background()
	create := func(name string, rs map[string]any) (dep string) {
		d := s.Do("POST", "/v2/deployments", map[string]any{"name": name, "source": "external_docker",
			"source_config":          map[string]any{"resource_spec": rs},
			"source_revision_config": map[string]any{"image_uri": "example/agent:1"}, "secrets": []any{}})
		mustStatus(t, d, 201)
		dep = d.Map()["id"].(string)
		t.Cleanup(func() { servertest.DropAgentDatabase(t, pg, "slipway_dep_"+strings.ReplaceAll(dep, "-", "")) })
		if st := waitRevision(t, s, dep, d.Map()["latest_revision_id"].(string)); st != "DEPLOYED" {
			t.Fatalf("%s: revision ended %s:\n%s", name, st, s.Logs())
		}
		return dep
	}
	scaled := create("redis-scaled", map[string]any{"min_scale": 2, "queue_min_scale": 1, "db_max_connections": 9})
	single := create("redis-single", map[string]any{"min_scale": 1})
	user, prefix := "slipway-dep-"+scaled, "slipway:"+scaled+":"
	t.Cleanup(func() { admin.Do(ctx, "acl", "deluser", user) })
	if users, _ := servertest.RedisLeft(t, admin, user, prefix); users != 1 {
		t.Fatalf("the scaled deployment has %d Redis users", users)
	}
	if users, _ := servertest.RedisLeft(t, admin, "slipway-dep-"+single, "slipway:"+single+":"); users != 0 {
		t.Fatal("an unscaled deployment got a Redis user")
	}
	logs := func() string {
		rev := s.Do("GET", "/v2/deployments/"+scaled, nil).Map()["latest_revision_id"].(string)
		return string(s.Do("GET", "/v2/deployments/"+scaled+"/revisions/"+rev+"/logs", nil).Body)
	}
	// Deploy log lines are stored shortly after they are written.
	for _, want := range []string{"under the prefix " + prefix, "2 API replicas (role api) and 1 queue workers", "each gets 3 of the db_max_connections 9"} {
		for deadline := time.Now().Add(10 * time.Second); !strings.Contains(logs(), want); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Errorf("the deploy log does not say %q: %s", want, logs())
				break
			}
		}
	}
	if got := s.Do("GET", "/v2/deployments/"+scaled, nil); strings.Contains(string(got.Body), "agent_redis") {
		t.Fatalf("the API shows the Redis user: %s", got.Body)
	}
	// What agents would have written, under the prefix.
	for i := range 2500 {
		if err := admin.Set(ctx, fmt.Sprintf("%sk:%d", prefix, i), "v", time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
	}
	mustStatus(t, s.Do("DELETE", "/v2/deployments/"+scaled, nil), 204)
	deadline := time.Now().Add(30 * time.Second)
	for s.Do("GET", "/v2/deployments/"+scaled, nil).Status != 404 {
		if time.Now().After(deadline) {
			t.Fatalf("deployment not deleted:\n%s", s.Logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if users, keys := servertest.RedisLeft(t, admin, user, prefix); users != 0 || keys != 0 {
		t.Fatalf("deleting the deployment left %d Redis users and %d keys", users, keys)
	}
	// The name is hex and underscores: safe in a literal.
	name := "slipway_dep_" + strings.ReplaceAll(scaled, "-", "")
	if n := servertest.PostgresCount(t, pg, "select (select count(*) from pg_database where datname = '"+name+"') + (select count(*) from pg_roles where rolname = '"+name+"')"); n != 0 {
		t.Fatalf("deleting the deployment left its database or role (%d)", n)
	}
}
