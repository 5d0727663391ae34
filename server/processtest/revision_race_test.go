package processtest_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"slipway/runtime/build/swaprace"
	"slipway/server/servertest"
)

// TestServingRevisionCannotRedirectTheNextBuild is the attack of the
// finding, on the process runtime with Slipway as root: an Editor of a
// workspace deploys revision A, whose command graph (testdata/graphs/
// swaprace) learns the next revision's id from the API, watches for
// revisions/<next>/app to appear and be handed to the deployment's uid,
// and swaps the files Slipway opens there for links into the data
// directory. The Editor then deploys revision B, whose langgraph.json (in
// a subdirectory, padded to 16 MiB so that parsing it holds the window
// open) names "env": "./conf/master.key", a pip_config_file, a local
// dependency with pyproject.toml and requirements.txt, and has a
// package.json beside it; a second round swaps the configuration's
// directory itself. B's python_version is one no host has, so its build
// fails right after Slipway has read everything: A keeps serving and
// reports what it could see.
//
// Neither B's build log nor its status may hold the master key or the
// data directory's path, B's build must get as far as the interpreter
// check (its own files were read, not the data directory's), and A must
// not even see B's directory. On 5afda92 A saw B, swapped conf for a link
// to the data directory once B was handed over, and B's status quoted the
// master key ("env file ./conf/master.key: unexpected character ... near
// \"<key>\"").
func TestServingRevisionCannotRedirectTheNextBuild(t *testing.T) {
	requireRoot(t)
	start := time.Now()
	s := servertest.Start(t, map[string]string{"SLIPWAY_RUNTIME": "process"})
	iso := isolation(t, s)
	key, err := os.ReadFile(filepath.Join(s.DataDir, "master.key"))
	if err != nil || len(strings.TrimSpace(string(key))) < 32 {
		t.Fatalf("the master key: %q, %v", key, err)
	}
	masterKey := strings.TrimSpace(string(key))

	// The attacker: an Editor of a workspace of its own.
	ws := s.Do("POST", "/api/v1/workspaces", map[string]any{"display_name": "racers"})
	if ws.Status/100 != 2 {
		t.Fatalf("workspace: %d %s", ws.Status, ws.Body)
	}
	k := s.Do("POST", "/api/v1/api-key", map[string]any{"description": "racer", "role_id": "Editor"}, "X-Tenant-Id", ws.Map()["id"].(string))
	if k.Status != 200 {
		t.Fatalf("editor key: %d %s", k.Status, k.Body)
	}
	editor := k.Map()["key"].(string)
	as := func(method, path string, body any) *servertest.Response {
		return s.Do(method, path, body, "X-Api-Key", editor)
	}
	cr := as("POST", "/v2/deployments", map[string]any{"name": "racer", "source": "internal_source", "secrets": []any{},
		"source_config": map[string]any{}, "source_revision_config": map[string]any{"graph_config_path": "langgraph.json"}})
	if cr.Status != 201 {
		t.Fatalf("create: %d %s", cr.Status, cr.Body)
	}
	dep := cr.Map()["id"].(string)
	deployAs := func(files map[string]string, graphConfig string) string {
		t.Helper()
		up := as("POST", "/v2/deployments/"+dep+"/upload-url", nil)
		if up.Status != 200 {
			t.Fatalf("upload-url: %d %s", up.Status, up.Body)
		}
		if r := servertest.Do(t, "PUT", up.Map()["upload_url"].(string), sourceTarballBytes(files)); r.Status != 200 {
			t.Fatalf("upload: %d %s", r.Status, r.Body)
		}
		p := as("PATCH", "/v2/deployments/"+dep, map[string]any{"source_revision_config": map[string]any{
			"source_tarball_path": up.Map()["object_path"], "graph_config_path": graphConfig}})
		if p.Status != 200 {
			t.Fatalf("patch: %d %s", p.Status, p.Body)
		}
		return p.Map()["latest_revision_id"].(string)
	}
	// waitStatus's key is the Default workspace's: this deployment is
	// the Editor's.
	wait := func(rev string) string {
		t.Helper()
		for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			st, _ := as("GET", "/v2/deployments/"+dep+"/revisions/"+rev, nil).Map()["status"].(string)
			switch st {
			case "DEPLOYED", "BUILD_FAILED", "DEPLOY_FAILED", "CREATE_FAILED", "SKIPPED":
				return st
			}
		}
		t.Fatalf("revision %s did not finish", rev)
		return ""
	}
	revA := deployAs(map[string]string{
		"langgraph.json": `{"graphs": {"race": {"command": ["./bin/swaprace"]}}}`,
		"bin/swaprace":   staticGraph(t, "swaprace"),
	}, "langgraph.json")
	if st := wait(revA); st != "DEPLOYED" {
		t.Fatalf("revision A ended %s: %s", st, as("GET", "/v2/deployments/"+dep+"/revisions/"+revA+"/logs", nil).Body)
	}
	depDir := filepath.Join(s.DataDir, "deployments", dep)

	padded := func(body string) string { return "{" + body + strings.Repeat(" ", 16<<20) + "}" }
	project := map[string]string{
		"cfg/langgraph.json": padded(`"graphs": {"agent": {"builtin": "echo"}}, "env": "./conf/master.key",
			"pip_config_file": "pip/pip.conf", "dependencies": ["./dep"], "python_version": "3.99"`),
		"cfg/conf/master.key":      "DECOY=from-the-source\n",
		"cfg/pip/pip.conf":         "[global]\n",
		"cfg/dep/pyproject.toml":   "[project]\nname = \"dep\"\ndependencies = []\n",
		"cfg/dep/requirements.txt": "\n",
		"cfg/package.json":         "{}",
	}
	data := func(rel string) string { return filepath.Join(s.DataDir, filepath.FromSlash(rel)) }
	known := []string{}
	for _, round := range []struct {
		name    string
		targets []swaprace.Target
	}{
		{"the files under the configuration's directory", []swaprace.Target{
			{File: "cfg/conf/master.key", Swap: "cfg/conf", To: s.DataDir},
			{File: "cfg/pip/pip.conf", Swap: "cfg/pip", To: data("admin")},
			{File: "cfg/dep/requirements.txt", Swap: "cfg/dep", To: data("deployments")},
			{File: "cfg/package.json", Swap: "cfg/package.json", To: data("master.key")},
		}},
		{"the configuration's directory", []swaprace.Target{
			{File: "cfg/langgraph.json", Swap: "cfg", To: s.DataDir},
		}},
	} {
		t.Run(round.name, func(t *testing.T) {
			ready := filepath.Join(depDir, "home", "swaprace.ready")
			_ = os.Remove(ready)
			th := as("POST", "/agents/racer/threads", map[string]any{})
			if th.Status != 200 {
				t.Fatalf("thread: %d %s", th.Status, th.Body)
			}
			tid := th.Map()["thread_id"].(string)
			run := as("POST", "/agents/racer/threads/"+tid+"/runs", map[string]any{"assistant_id": "race", "input": map[string]any{
				"api": s.URL, "key": editor, "deployment_id": dep, "targets": round.targets, "timeout_ms": 40000, "known": known}})
			if run.Status != 200 {
				t.Fatalf("run: %d %s", run.Status, run.Body)
			}
			rid := run.Map()["run_id"].(string)
			for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				if _, err := os.Stat(ready); err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the racing graph did not start: %s", as("GET", "/agents/racer/threads/"+tid+"/runs/"+rid, nil).Body)
				}
			}
			revB := deployAs(project, "cfg/langgraph.json")
			known = append(known, revB)
			st := wait(revB)
			joined := as("GET", "/agents/racer/threads/"+tid+"/runs/"+rid+"/join", nil)
			if joined.Status != 200 {
				t.Fatalf("join: %d %s", joined.Status, joined.Body)
			}
			var rep struct {
				OwnRevision  string            `json:"own_revision"`
				NextRevision string            `json:"next_revision"`
				Listed       map[string]string `json:"listed"`
				SawNext      bool              `json:"saw_next"`
				HandedOver   bool              `json:"handed_over"`
				Results      []swaprace.Result `json:"results"`
				Error        string            `json:"error"`
			}
			raw, _ := json.Marshal(joined.Map()["report"])
			if err := json.Unmarshal(raw, &rep); err != nil || rep.OwnRevision == "" {
				t.Fatalf("the racing graph's report: %v: %s", err, joined.Body)
			}
			t.Logf("revision A's report: %s", raw)

			status := as("GET", "/v2/deployments/"+dep+"/revisions/"+revB, nil)
			logs := as("GET", "/v2/deployments/"+dep+"/revisions/"+revB+"/logs", nil)
			var msg string // the build's error, as its log's last lines say it
			for _, e := range logs.Map()["logs"].([]any) {
				if m, _ := e.(map[string]any)["message"].(string); strings.Contains(m, "failed") {
					msg = m
				}
			}
			t.Logf("revision B: %s: %s", st, msg)
			for what, body := range map[string]string{"status": string(status.Body), "build log": string(logs.Body)} {
				if strings.Contains(body, masterKey) {
					t.Errorf("revision B's %s holds the master key", what)
				}
				if strings.Contains(body, s.DataDir) {
					t.Errorf("revision B's %s names the data directory: %s", what, body)
				}
			}
			// B's own files were read (its decoy env file, its
			// dependency): the build went on to the interpreter check.
			if st != "BUILD_FAILED" || !strings.Contains(msg, "python_version 3.99") {
				t.Errorf("revision B ended %s (%s), want BUILD_FAILED at the interpreter check", st, msg)
			}
			// A did not see B, let alone swap anything in it.
			if rep.NextRevision != revB {
				t.Errorf("revision A learnt of %q, want %s (%s)", rep.NextRevision, revB, rep.Error)
			}
			// In a mount namespace B's directory does not exist for A;
			// under Landlock alone (uid mode) A can stat it, no more.
			if mode, _ := iso["mode"].(string); strings.Contains(mode, "namespaces") && (rep.SawNext || rep.HandedOver) {
				t.Errorf("revision A saw revision B's directory (handed over: %v)", rep.HandedOver)
			}
			for _, r := range rep.Results {
				if r.Swaps > 0 {
					t.Errorf("revision A swapped %s for a link to %s", r.Swap, r.To)
				}
			}
			for dir, entries := range rep.Listed {
				if strings.Contains(entries, revB) {
					t.Errorf("revision A lists %s: %s", dir, entries)
				}
			}
			if r := as("GET", "/agents/racer/ok", nil); r.Status != 200 {
				t.Errorf("revision A after the attack: %d %s", r.Status, r.Body)
			}
		})
	}
	t.Logf("isolation %v; the attack took %s", iso["mode"], time.Since(start).Round(time.Millisecond))
}
