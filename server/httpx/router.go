package httpx

import (
	"context"
	"net/http"
	"sync"

	"github.com/julienschmidt/httprouter"
)

// Route is one registered (method, path pattern) pair.
type Route struct {
	Method string
	Path   string
}

// Router is an httprouter.Router that remembers every route registered on
// it. httprouter cannot list its routes, and the authorization tests must
// enumerate the real registrations so that a new route without a test case
// fails them. Every registration method of the embedded router is
// shadowed here, so nothing reaches it unrecorded.
type Router struct {
	*httprouter.Router

	// Wrap, when set before the first registration, wraps every route's
	// handler, told the route's method and pattern (metrics label requests
	// by pattern, not by raw path).
	Wrap func(method, path string, h httprouter.Handle) httprouter.Handle

	mu     sync.Mutex
	routes []Route
}

// Record wraps rt (typically from NewRouter) into a recording Router.
func Record(rt *httprouter.Router) *Router { return &Router{Router: rt} }

// Routes returns the registered routes in registration order.
func (rt *Router) Routes() []Route {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return append([]Route(nil), rt.routes...)
}

func (rt *Router) record(method, path string) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	rt.routes = append(rt.routes, Route{Method: method, Path: path})
}

// Handle registers h for method and path.
func (rt *Router) Handle(method, path string, h httprouter.Handle) {
	rt.record(method, path)
	if rt.Wrap != nil {
		h = rt.Wrap(method, path, h)
	}
	rt.Router.Handle(method, path, h)
}

// Handler registers a net/http handler for method and path.
func (rt *Router) Handler(method, path string, h http.Handler) {
	if rt.Wrap == nil {
		rt.record(method, path)
		rt.Router.Handler(method, path, h)
		return
	}
	// As httprouter's own Handler: the parameters travel in the context.
	rt.Handle(method, path, func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
		if len(ps) > 0 {
			r = r.WithContext(context.WithValue(r.Context(), httprouter.ParamsKey, ps))
		}
		h.ServeHTTP(w, r)
	})
}

// HandlerFunc registers a net/http handler function for method and path.
func (rt *Router) HandlerFunc(method, path string, h http.HandlerFunc) { rt.Handler(method, path, h) }

// ServeFiles serves files under path (which ends in /*filepath) from root.
func (rt *Router) ServeFiles(path string, root http.FileSystem) {
	if rt.Wrap == nil {
		rt.record(http.MethodGet, path)
		rt.Router.ServeFiles(path, root)
		return
	}
	// As httprouter's own ServeFiles, through Handle so that Wrap sees it.
	files := http.FileServer(root)
	rt.GET(path, func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
		r.URL.Path = ps.ByName("filepath")
		files.ServeHTTP(w, r)
	})
}

func (rt *Router) GET(path string, h httprouter.Handle)     { rt.Handle(http.MethodGet, path, h) }
func (rt *Router) HEAD(path string, h httprouter.Handle)    { rt.Handle(http.MethodHead, path, h) }
func (rt *Router) OPTIONS(path string, h httprouter.Handle) { rt.Handle(http.MethodOptions, path, h) }
func (rt *Router) POST(path string, h httprouter.Handle)    { rt.Handle(http.MethodPost, path, h) }
func (rt *Router) PUT(path string, h httprouter.Handle)     { rt.Handle(http.MethodPut, path, h) }
func (rt *Router) PATCH(path string, h httprouter.Handle)   { rt.Handle(http.MethodPatch, path, h) }
func (rt *Router) DELETE(path string, h httprouter.Handle)  { rt.Handle(http.MethodDelete, path, h) }
