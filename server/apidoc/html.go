package apidoc

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html/template"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strings"
)

// The /docs page is rendered on the server from the document itself: no
// script, no asset to fetch, so it works offline and under a CSP that
// allows nothing but its one inline style (pinned by hash).
const docsCSS = `body{font:15px/1.45 system-ui,sans-serif;margin:0;color:#1b1f24;background:#fff}
header{background:#0f3d56;color:#fff;padding:18px 28px}header h1{margin:0;font-size:24px}header p{margin:6px 0 0;opacity:.85}header a{color:#fff}
main{padding:8px 28px 40px;max-width:1100px}h2{border-bottom:2px solid #d0d7de;padding-bottom:4px;margin-top:32px}
details{border:1px solid #d0d7de;border-radius:6px;margin:8px 0;background:#f6f8fa}summary{cursor:pointer;padding:8px 12px}
.m{display:inline-block;min-width:64px;font-weight:700;font-family:monospace;color:#fff;border-radius:4px;padding:1px 6px;margin-right:8px;text-align:center}
.GET{background:#1f6feb}.POST{background:#1a7f37}.PUT{background:#9a6700}.PATCH{background:#8250df}.DELETE{background:#cf222e}.HEAD,.OPTIONS{background:#57606a}
code,.p{font-family:monospace}.op{padding:4px 14px 12px;background:#fff}table{border-collapse:collapse;margin:6px 0}td,th{border:1px solid #d0d7de;padding:3px 8px;text-align:left;vertical-align:top}
.s{color:#57606a}`

// DocsCSP is the Content-Security-Policy of the /docs page.
var DocsCSP = func() string {
	sum := sha256.Sum256([]byte(docsCSS))
	return "default-src 'none'; style-src 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
}()

var docsTmpl = template.Must(template.New("docs").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>{{.Title}} — API reference</title><style>{{.CSS}}</style></head>
<body><header><h1>{{.Title}} <small>{{.Version}}</small></h1><p>{{.Description}} The machine-readable document: <a href="{{.JSONPath}}">{{.JSONPath}}</a> (OpenAPI 3.1).</p></header>
<main>
{{range .Groups}}<h2 id="tag-{{.Name}}">{{.Name}}</h2>{{if .Description}}<p>{{.Description}}</p>{{end}}
{{range .Ops}}<details id="{{.ID}}"><summary><span class="m {{.Method}}">{{.Method}}</span><span class="p">{{.Path}}</span> — {{.Summary}}</summary><div class="op">
<p class="s">operationId <code>{{.ID}}</code>{{if .Security}} · credentials: {{.Security}}{{else}} · no credential{{end}}</p>
{{if .Description}}<p>{{.Description}}</p>{{end}}
{{if .Params}}<table><tr><th>parameter</th><th>in</th><th>type</th><th>description</th></tr>{{range .Params}}<tr><td><code>{{.Name}}</code>{{if .Required}}*{{end}}</td><td>{{.In}}</td><td>{{.Type}}</td><td>{{.Description}}</td></tr>{{end}}</table>{{end}}
{{if .Body}}<p>Request body: {{.Body}}</p>{{end}}
<table><tr><th>status</th><th>body</th><th>description</th></tr>{{range .Responses}}<tr><td>{{.Status}}</td><td>{{.Body}}</td><td>{{.Description}}</td></tr>{{end}}</table>
</div></details>{{end}}{{end}}
<h2 id="schemas">Schemas</h2>
{{range .Schemas}}<details id="schema-{{.Name}}"><summary><code>{{.Name}}</code> <span class="s">{{.Description}}</span></summary><div class="op">
{{if .Props}}<table><tr><th>field</th><th>type</th><th>description</th></tr>{{range .Props}}<tr><td><code>{{.Name}}</code>{{if .Required}}*{{end}}</td><td>{{.Type}}</td><td>{{.Description}}</td></tr>{{end}}</table>{{else}}<p>{{.Type}}</p>{{end}}
</div></details>{{end}}
</main></body></html>
`))

type htmlParam struct {
	Name, In, Type, Description string
	Required                    bool
}

type htmlResp struct{ Status, Body, Description string }

type htmlOp struct {
	Method, Path, ID, Summary, Description, Security, Body string
	Params                                                 []htmlParam
	Responses                                              []htmlResp
}

type htmlGroup struct {
	Name, Description string
	Ops               []htmlOp
}

type htmlSchema struct {
	Name, Description, Type string
	Props                   []htmlParam
}

var methodOrder = map[string]int{"get": 0, "post": 1, "put": 2, "patch": 3, "delete": 4, "head": 5, "options": 6}

// typeOf names a schema's type in a line: a definition's name, "array of
// X", an enum's values.
func typeOf(s map[string]any) string {
	if s == nil {
		return "any"
	}
	if ref, ok := s["$ref"].(string); ok {
		return strings.TrimPrefix(ref, "#/components/schemas/")
	}
	var t string
	switch v := s["type"].(type) {
	case string:
		t = v
	case []any:
		parts := []string{}
		for _, p := range v {
			if p != "null" {
				parts = append(parts, fmt.Sprint(p))
			}
		}
		t = strings.Join(parts, "|")
		if len(parts) < len(v) {
			t += " (nullable)"
		}
	}
	if strings.HasPrefix(t, "array") {
		if it, ok := s["items"].(map[string]any); ok {
			t = strings.Replace(t, "array", "array of "+typeOf(it), 1)
		}
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		if alts, ok := s[k].([]any); ok {
			names := []string{}
			for _, a := range alts {
				m, _ := a.(map[string]any)
				names = append(names, typeOf(m))
			}
			t = strings.Join(names, " | ")
		}
	}
	if e, ok := s["enum"].([]any); ok {
		vals := []string{}
		for _, v := range e {
			vals = append(vals, fmt.Sprint(v))
		}
		t += " one of: " + strings.Join(vals, ", ")
	}
	for _, k := range []string{"minimum", "maximum", "minLength", "maxLength", "pattern", "format"} {
		if v, ok := s[k]; ok {
			t += fmt.Sprintf(" %s %v", k, v)
		}
	}
	if t == "" {
		return "any"
	}
	return t
}

// RenderHTML renders a document built by Build as the /docs page.
func RenderHTML(doc []byte, jsonPath string) ([]byte, error) {
	var d struct {
		Info  struct{ Title, Version, Description string }
		Tags  []struct{ Name, Description string }
		Paths map[string]map[string]struct {
			OperationID string           `json:"operationId"`
			Summary     string           `json:"summary"`
			Description string           `json:"description"`
			Tags        []string         `json:"tags"`
			Security    []map[string]any `json:"security"`
			Parameters  []struct {
				Name, In, Description string
				Required              bool
				Schema                map[string]any
			} `json:"parameters"`
			RequestBody *struct {
				Content map[string]struct{ Schema map[string]any }
			} `json:"requestBody"`
			Responses map[string]struct {
				Description string
				Content     map[string]struct{ Schema map[string]any }
			} `json:"responses"`
		}
		Components struct {
			Schemas map[string]map[string]any
		}
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		return nil, fmt.Errorf("reading the document: %w", err)
	}
	groups := map[string]*htmlGroup{}
	var order []string
	group := func(name, desc string) *htmlGroup {
		if g, ok := groups[name]; ok {
			return g
		}
		g := &htmlGroup{Name: name, Description: desc}
		groups[name] = g
		order = append(order, name)
		return g
	}
	for _, t := range d.Tags {
		group(t.Name, t.Description)
	}
	paths := slices.Sorted(maps.Keys(d.Paths))
	for _, p := range paths {
		methods := make([]string, 0, len(d.Paths[p]))
		for m := range d.Paths[p] {
			methods = append(methods, m)
		}
		sort.Slice(methods, func(i, j int) bool { return methodOrder[methods[i]] < methodOrder[methods[j]] })
		for _, m := range methods {
			o := d.Paths[p][m]
			h := htmlOp{Method: strings.ToUpper(m), Path: p, ID: o.OperationID, Summary: o.Summary, Description: o.Description}
			sec := []string{}
			for _, req := range o.Security {
				names := slices.Sorted(maps.Keys(req))
				sec = append(sec, strings.Join(names, "+"))
			}
			h.Security = strings.Join(sec, " or ")
			for _, pr := range o.Parameters {
				h.Params = append(h.Params, htmlParam{Name: pr.Name, In: pr.In, Type: typeOf(pr.Schema), Description: pr.Description, Required: pr.Required})
			}
			if o.RequestBody != nil {
				for ct, c := range o.RequestBody.Content {
					h.Body = typeOf(c.Schema) + " (" + ct + ")"
				}
			}
			codes := slices.Sorted(maps.Keys(o.Responses))
			for _, c := range codes {
				r := o.Responses[c]
				body := "—"
				for ct, mt := range r.Content {
					body = typeOf(mt.Schema)
					if ct != "application/json" {
						body += " (" + ct + ")"
					}
				}
				h.Responses = append(h.Responses, htmlResp{Status: c, Body: body, Description: r.Description})
			}
			tag := "Other"
			if len(o.Tags) > 0 {
				tag = o.Tags[0]
			}
			g := group(tag, "")
			g.Ops = append(g.Ops, h)
		}
	}
	var view struct {
		Title, Version, Description, JSONPath string
		CSS                                   template.CSS
		Groups                                []*htmlGroup
		Schemas                               []htmlSchema
	}
	view.Title, view.Version, view.Description, view.JSONPath = d.Info.Title, d.Info.Version, d.Info.Description, jsonPath
	view.CSS = template.CSS(docsCSS)
	for _, name := range order {
		if len(groups[name].Ops) > 0 {
			view.Groups = append(view.Groups, groups[name])
		}
	}
	names := slices.Sorted(maps.Keys(d.Components.Schemas))
	for _, n := range names {
		s := d.Components.Schemas[n]
		hs := htmlSchema{Name: n, Type: typeOf(s)}
		hs.Description, _ = s["description"].(string)
		req := map[string]bool{}
		if rl, ok := s["required"].([]any); ok {
			for _, r := range rl {
				req[fmt.Sprint(r)] = true
			}
		}
		if props, ok := s["properties"].(map[string]any); ok {
			pn := slices.Sorted(maps.Keys(props))
			for _, k := range pn {
				ps, _ := props[k].(map[string]any)
				desc, _ := ps["description"].(string)
				hs.Props = append(hs.Props, htmlParam{Name: k, Type: typeOf(ps), Description: desc, Required: req[k]})
			}
		}
		view.Schemas = append(view.Schemas, hs)
	}
	var buf bytes.Buffer
	if err := docsTmpl.Execute(&buf, view); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Handlers serves the document at its path and the page at /docs. The
// document is built once, on first use.
type Handlers struct {
	json, html []byte
	err        error
}

// NewHandlers builds the document of d and its page.
func NewHandlers(d *Doc, jsonPath string) *Handlers {
	h := &Handlers{}
	h.json, h.err = d.Build()
	if h.err == nil {
		h.html, h.err = RenderHTML(h.json, jsonPath)
	}
	return h
}

// Err is the build error, if any (the tests check it is nil).
func (h *Handlers) Err() error { return h.err }

// JSON serves the OpenAPI document.
func (h *Handlers) JSON(w http.ResponseWriter, _ *http.Request) {
	if h.err != nil {
		http.Error(w, `{"detail":"Internal server error."}`, http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(h.json)
}

// HTML serves the /docs page.
func (h *Handlers) HTML(w http.ResponseWriter, _ *http.Request) {
	if h.err != nil {
		http.Error(w, `{"detail":"Internal server error."}`, http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", DocsCSP)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(h.html)
}
