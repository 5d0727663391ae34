package agentapi

import (
	"net/http"

	"github.com/julienschmidt/httprouter"

	"slipway/server/apidoc"
	"slipway/server/httpx"
)

// Handler routes every endpoint.
func (a *API) Handler() http.Handler {
	rt := httpx.Record(httpx.NewRouter())
	if m := a.Engine.Metrics; m != nil {
		rt.Wrap = countRequests(m.HTTPRequests)
	}
	a.routes(rt)
	var h http.Handler = rt
	if len(a.Disabled) > 0 {
		h = a.withoutDisabled(h)
	}
	if a.Engine.HasHTTPApp() {
		h = a.appFirst(rt)
	}
	return a.withMetrics(httpx.LimitBody(a.traced(h, rt), a.MaxBody))
}

// routes registers every endpoint on rt (the tests read them back to
// compare with the OpenAPI document). Every handler's errors pass
// a.errors, which maps the engine's to statuses.
func (a *API) routes(rt *httpx.Router) {
	h := func(fn httpx.Handle) httprouter.Handle { return httpx.Adapt(a.errors(fn)) }
	rt.GET("/ok", h(func(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
		return reply(w)(map[string]any{"ok": true}, nil)
	}))
	rt.GET("/info", h(a.info))
	// The document lists the project's custom routes too, as the
	// reference's does.
	doc, err := apidoc.NewMergedHandlers(OpenAPIDoc(a.Version), "openapi.json", a.Engine.AppOpenAPI())
	if err != nil {
		a.Engine.Log.Warn().Err(err).Msg("the custom routes' OpenAPI document is left out of /openapi.json")
	}
	rt.GET("/openapi.json", func(w http.ResponseWriter, r *http.Request, _ httprouter.Params) { doc.JSON(w, r) })
	rt.GET("/docs", func(w http.ResponseWriter, r *http.Request, _ httprouter.Params) { doc.HTML(w, r) })

	// httprouter cannot hold /assistants/search beside
	// /assistants/:assistant_id (nor /threads/search beside
	// /threads/:thread_id), so the static names dispatch on the wildcard's
	// value.
	rt.POST("/assistants", h(a.createAssistant))
	rt.POST("/assistants/:assistant_id", h(searchOrCount("assistant_id", a.searchAssistants)))
	rt.GET("/assistants/:assistant_id", h(a.getAssistant))
	rt.PATCH("/assistants/:assistant_id", h(a.patchAssistant))
	rt.DELETE("/assistants/:assistant_id", h(a.deleteAssistant))
	rt.GET("/assistants/:assistant_id/graph", h(a.assistantGraph))
	rt.GET("/assistants/:assistant_id/schemas", h(a.assistantSchemas))
	rt.GET("/assistants/:assistant_id/subgraphs", h(a.assistantSubgraphs))
	rt.GET("/assistants/:assistant_id/subgraphs/:namespace", h(a.assistantSubgraphs))
	rt.POST("/assistants/:assistant_id/versions", h(a.assistantVersions))
	rt.POST("/assistants/:assistant_id/latest", h(a.setLatestVersion))

	rt.POST("/threads", h(a.createThread))
	rt.POST("/threads/:thread_id", h(a.pruneOr(searchOrCount("thread_id", a.searchThreads))))
	rt.GET("/threads/:thread_id", h(onThread(a.getThread)))
	rt.PATCH("/threads/:thread_id", h(onThread(a.patchThread)))
	rt.DELETE("/threads/:thread_id", h(onThread(a.deleteThread)))
	rt.GET("/threads/:thread_id/state", h(onThread(a.getState)))
	rt.GET("/threads/:thread_id/state/:checkpoint_id", h(onThread(a.getState)))
	rt.POST("/threads/:thread_id/state", h(onThread(a.updateState)))
	// The SDK asks for a state by checkpoint object at .../state/checkpoint.
	rt.POST("/threads/:thread_id/state/:checkpoint_id", h(a.stateAtCheckpoint))
	rt.GET("/threads/:thread_id/history", h(onThread(a.history)))
	rt.POST("/threads/:thread_id/history", h(onThread(a.history)))
	rt.POST("/threads/:thread_id/copy", h(onThread(a.copyThread)))

	// Stateless runs: /runs, /runs/stream, /runs/wait, and /runs/batch.
	rt.POST("/runs", h(func(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
		return a.createRun(w, r, "", "")
	}))
	rt.POST("/runs/:action", h(func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
		switch ps.ByName("action") {
		case "batch":
			return a.batchRuns(w, r)
		case "crons":
			return a.createCron(w, r, "")
		case "cancel":
			return a.cancelRuns(w, r)
		}
		return a.createRun(w, r, "", ps.ByName("action"))
	}))
	// Crons: /runs/crons/{search,count} (POST) and /runs/crons/{cron_id}.
	rt.POST("/runs/:action/:cron_id", h(a.onCron))
	rt.GET("/runs/:action/:cron_id", h(a.onCron))
	rt.PATCH("/runs/:action/:cron_id", h(a.onCron))
	rt.DELETE("/runs/:action/:cron_id", h(a.onCron))
	rt.POST("/threads/:thread_id/runs", h(onThread(func(w http.ResponseWriter, r *http.Request, _ httprouter.Params, thread string) error {
		return a.createRun(w, r, thread, "")
	})))
	rt.GET("/threads/:thread_id/runs", h(onThread(a.listRuns)))
	// /runs/stream and /runs/wait share the position of :run_id.
	rt.POST("/threads/:thread_id/runs/:run_id", h(onThread(func(w http.ResponseWriter, r *http.Request, ps httprouter.Params, thread string) error {
		if ps.ByName("run_id") == "crons" {
			return a.createCron(w, r, thread)
		}
		return a.createRun(w, r, thread, ps.ByName("run_id"))
	})))
	rt.GET("/threads/:thread_id/runs/:run_id", h(onRun(a.getRun)))
	rt.DELETE("/threads/:thread_id/runs/:run_id", h(onRun(a.deleteRun)))
	rt.GET("/threads/:thread_id/runs/:run_id/join", h(onRun(a.joinRun)))
	rt.GET("/threads/:thread_id/runs/:run_id/stream", h(onRun(a.joinStream)))
	rt.POST("/threads/:thread_id/runs/:run_id/cancel", h(onRun(a.cancelRun)))

	rt.POST("/ui/:graph_id", h(a.uiHTML))
	rt.GET("/ui/:graph_id/:file", h(a.uiFile))

	rt.PUT("/store/items", h(a.putItem))
	rt.GET("/store/items", h(a.getItem))
	rt.DELETE("/store/items", h(a.deleteItem))
	rt.POST("/store/items/search", h(a.searchItems))
	rt.POST("/store/namespaces", h(a.listNamespaces))
}

// searchOrCount serves POST /{resource}/search and /{resource}/count on the
// route whose wildcard is param; any other value of it has no POST.
func searchOrCount(param string, search func(w http.ResponseWriter, r *http.Request, count bool) error) httpx.Handle {
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
		switch ps.ByName(param) {
		case "search":
			return search(w, r, false)
		case "count":
			return search(w, r, true)
		}
		return httpx.Errorf(http.StatusMethodNotAllowed, "Method Not Allowed")
	}
}

// onThread validates the thread_id path parameter for a handler of one
// thread.
func onThread(fn func(w http.ResponseWriter, r *http.Request, ps httprouter.Params, thread string) error) httpx.Handle {
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
		id, err := threadID(ps)
		if err != nil {
			return err
		}
		return fn(w, r, ps, id)
	}
}

// onRun validates the thread_id and run_id path parameters for a handler
// of one run.
func onRun(fn func(w http.ResponseWriter, r *http.Request, thread, run string) error) httpx.Handle {
	return onThread(func(w http.ResponseWriter, r *http.Request, ps httprouter.Params, thread string) error {
		id, err := runID(ps)
		if err != nil {
			return err
		}
		return fn(w, r, thread, id)
	})
}

// reply answers 200 with v, or passes err on to the error mapping; it
// takes an engine call's two results as they come:
// reply(w)(a.Engine.GetThread(id)).
func reply(w http.ResponseWriter) func(v any, err error) error {
	return func(v any, err error) error {
		if err != nil {
			return err
		}
		httpx.WriteJSON(w, http.StatusOK, v)
		return nil
	}
}

// noContent answers 204, or passes err on to the error mapping.
func noContent(w http.ResponseWriter, err error) error {
	if err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// replyCount answers a /count request with n and a /search request with
// list.
func replyCount[T any](w http.ResponseWriter, count bool, list []T, n int, err error) error {
	if count {
		return reply(w)(n, err)
	}
	if list == nil {
		list = []T{}
	}
	return reply(w)(list, err)
}
