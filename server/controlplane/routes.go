package controlplane

import (
	"net/http"

	"github.com/julienschmidt/httprouter"

	"slipway/server/auth"
	"slipway/server/httpx"
)

// Routes registers the control-plane API under prefix ("" and "/api-host").
// Every route passes auth.Guard, which decides read-only access from the
// method (or the route's declared auth.Read); tr routes are tracked
// operations, whose refusals are audited.
func (s *Service) Routes(rt *httpx.Router, res auth.Resolver, prefix string) {
	ws := func(h httpx.Handle) httprouter.Handle { return auth.Require(res, true, withHTTPErrors(h)) }
	tr := func(op string, h httpx.Handle) httprouter.Handle {
		return auth.Guard(res, auth.Policy{Workspace: true}, func(h httpx.Handle) httpx.Handle { return s.Audit.Track(op, h) },
			withHTTPErrors(h))
	}
	rt.GET(prefix+"/v2/deployments", ws(s.listDeployments))
	rt.POST(prefix+"/v2/deployments", tr("create_deployment", s.createDeployment))
	rt.GET(prefix+"/v2/deployments/:id", ws(s.getDeployment))
	rt.PATCH(prefix+"/v2/deployments/:id", tr("update_deployment", s.patchDeployment))
	rt.DELETE(prefix+"/v2/deployments/:id", tr("delete_deployment", s.deleteDeployment))
	rt.GET(prefix+"/v2/deployments/:id/revisions", ws(s.listRevisions))
	rt.GET(prefix+"/v2/deployments/:id/revisions/:rid", ws(s.getRevisionHandler))
	// A redeploy changes which revision the deployment runs: an update.
	rt.POST(prefix+"/v2/deployments/:id/revisions/:rid/redeploy", tr("update_deployment", s.redeploy))
	rt.GET(prefix+"/v2/deployments/:id/revisions/:rid/logs", ws(s.revisionLogs))
	rt.GET(prefix+"/v2/deployments/:id/logs", ws(s.deploymentLogs))
	rt.POST(prefix+"/v1/projects/:id/revisions/:rid/build_logs", auth.RequireRead(res, withHTTPErrors(s.phaseLogs("build"))))
	rt.POST(prefix+"/v1/projects/:id/revisions/:rid/deploy_logs", auth.RequireRead(res, withHTTPErrors(s.phaseLogs("deploy"))))
	rt.POST(prefix+"/v2/deployments/:id/upload-url", ws(s.createUploadURL))
	rt.POST(prefix+"/deployments/:id/upload-url", ws(s.createUploadURL))
	rt.GET(prefix+"/v2/listeners", ws(s.listListeners))
	rt.POST(prefix+"/v2/listeners", ws(s.createListener))
	rt.GET(prefix+"/v2/listeners/:id", ws(s.getListener))
	rt.PATCH(prefix+"/v2/listeners/:id", ws(s.patchListener))
	rt.DELETE(prefix+"/v2/listeners/:id", ws(s.deleteListener))
	rt.GET(prefix+"/v1/integrations/github/install", ws(s.githubInstall))
	rt.GET(prefix+"/api/v1/sessions", ws(s.listTracingProjects))
	rt.PATCH(prefix+"/api/v1/sessions/:session_id", tr("update_tracer_session", s.updateTracingProject))
	rt.DELETE(prefix+"/api/v1/sessions/:session_id", tr("delete_tracer_session", s.deleteTracingProjectHandler))
	rt.DELETE(prefix+"/api/v1/sessions", tr("delete_tracer_sessions", s.deleteTracingProjects))
	// Pre-signed: the signature in the URL is the only credential.
	rt.PUT(prefix+"/v2/uploads/:id", httpx.Adapt(withHTTPErrors(s.putUpload)))
}

// withHTTPErrors answers the store's domain errors (*errs.Error) in the
// API's shape, by httpx.FromDomain: the one table where the domain
// vocabulary becomes HTTP statuses.
func withHTTPErrors(h httpx.Handle) httpx.Handle {
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
		return httpx.FromDomain(h(w, r, ps))
	}
}
