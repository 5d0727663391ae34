package processtest_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"os"
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
		mode := int64(0o644)
		if strings.HasPrefix(name, "bin/") {
			mode = 0o755
		}
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: mode, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
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
func deploySource(t testing.TB, s *servertest.Server, dep string, files map[string]string) string {
	t.Helper()
	up := s.Do("POST", "/v2/deployments/"+dep+"/upload-url", nil)
	if up.Status != 200 {
		t.Fatalf("upload-url: %d %s", up.Status, up.Body)
	}
	if r := servertest.Do(t, "PUT", up.Map()["upload_url"].(string), sourceTarballBytes(files)); r.Status != 200 {
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

// TestRuntimeEndToEnd is the spec's recommended flow on each real runtime:
// create, upload (the echo built-in and a static Go command graph), poll
// until DEPLOYED, use the deployment through its URL (the reject scenario,
// the official JS and Python SDKs' suites), PATCH while a client keeps creating runs, roll back,
// delete — and nothing of the deployment remains.
func TestRuntimeEndToEnd(t *testing.T) {
	for _, driver := range drivers {
		t.Run(driver, func(t *testing.T) {
			requireRuntime(t, driver)
			runtimeEndToEnd(t, driver)
		})
	}
}

func runtimeEndToEnd(t *testing.T, driver string) {
	s := servertest.Start(t, map[string]string{"SLIPWAY_RUNTIME": driver})
	if info := s.Do("GET", "/info", nil).Map()["runtime"].(map[string]any); info["driver"] != driver {
		t.Fatalf("runtime: %v", info)
	}
	d := s.Do("POST", "/v2/deployments", map[string]any{"name": "e2e-agent", "source": "internal_source", "source_config": map[string]any{},
		"source_revision_config": map[string]any{"graph_config_path": "langgraph.json"},
		"secrets":                []any{map[string]any{"name": "GREETING", "value": "s3cr3t"}}})
	if d.Status != 201 {
		t.Fatalf("create: %d %s", d.Status, d.Body)
	}
	dep := d.Map()["id"].(string)
	rev1 := deploySource(t, s, dep, appFiles(t, ""))
	if st := waitStatus(t, s, dep, rev1); st != "DEPLOYED" {
		t.Fatalf("revision 1 ended %s:\n%s\n%s", st, s.Do("GET", "/v2/deployments/"+dep+"/revisions/"+rev1+"/logs", nil).Body, s.Logs())
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
	if len(msgs) != 2 || msgs[0].(map[string]any)["content"] != "hi" || msgs[1].(map[string]any)["type"] != "ai" {
		t.Fatalf("state: %v", msgs)
	}
	// The command graph (a static Go program inside the archive) runs too.
	ct := agent("POST", "/threads", map[string]any{}).Map()["thread_id"].(string)
	cw := agent("POST", "/threads/"+ct+"/runs/wait", map[string]any{"assistant_id": "counter",
		"input": map[string]any{"messages": []any{map[string]any{"role": "user", "content": "four"}}}})
	if cw.Status != 200 || !strings.Contains(string(cw.Body), "4 characters") || cw.Map()["count"] != 1.0 {
		t.Fatalf("command graph: %d %s", cw.Status, cw.Body)
	}

	// The official SDK suites, JS and Python, through the deployment URL
	// (the SDKs send LANGGRAPH_API_KEY as x-api-key).
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

	// A client that disconnects from a stream with on_disconnect=cancel
	// cancels its run: the disconnect crosses the proxy.
	dt := agent("POST", "/threads", map[string]any{}).Map()["thread_id"].(string)
	req, _ = http.NewRequest("POST", url+"/threads/"+dt+"/runs/stream", strings.NewReader(
		`{"assistant_id":"agent","input":{"messages":[{"role":"user","content":"long"}],"sleep":5},"on_disconnect":"cancel"}`))
	req.Header.Set("X-Api-Key", s.Key)
	req.Header.Set("Content-Type", "application/json")
	resp, err = http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("stream to abandon: %v %v", err, resp)
	}
	n, _ = resp.Body.Read(head)
	resp.Body.Close() // hang up after the first event
	runID := ""
	if i := strings.Index(string(head[:n]), `"run_id":"`); i >= 0 {
		runID = strings.SplitN(string(head[i+len(`"run_id":"`):n]), `"`, 2)[0]
	}
	if runID == "" {
		t.Fatalf("no run id in the first event %q", head[:n])
	}
	var status any
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if status = agent("GET", "/threads/"+dt+"/runs/"+runID, nil).Map()["status"]; status != "pending" && status != "running" {
			break
		}
	}
	if status == "pending" || status == "running" || status == "success" {
		t.Fatalf("abandoned run is %v 3 s into a 5 s run: the disconnect did not reach the agent", status)
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
					body, _ := io.ReadAll(resp.Body)
					t.Logf("during the switch: %d %s", resp.StatusCode, body)
				}
			}
			if resp != nil {
				resp.Body.Close()
			}
		}
	}()
	time.Sleep(200 * time.Millisecond)
	rev2 := deploySource(t, s, dep, appFiles(t, `, "second": {"builtin": "echo"}`))
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
	// Files go right after the records (see removeDeployment).
	for left := leftovers(t, s, driver, dep); len(left) > 0; left = leftovers(t, s, driver, dep) {
		if time.Now().After(deadline) {
			t.Fatalf("deleting the deployment left: %v", left)
		}
		time.Sleep(50 * time.Millisecond)
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

func rawTarball(t *testing.T, entries []tar.Header, bodies map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, h := range entries {
		h := h
		body := bodies[h.Name]
		h.Size = int64(len(body))
		if h.Typeflag != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		_, _ = tw.Write([]byte(body))
	}
	_ = tw.Close()
	_ = zw.Close()
	return buf.Bytes()
}

// assertLinksStayInApp checks that every symbolic link under dataDir that
// lies in an unpacked "app" directory resolves inside that directory.
func assertLinksStayInApp(t *testing.T, dataDir string) {
	t.Helper()
	_ = filepath.WalkDir(dataDir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.Type()&os.ModeSymlink == 0 {
			return nil
		}
		app := p
		for filepath.Base(app) != "app" && app != dataDir && app != "/" {
			app = filepath.Dir(app)
		}
		if filepath.Base(app) != "app" {
			return nil
		}
		resolved, err := filepath.EvalSymlinks(p)
		if err != nil {
			return nil // dangling: leads nowhere
		}
		realApp, _ := filepath.EvalSymlinks(app)
		if resolved != realApp && !strings.HasPrefix(resolved, realApp+string(filepath.Separator)) {
			target, _ := os.Readlink(p)
			t.Fatalf("%s -> %s leads out of %s, to %s", p, target, app, resolved)
		}
		return nil
	})
}

// TestRuntimeFailures, on each runtime: unsafe archives fail the build with a reason
// and write nothing outside their directory; a revision whose agent never
// becomes healthy fails its deploy while the previous revision keeps serving.
func TestRuntimeFailures(t *testing.T) {
	for _, driver := range drivers {
		t.Run(driver, func(t *testing.T) {
			requireRuntime(t, driver)
			runtimeFailures(t, driver)
		})
	}
}

func runtimeFailures(t *testing.T, driver string) {
	s := servertest.Start(t, map[string]string{"SLIPWAY_RUNTIME": driver})
	dep := s.Do("POST", "/v2/deployments", map[string]any{"name": "fragile", "source": "internal_source", "source_config": map[string]any{},
		"source_revision_config": map[string]any{"graph_config_path": "langgraph.json"}, "secrets": []any{}}).Map()["id"].(string)
	good := deploySource(t, s, dep, map[string]string{"langgraph.json": `{"graphs": {"agent": {"builtin": "echo"}}}`})
	if st := waitStatus(t, s, dep, good); st != "DEPLOYED" {
		t.Fatalf("good revision ended %s", st)
	}
	url := s.Do("GET", "/v2/deployments/"+dep, nil).Map()["url"].(string)
	cfg := map[string]string{"langgraph.json": `{"graphs": {"agent": {"builtin": "echo"}}}`}
	upload := func(archive []byte) string {
		up := s.Do("POST", "/v2/deployments/"+dep+"/upload-url", nil).Map()
		if r := servertest.Do(t, "PUT", up["upload_url"].(string), archive); r.Status != 200 {
			t.Fatalf("upload: %d %s", r.Status, r.Body)
		}
		return s.Do("PATCH", "/v2/deployments/"+dep, map[string]any{"source_revision_config": map[string]any{
			"source_tarball_path": up["object_path"]}}).Map()["latest_revision_id"].(string)
	}
	cases := []struct {
		name    string
		archive []byte
		want    string
	}{
		{"dot-dot path", rawTarball(t, []tar.Header{{Name: "langgraph.json", Typeflag: tar.TypeReg, Mode: 0o644},
			{Name: "../../escaped.txt", Typeflag: tar.TypeReg, Mode: 0o644}}, map[string]string{"langgraph.json": cfg["langgraph.json"], "../../escaped.txt": "x"}), "escapes"},
		{"symlink out", rawTarball(t, []tar.Header{{Name: "langgraph.json", Typeflag: tar.TypeReg, Mode: 0o644},
			{Name: "etc", Typeflag: tar.TypeSymlink, Linkname: "/etc"}}, cfg), "outside the archive"},
		// d/s/t is created where d/s leads, the app root: its ".." is outside.
		{"symlink through symlink", rawTarball(t, []tar.Header{{Name: "langgraph.json", Typeflag: tar.TypeReg, Mode: 0o644},
			{Name: "d/", Typeflag: tar.TypeDir, Mode: 0o755}, {Name: "d/s", Typeflag: tar.TypeSymlink, Linkname: ".."},
			{Name: "d/s/t", Typeflag: tar.TypeSymlink, Linkname: ".."}}, cfg), "goes through the symlink d/s"},
		// t is harmless until s makes "s/.." the app root's parent.
		{"symlink redirected by a later one", rawTarball(t, []tar.Header{{Name: "langgraph.json", Typeflag: tar.TypeReg, Mode: 0o644},
			{Name: "t", Typeflag: tar.TypeSymlink, Linkname: "s/.."}, {Name: "s", Typeflag: tar.TypeSymlink, Linkname: "."}}, cfg),
			"symlink t points to"},
	}
	for _, tc := range cases {
		rev := upload(tc.archive)
		if st := waitStatus(t, s, dep, rev); st != "BUILD_FAILED" {
			t.Fatalf("%s: ended %s", tc.name, st)
		}
		logs := string(s.Do("POST", "/v1/projects/"+dep+"/revisions/"+rev+"/build_logs", map[string]any{"level": "error"}).Body)
		if !strings.Contains(logs, tc.want) {
			t.Fatalf("%s: build log does not say why: %s", tc.name, logs)
		}
	}
	for _, p := range []string{filepath.Join(s.DataDir, "escaped.txt"), filepath.Join(s.DataDir, "deployments", "escaped.txt"),
		filepath.Join(s.DataDir, "deployments", dep, "escaped.txt"), filepath.Join(s.DataDir, "builds", "escaped.txt"),
		filepath.Join(s.DataDir, "builds", dep, "escaped.txt")} {
		if _, err := os.Stat(p); err == nil {
			t.Fatalf("an archive wrote %s", p)
		}
	}
	assertLinksStayInApp(t, s.DataDir)
	// An agent that cannot start never passes its health check.
	bad := deploySource(t, s, dep, map[string]string{"langgraph.json": `{"graphs": {"agent": {"builtin": "no-such-graph"}}}`})
	if st := waitStatus(t, s, dep, bad); st != "DEPLOY_FAILED" {
		t.Fatalf("unhealthy revision ended %s", st)
	}
	d := s.Do("GET", "/v2/deployments/"+dep, nil).Map()
	if d["active_revision_id"] != good || d["status"] != "READY" {
		t.Fatalf("after failures: %v", d)
	}
	if r := servertest.Do(t, "GET", url+"/ok", nil, "X-Api-Key", s.Key); r.Status != 200 {
		t.Fatalf("the previous revision stopped serving: %d %s", r.Status, r.Body)
	}
}

// TestProcessKilledDuringDeploy kills Slipway with SIGKILL while the process
// runtime hands a deployment over to a new revision; after a restart the
// revision is recorded as interrupted, retried to DEPLOYED, and exactly one
// agent process of the deployment runs. A deploy takes a fraction of a
// second here, so a revision that finishes before the kill lands is
// followed by another.
func TestProcessKilledDuringDeploy(t *testing.T) {
	s := servertest.Start(t, map[string]string{"SLIPWAY_RUNTIME": "process"})
	dep := s.Do("POST", "/v2/deployments", map[string]any{"name": "handover", "source": "internal_source", "source_config": map[string]any{},
		"source_revision_config": map[string]any{"graph_config_path": "langgraph.json"}, "secrets": []any{}}).Map()["id"].(string)
	files := map[string]string{"langgraph.json": `{"graphs": {"agent": {"builtin": "echo"}}}`}
	if st := waitStatus(t, s, dep, deploySource(t, s, dep, files)); st != "DEPLOYED" {
		t.Fatalf("first revision ended %s", st)
	}
	for attempt := 0; attempt < 10; attempt++ {
		rev := deploySource(t, s, dep, files)
		var st any
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
			st = s.Do("GET", "/v2/deployments/"+dep+"/revisions/"+rev, nil).Map()["status"]
			if st == "DEPLOYING" || st == "DEPLOYED" {
				break
			}
			time.Sleep(time.Millisecond)
		}
		if st != "DEPLOYING" {
			continue // missed the window
		}
		t.Logf("killed while revision %d deployed", attempt+2)
		s.Kill()
		s.Restart()
		if st := waitStatus(t, s, dep, rev); st != "DEPLOYED" {
			t.Fatalf("retried revision ended %s", st)
		}
		if logs := string(s.Do("GET", "/v2/deployments/"+dep+"/revisions/"+rev+"/logs", nil).Body); !strings.Contains(logs, "interrupted by a restart") {
			t.Fatalf("the log does not record the interrupted deploy: %s", logs)
		}
		waitActive(t, s, dep, rev)
		url := s.Do("GET", "/v2/deployments/"+dep, nil).Map()["url"].(string)
		if r := servertest.Do(t, "GET", url+"/ok", nil, "X-Api-Key", s.Key); r.Status != 200 {
			t.Fatalf("not serving after the crash: %d", r.Status)
		}
		if pids := agentProcesses(t, filepath.Join(s.DataDir, "deployments", dep)); len(pids) != 1 {
			t.Fatalf("agent processes of the deployment: %v, want exactly one", pids)
		}
		return
	}
	t.Fatal("no attempt was caught while DEPLOYING")
}
