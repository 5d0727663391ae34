package apidoc

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestOpenAPIPath(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"/v2/deployments", "/v2/deployments"},
		{"/v2/deployments/:id/revisions/:rid", "/v2/deployments/{id}/revisions/{rid}"},
		{"/agents/:name/*path", "/agents/{name}/{path}"},
	} {
		if got := OpenAPIPath(c.in); got != c.want {
			t.Errorf("OpenAPIPath(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

type sample struct {
	ID     string  `json:"id"`
	Status string  `json:"status"`
	Note   *string `json:"note"`
	Inner  *sample `json:"inner"`
}

func TestBuild(t *testing.T) {
	ok := []Resp{{Status: 200, Body: sample{}}}
	for _, c := range []struct {
		name string
		doc  Doc
		err  string // "" means it builds
		want []string
	}{
		{"renamed path parameter, enum, nullable pointers", Doc{
			Ops:   []Op{{Method: "GET", Path: "/s/:id", PathNames: map[string]string{"id": "sample_id"}, ID: "get", Public: true, Responses: ok}},
			Enums: map[string][]string{"Sample.status": {"A", "B"}},
		}, "", []string{`"/s/{sample_id}"`, `"enum":["A","B"]`, `"type":["null","string"]`, `"inner":{"anyOf":[{"type":"null"},{"$ref":"#/components/schemas/Sample"`}},
		{"unknown requirement", Doc{Ops: []Op{{Method: "GET", Path: "/s", Security: []string{"nope"}, Responses: ok}}}, `unknown security requirement "nope"`, nil},
		{"documented twice", Doc{Ops: []Op{{Method: "GET", Path: "/s", Public: true}, {Method: "GET", Path: "/s", Public: true}}}, "documented twice", nil},
		{"enum on a missing property", Doc{Ops: []Op{{Method: "GET", Path: "/s", Public: true, Responses: ok}}, Enums: map[string][]string{"Sample.nope": {"x"}}}, `no property "nope"`, nil},
		{"enum on a missing definition", Doc{Enums: map[string][]string{"Nope.x": {"x"}}}, `no definition "Nope"`, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			raw, err := c.doc.Build()
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var compact map[string]any
			if err := json.Unmarshal(raw, &compact); err != nil {
				t.Fatal(err)
			}
			flat, _ := json.Marshal(compact)
			for _, w := range c.want {
				if !strings.Contains(string(flat), w) {
					t.Errorf("document lacks %s:\n%s", w, flat)
				}
			}
		})
	}
}

func TestRenderHTMLEscapes(t *testing.T) {
	d := Doc{Title: "<T>", Ops: []Op{{Method: "GET", Path: "/x", ID: "x", Summary: "<script>alert(1)</script>", Public: true}}}
	raw, err := d.Build()
	if err != nil {
		t.Fatal(err)
	}
	page, err := RenderHTML(raw, "/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(page), "<script>") || !strings.Contains(string(page), "&lt;script&gt;") {
		t.Errorf("the summary is not escaped:\n%s", page)
	}
}
