package controlplane

import (
	"strings"
	"time"

	"slipway/server/apidoc"
)

// Response shapes written as maps by the handlers, named for the document.
type (
	// UploadURLResponse is the answer of POST .../upload-url.
	UploadURLResponse struct {
		UploadURL  string    `json:"upload_url"`
		ObjectPath string    `json:"object_path"`
		ExpiresAt  time.Time `json:"expires_at"`
	}
	// UploadResult is the answer of PUT /v2/uploads/{id}.
	UploadResult struct {
		ObjectPath string `json:"object_path"`
		Size       int64  `json:"size"`
		SHA256     string `json:"sha256"`
	}
	// RevisionLogs is the JSON answer of a revision's log.
	RevisionLogs struct {
		Logs     []LogEntry `json:"logs"`
		Status   string     `json:"status"`
		IsActive bool       `json:"is_active"`
	}
	// DeploymentLogs is the JSON answer of a deployment's agent output.
	DeploymentLogs struct {
		Logs             []LogEntry `json:"logs"`
		ActiveRevisionID *string    `json:"active_revision_id"`
	}
	// PhaseLogs is the answer of the build_logs and deploy_logs endpoints.
	PhaseLogs struct {
		Logs       []LogEntry `json:"logs"`
		NextOffset *string    `json:"next_offset"`
	}
	// PhaseLogQuery is their body.
	PhaseLogQuery = logQuery
)

// OpenAPIEnums are the enums the validator enforces, for the document.
func OpenAPIEnums() map[string][]string {
	return map[string][]string{
		"Deployment.status": DeploymentStatuses,
		"Deployment.source": {SourceGitHub, SourceExternalDocker, SourceInternalDocker, SourceInternalSource},
		// github is refused: it needs the hosted service's GitHub App.
		"CreateRequest.source":         selfHosted,
		"RevisionView.status":          RevisionStatuses,
		"RevisionLogs.status":          RevisionStatuses,
		"SourceConfig.deployment_type": deploymentTypes,
		"Container.imagePullPolicy":    pullPolicies,
		"Container.restartPolicy":      restartPolicies,
		"LogEntry.phase":               logPhases,
		"Listener.compute_type":        {ComputeTypeK8s},
	}
}

// OpenAPIBounds are the bounds the validator enforces on bodies.
func OpenAPIBounds() map[string]apidoc.Schema {
	return map[string]apidoc.Schema{
		"CreateRequest.name": {"minLength": 1, "maxLength": 63, "pattern": dnsLabelPattern,
			"description": "A lowercase RFC 1123 DNS label: it names the deployment's URL /agents/{name}."},
		"Secret.name":          {"pattern": cIdentPattern, "description": "An environment variable name."},
		"SecretReference.name": {"pattern": cIdentPattern},
	}
}

// OpenAPI describes the control-plane routes Routes registers.
func OpenAPI() []apidoc.Op {
	ws := apidoc.Workspace
	tag := "Deployments"
	page := []apidoc.Param{
		apidoc.IntParam("limit", "Page size.", 1, 100),
		apidoc.IntParam("offset", "Resources to skip.", 0, 0),
	}
	idErr := "Slipway answers 422 when a path id is not a UUID, as the hosted service does."
	follow := []apidoc.Param{
		{Name: "follow", Description: "true: answer as server-sent events and follow new lines (also chosen by Accept: text/event-stream). " +
			"Followed streams are capped per credential and in all (SLIPWAY_LOG_FOLLOWERS_PER_CREDENTIAL, SLIPWAY_LOG_FOLLOWERS_MAX): one more is answered 429 with Retry-After."},
		{Name: "last_event_id", Description: "Resume a followed log after this event id (or the Last-Event-ID header)."},
	}
	logsResp := func(body any) []apidoc.Resp {
		return []apidoc.Resp{{Status: 200, Body: body, Stream: true, Description: "The stored lines as JSON; with follow, a text/event-stream of `log` events (data: a LogEntry) ending with an `end` event."}}
	}
	ops := []apidoc.Op{
		{Method: "GET", Path: "/v2/deployments", ID: "list_deployments", Summary: "List deployments", Tag: tag, Security: ws,
			Query: append(page,
				apidoc.Param{Name: "name_contains", Description: "Case-insensitive substring of the name."},
				apidoc.Param{Name: "status", Description: "Comma-separated deployment statuses: " + strings.Join(DeploymentStatuses, ", ") + "."},
				apidoc.Param{Name: "deployment_type", Description: "Comma-separated: dev_free, dev, prod."},
				apidoc.Param{Name: "deployment_ids", Description: "Comma-separated deployment ids."},
				apidoc.Param{Name: "image_version"},
				apidoc.Param{Name: "cursor", Description: "Slipway's own: the next_cursor of the page before. The page starts after the deployment it names, at the cost of the page whatever the depth (an offset costs the deployments it skips); not combined with offset."}),
			Responses: []apidoc.Resp{{Status: 200, Body: DeploymentList{}, Description: "Newest first. `offset` is the value to pass for the next page; Slipway adds `next_cursor` (null after the last page)."}}},
		{Method: "POST", Path: "/v2/deployments", ID: "create_deployment", Summary: "Create a deployment", Tag: tag, Security: ws,
			Description: "Creates the deployment and its first revision. Slipway builds internal_source (an uploaded archive) and internal_docker/external_docker images itself; github sources are accepted only with a configured integration.",
			Body:        CreateRequest{}, Responses: []apidoc.Resp{{Status: 201, Body: Deployment{}}}},
		{Method: "GET", Path: "/v2/deployments/:id", ID: "get_deployment", Summary: "Get a deployment", Tag: tag, Security: ws,
			Description: "Slipway adds `url` (where the agent is served) and `health` to the hosted shape. " + idErr,
			Responses:   []apidoc.Resp{{Status: 200, Body: Deployment{}}}},
		{Method: "PATCH", Path: "/v2/deployments/:id", ID: "patch_deployment", Summary: "Update a deployment", Tag: tag, Security: ws,
			Description: "A change of source_revision_config (or of secrets) creates a new revision.",
			Body:        PatchRequest{}, Responses: []apidoc.Resp{{Status: 200, Body: Deployment{}}}},
		{Method: "DELETE", Path: "/v2/deployments/:id", ID: "delete_deployment", Summary: "Delete a deployment", Tag: tag, Security: ws,
			Query:     []apidoc.Param{{Name: "delete_tracing_project", Description: "true: also delete the tracing project named after the deployment."}},
			Responses: []apidoc.Resp{{Status: 204}}},
		{Method: "GET", Path: "/v2/deployments/:id/revisions", ID: "list_revisions", Summary: "List a deployment's revisions", Tag: tag, Security: ws,
			Query:     append(page, apidoc.Param{Name: "status", Description: "Comma-separated revision statuses: " + strings.Join(RevisionStatuses, ", ") + "."}),
			Responses: []apidoc.Resp{{Status: 200, Body: List[RevisionView]{}, Description: "Newest first; Slipway adds is_active."}}},
		{Method: "GET", Path: "/v2/deployments/:id/revisions/:rid", ID: "get_revision", Summary: "Get a revision", Tag: tag, Security: ws,
			Responses: []apidoc.Resp{{Status: 200, Body: RevisionView{}}}},
		{Method: "POST", Path: "/v2/deployments/:id/revisions/:rid/redeploy", ID: "redeploy_revision", Summary: "Redeploy a revision (rollback)", Tag: tag, Security: ws,
			Description: "Creates a new revision, a copy of the one named, and answers with the deployment (its latest_revision_id is the new revision).",
			Responses:   []apidoc.Resp{{Status: 200, Body: Deployment{}}}},
		{Method: "GET", Path: "/v2/deployments/:id/revisions/:rid/logs", ID: "revision_logs", Summary: "A revision's build, deploy and agent log", Tag: "Logs", Security: ws,
			Description: "Slipway's own endpoint (the hosted service serves logs from LangSmith).",
			Query:       append([]apidoc.Param{{Name: "phase", Description: "Comma-separated: build, deploy, agent."}}, follow...),
			Responses:   logsResp(RevisionLogs{})},
		{Method: "GET", Path: "/v2/deployments/:id/logs", ID: "deployment_logs", Summary: "A deployment's agent output", Tag: "Logs", Security: ws,
			Description: "Slipway's own endpoint: what the deployment's agent wrote, across its revisions.",
			Query:       append([]apidoc.Param{{Name: "revision_id", Description: "Only this revision's agent output.", Schema: apidoc.Schema{"type": "string", "format": "uuid"}}}, follow...),
			Responses:   logsResp(DeploymentLogs{})},
		{Method: "POST", Path: "/v1/projects/:id/revisions/:rid/build_logs", ID: "build_logs", Summary: "A revision's build log (the deploy client's endpoint)", Tag: "Logs", Security: ws,
			Body: PhaseLogQuery{}, BodyOptional: true, Responses: []apidoc.Resp{{Status: 200, Body: PhaseLogs{}}}},
		{Method: "POST", Path: "/v1/projects/:id/revisions/:rid/deploy_logs", ID: "deploy_logs", Summary: "A revision's deploy log (the deploy client's endpoint)", Tag: "Logs", Security: ws,
			Body: PhaseLogQuery{}, BodyOptional: true, Responses: []apidoc.Resp{{Status: 200, Body: PhaseLogs{}}}},
		{Method: "POST", Path: "/v2/deployments/:id/upload-url", ID: "create_upload_url", Summary: "Get a pre-signed URL for a source archive", Tag: "Uploads", Security: ws,
			Description: "The URL is Slipway's own PUT /v2/uploads/{id} (the hosted service signs a cloud-storage URL); object_path goes into source_revision_config.source_tarball_path.",
			Responses:   []apidoc.Resp{{Status: 200, Body: UploadURLResponse{}}}},
		{Method: "POST", Path: "/deployments/:id/upload-url", ID: "create_upload_url_legacy", Summary: "Get a pre-signed URL for a source archive (the spec's path)", Tag: "Uploads", Security: ws,
			Responses: []apidoc.Resp{{Status: 200, Body: UploadURLResponse{}}}},
		{Method: "PUT", Path: "/v2/uploads/:id", ID: "put_upload", Summary: "Upload a source archive (gzipped tar) to a pre-signed URL", Tag: "Uploads", Public: true,
			Query: []apidoc.Param{{Name: "expires", Required: true, Schema: apidoc.Schema{"type": "integer"}},
				{Name: "signature", Required: true}},
			Description: "Authenticated by the URL's signature alone, single use; the body (a gzipped tar, whatever Content-Type it is sent with) is capped at SLIPWAY_MAX_UPLOAD_MB.",
			Body:        apidoc.Schema{"contentMediaType": "application/gzip"}, BodyType: "*/*",
			Responses: []apidoc.Resp{{Status: 200, Body: UploadResult{}}}},
		{Method: "GET", Path: "/v2/listeners", ID: "list_listeners", Summary: "List listeners", Tag: "Listeners", Security: ws,
			Query: page, Responses: []apidoc.Resp{{Status: 200, Body: List[Listener]{}}}},
		{Method: "POST", Path: "/v2/listeners", ID: "create_listener", Summary: "Create a listener", Tag: "Listeners", Security: ws,
			Body: ListenerCreateRequest{}, Responses: []apidoc.Resp{{Status: 201, Body: Listener{}}}},
		{Method: "GET", Path: "/v2/listeners/:id", ID: "get_listener", Summary: "Get a listener", Tag: "Listeners", Security: ws,
			Responses: []apidoc.Resp{{Status: 200, Body: Listener{}}}},
		{Method: "PATCH", Path: "/v2/listeners/:id", ID: "patch_listener", Summary: "Update a listener", Tag: "Listeners", Security: ws,
			Body: ListenerPatchRequest{}, Responses: []apidoc.Resp{{Status: 200, Body: Listener{}}}},
		{Method: "DELETE", Path: "/v2/listeners/:id", ID: "delete_listener", Summary: "Delete a listener", Tag: "Listeners", Security: ws,
			Responses: []apidoc.Resp{{Status: 204}}},
		{Method: "GET", Path: "/v1/integrations/github/install", ID: "list_github_integrations", Summary: "List GitHub integrations", Tag: "Integrations", Security: ws,
			Description: "Always empty: Slipway has no GitHub App.", Responses: []apidoc.Resp{{Status: 200, Body: []GithubIntegration{}}}},
		{Method: "GET", Path: "/api/v1/sessions", ID: "list_tracer_sessions", Summary: "List tracing projects", Tag: "Tracing projects", Security: ws,
			Query: []apidoc.Param{{Name: "name"}}, Responses: []apidoc.Resp{{Status: 200, Body: []TracingProject{}}}},
		{Method: "PATCH", Path: "/api/v1/sessions/:session_id", ID: "update_tracer_session", Summary: "Update a tracing project", Tag: "Tracing projects", Security: ws,
			Body: apidoc.JSON, Responses: []apidoc.Resp{{Status: 200, Body: TracingProject{}}}},
		{Method: "DELETE", Path: "/api/v1/sessions/:session_id", ID: "delete_tracer_session", Summary: "Delete a tracing project", Tag: "Tracing projects", Security: ws,
			Responses: []apidoc.Resp{{Status: 200, Body: apidoc.JSON}}},
		{Method: "DELETE", Path: "/api/v1/sessions", ID: "delete_tracer_sessions", Summary: "Delete tracing projects", Tag: "Tracing projects", Security: ws,
			Query: []apidoc.Param{{Name: "session_ids", Description: "The ids to delete (repeated)."}}, Responses: []apidoc.Resp{{Status: 200, Body: apidoc.JSON}}},
	}
	// The hosted service's parameter names.
	for i := range ops {
		switch {
		case strings.HasPrefix(ops[i].Path, "/v2/listeners"):
			ops[i].PathNames = map[string]string{"id": "listener_id"}
		case strings.HasPrefix(ops[i].Path, "/v2/uploads"):
			ops[i].PathNames = map[string]string{"id": "upload_id"}
		case strings.Contains(ops[i].Path, "/:id"):
			ops[i].PathNames = map[string]string{"id": "deployment_id", "rid": "revision_id"}
		}
	}
	return ops
}
