package js_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"slipway/server/servertest"
)

// TestPlatformGraphConventions: graphs written for the hosted platform load
// and run unchanged. A graph exported as a Promise (an async IIFE that
// compiles it) is awaited, and getLogger() of @langchain/langgraph-sdk/logging
// finds the platform's logger, whose lines reach the agent's log.
func TestPlatformGraphConventions(t *testing.T) {
	project, _ := needNode(t)
	app := t.TempDir()
	if err := os.Symlink(filepath.Join(project, "node_modules"), filepath.Join(app, "node_modules")); err != nil {
		t.Fatal(err)
	}
	graph := `import { getLogger } from "@langchain/langgraph-sdk/logging";
import { StateGraph, Annotation, START } from "@langchain/langgraph";
getLogger().info("graph module loaded", { marker: "at-import" });
const State = Annotation.Root({ n: Annotation() });
export const graph = (async () =>
  new StateGraph(State)
    .addNode("one", (s) => {
      getLogger().child({ node: "one" }).warn("node ran");
      return { n: (s.n ?? 0) + 1 };
    })
    .addEdge(START, "one")
    .compile())();
`
	if err := os.WriteFile(filepath.Join(app, "graph.mjs"), []byte(graph), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(app, "langgraph.json")
	if err := os.WriteFile(cfg, []byte(`{"graphs": {"agent": "./graph.mjs:graph"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := servertest.FreeAddr(t)
	var out servertest.SyncBuffer
	cmd := exec.Command(servertest.Binary(t), "agent")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "SLIPWAY_GRAPH_CONFIG=" + cfg,
		"SLIPWAY_AGENT_DATA_DIR=" + t.TempDir(), "SLIPWAY_AGENT_ADDR=" + addr}
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
	base := "http://" + addr
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(base + "/ok")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		select {
		case <-exited:
			t.Fatalf("the agent exited:\n%s", out.String())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the agent did not become healthy:\n%s", out.String())
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", base+"/runs/wait", strings.NewReader(`{"assistant_id":"agent","input":{"n":1}}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var state struct{ N int }
	if err := json.NewDecoder(resp.Body).Decode(&state); err != nil || resp.StatusCode != 200 || state.N != 2 {
		t.Fatalf("runs/wait: %d %v %+v\n%s", resp.StatusCode, err, state, out.String())
	}
	for _, want := range []string{`[info] graph module loaded {\"marker\":\"at-import\"}`, `[warn] node ran {\"node\":\"one\"}`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the agent's log lacks %q:\n%s", want, out.String())
		}
	}
}
