package py_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"slipway/server/servertest"
)

// needPython returns the test virtualenv's interpreter (SLIPWAY_TEST_PYTHON,
// else /opt/slipway-ci/venv/bin/python, which .ci/run creates from
// e2e/requirements.txt), skipping (or, in CI, failing) when it is missing or
// lacks the pinned packages.
func needPython(t *testing.T) (python, project, suite string) {
	t.Helper()
	root := servertest.RepoRoot()
	project = filepath.Join(root, "testdata", "graphs", "py-agent")
	suite = filepath.Join(root, "runtime", "agent", "hosts", "py", "e2e")
	python = os.Getenv("SLIPWAY_TEST_PYTHON")
	if python == "" {
		python = "/opt/slipway-ci/venv/bin/python"
	}
	check := exec.Command(python, "-c", "import langgraph, langgraph_sdk, pytest, langgraph.checkpoint.conformance")
	if out, err := check.CombinedOutput(); err != nil {
		msg := "the Python host tests need a virtualenv with runtime/agent/hosts/py/e2e/requirements.txt installed " +
			"(.ci/run makes /opt/slipway-ci/venv; or set SLIPWAY_TEST_PYTHON): " + python + ": " + string(out) + err.Error()
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return python, project, suite
}

// TestPyCheckpointerConformance runs langgraph-checkpoint-conformance
// (e2e/conformance.py) against the Python host's checkpointer in a real
// `slipway agent`: the agent serves testdata/graphs/py-agent/conformance.json,
// whose graph relays the host's saver on a Unix socket the suite calls.
func TestPyCheckpointerConformance(t *testing.T) {
	runPyConformance(t, nil)
}

// TestPyCheckpointerConformanceOnPostgres is the same suite against an
// agent keeping its state, the host's checkpoint rows included, in
// PostgreSQL (SLIPWAY_AGENT_POSTGRES_URL).
func TestPyCheckpointerConformanceOnPostgres(t *testing.T) {
	needPython(t)
	url := servertest.PostgresSchemaURL(t)
	runPyConformance(t, map[string]string{"SLIPWAY_AGENT_POSTGRES_URL": url})
	// The agent's state is in the database, not in a bbolt file: its
	// system assistant (the suite deletes the threads it wrote).
	if n := servertest.PostgresCount(t, url, "select count(*) from assistants"); n == 0 {
		t.Fatal("no assistant in PostgreSQL, want the agent's")
	}
}

// runPyConformance runs the suite against an agent started with env
// added to its own.
func runPyConformance(t *testing.T, env map[string]string) {
	python, project, suite := needPython(t)
	// A short directory: a Unix socket path has at most 107 bytes.
	dir, err := os.MkdirTemp("", "pycv")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "relay.sock")
	agentEnv := map[string]string{
		"SLIPWAY_LOG_LEVEL":        "warn",
		"SLIPWAY_GRAPH_CONFIG":     filepath.Join(project, "conformance.json"),
		"SLIPWAY_AGENT_PYTHON":     python,
		"SLIPWAY_TEST_SAVER_RELAY": sock,
	}
	for k, v := range env {
		agentEnv[k] = v
	}
	a := servertest.StartAgent(t, agentEnv)
	report := filepath.Join(dir, "report.json")
	cmd := exec.Command(python, "conformance.py", report)
	cmd.Dir = suite
	cmd.Env = append(os.Environ(), "SAVER_RELAY="+sock)
	out, runErr := cmd.CombinedOutput()
	t.Logf("conformance:\n%s", out)
	raw, err := os.ReadFile(report)
	if err != nil {
		t.Fatalf("the suite wrote no report (%v): %v\nagent log:\n%s", runErr, err, a.Logs())
	}
	// One report per way of calling the saver: its async methods, and its
	// synchronous wrappers from a worker thread.
	var r map[string]map[string]struct {
		Detected bool  `json:"detected"`
		Passed   *bool `json:"passed"`
		OK       int   `json:"tests_passed"`
		Failed   int   `json:"tests_failed"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("report: %v", err)
	}
	passed, failed := 0, 0
	for _, name := range []string{"slipway-python-host", "slipway-python-host-sync"} {
		for _, base := range []string{"put", "put_writes", "get_tuple", "list", "delete_thread"} {
			c := r[name][base]
			if !c.Detected || c.Passed == nil || !*c.Passed {
				t.Errorf("%s, capability %s: detected %v, passed %v", name, base, c.Detected, c.Passed)
			}
		}
		for _, c := range r[name] {
			passed, failed = passed+c.OK, failed+c.Failed
		}
	}
	t.Logf("checkpointer conformance: %d passed, %d failed", passed, failed)
	if runErr != nil || failed > 0 || passed == 0 {
		t.Fatalf("checkpointer conformance failed (%v): %d failed\nagent log:\n%s", runErr, failed, a.Logs())
	}
}

// TestPyHostThroughSDK runs the pytest suite e2e/test_host.py: the official
// Python SDK against real `slipway agent` processes (the suite starts
// them from this binary, so it can kill the host and restart the agent)
// serving testdata/graphs/py-agent.
func TestPyHostThroughSDK(t *testing.T) {
	pyHostSuite(t)
}

// TestPyHostThroughSDKOnPostgres runs the same suite with every agent it
// starts keeping its state in a schema of its own on PostgreSQL: the
// suite asks this test for one (PYHOST_POSTGRES_MINT) as it starts each.
func TestPyHostThroughSDKOnPostgres(t *testing.T) {
	servertest.SkipShort(t, "the Python SDK suite on PostgreSQL")
	minter, urls := postgresMinter(t)
	pyHostSuite(t, "PYHOST_POSTGRES_MINT="+minter)
	checkPostgresKept(t, urls())
}

// TestPyHostThroughSDKOnPostgresAndRedis runs the same suite with every
// agent (role all) on a schema of its own and, on Redis, a key prefix of
// its own: each run is claimed under a lease after a wake-up on Redis,
// its events reach the SDK through a Redis Stream, and cancellations go
// over Redis, as between the processes of a scaled deployment.
func TestPyHostThroughSDKOnPostgresAndRedis(t *testing.T) {
	servertest.SkipShort(t, "the Python SDK suite on PostgreSQL and Redis")
	redisURL, prefix := servertest.RedisPrefix(t)
	minter, urls := postgresMinter(t)
	pyHostSuite(t, "PYHOST_POSTGRES_MINT="+minter, "PYHOST_REDIS_URL="+redisURL, "PYHOST_REDIS_PREFIX="+prefix)
	checkPostgresKept(t, urls())
	if n := servertest.RedisKeys(t, redisURL, prefix); n == 0 {
		t.Fatal("the suite's run streams are not in Redis")
	}
}

// postgresMinter serves, for the suite's agents, a fresh PostgreSQL schema
// URL per request (its URL goes in PYHOST_POSTGRES_MINT), and lists the
// URLs it handed out.
func postgresMinter(t *testing.T) (string, func() []string) {
	mint := servertest.PostgresSchemas(t)
	var mu sync.Mutex
	var urls []string
	minter := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		url, err := mint()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		mu.Lock()
		urls = append(urls, url)
		mu.Unlock()
		io.WriteString(w, url)
	}))
	t.Cleanup(minter.Close)
	return minter.URL, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), urls...)
	}
}

// checkPostgresKept checks that the agents kept their threads and runs in
// their schemas, not in bbolt.
func checkPostgresKept(t *testing.T, urls []string) {
	t.Helper()
	threads := 0
	for _, url := range urls {
		threads += servertest.PostgresCount(t, url, "select (select count(*) from threads) + (select count(*) from runs)")
	}
	if len(urls) < 2 || threads == 0 {
		t.Fatalf("%d agents took a schema, %d threads and runs were kept in them", len(urls), threads)
	}
	t.Logf("%d agents on PostgreSQL kept %d threads and runs", len(urls), threads)
}

// pyHostSuite runs e2e/ with pytest, env added to the environment.
func pyHostSuite(t *testing.T, env ...string) {
	python, _, suite := needPython(t)
	args := []string{"-m", "pytest", "-v", "-p", "no:cacheprovider"}
	if k := os.Getenv("PY_TEST_K"); k != "" {
		args = append(args, "-k", k)
	}
	cmd := exec.Command(python, args...)
	cmd.Dir = suite
	cmd.Env = append(append(os.Environ(), "SLIPWAY_BIN="+servertest.Binary(t), "PYHOST_PRINT_LOGS=1"), env...)
	out, err := cmd.CombinedOutput()
	t.Logf("pytest:\n%s", out)
	if err != nil {
		t.Fatalf("Python host tests failed: %v", err)
	}
}
