package js_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"slipway/server/servertest"
)

// TestGraphImportFailureFailsStart: a graph that cannot be imported makes
// `slipway agent` exit non-zero with the loader's message, never serve
// without it (so a revision ends DEPLOY_FAILED with the message in its log).
func TestGraphImportFailureFailsStart(t *testing.T) {
	project, _ := needNode(t)
	for _, tc := range []struct {
		name, file, code, export, want string
	}{
		{"syntax error", "broken.mjs", "export const graph = ;\n", "graph", "SyntaxError"},
		{"missing export", "noexport.mjs", "export const other = 1;\n", "graph", `has no export named "graph"`},
		{"missing dependency", "nodep.mjs", "import x from \"left-pad-not-installed\";\nexport const graph = x;\n", "graph", "left-pad-not-installed"},
		{"TypeScript syntax error", "broken.ts", "export const graph: number = (;\n", "graph", "TypeScript transpilation failed"},
		{"not a graph", "notgraph.mjs", "export const graph = { hello: 1 };\n", "graph", "not a LangGraph graph"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			app := t.TempDir()
			// The project's node_modules, so only the graph itself is broken.
			if err := os.Symlink(filepath.Join(project, "node_modules"), filepath.Join(app, "node_modules")); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(app, tc.file), []byte(tc.code), 0o644); err != nil {
				t.Fatal(err)
			}
			cfg := filepath.Join(app, "langgraph.json")
			if err := os.WriteFile(cfg, []byte(`{"graphs": {"agent": "./`+tc.file+`:`+tc.export+`"}}`), 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(servertest.Binary(t), "agent")
			cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "SLIPWAY_GRAPH_CONFIG=" + cfg,
				"SLIPWAY_AGENT_DATA_DIR=" + t.TempDir(), "SLIPWAY_AGENT_ADDR=" + servertest.FreeAddr(t)}
			done := make(chan struct{})
			var out []byte
			var err error
			go func() { out, err = cmd.CombinedOutput(); close(done) }()
			select {
			case <-done:
			case <-time.After(60 * time.Second):
				_ = cmd.Process.Kill()
				t.Fatal("slipway agent kept running with a graph that cannot load")
			}
			if err == nil {
				t.Fatalf("slipway agent exited 0:\n%s", out)
			}
			if !strings.Contains(string(out), tc.want) || !strings.Contains(string(out), `graph \"agent\"`) && !strings.Contains(string(out), `graph "agent"`) {
				t.Fatalf("output does not name the graph and %q:\n%s", tc.want, out)
			}
		})
	}
}
