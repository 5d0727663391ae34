package httpx

import (
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
	rt.Router.Handle(method, path, h)
}

// Handler registers a net/http handler for method and path.
func (rt *Router) Handler(method, path string, h http.Handler) {
	rt.record(method, path)
	rt.Router.Handler(method, path, h)
}

// HandlerFunc registers a net/http handler function for method and path.
func (rt *Router) HandlerFunc(method, path string, h http.HandlerFunc) { rt.Handler(method, path, h) }

// ServeFiles serves files under path (which ends in /*filepath) from root.
func (rt *Router) ServeFiles(path string, root http.FileSystem) {
	rt.record(http.MethodGet, path)
	rt.Router.ServeFiles(path, root)
}

func (rt *Router) GET(path string, h httprouter.Handle)     { rt.Handle(http.MethodGet, path, h) }
func (rt *Router) HEAD(path string, h httprouter.Handle)    { rt.Handle(http.MethodHead, path, h) }
func (rt *Router) OPTIONS(path string, h httprouter.Handle) { rt.Handle(http.MethodOptions, path, h) }
func (rt *Router) POST(path string, h httprouter.Handle)    { rt.Handle(http.MethodPost, path, h) }
func (rt *Router) PUT(path string, h httprouter.Handle)     { rt.Handle(http.MethodPut, path, h) }
func (rt *Router) PATCH(path string, h httprouter.Handle)   { rt.Handle(http.MethodPatch, path, h) }
func (rt *Router) DELETE(path string, h httprouter.Handle)  { rt.Handle(http.MethodDelete, path, h) }
