package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBundleUI: a graph's TSX components, their local imports and CSS
// become one browser script defining __LGUI_<graph> and a stylesheet; the
// page's modules stay imports answered by its LGUI_REQUIRE global; a file
// outside the project, or one that does not build, is an error naming the
// file and line but not quoting the source or Slipway's paths.
func TestBundleUI(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"src/ui.tsx": `import "./styles.css";
import { Card } from "./card";
import { useStreamContext } from "@langchain/langgraph-sdk/react-ui";
import { format } from "shared-lib";
const Weather = (props: { city: string }) => { useStreamContext(); return <Card title={format(props.city)} />; };
export default { weather: Weather };
`,
		"src/card.tsx":   `export const Card = ({ title }: { title: string }) => <div className="card">{title}</div>;` + "\n",
		"src/styles.css": ".card { color: rgb(1, 2, 3) }\n",
		"src/broken.tsx": "export default { x: () => <div> };\nconst SECRET_SOURCE = 1;\n",
	} {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, err := BundleUI(dir, map[string]string{"my-agent": "./src/ui.tsx"}, []string{"shared-lib"})
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for _, f := range out["my-agent"] {
		files[f.Name] = string(f.Contents)
	}
	js, css := files["entrypoint.js"], files["entrypoint.css"]
	for _, want := range []string{"var __LGUI_my_agent", `Symbol.for("LGUI_REQUIRE")`, `"react/jsx-runtime"`, `"shared-lib"`, `"@langchain/langgraph-sdk/react-ui"`, "LGUI_EXT_STORE", `"card"`} {
		if !strings.Contains(js, want) {
			t.Errorf("the script lacks %s:\n%s", want, js)
		}
	}
	if strings.Contains(js, `typeof require !== "undefined" ? require`) {
		t.Error("the script still calls require for the page's modules")
	}
	if !strings.Contains(css, "rgb(1, 2, 3)") {
		t.Errorf("the stylesheet lacks the components' CSS: %q", css)
	}

	for _, tc := range []struct{ name, path, want string }{
		{"outside the project", "../elsewhere/ui.tsx", "outside the project's directory"},
		{"absolute", "/etc/ui.tsx", "outside the project's directory"},
		{"missing", "./src/nowhere.tsx", "Could not resolve"},
		{"does not build", "./src/broken.tsx", "src/broken.tsx:1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := BundleUI(dir, map[string]string{"g": tc.path}, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v; want %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "SECRET_SOURCE") || strings.Contains(err.Error(), dir) {
				t.Fatalf("the error quotes the source or the directory: %v", err)
			}
		})
	}
}
