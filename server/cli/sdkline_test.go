package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"slipway/runtime/build"
)

// TestSDKLineSpeaksTheProjectsLanguage: the closing line of a deploy shows
// the official SDK of the project's language, calling its first graph.
func TestSDKLineSpeaksTheProjectsLanguage(t *testing.T) {
	for _, c := range []struct {
		name, spec string
		want       string
	}{
		{"python file", `"./src/agent/graph.py:graph"`, "get_client(url="},
		{"python module", `"my_pkg.agent:graph"`, "get_client(url="},
		{"python object", `{"path": "./agent.py:graph", "description": "x"}`, "get_client(url="},
		{"typescript", `"./src/agent/graph.ts:graph"`, "new Client({ apiUrl"},
		{"javascript object", `{"path": "./src/graph.mjs:graph"}`, "new Client({ apiUrl"},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := graphConfig{Names: []string{"agent"}, Python: build.PythonSpec(json.RawMessage(c.spec))}
			line := sdkLine("http://127.0.0.1:8123/agents/x", g)
			if !strings.Contains(line, c.want) || !strings.Contains(line, `"agent"`) {
				t.Fatalf("sdkLine for %s = %q, want %q", c.spec, line, c.want)
			}
		})
	}
}
