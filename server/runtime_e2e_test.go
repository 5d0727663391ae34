package server_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"slipway/server/servertest"
)

func sourceTarball(t *testing.T, files map[string]string) []byte {
	t.Helper()
	return sourceTarballBytes(files)
}

func sourceTarballBytes(files map[string]string) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for name, body := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			panic(err)
		}
		_, _ = tw.Write([]byte(body))
	}
	_ = tw.Close()
	_ = zw.Close()
	return buf.Bytes()
}

// deploySource uploads a source archive and PATCHes it in, returning the
// new revision.
func deploySource(t *testing.T, s *servertest.Server, dep string, files map[string]string) string {
	t.Helper()
	up := s.Do("POST", "/v2/deployments/"+dep+"/upload-url", nil)
	if up.Status != 200 {
		t.Fatalf("upload-url: %d %s", up.Status, up.Body)
	}
	if r := servertest.Do(t, "PUT", up.Map()["upload_url"].(string), sourceTarball(t, files)); r.Status != 200 {
		t.Fatalf("upload: %d %s", r.Status, r.Body)
	}
	r := s.Do("PATCH", "/v2/deployments/"+dep, map[string]any{"source_revision_config": map[string]any{
		"source_tarball_path": up.Map()["object_path"], "graph_config_path": "langgraph.json"}})
	if r.Status != 200 {
		t.Fatalf("patch: %d %s", r.Status, r.Body)
	}
	return r.Map()["latest_revision_id"].(string)
}

func waitStatus(t *testing.T, s *servertest.Server, dep, rev string) string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		st, _ := s.Do("GET", "/v2/deployments/"+dep+"/revisions/"+rev, nil).Map()["status"].(string)
		switch st {
		case "DEPLOYED", "BUILD_FAILED", "DEPLOY_FAILED", "CREATE_FAILED", "SKIPPED":
			return st
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("revision %s did not finish", rev)
	return ""
}

// TestProcessRuntimeEndToEnd is the spec's recommended flow on the process
// runtime: create, upload, poll until DEPLOYED, use the deployment through
// its URL (the reject scenario), PATCH while a client keeps creating runs,
// roll back, delete — and nothing of the deployment remains.
func TestProcessRuntimeEndToEnd(t *testing.T) {
	s := servertest.Start(t, map[string]string{"SLIPWAY_RUNTIME": "process"})
	d := s.Do("POST", "/v2/deployments", map[string]any{"name": "e2e-agent", "source": "internal_source", "source_config": map[string]any{},
		"source_revision_config": map[string]any{"graph_config_path": "langgraph.json"},
		"secrets":                []any{map[string]any{"name": "GREETING", "value": "s3cr3t"}}})
	if d.Status != 201 {
		t.Fatalf("create: %d %s", d.Status, d.Body)
	}
	dep := d.Map()["id"].(string)
	cfg := map[string]string{"langgraph.json": `{"graphs": {"agent": {"builtin": "echo"}}}`}
	rev1 := deploySource(t, s, dep, cfg)
	if st := waitStatus(t, s, dep, rev1); st != "DEPLOYED" {
		t.Fatalf("revision 1 ended %s:\n%s", st, s.Logs())
	}
	got := s.Do("GET", "/v2/deployments/"+dep, nil).Map()
	url, _ := got["url"].(string)
	if got["status"] != "READY" || !strings.HasSuffix(url, "/agents/e2e-agent") {
		t.Fatalf("deployment: %v", got)
	}
	agent := func(method, path string, body any) *servertest.Response {
		return servertest.Do(t, method, url+path, body, "X-Api-Key", s.Key)
	}
	if r := servertest.Do(t, "GET", url+"/ok", nil); r.Status != 401 {
		t.Fatalf("the proxy served without a key: %d", r.Status)
	}
	// The spec's reject scenario through the deployment URL.
	th := agent("POST", "/threads", map[string]any{}).Map()["thread_id"].(string)
	first := agent("POST", "/threads/"+th+"/runs", map[string]any{"assistant_id": "agent",
		"input": map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hi"}}, "sleep": 1}})
	if first.Status != 200 {
		t.Fatalf("first run: %d %s", first.Status, first.Body)
	}
	if r := agent("POST", "/threads/"+th+"/runs", map[string]any{"assistant_id": "agent", "multitask_strategy": "reject",
		"input": map[string]any{"messages": []any{map[string]any{"role": "user", "content": "again"}}}}); r.Status != 409 {
		t.Fatalf("second run: %d %s", r.Status, r.Body)
	}
	agent("GET", "/threads/"+th+"/runs/"+first.Map()["run_id"].(string)+"/join", nil)
	msgs := agent("GET", "/threads/"+th+"/state", nil).Map()["values"].(map[string]any)["messages"].([]any)
	if len(msgs) != 2 {
		t.Fatalf("state: %v", msgs)
	}

	// The official JS SDK's suite, through the deployment URL (the SDK sends
	// LANGGRAPH_API_KEY as x-api-key).
	runSDKSuite(t, url, s.Key)

	// SSE passes through unbuffered: the first event of a one-second run
	// arrives long before the run ends.
	req, _ := http.NewRequest("POST", url+"/threads/"+th+"/runs/stream", strings.NewReader(
		`{"assistant_id":"agent","input":{"messages":[{"role":"user","content":"s"}],"sleep":1},"stream_mode":["values"]}`))
	req.Header.Set("X-Api-Key", s.Key)
	req.Header.Set("Content-Type", "application/json")
	started := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("stream through the proxy: %v %v", err, resp)
	}
	head := make([]byte, 64)
	n, _ := resp.Body.Read(head)
	if !strings.Contains(string(head[:n]), "event: metadata") || time.Since(started) > 700*time.Millisecond {
		t.Fatalf("first event %q after %v: the proxy buffers the stream", head[:n], time.Since(started))
	}
	rest, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(rest), "event: values") {
		t.Fatalf("stream: %s", rest)
	}

	// PATCH to a new revision while a client keeps creating runs: none fails.
	var failures, calls atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		client := &http.Client{Timeout: 90 * time.Second}
		for {
			select {
			case <-stop:
				return
			default:
			}
			req, _ := http.NewRequest("POST", url+"/runs/wait", strings.NewReader(`{"assistant_id":"agent","input":{"messages":[{"role":"user","content":"during"}]}}`))
			req.Header.Set("X-Api-Key", s.Key)
			req.Header.Set("Content-Type", "application/json")
			resp, err := client.Do(req)
			calls.Add(1)
			if err != nil || resp.StatusCode != 200 {
				failures.Add(1)
				if err == nil {
					t.Logf("during the switch: %d", resp.StatusCode)
				}
			}
			if resp != nil {
				resp.Body.Close()
			}
		}
	}()
	time.Sleep(200 * time.Millisecond)
	cfg2 := map[string]string{"langgraph.json": `{"graphs": {"agent": {"builtin": "echo"}, "second": {"builtin": "echo"}}}`}
	rev2 := deploySource(t, s, dep, cfg2)
	if st := waitStatus(t, s, dep, rev2); st != "DEPLOYED" {
		t.Fatalf("revision 2 ended %s", st)
	}
	waitActive(t, s, dep, rev2)
	time.Sleep(300 * time.Millisecond)
	close(stop)
	wg.Wait()
	if f := failures.Load(); f != 0 {
		t.Fatalf("%d of %d requests failed during the switch", f, calls.Load())
	}
	if calls.Load() < 10 {
		t.Fatalf("only %d requests during the switch: the test proves nothing", calls.Load())
	}
	t.Logf("%d runs through the proxy during the switch, none failed", calls.Load())
	// Threads survive the switch: the agent's database is the deployment's.
	if r := agent("GET", "/threads/"+th, nil); r.Status != 200 {
		t.Fatalf("thread lost across revisions: %d", r.Status)
	}
	if r := agent("GET", "/assistants/second", nil); r.Status != 200 {
		t.Fatalf("revision 2 not serving: %d %s", r.Status, r.Body)
	}

	// Roll back to the first revision.
	if r := s.Do("POST", "/v2/deployments/"+dep+"/revisions/"+rev1+"/redeploy", nil); r.Status != 200 {
		t.Fatalf("redeploy: %d %s", r.Status, r.Body)
	}
	waitActive(t, s, dep, rev1)
	if r := agent("GET", "/assistants/second", nil); r.Status != 404 {
		t.Fatalf("after rollback the second graph is still served: %d", r.Status)
	}

	// DELETE leaves no process and no file of the deployment.
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
	if _, err := os.Stat(filepath.Join(s.DataDir, "deployments", dep)); !os.IsNotExist(err) {
		t.Fatalf("deployment files remain: %v", err)
	}
	if _, err := os.Stat(filepath.Join(s.DataDir, "uploads", dep)); !os.IsNotExist(err) {
		t.Fatalf("uploads remain: %v", err)
	}
	if r := servertest.Do(t, "GET", url+"/ok", nil, "X-Api-Key", s.Key); r.Status != 404 {
		t.Fatalf("the deployment URL still answers: %d", r.Status)
	}
}

func waitActive(t *testing.T, s *servertest.Server, dep, rev string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		d := s.Do("GET", "/v2/deployments/"+dep, nil).Map()
		if d["active_revision_id"] == rev {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("revision %s never became active: %v", rev, d)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestKilledDuringBuildIsInterruptedAndRetried kills Slipway with SIGKILL
// while a revision builds; after a restart the revision is recorded as
// interrupted and retried until it is deployed.
func TestKilledDuringBuildIsInterruptedAndRetried(t *testing.T) {
	s := servertest.Start(t, map[string]string{"SLIPWAY_RUNTIME": "process"})
	d := s.Do("POST", "/v2/deployments", map[string]any{"name": "crashy", "source": "internal_source",
		"source_config":          map[string]any{"install_command": "sleep 2 && touch installed"},
		"source_revision_config": map[string]any{"graph_config_path": "langgraph.json"}, "secrets": []any{}})
	dep := d.Map()["id"].(string)
	rev := deploySource(t, s, dep, map[string]string{"langgraph.json": `{"graphs": {"agent": {"builtin": "echo"}}}`})
	deadline := time.Now().Add(20 * time.Second)
	for s.Do("GET", "/v2/deployments/"+dep+"/revisions/"+rev, nil).Map()["status"] != "BUILDING" {
		if time.Now().After(deadline) {
			t.Fatal("never saw BUILDING")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Mid-build (the install command takes 2 s), after the log's periodic
	// flush has written the first attempt's lines.
	time.Sleep(500 * time.Millisecond)
	s.Kill()
	s.Restart()
	if st := waitStatus(t, s, dep, rev); st != "DEPLOYED" {
		t.Fatalf("retried revision ended %s:\n%s", st, s.Logs())
	}
	logs := s.Do("POST", "/v1/projects/"+dep+"/revisions/"+rev+"/build_logs", map[string]any{}).Body
	if !strings.Contains(string(logs), "build started") {
		t.Fatalf("build logs: %s", logs)
	}
	history := s.Do("GET", "/v2/deployments/"+dep+"/revisions/"+rev, nil).Map()
	if history["status"] != "DEPLOYED" {
		t.Fatalf("revision: %v", history)
	}
	// The log shows the first attempt was interrupted by the restart.
	all := s.Do("GET", "/v2/deployments/"+dep+"/revisions/"+rev+"/logs", nil)
	if strings.Count(string(all.Body), "build started") < 2 || !strings.Contains(string(all.Body), "interrupted by a restart") {
		t.Fatalf("expected the interrupted attempt and its retry in the log: %s", all.Body)
	}
}

// runSDKSuite runs server/agentapi/sdktest against url with the JS SDK;
// without Node it fails in CI and skips elsewhere.
func runSDKSuite(t *testing.T, url, key string) {
	t.Helper()
	dir, _ := filepath.Abs(filepath.Join("agentapi", "sdktest"))
	_, nodeErr := osexec.LookPath("node")
	_, modErr := os.Stat(filepath.Join(dir, "node_modules", "@langchain", "langgraph-sdk"))
	if nodeErr != nil || modErr != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("node and `npm ci` in server/agentapi/sdktest are needed")
		}
		t.Log("skipping the JS SDK suite through the proxy: node or its packages are missing")
		return
	}
	cmd := osexec.Command("node", "--test", "agent.test.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "AGENT_URL="+url, "LANGGRAPH_API_KEY="+key)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("JS SDK suite through the proxy: %v\n%s", err, out)
	}
}
