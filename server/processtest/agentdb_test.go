package processtest_test

import (
	"bytes"
	"context"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"slipway/server/servertest"
)

// TestProcessAgentDatabase: with SLIPWAY_POSTGRES_URL, a deployment on the
// process runtime keeps its agent's state in a database of its own (even
// with a secret of the agent setting's name): a
// thread and a run created through the proxy land there, the control
// plane's file holds the role's password only sealed, a redeploy, a
// rollback and a restart of Slipway keep the database and the thread, and
// deleting the deployment drops the
// database and the role with everything else.
func TestProcessAgentDatabase(t *testing.T) {
	requireRuntime(t, "process")
	admin := servertest.PostgresAdminURL(t)
	s := servertest.Start(t, map[string]string{"SLIPWAY_RUNTIME": "process", "SLIPWAY_POSTGRES_URL": admin})
	d := s.Do("POST", "/v2/deployments", map[string]any{"name": "pg-agent", "source": "internal_source", "source_config": map[string]any{},
		"source_revision_config": map[string]any{"graph_config_path": "langgraph.json"},
		// A secret of the setting's name does not take the agent elsewhere.
		"secrets": []any{map[string]any{"name": "SLIPWAY_AGENT_POSTGRES_URL", "value": "postgres://x:y@127.0.0.1:1/elsewhere"}}})
	if d.Status != 201 {
		t.Fatalf("create: %d %s", d.Status, d.Body)
	}
	dep := d.Map()["id"].(string)
	name := "slipway_dep_" + strings.ReplaceAll(dep, "-", "")
	t.Cleanup(func() { servertest.DropAgentDatabase(t, admin, name) })
	rev1 := deploySource(t, s, dep, appFiles(t, ""))
	if st := waitStatus(t, s, dep, rev1); st != "DEPLOYED" {
		t.Fatalf("revision 1 ended %s:\n%s\n%s", st, s.Do("GET", "/v2/deployments/"+dep+"/revisions/"+rev1+"/logs", nil).Body, s.Logs())
	}
	if logs := s.Do("GET", "/v2/deployments/"+dep+"/revisions/"+rev1+"/logs", nil); !strings.Contains(string(logs.Body), "agent state in PostgreSQL database "+name) ||
		!strings.Contains(string(logs.Body), "the secret SLIPWAY_AGENT_POSTGRES_URL is replaced") {
		t.Fatalf("the deploy log does not name the database: %s", logs.Body)
	}
	base := s.Do("GET", "/v2/deployments/"+dep, nil).Map()["url"].(string)
	agent := func(method, path string, body any) *servertest.Response {
		return servertest.Do(t, method, base+path, body, "X-Api-Key", s.Key)
	}
	th := agent("POST", "/threads", map[string]any{}).Map()["thread_id"].(string)
	if r := agent("POST", "/threads/"+th+"/runs/wait", map[string]any{"assistant_id": "agent",
		"input": map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hi"}}}}); r.Status != 200 {
		t.Fatalf("run: %d %s", r.Status, r.Body)
	}

	// The agent's own view of its database: the URL it was started with.
	agentURL := ""
	for _, pid := range agentProcesses(t, filepath.Join(s.DataDir, "deployments", dep)) {
		env, _ := os.ReadFile(filepath.Join("/proc", pid, "environ"))
		for _, kv := range bytes.Split(env, []byte{0}) {
			if v, ok := bytes.CutPrefix(kv, []byte("SLIPWAY_AGENT_POSTGRES_URL=")); ok {
				agentURL = string(v)
			}
		}
	}
	u, err := url.Parse(agentURL)
	if err != nil || u.User.Username() != name || u.Path != "/"+name {
		t.Fatalf("the agent does not run on its own database and role: %q %v", u.Redacted(), err)
	}
	password, _ := u.User.Password()
	if len(password) < 32 {
		t.Fatalf("a weak password: %d characters", len(password))
	}
	db, err := os.ReadFile(filepath.Join(s.DataDir, "slipway.db"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(db, []byte(password)) {
		t.Fatal("the control plane's database holds the role's password in clear")
	}

	ctx := context.Background()
	au, _ := url.Parse(admin)
	au.Path = "/" + name
	count := func(q string, args ...any) (n int) {
		t.Helper()
		c, err := pgx.Connect(ctx, au.String())
		if err != nil {
			t.Fatalf("connect as admin to the deployment's database: %v", err)
		}
		defer c.Close(ctx)
		if err := c.QueryRow(ctx, q, args...).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count("select count(*) from threads where thread_id::text = $1", th); n != 1 {
		t.Fatalf("the thread is not in the deployment's database (%d rows)", n)
	}
	if n := count("select count(*) from runs"); n != 1 {
		t.Fatalf("%d runs in the deployment's database, want 1", n)
	}

	// A redeploy: the same database, the thread is still served.
	rev2 := deploySource(t, s, dep, appFiles(t, `, "second": {"builtin": "echo"}`))
	if st := waitStatus(t, s, dep, rev2); st != "DEPLOYED" {
		t.Fatalf("revision 2 ended %s", st)
	}
	waitActive(t, s, dep, rev2)
	if r := agent("GET", "/threads/"+th, nil); r.Status != 200 {
		t.Fatalf("thread lost across the redeploy: %d %s", r.Status, r.Body)
	}
	// A rollback, then a restart of Slipway (the agent is started again,
	// on the same database): the thread is still there.
	if r := s.Do("POST", "/v2/deployments/"+dep+"/revisions/"+rev1+"/redeploy", nil); r.Status != 200 {
		t.Fatalf("redeploy: %d %s", r.Status, r.Body)
	}
	waitActive(t, s, dep, rev1)
	s.Restart()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if r := agent("GET", "/threads/"+th, nil); r.Status == 200 {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("thread not served after a restart of Slipway: %d %s", r.Status, r.Body)
		}
	}
	if n := count("select count(*) from threads"); n != 1 {
		t.Fatalf("%d threads in the deployment's database after the restart, want 1", n)
	}

	if r := s.Do("DELETE", "/v2/deployments/"+dep, nil); r.Status != 204 {
		t.Fatalf("delete: %d", r.Status)
	}
	deadline := time.Now().Add(30 * time.Second)
	for s.Do("GET", "/v2/deployments/"+dep, nil).Status != 404 {
		if time.Now().After(deadline) {
			t.Fatal("deployment not deleted")
		}
		time.Sleep(50 * time.Millisecond)
	}
	for left := leftovers(t, s, "process", dep); len(left) > 0; left = leftovers(t, s, "process", dep) {
		if time.Now().After(deadline) {
			t.Fatalf("deleting the deployment left: %v", left)
		}
		time.Sleep(50 * time.Millisecond)
	}
	c, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var dbs, roles int
	if err := c.QueryRow(ctx, "select (select count(*) from pg_database where datname = $1), (select count(*) from pg_roles where rolname = $1)", name).
		Scan(&dbs, &roles); err != nil {
		t.Fatal(err)
	}
	if dbs != 0 || roles != 0 {
		t.Fatalf("deleting the deployment left %d databases and %d roles named %s", dbs, roles, name)
	}
}
