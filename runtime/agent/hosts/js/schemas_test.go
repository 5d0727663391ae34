package js_test

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"slipway/server/servertest"
)

// TestJSSchemasWithoutZodSchemaExport: a project whose @langchain/langgraph
// has no "./zod/schema" export (LangGraph.js 0.2.x, which the official
// templates pin) still gets typed /schemas for a zod-state graph, from the
// zod types themselves, as the reference server does (it converts them
// with @langchain/core); before, Slipway fell back to the channel names
// with untyped values.
func TestJSSchemasWithoutZodSchemaExport(t *testing.T) {
	project, _ := needNode(t)
	// A copy of the test project's packages (a symlink would resolve to
	// files outside the project, which the host treats as its own), with
	// LangGraph's "./zod/schema" export removed.
	app := t.TempDir()
	// node_modules may itself be a symlink (a worktree's to a shared
	// install): copy what it points to, and never write through a link.
	src, err := filepath.EvalSymlinks(filepath.Join(project, "node_modules"))
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cp", "-a", src, filepath.Join(app, "node_modules")).CombinedOutput(); err != nil {
		t.Fatalf("copy node_modules: %v %s", err, out)
	}
	pkgFile := filepath.Join(app, "node_modules", "@langchain", "langgraph", "package.json")
	if resolved, err := filepath.EvalSymlinks(pkgFile); err != nil || resolved != pkgFile {
		t.Fatalf("%s is not a file of the copy (%s, %v)", pkgFile, resolved, err)
	}
	raw, err := os.ReadFile(pkgFile)
	if err != nil {
		t.Fatal(err)
	}
	var pkg map[string]any
	if err := json.Unmarshal(raw, &pkg); err != nil {
		t.Fatal(err)
	}
	exports, _ := pkg["exports"].(map[string]any)
	if _, ok := exports["./zod/schema"]; !ok {
		t.Fatalf("the test project's LangGraph has no ./zod/schema export to remove")
	}
	delete(exports, "./zod/schema")
	if raw, err = json.Marshal(pkg); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		pkgFile:                            string(raw),
		filepath.Join(app, "package.json"): `{"name": "zod-no-schema-export", "private": true, "type": "module"}`,
		filepath.Join(app, "graph.mjs"): `import { StateGraph, START, END } from "@langchain/langgraph";
import { z } from "zod";
const State = z.object({ topic: z.string().describe("what to write about"), words: z.number().int().optional() });
export const graph = new StateGraph(State).addNode("write", (s) => ({ words: 1 })).addEdge(START, "write").addEdge("write", END).compile();
`,
		// An Annotation state with an Annotation context, as the official
		// react-agent-js template builds it; LangGraph.js 0.2 keeps the
		// context's channels on the builder (_configSchema), which 1.x no
		// longer does, so the test sets them as 0.2 would.
		filepath.Join(app, "context.mjs"): `import { StateGraph, Annotation, START, END } from "@langchain/langgraph";
const Configuration = Annotation.Root({ model: Annotation(), systemPromptTemplate: Annotation() });
const builder = new StateGraph(Annotation.Root({ question: Annotation() })).addNode("ask", () => ({})).addEdge(START, "ask").addEdge("ask", END);
builder._configSchema = Configuration.spec;
export const graph = builder.compile();
`,
		filepath.Join(app, "langgraph.json"): `{"graphs": {"agent": "./graph.mjs:graph", "context": "./context.mjs:graph"}}`,
	}
	for name, text := range files {
		if err := os.WriteFile(name, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The premise: this LangGraph really has no zod/schema to import.
	probe := exec.Command("node", "--input-type=module", "-e", `import("@langchain/langgraph/zod/schema").then(() => process.exit(3), () => process.exit(0))`)
	probe.Dir = app
	if out, err := probe.CombinedOutput(); err != nil {
		t.Fatalf("@langchain/langgraph/zod/schema is importable in the test project: %v %s", err, out)
	}

	a := servertest.StartAgent(t, map[string]string{"SLIPWAY_LOG_LEVEL": "warn", "SLIPWAY_GRAPH_CONFIG": filepath.Join(app, "langgraph.json")})
	resp, err := http.Get(a.URL + "/assistants/agent/schemas")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ = io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /assistants/agent/schemas: %d %s\nagent log:\n%s", resp.StatusCode, raw, a.Logs())
	}
	var got map[string]map[string]any
	var body map[string]any
	if err := json.Unmarshal(raw, &body); err != nil {
		t.Fatalf("decode %s: %v", raw, err)
	}
	got = map[string]map[string]any{}
	for k, v := range body {
		if m, ok := v.(map[string]any); ok {
			got[k] = m
		}
	}
	for _, tc := range []struct{ schema, key, typ string }{
		{"state_schema", "topic", "string"},
		{"state_schema", "words", "integer"},
		{"input_schema", "topic", "string"},
		{"output_schema", "words", "integer"},
	} {
		props, _ := got[tc.schema]["properties"].(map[string]any)
		prop, _ := props[tc.key].(map[string]any)
		if prop["type"] != tc.typ {
			t.Errorf("%s.properties.%s = %v, want type %q (from the zod state)\n%s", tc.schema, tc.key, prop, tc.typ, raw)
		}
	}
	if req, _ := got["output_schema"]["required"].([]any); len(req) != 1 || req[0] != "topic" {
		t.Errorf("output_schema.required = %v, want [topic]", got["output_schema"]["required"])
	}
	if _, ok := got["input_schema"]["required"]; ok {
		t.Errorf("input_schema requires %v: a run's input may leave any key out", got["input_schema"]["required"])
	}

	// The Annotation context: its keys, for config_schema and context_schema.
	resp, err = http.Get(a.URL + "/assistants/context/schemas")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ = io.ReadAll(resp.Body)
	var ctx map[string]any
	if err := json.Unmarshal(raw, &ctx); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /assistants/context/schemas: %d %s %v", resp.StatusCode, raw, err)
	}
	// Its input and output: the state's keys (a compiled graph's input
	// channel is only __start__).
	for _, name := range []string{"input_schema", "output_schema", "state_schema"} {
		s, _ := ctx[name].(map[string]any)
		props, _ := s["properties"].(map[string]any)
		if _, ok := props["question"]; !ok || len(props) != 1 {
			t.Errorf("%s = %v, want the state's key question\n%s", name, ctx[name], raw)
		}
	}
	for _, name := range []string{"config_schema", "context_schema"} {
		s, _ := ctx[name].(map[string]any)
		props, _ := s["properties"].(map[string]any)
		if _, ok := props["model"]; !ok || len(props) != 2 {
			t.Errorf("%s = %v, want the context's keys model and systemPromptTemplate\n%s", name, ctx[name], raw)
		}
	}
}
