package server

import (
	"context"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/julienschmidt/httprouter"

	"slipway/runtime"
	"slipway/server/auth"
	"slipway/server/controlplane"
	"slipway/server/httpx"
)

// proxy serves each deployment's agent API at /agents/{name}/...: the
// caller needs an API key of the deployment's workspace, which is removed
// before the request reaches the agent; requests wait at the gate while a
// revision is being handed over; SSE responses stream unbuffered.
type proxy struct {
	cp     *controlplane.Service
	driver runtime.Driver
	gate   *runtime.Gate
	// handoverWait bounds how long a request waits for a handover.
	handoverWait time.Duration

	once sync.Once
	rp   *httputil.ReverseProxy
}

type targetKey struct{}

type target struct {
	dep  string
	base *url.URL
	path string
}

// reverseProxy is built once: one keep-alive transport for every agent.
// Server-sent events still stream: ReverseProxy flushes text/event-stream
// responses as they are written.
func (p *proxy) reverseProxy() *httputil.ReverseProxy {
	p.once.Do(func() {
		p.rp = &httputil.ReverseProxy{
			BufferPool: bufferPool{},
			Transport:  &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 90 * time.Second, DisableCompression: true},
			Rewrite: func(pr *httputil.ProxyRequest) {
				t := pr.In.Context().Value(targetKey{}).(target)
				pr.SetURL(t.base)
				pr.Out.URL.Path = t.path
				pr.Out.URL.RawPath = ""
				pr.Out.Header.Del("X-Api-Key")
				pr.Out.Header.Del("X-Tenant-Id")
				pr.SetXForwarded()
			},
			ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
				if r.Context().Err() != nil {
					return // the client went away; its disconnect reached the agent
				}
				// A container restarted by its restart policy may come back
				// at another address: look it up again for the next request.
				if rf, ok := p.driver.(runtime.Refresher); ok {
					rf.Refresh(r.Context().Value(targetKey{}).(target).dep)
				}
				httpx.WriteJSON(w, http.StatusBadGateway, map[string]any{"detail": "The deployment's agent server did not answer: " + err.Error()})
			},
		}
	})
	return p.rp
}

func (p *proxy) serve(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	pr := auth.From(r)
	name := ps.ByName("name")
	dep, ok := p.cp.DeploymentByName(pr.WorkspaceID, name)
	if !ok {
		return httpx.NotFound("Deployment %q not found.", name)
	}
	ctx, cancel := context.WithTimeout(r.Context(), p.handoverWait)
	err := p.gate.Wait(ctx, dep)
	cancel()
	if err != nil {
		return httpx.Errorf(http.StatusServiceUnavailable, "Deployment %q is switching revisions; try again.", name)
	}
	endpoint, ok := p.driver.Endpoint(dep)
	if !ok {
		return httpx.Errorf(http.StatusServiceUnavailable, "Deployment %q has no running revision.", name)
	}
	base, err := url.Parse(endpoint)
	if err != nil {
		return err
	}
	t := target{dep: dep, base: base, path: "/" + strings.TrimPrefix(ps.ByName("path"), "/")}
	r = r.WithContext(context.WithValue(r.Context(), targetKey{}, t))
	rp := p.reverseProxy()
	rp.ServeHTTP(w, r)
	return nil
}

// bufferPool reuses the proxy's copy buffers; without one, ReverseProxy
// allocates 32 KiB per request.
type bufferPool struct{}

var copyBuffers = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

func (bufferPool) Get() []byte  { return *copyBuffers.Get().(*[]byte) }
func (bufferPool) Put(b []byte) { copyBuffers.Put(&b) }
