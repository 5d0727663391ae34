package controlplane_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"slipway/server/apptest"
	"slipway/server/servertest"
)

// TestAgentDatabaseUnreachable: with SLIPWAY_POSTGRES_URL naming a server
// that does not answer, the deploy fails with a deploy log line that says
// so, and neither that log, the revision nor Slipway's
// own log quote the admin password.
func TestAgentDatabaseUnreachable(t *testing.T) {
	const password = "hunter2-adm1n-pw"
	s := apptest.New(t, map[string]string{"SLIPWAY_POSTGRES_URL": "postgres://admin:" + password + "@127.0.0.1:1/postgres?connect_timeout=2"})
	d := s.Do("POST", "/v2/deployments", map[string]any{"name": "pg-down", "source": "external_docker",
		"source_config": map[string]any{}, "source_revision_config": map[string]any{"image_uri": "example/agent:1"}, "secrets": []any{}})
	mustStatus(t, d, 201)
	dep, rev := d.Map()["id"].(string), d.Map()["latest_revision_id"].(string)
	if st := waitRevision(t, s, dep, rev); st != "DEPLOY_FAILED" {
		t.Fatalf("revision ended %s, want DEPLOY_FAILED", st)
	}
	logs := s.Do("GET", "/v2/deployments/"+dep+"/revisions/"+rev+"/logs", nil)
	revision := s.Do("GET", "/v2/deployments/"+dep+"/revisions/"+rev, nil)
	if !strings.Contains(string(logs.Body), "cannot connect to the PostgreSQL server of SLIPWAY_POSTGRES_URL") {
		t.Fatalf("the deploy log does not say why: %s", logs.Body)
	}
	for what, text := range map[string]string{"deploy log": string(logs.Body), "revision": string(revision.Body), "server log": s.Logs()} {
		if strings.Contains(text, password) {
			t.Errorf("the %s quotes the admin password: %s", what, text)
		}
	}
}

// TestAgentDatabaseLifecycle follows a deployment's database on a real
// PostgreSQL (the fake runtime stands in for the agent): created with its
// role on the first deploy, bounded by db_max_connections, closed to
// PUBLIC; the same database after a redeploy and a restart of Slipway;
// a deletion waits while the server does not answer; gone with its role
// once the deployment is deleted.
func TestAgentDatabaseLifecycle(t *testing.T) {
	admin := servertest.PostgresAdminURL(t)
	s := apptest.New(t, map[string]string{"SLIPWAY_POSTGRES_URL": admin})
	ctx := context.Background()
	c, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	d := s.Do("POST", "/v2/deployments", map[string]any{"name": "pg-life", "source": "external_docker",
		"source_config":          map[string]any{"resource_spec": map[string]any{"db_max_connections": 5}},
		"source_revision_config": map[string]any{"image_uri": "example/agent:1"}, "secrets": []any{}})
	mustStatus(t, d, 201)
	dep, rev := d.Map()["id"].(string), d.Map()["latest_revision_id"].(string)
	if st := waitRevision(t, s, dep, rev); st != "DEPLOYED" {
		t.Fatalf("revision ended %s:\n%s", st, s.Logs())
	}
	name := "slipway_dep_" + strings.ReplaceAll(dep, "-", "")
	t.Cleanup(func() { servertest.DropAgentDatabase(t, admin, name) })
	type state struct {
		oid, owner     string
		connLimit      int
		publicConnect  bool
		roleCount, dbs int
	}
	look := func() (st state) {
		t.Helper()
		if err := c.QueryRow(ctx, "select count(*) from pg_roles where rolname = $1", name).Scan(&st.roleCount); err != nil {
			t.Fatal(err)
		}
		if err := c.QueryRow(ctx, "select count(*) from pg_database where datname = $1", name).Scan(&st.dbs); err != nil {
			t.Fatal(err)
		}
		if st.dbs == 0 || st.roleCount == 0 {
			return st
		}
		// A NULL datacl means the defaults, which let PUBLIC connect.
		err := c.QueryRow(ctx, `select d.oid::text, pg_get_userbyid(d.datdba), r.rolconnlimit,
			d.datacl is null or exists(select 1 from aclexplode(d.datacl) a where a.grantee = 0 and a.privilege_type = 'CONNECT')
			from pg_database d, pg_roles r where d.datname = $1 and r.rolname = $1`, name).Scan(&st.oid, &st.owner, &st.connLimit, &st.publicConnect)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	first := look()
	if first.dbs != 1 || first.roleCount != 1 || first.owner != name || first.connLimit != 5 || first.publicConnect {
		t.Fatalf("after the first deploy: %+v", first)
	}
	if got := s.Do("GET", "/v2/deployments/"+dep, nil); strings.Contains(string(got.Body), "agent_database") || strings.Contains(string(got.Body), name) {
		t.Fatalf("the API shows the agent database: %s", got.Body)
	}

	// A new revision, then a restart of Slipway: the same database.
	p := s.Do("PATCH", "/v2/deployments/"+dep, map[string]any{"source_revision_config": map[string]any{"image_uri": "example/agent:2"}})
	mustStatus(t, p, 200)
	if st := waitRevision(t, s, dep, p.Map()["latest_revision_id"].(string)); st != "DEPLOYED" {
		t.Fatalf("revision 2 ended %s", st)
	}
	s.Restart()
	deadline := time.Now().Add(30 * time.Second)
	for s.Do("GET", "/v2/deployments/"+dep, nil).Map()["status"] != "READY" && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if again := look(); again != first {
		t.Fatalf("the database changed across a redeploy and a restart: %+v, then %+v", first, again)
	}

	// Deleted while the server does not answer: the deletion waits, and
	// goes through once it answers again.
	s.Env["SLIPWAY_POSTGRES_URL"] = "postgres://nobody:nothing@127.0.0.1:1/postgres?connect_timeout=2"
	s.Restart()
	mustStatus(t, s.Do("DELETE", "/v2/deployments/"+dep, nil), 204)
	time.Sleep(3 * time.Second) // the reconciler scans every 2 s
	if r := s.Do("GET", "/v2/deployments/"+dep, nil); r.Status != 200 || look() != first {
		t.Fatalf("with the database unreachable the deployment went (%d) or its database changed: %+v", r.Status, look())
	}
	s.Env["SLIPWAY_POSTGRES_URL"] = admin
	s.Restart()
	deadline = time.Now().Add(30 * time.Second)
	for s.Do("GET", "/v2/deployments/"+dep, nil).Status != 404 {
		if time.Now().After(deadline) {
			t.Fatal("deployment not deleted")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if gone := look(); gone.dbs != 0 || gone.roleCount != 0 {
		t.Fatalf("deleting the deployment left its database or role: %+v", gone)
	}
}

// TestAgentDatabaseAdminWithoutPrivileges: an admin role that may not
// create roles fails the deploy with a log line saying what it lacks,
// without its password.
func TestAgentDatabaseAdminWithoutPrivileges(t *testing.T) {
	admin := servertest.PostgresAdminURL(t)
	ctx := context.Background()
	c, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	// Closed after the role's cleanup below (cleanups run last first).
	t.Cleanup(func() { c.Close(ctx) })
	const role, password = "slipway_test_weak_admin", "w3ak-adm1n-pw"
	if _, err := c.Exec(ctx, "drop role if exists "+role); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, "create role "+role+" login nocreaterole nocreatedb password '"+password+"'"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := c.Exec(ctx, "drop role if exists "+role); err != nil {
			t.Error(err)
		}
	})
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(role, password)
	s := apptest.New(t, map[string]string{"SLIPWAY_POSTGRES_URL": u.String()})
	d := s.Do("POST", "/v2/deployments", map[string]any{"name": "pg-weak", "source": "external_docker",
		"source_config": map[string]any{}, "source_revision_config": map[string]any{"image_uri": "example/agent:1"}, "secrets": []any{}})
	mustStatus(t, d, 201)
	dep, rev := d.Map()["id"].(string), d.Map()["latest_revision_id"].(string)
	t.Cleanup(func() { servertest.DropAgentDatabase(t, admin, "slipway_dep_"+strings.ReplaceAll(dep, "-", "")) })
	if st := waitRevision(t, s, dep, rev); st != "DEPLOY_FAILED" {
		t.Fatalf("revision ended %s, want DEPLOY_FAILED", st)
	}
	logs := s.Do("GET", "/v2/deployments/"+dep+"/revisions/"+rev+"/logs", nil)
	if !strings.Contains(string(logs.Body), "does the admin role have CREATEROLE?") {
		t.Fatalf("the deploy log does not say what the role lacks: %s", logs.Body)
	}
	if strings.Contains(string(logs.Body)+s.Logs(), password) {
		t.Fatal("a log quotes the admin password")
	}
}
