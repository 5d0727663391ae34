package agent

import (
	"bytes"
	"fmt"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/evanw/esbuild/pkg/api"
)

// Generative UI: "ui" in langgraph.json maps a graph id to a TSX/JSX
// file whose default export maps component names to React components.
// Slipway bundles each with esbuild's Go library (github.com/evanw/esbuild,
// the bundler the reference's @langchain/langgraph-ui drives from Node), so
// no Node is needed to serve them: a browser IIFE whose global
// __LGUI_<graph> has render(name, shadowRootId), the contract of the SDK's
// LoadExternalComponent, with React, the SDK and ui_config.shared left to
// the page (they are resolved through its LGUI_REQUIRE global), and the
// CSS the components import beside it.

// UIFile is one file of a graph's UI bundle.
type UIFile struct {
	Name     string // entrypoint.js, entrypoint.css
	Contents []byte
}

// uiRenderer is the bundle's entry: the user's components, rendered into
// the shadow root LoadExternalComponent made, through the component store
// the SDK's page registered (Symbol.for("LGUI_EXT_STORE")).
const uiRenderer = `
const STORE = Symbol.for("LGUI_EXT_STORE");
export const render = (name, shadowRootId) => {
  const root = document.getElementById(shadowRootId).shadowRoot;
  const el = document.createElement("div");
  root.appendChild(el);
  window[STORE].respond(shadowRootId, ui[name], el);
};
`

// uiExternal are the modules the page provides (LoadExternalComponent's
// bootstrapUiContext); a package name covers its subpaths.
var uiExternal = []string{"react", "react-dom", "@langchain/langgraph-sdk", "@langchain/langgraph-sdk/react-ui"}

var notIdent = regexp.MustCompile(`[^a-zA-Z0-9]`)

// UIGlobal is the global a graph's bundle defines.
func UIGlobal(graph string) string { return "__LGUI_" + notIdent.ReplaceAllString(graph, "_") }

// BundleUI bundles the UI file of each graph in ui (paths relative to
// dir, the project's directory, which they may not leave). Errors name the
// graph and esbuild's message with its file and line, never the source.
func BundleUI(dir string, ui map[string]string, shared []string) (map[string][]UIFile, error) {
	out := map[string][]UIFile{}
	for _, graph := range slices.Sorted(maps.Keys(ui)) {
		rel := filepath.ToSlash(filepath.Clean(ui[graph]))
		if filepath.IsAbs(ui[graph]) || rel == ".." || strings.HasPrefix(rel, "../") {
			return nil, fmt.Errorf("ui %q: %q is outside the project's directory", graph, ui[graph])
		}
		entry := fmt.Sprintf("import ui from %q;\n%s", "./"+rel, uiRenderer)
		res := api.Build(api.BuildOptions{
			Stdin:         &api.StdinOptions{Contents: entry, ResolveDir: dir, Sourcefile: "ui-entrypoint.jsx", Loader: api.LoaderJSX},
			AbsWorkingDir: dir,
			Bundle:        true,
			Write:         false,
			Outdir:        filepath.Join(dir, "dist"),
			EntryNames:    "entrypoint",
			Format:        api.FormatIIFE,
			GlobalName:    UIGlobal(graph),
			Platform:      api.PlatformBrowser,
			Target:        api.ES2020,
			JSX:           api.JSXAutomatic,
			External:      append(slices.Clone(uiExternal), shared...),
			LogLevel:      api.LogLevelSilent,
		})
		if len(res.Errors) > 0 {
			msgs := make([]string, 0, len(res.Errors))
			for _, m := range res.Errors {
				if m.Location != nil {
					msgs = append(msgs, fmt.Sprintf("%s:%d: %s", m.Location.File, m.Location.Line, m.Text))
				} else {
					msgs = append(msgs, m.Text)
				}
			}
			return nil, fmt.Errorf("ui %q (%s): %s", graph, ui[graph], strings.Join(msgs, "; "))
		}
		for _, f := range res.OutputFiles {
			name := filepath.Base(f.Path)
			contents := f.Contents
			if strings.HasSuffix(name, ".js") {
				// The external imports become require() calls, which
				// the page answers through its LGUI_REQUIRE global.
				contents = bytes.ReplaceAll(contents, []byte(`typeof require !== "undefined" ? require`),
					[]byte(`typeof globalThis[Symbol.for("LGUI_REQUIRE")] !== "undefined" ? globalThis[Symbol.for("LGUI_REQUIRE")]`))
			}
			out[graph] = append(out[graph], UIFile{Name: name, Contents: contents})
		}
	}
	return out, nil
}
