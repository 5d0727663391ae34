package agentapi

import (
	"encoding/json"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"

	"slipway/server/httpx"
	"slipway/server/servertest"
)

var paramRE = regexp.MustCompile(`\{[^}]*\}|[:*][A-Za-z_][A-Za-z0-9_]*`)

// TestOpenAPICoversEveryRoute fails when a route of the agent API is not in
// its document, or the document has an operation no route serves.
func TestOpenAPICoversEveryRoute(t *testing.T) {
	rt := httpx.Record(httpx.NewRouter())
	(&API{}).routes(rt)
	registered := map[string]bool{}
	for _, r := range rt.Routes() {
		registered[r.Method+" "+paramRE.ReplaceAllString(r.Path, "{}")] = true
	}
	spec, err := OpenAPIDoc("test").Build()
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Paths map[string]map[string]json.RawMessage
	}
	if err := json.Unmarshal(spec, &d); err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for p, ops := range d.Paths {
		for m := range ops {
			documented[strings.ToUpper(m)+" "+paramRE.ReplaceAllString(p, "{}")] = true
		}
	}
	var problems []string
	for k := range registered {
		if !documented[k] {
			problems = append(problems, "route "+k+" is registered but not in the OpenAPI document")
		}
	}
	for k := range documented {
		if !registered[k] {
			problems = append(problems, "operation "+k+" is documented but no route serves it")
		}
	}
	sort.Strings(problems)
	for _, p := range problems {
		t.Error(p)
	}
	if len(registered) < 10 {
		t.Fatalf("only %d routes registered: the route listing is broken", len(registered))
	}
}

// TestOpenAPIDocumentIsValid checks what `slipway agent` serves at
// /openapi.json against the OpenAPI 3.1 specification, and that /docs
// renders it.
func TestOpenAPIDocumentIsValid(t *testing.T) {
	a := servertest.StartAgent(t, nil)
	r := a.Do("GET", "/openapi.json", nil)
	if r.Status != 200 {
		t.Fatalf("GET /openapi.json: %d %s", r.Status, r.Body)
	}
	doc, err := libopenapi.NewDocument(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	if v := doc.GetVersion(); v != "3.1.0" {
		t.Fatalf("openapi version %q", v)
	}
	v, errs := validator.NewValidator(doc)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if ok, verrs := v.ValidateDocument(); !ok {
		for _, e := range verrs {
			t.Errorf("%s: %s", e.Message, e.Reason)
			for _, sv := range e.SchemaValidationErrors {
				t.Errorf("  %s: %s", sv.FieldPath, sv.Reason)
			}
		}
	}
	page := a.Do("GET", "/docs", nil)
	if page.Status != 200 || !strings.Contains(string(page.Body), "create_run") || page.Header.Get("Content-Security-Policy") == "" {
		t.Errorf("GET /docs: %d %.200s", page.Status, page.Body)
	}
}
