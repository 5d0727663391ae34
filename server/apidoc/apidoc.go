// Package apidoc builds the OpenAPI 3.1 documents of `slipway serve` and
// `slipway agent` from tables of operations kept beside the routes they
// describe, and renders them as an HTML page for /docs.
//
// Request and response schemas come from the Go types the handlers decode
// and encode, reflected by github.com/swaggest/jsonschema-go (a maintained
// JSON Schema reflector that already emits the 3.1 dialect, e.g. nullable
// as a type list); the operation and path layer is assembled here because
// the documents are small and the routes are httprouter patterns that the
// tests compare with the router's own records.
package apidoc

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/google/uuid"
	jsonschema "github.com/swaggest/jsonschema-go"
)

// Schema is a raw JSON Schema fragment, for shapes that have no Go type.
type Schema map[string]any

// Param is one query (or header) parameter.
type Param struct {
	Name        string
	In          string // "query" (default) or "header"
	Description string
	Required    bool
	Schema      Schema
}

// Resp is one documented response. Body is a Go value whose type is
// reflected (a Schema is used as is); nil means no body.
type Resp struct {
	Status      int
	Description string
	Body        any
	// ContentType defaults to application/json when Body is set.
	ContentType string
	// Stream says the response may also be a text/event-stream (chosen
	// by the route or the request's Accept header).
	Stream bool
}

// Op is one operation: an httprouter route and what it takes and answers.
type Op struct {
	Method string
	// Path is the httprouter pattern the route is registered with
	// (":id", "*path"); the document spells it "{id}".
	Path string
	// PathNames renames path parameters in the document (router name →
	// documented name), to keep the published names where the router's
	// differ.
	PathNames   map[string]string
	ID          string
	Summary     string
	Description string
	Tag         string
	// Security names the requirement sets (keys of Doc.Security) any one
	// of which grants access; Public operations take no credential.
	Security []string
	Public   bool
	Query    []Param
	// Body is the request body: a Go value reflected into a schema (a
	// Schema is used as is); BodyType defaults to application/json.
	Body     any
	BodyType string
	// BodyOptional says a missing (or null) body is accepted.
	BodyOptional bool
	Responses    []Resp
}

// SecurityScheme is an OpenAPI security scheme object.
type SecurityScheme = Schema

// Doc is a whole document's input.
type Doc struct {
	Title, Version, Description string
	Tags                        []Tag
	Schemes                     map[string]SecurityScheme
	// Security maps a requirement name (used by Op.Security) to the
	// schemes that must all be present.
	Security map[string][]string
	Ops      []Op
	// Enums adds enum lists to reflected properties, keyed
	// "Definition.property" (e.g. "Deployment.status"); the values come
	// from the same Go variables the server checks against.
	Enums map[string][]string
	// Bounds adds keywords (minLength, maximum, pattern ...) to reflected
	// properties, keyed like Enums.
	Bounds map[string]Schema
	// StringDetail422 says a 422 may also carry one sentence in detail
	// (the agent API answers some as the reference LangGraph server does).
	StringDetail422 bool
}

// Tag groups operations on the /docs page.
type Tag struct{ Name, Description string }

// ErrorSchemas are the error shapes every API of Slipway answers with.
var errorSchemas = map[string]any{
	"ValidationError": Schema{
		"type":     "object",
		"required": []string{"loc", "msg", "type"},
		"properties": Schema{
			"loc":  Schema{"type": "array", "items": Schema{"anyOf": []any{Schema{"type": "string"}, Schema{"type": "integer"}}}},
			"msg":  Schema{"type": "string"},
			"type": Schema{"type": "string"},
		},
	},
	"HTTPValidationError": Schema{
		"type":        "object",
		"description": "422: what in the request is invalid, one entry per problem.",
		"required":    []string{"detail"},
		"properties": Schema{
			"detail": Schema{"type": "array", "items": Schema{"$ref": "#/components/schemas/ValidationError"}},
		},
	},
	"ErrorDetail": Schema{
		"type":        "object",
		"description": "Every other error (400, 401, 403, 404, 409, 413, 429, 5xx): one sentence in detail.",
		"required":    []string{"detail"},
		"properties":  Schema{"detail": Schema{"type": "string"}},
	},
}

var pathParamRE = regexp.MustCompile(`[:*]([A-Za-z_][A-Za-z0-9_]*)`)

// OpenAPIPath turns an httprouter pattern into an OpenAPI path template.
func OpenAPIPath(p string) string { return pathParamRE.ReplaceAllString(p, "{$1}") }

func (op Op) docPath() string {
	return pathParamRE.ReplaceAllStringFunc(op.Path, func(m string) string {
		if n, ok := op.PathNames[m[1:]]; ok {
			return "{" + n + "}"
		}
		return "{" + m[1:] + "}"
	})
}

// Build renders the document as JSON.
func (d *Doc) Build() ([]byte, error) {
	b := &builder{doc: d, defs: map[string]any{}, names: map[string]reflect.Type{}}
	for k, v := range errorSchemas {
		b.defs[k] = v
	}
	b.r.InterceptDefName(b.defName)
	// A UUID is a string in place: as a definition of its own the
	// reflector would leave a *uuid.UUID a bare $ref, which null fails.
	b.r.InlineDefinition(uuid.UUID{})

	paths := map[string]map[string]any{}
	for _, op := range d.Ops {
		o, err := b.operation(op)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", op.Method, op.Path, err)
		}
		p := op.docPath()
		if paths[p] == nil {
			paths[p] = map[string]any{}
		}
		m := strings.ToLower(op.Method)
		if _, dup := paths[p][m]; dup {
			return nil, fmt.Errorf("%s %s documented twice", op.Method, op.Path)
		}
		paths[p][m] = o
	}
	if err := b.applyProps(); err != nil {
		return nil, err
	}
	tags := []any{}
	for _, t := range d.Tags {
		tags = append(tags, Schema{"name": t.Name, "description": t.Description})
	}
	out := Schema{
		"openapi":    "3.1.0",
		"info":       Schema{"title": d.Title, "version": d.Version, "description": d.Description},
		"tags":       tags,
		"paths":      paths,
		"components": Schema{"schemas": b.defs},
	}
	if d.Schemes != nil {
		out["components"].(Schema)["securitySchemes"] = d.Schemes
	}
	// Normalize through JSON: a nullable $ref comes out of the reflector
	// as {"anyOf":[null, ref], "type":"object"}, whose type would forbid
	// the null again.
	raw, err := json.Marshal(out)
	if err != nil {
		return nil, err
	}
	var tree any
	if err := json.Unmarshal(raw, &tree); err != nil {
		return nil, err
	}
	fixNullableRefs(tree)
	return json.MarshalIndent(tree, "", "  ")
}

func fixNullableRefs(v any) {
	switch x := v.(type) {
	case map[string]any:
		if _, ok := x["anyOf"]; ok {
			delete(x, "type")
		}
		for _, c := range x {
			fixNullableRefs(c)
		}
	case []any:
		for _, c := range x {
			fixNullableRefs(c)
		}
	}
}

type builder struct {
	doc   *Doc
	r     jsonschema.Reflector
	defs  map[string]any
	names map[string]reflect.Type
}

var pkgPathRE = regexp.MustCompile(`[A-Za-z0-9_./-]*\.`)

// defName names a definition after its Go type without the package (the
// API's names, e.g. "Deployment"), keeping the package prefix only when two
// packages use the same name.
func (b *builder) defName(t reflect.Type, def string) string {
	if def == "" {
		return def // inlined by the reflector (uuid.UUID, time.Time ...)
	}
	name := pkgPathRE.ReplaceAllString(t.Name(), "")
	name = strings.NewReplacer("[", "", "]", "", ",", "", "*", "").Replace(name)
	if name == "" {
		return def
	}
	name = strings.ToUpper(name[:1]) + name[1:]
	if prev, ok := b.names[name]; ok && prev != t {
		return def
	}
	b.names[name] = t
	return name
}

func (b *builder) schema(v any) (any, error) {
	if s, ok := v.(Schema); ok {
		return s, nil
	}
	s, err := b.r.Reflect(v,
		jsonschema.DefinitionsPrefix("#/components/schemas/"),
		jsonschema.RootRef,
		// A pointer to a struct is null or the struct: say so next to the
		// $ref rather than making the definition itself nullable.
		func(rc *jsonschema.ReflectContext) { rc.EnvelopNullability = true },
		jsonschema.CollectDefinitions(func(name string, s jsonschema.Schema) { b.defs[name] = s }),
	)
	if err != nil {
		return nil, err
	}
	return s, nil
}

func (b *builder) operation(op Op) (any, error) {
	o := Schema{"operationId": op.ID, "summary": op.Summary}
	if op.Description != "" {
		o["description"] = op.Description
	}
	if op.Tag != "" {
		o["tags"] = []string{op.Tag}
	}
	if op.Public {
		o["security"] = []any{}
	} else {
		reqs := []any{}
		for _, name := range op.Security {
			schemes, ok := b.doc.Security[name]
			if !ok {
				return nil, fmt.Errorf("unknown security requirement %q", name)
			}
			req := Schema{}
			for _, s := range schemes {
				req[s] = []string{}
			}
			reqs = append(reqs, req)
		}
		o["security"] = reqs
	}
	params := []any{}
	for _, m := range pathParamRE.FindAllStringSubmatch(op.Path, -1) {
		desc := ""
		if strings.Contains(op.Path, "*"+m[1]) {
			desc = "The rest of the path, slashes included."
		}
		name := m[1]
		if n, ok := op.PathNames[name]; ok {
			name = n
		}
		params = append(params, Schema{"name": name, "in": "path", "required": true, "description": desc, "schema": Schema{"type": "string"}})
	}
	for _, q := range op.Query {
		in := q.In
		if in == "" {
			in = "query"
		}
		s := q.Schema
		if s == nil {
			s = Schema{"type": "string"}
		}
		params = append(params, Schema{"name": q.Name, "in": in, "required": q.Required, "description": q.Description, "schema": s})
	}
	if len(params) > 0 {
		o["parameters"] = params
	}
	if op.Body != nil {
		s, err := b.schema(op.Body)
		if err != nil {
			return nil, err
		}
		ct := cmp.Or(op.BodyType, "application/json")
		if op.BodyOptional && ct == "application/json" {
			s = Schema{"anyOf": []any{Schema{"type": "null"}, s}}
		}
		o["requestBody"] = Schema{"required": !op.BodyOptional, "content": Schema{ct: Schema{"schema": s}}}
	}
	resps := Schema{}
	for _, r := range op.Responses {
		desc := r.Description
		if desc == "" {
			desc = http.StatusText(r.Status)
		}
		out := Schema{"description": desc}
		if r.Body != nil {
			s, err := b.schema(r.Body)
			if err != nil {
				return nil, err
			}
			ct := cmp.Or(r.ContentType, "application/json")
			content := Schema{ct: Schema{"schema": s}}
			if r.Stream {
				content["text/event-stream"] = Schema{"schema": SSE}
			}
			out["content"] = content
		}
		resps[strconv.Itoa(r.Status)] = out
	}
	if !op.Public || op.Body != nil || len(op.Query) > 0 {
		if _, ok := resps["422"]; !ok && (op.Body != nil || len(op.Query) > 0 || strings.Contains(op.Path, ":")) {
			var schema any = Schema{"$ref": "#/components/schemas/HTTPValidationError"}
			if b.doc.StringDetail422 {
				schema = Schema{"anyOf": []any{schema, Schema{"$ref": "#/components/schemas/ErrorDetail"}}}
			}
			resps["422"] = Schema{"description": "Invalid request", "content": Schema{"application/json": Schema{"schema": schema}}}
		}
	}
	resps["default"] = Schema{"description": "An error", "content": Schema{"application/json": Schema{"schema": Schema{"$ref": "#/components/schemas/ErrorDetail"}}}}
	o["responses"] = resps
	return o, nil
}

// applyProps adds the enums and bounds of Doc to reflected definitions.
func (b *builder) applyProps() error {
	apply := func(key string, f func(prop map[string]any)) error {
		def, prop, ok := strings.Cut(key, ".")
		if !ok {
			return fmt.Errorf("property key %q is not Definition.property", key)
		}
		raw, ok := b.defs[def]
		if !ok {
			return fmt.Errorf("no definition %q for %q", def, key)
		}
		// Round-trip through JSON to edit reflected and raw schemas alike.
		var m map[string]any
		j, err := json.Marshal(raw)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(j, &m); err != nil {
			return err
		}
		props, _ := m["properties"].(map[string]any)
		p, ok := props[prop].(map[string]any)
		if !ok {
			return fmt.Errorf("definition %q has no property %q", def, prop)
		}
		f(p)
		b.defs[def] = m
		return nil
	}
	keys := slices.Sorted(maps.Keys(b.doc.Enums))
	for _, k := range keys {
		vals := b.doc.Enums[k]
		if err := apply(k, func(p map[string]any) {
			e := make([]any, 0, len(vals)+1)
			for _, v := range vals {
				e = append(e, v)
			}
			if t, ok := p["type"].([]any); ok && len(t) > 1 {
				e = append(e, nil) // a nullable property may be null
			}
			p["enum"] = e
		}); err != nil {
			return err
		}
	}
	for k, bound := range b.doc.Bounds {
		if err := apply(k, func(p map[string]any) {
			for kk, v := range bound {
				p[kk] = v
			}
		}); err != nil {
			return err
		}
	}
	return nil
}

// The security schemes of Slipway's APIs, and the requirement sets routes
// name: a credential (API key or Bearer token) alone, or with the header
// that picks the workspace or organization it acts on.
var (
	Schemes = map[string]SecurityScheme{
		"ApiKey": {"type": "apiKey", "in": "header", "name": "X-Api-Key",
			"description": "A service key, an organization key or a personal access token."},
		"Bearer": {"type": "http", "scheme": "bearer",
			"description": "A personal access token or a login session token (POST /api/v1/login)."},
		"TenantId": {"type": "apiKey", "in": "header", "name": "X-Tenant-Id",
			"description": "The workspace a request acts on; required with organization-scoped keys on workspace routes."},
		"OrganizationId": {"type": "apiKey", "in": "header", "name": "X-Organization-Id",
			"description": "The organization a request acts on; a credential that belongs to one organization may leave it out."},
		"SessionCookie": {"type": "apiKey", "in": "cookie", "name": "__Host-slipway_session",
			"description": "The dashboard's sign-in (POST /ui/session), used only when the request carries no key or token header, and never on the agents origin (SLIPWAY_AGENTS_URL). A change made with it must also send X-CSRF-Token equal to the __Host-slipway_csrf cookie, from the same origin; the workspace is the __Host-slipway_workspace cookie. The __Host- prefix is left out (slipway_session, slipway_csrf, slipway_workspace) only where browsers refuse Secure cookies: plain http to an address other than localhost."},
	}
	Requirements = map[string][]string{
		"key": {"ApiKey"}, "bearer": {"Bearer"},
		"key+tenant": {"ApiKey", "TenantId"}, "bearer+tenant": {"Bearer", "TenantId"},
		"key+org": {"ApiKey", "OrganizationId"}, "bearer+org": {"Bearer", "OrganizationId"},
		"cookie": {"SessionCookie"},
	}
	// Workspace routes act on one workspace.
	Workspace = []string{"key+tenant", "bearer+tenant", "key", "bearer", "cookie"}
	// Organization routes act on the caller's organization.
	Organization = []string{"key+org", "bearer+org", "key", "bearer", "cookie"}
)

// JSON is a response or body of any JSON object.
var JSON = Schema{"type": "object"}

// SSE is a server-sent event stream.
var SSE = Schema{"type": "string", "description": "text/event-stream: `id`, `event` and `data` lines."}

// IntParam is an integer query parameter with bounds.
func IntParam(name, desc string, min, max int) Param {
	s := Schema{"type": "integer", "minimum": min}
	if max > 0 {
		s["maximum"] = max
	}
	return Param{Name: name, Description: desc, Schema: s}
}
