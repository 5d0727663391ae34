package server

import (
	"slipway/server/apidoc"
	"slipway/server/controlplane"
	"slipway/server/dashboard"
	"slipway/server/orgapi"
)

// InfoResponse is the answer of GET /info.
type InfoResponse struct {
	Version    string         `json:"version"`
	InstanceID string         `json:"instance_id"`
	Runtime    map[string]any `json:"runtime" description:"The runtime driver, why it was chosen, and its isolation."`
}

// apiDoc is the OpenAPI document of `slipway serve`: the tables kept beside
// each package's routes, and the routes of this package.
func apiDoc(version string) *apidoc.Doc {
	proxy := []apidoc.Op{}
	for _, m := range []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"} {
		sec := apidoc.Workspace
		proxy = append(proxy, apidoc.Op{Method: m, Path: "/agents/:name/*path", ID: "proxy_" + m, Tag: "Agents",
			Summary:     "Call a deployment's agent server",
			Description: "Forwards the request, streaming, to the deployment's agent server (its API: GET /agents/{name}/openapi.json) after checking the credential against the deployment's workspace. Slipway's own route: the hosted service serves each deployment on its own host (so does Slipway, for a deployment's custom_url).",
			Security:    sec,
			Responses: []apidoc.Resp{{Status: 200, Description: "What the agent server answers.", Body: apidoc.Schema{}, ContentType: "*/*"},
				{Status: 502, Description: "The agent server is not reachable.", Body: apidoc.Schema{"$ref": "#/components/schemas/ErrorDetail"}},
				{Status: 503, Description: "The deployment has no running revision yet.", Body: apidoc.Schema{"$ref": "#/components/schemas/ErrorDetail"}}}})
	}
	ops := []apidoc.Op{
		{Method: "GET", Path: "/ok", ID: "ok", Summary: "Liveness", Tag: "Server", Public: true, Responses: []apidoc.Resp{{Status: 200, Body: apidoc.Schema{"type": "object", "properties": apidoc.Schema{"ok": apidoc.Schema{"type": "boolean"}}}}}},
		{Method: "GET", Path: "/info", ID: "info", Summary: "Version, instance and runtime", Tag: "Server", Public: true, Responses: []apidoc.Resp{{Status: 200, Body: InfoResponse{}}}},
		{Method: "GET", Path: "/openapi.json", ID: "openapi", Summary: "This document", Tag: "Server", Public: true, Responses: []apidoc.Resp{{Status: 200, Body: apidoc.JSON}}},
		{Method: "GET", Path: "/docs", ID: "docs", Summary: "This document as a page", Tag: "Server", Public: true, Responses: []apidoc.Resp{{Status: 200, Body: apidoc.Schema{"type": "string"}, ContentType: "text/html"}}},
	}
	ops = append(ops, controlplane.OpenAPI()...)
	ops = append(ops, chartsOpenAPI()...)
	ops = append(ops, orgapi.OpenAPI()...)
	ops = append(ops, dashboard.OpenAPI()...)
	ops = append(ops, proxy...)
	for _, m := range []string{"GET", "HEAD"} {
		ops = append(ops, apidoc.Op{Method: m, Path: "/ui-assets/:dep/ui/:graph/:file", ID: "ui_asset_" + m, Tag: "Agents", Public: true,
			PathNames:   map[string]string{"dep": "deployment_id"},
			Summary:     "A file of a deployment's generative UI",
			Description: "A script or stylesheet of a graph's generative UI (\"ui\" in langgraph.json), at the URL the agent's POST /ui/{graph} names: public, as the reference serves them, since a page's <script> and <link> elements send no credential. Only these files are served here.",
			Responses: []apidoc.Resp{{Status: 200, Description: "The file.", Body: apidoc.Schema{"type": "string"}, ContentType: "text/javascript"},
				{Status: 404, Description: "No such deployment, graph or file.", Body: apidoc.Schema{"$ref": "#/components/schemas/ErrorDetail"}}}})
	}
	return &apidoc.Doc{
		Title:   "Slipway",
		Version: version,
		Description: "The control plane (the hosted LangGraph control plane's /v2 API), the organization API with its OCSF audit log, uploads, logs, and the proxy to deployments. " +
			"Every route is also served under /api-host (the hosted service's prefix). Errors are {\"detail\": \"...\"}, and 422 is an HTTPValidationError.",
		Tags: []apidoc.Tag{
			{Name: "Deployments", Description: "Deployments and their revisions."},
			{Name: "Uploads", Description: "Source archives for internal_source deployments."},
			{Name: "Logs", Description: "Build, deploy and agent logs, as JSON or followed live (server-sent events)."},
			{Name: "Agents", Description: "The deployments' agent servers."},
			{Name: "Dashboard", Description: "The web dashboard at /: its page, files and sign-in."},
		},
		Schemes:  apidoc.Schemes,
		Security: apidoc.Requirements,
		Ops:      ops,
		Enums:    controlplane.OpenAPIEnums(),
		Bounds:   controlplane.OpenAPIBounds(),
	}
}
