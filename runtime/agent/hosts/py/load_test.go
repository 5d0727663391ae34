package py_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"slipway/server/servertest"
)

// TestPyGraphImportFailureFailsStart: a Python graph that cannot be loaded
// makes `slipway agent` exit non-zero with the loader's message, never
// serve without it (so a revision ends DEPLOY_FAILED with the message in
// its log).
func TestPyGraphImportFailureFailsStart(t *testing.T) {
	python, _, _ := needPython(t)
	for _, tc := range []struct {
		name, file, code, spec, want string
	}{
		{"syntax error", "broken.py", "graph = (\n", "./broken.py:graph", "SyntaxError"},
		{"missing attribute", "noattr.py", "other = 1\n", "./noattr.py:graph", `has no attribute named "graph"`},
		{"missing dependency", "nodep.py", "import left_pad_not_installed\ngraph = 1\n", "./nodep.py:graph", "No module named 'left_pad_not_installed'"},
		{"missing module", "", "", "no_such_pkg.agent:graph", "No module named 'no_such_pkg'"},
		{"not a graph", "notgraph.py", "graph = {'hello': 1}\n", "./notgraph.py:graph", "not a LangGraph graph"},
		{"raises at import", "raises.py", "raise RuntimeError('no API key')\n", "./raises.py:graph", "RuntimeError: no API key"},
		{"custom route app", "app.py", "import no_such_web_framework\n", "http:./app.py:app", "No module named 'no_such_web_framework'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			app := t.TempDir()
			if tc.file != "" {
				if err := os.WriteFile(filepath.Join(app, tc.file), []byte(tc.code), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			cfg := filepath.Join(app, "langgraph.json")
			conf, name := `{"graphs": {"agent": "`+tc.spec+`"}}`, `graph "agent"`
			if app, ok := strings.CutPrefix(tc.spec, "http:"); ok {
				conf, name = `{"graphs": {}, "http": {"app": "`+app+`"}}`, "http app "+app
			}
			if err := os.WriteFile(cfg, []byte(conf), 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(servertest.Binary(t), "agent")
			cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "SLIPWAY_GRAPH_CONFIG=" + cfg,
				"SLIPWAY_AGENT_PYTHON=" + python,
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
			named := strings.Contains(string(out), name) || strings.Contains(string(out), strings.ReplaceAll(name, `"`, `\"`))
			if !strings.Contains(string(out), tc.want) || !named {
				t.Fatalf("output does not name the graph and %q:\n%s", tc.want, out)
			}
		})
	}
}

// TestPyProjectVirtualenvIsTheInterpreter: without SLIPWAY_AGENT_PYTHON the
// host runs with the .venv beside langgraph.json; one without LangGraph
// fails the start naming that interpreter.
func TestPyProjectVirtualenvIsTheInterpreter(t *testing.T) {
	python, _, _ := needPython(t)
	app := t.TempDir()
	if out, err := exec.Command(python, "-m", "venv", "--without-pip", filepath.Join(app, ".venv")).CombinedOutput(); err != nil {
		t.Fatalf("venv: %v\n%s", err, out)
	}
	if err := os.WriteFile(filepath.Join(app, "agent.py"), []byte("graph = None\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(app, "langgraph.json")
	if err := os.WriteFile(cfg, []byte(`{"graphs": {"agent": "./agent.py:graph"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(servertest.Binary(t), "agent")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "SLIPWAY_GRAPH_CONFIG=" + cfg,
		"SLIPWAY_AGENT_DATA_DIR=" + t.TempDir(), "SLIPWAY_AGENT_ADDR=" + servertest.FreeAddr(t)}
	out, err := cmd.CombinedOutput()
	want := "cannot import langgraph with " + filepath.Join(app, ".venv", "bin", "python")
	if err == nil || !strings.Contains(string(out), want) {
		t.Fatalf("want a failed start naming %q, got %v:\n%s", want, err, out)
	}
}
