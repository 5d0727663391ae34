package js_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestResolveHookNestedCheckpoint: npm nests a newer
// @langchain/langgraph-checkpoint under @langchain/langgraph when another
// dependency (the official template's @langchain/langgraph-cli) hoists an
// older one to the project's node_modules. LangGraph must get its own copy,
// and so must the host, whose saver extends LangGraph's base classes.
func TestResolveHookNestedCheckpoint(t *testing.T) {
	needNode(t)
	hooks, err := filepath.Abs("hooks.mjs")
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	project := filepath.Join(root, "project")
	write := func(p, body string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	pkg := func(dir, name, version, index string) {
		write(filepath.Join(dir, "package.json"), `{"name":"`+name+`","version":"`+version+`","type":"module","main":"./dist/index.js"}`)
		write(filepath.Join(dir, "dist", "index.js"), index)
	}
	nm := filepath.Join(project, "node_modules", "@langchain")
	write(filepath.Join(project, "package.json"), `{"name":"app","type":"module"}`)
	pkg(filepath.Join(nm, "langgraph"), "@langchain/langgraph", "1.0.0",
		`export { version as checkpointVersion } from "@langchain/langgraph-checkpoint";`+"\n")
	pkg(filepath.Join(nm, "langgraph", "node_modules", "@langchain", "langgraph-checkpoint"), "@langchain/langgraph-checkpoint", "1.0.0",
		`export const version = "nested";`+"\n")
	pkg(filepath.Join(nm, "langgraph-checkpoint"), "@langchain/langgraph-checkpoint", "0.1.0",
		`export const version = "hoisted";`+"\n")
	// The user's own graph imports both, as graphs do.
	write(filepath.Join(project, "src", "graph.js"),
		`export { checkpointVersion as viaLanggraph } from "@langchain/langgraph";`+"\n"+
			`export { version as direct } from "@langchain/langgraph-checkpoint";`+"\n")
	// The host lives outside the project, as in the agent's data directory.
	host := filepath.Join(root, "host", "main.mjs")
	write(host, `import { register } from "node:module";
import { pathToFileURL } from "node:url";
register(pathToFileURL(process.argv[2]).href, import.meta.url, { data: { projectDir: process.argv[3] } });
const lg = await import("@langchain/langgraph");
const cp = await import("@langchain/langgraph-checkpoint");
const user = await import(pathToFileURL(process.argv[4]).href);
console.log(JSON.stringify({ langgraph: lg.checkpointVersion, host: cp.version, user: user.viaLanggraph, userDirect: user.direct }));
`)
	out, err := exec.Command("node", host, hooks, project, filepath.Join(project, "src", "graph.js")).CombinedOutput()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, out)
	}
	var got map[string]string
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("output %q: %v", out, err)
	}
	for k, v := range got {
		if v != "nested" {
			t.Errorf("%s got the %s copy of @langchain/langgraph-checkpoint, want LangGraph's nested one (all: %v)", k, v, got)
		}
	}
}
