package agentapi

import (
	"errors"
	"net/http"
	"strings"

	"github.com/julienschmidt/httprouter"

	"slipway/runtime/agent"
	"slipway/server/httpx"
)

func (a *API) storeRoutes(rt *httpx.Router, h func(httpx.Handle) httprouter.Handle) {
	rt.PUT("/store/items", h(a.putItem))
	rt.GET("/store/items", h(a.getItem))
	rt.DELETE("/store/items", h(a.deleteItem))
	rt.POST("/store/items/search", h(a.searchItems))
	rt.POST("/store/namespaces", h(a.listNamespaces))
}

func (a *API) putItem(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	var b struct {
		Namespace []string       `json:"namespace"`
		Key       string         `json:"key"`
		Value     map[string]any `json:"value"`
	}
	if err := decode(r, &b); err != nil {
		return err
	}
	if b.Value == nil {
		return httpx.Errorf(http.StatusUnprocessableEntity, "value must be an object")
	}
	if err := a.Engine.PutItem(b.Namespace, b.Key, b.Value); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// namespace reads ?namespace=a.b (the SDK joins labels with periods).
func namespace(r *http.Request) []string {
	v := r.URL.Query().Get("namespace")
	if v == "" {
		return nil
	}
	return strings.Split(v, ".")
}

// getItem answers a missing item with 200 and null, as the reference
// servers do: the JS SDK's getItem turns that body into null, while a 404
// would throw in every client that checks whether a key exists.
func (a *API) getItem(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	it, err := a.Engine.GetItem(namespace(r), r.URL.Query().Get("key"))
	if errors.Is(err, agent.ErrNotFound) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte("null\n"))
		return nil
	}
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, it)
	return nil
}

func (a *API) deleteItem(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	var b struct {
		Namespace []string `json:"namespace"`
		Key       string   `json:"key"`
	}
	if err := decode(r, &b); err != nil {
		return err
	}
	if b.Namespace == nil {
		b.Namespace, b.Key = namespace(r), r.URL.Query().Get("key")
	}
	if err := a.Engine.DeleteItem(b.Namespace, b.Key); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (a *API) searchItems(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	var b struct {
		Prefix []string       `json:"namespace_prefix"`
		Filter map[string]any `json:"filter"`
		Query  string         `json:"query"`
		Limit  int            `json:"limit"`
		Offset int            `json:"offset"`
	}
	if err := decode(r, &b); err != nil {
		return err
	}
	if err := limitOffset(&b.Limit, &b.Offset, 10); err != nil {
		return err
	}
	items, err := a.Engine.SearchItems(b.Prefix, b.Filter, b.Query, b.Limit, b.Offset)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"items": items})
	return nil
}

func (a *API) listNamespaces(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	var b struct {
		Prefix   []string `json:"prefix"`
		MaxDepth int      `json:"max_depth"`
		Limit    int      `json:"limit"`
		Offset   int      `json:"offset"`
	}
	if err := decode(r, &b); err != nil {
		return err
	}
	if err := limitOffset(&b.Limit, &b.Offset, 100); err != nil {
		return err
	}
	ns, err := a.Engine.ListNamespaces(b.Prefix, b.MaxDepth, b.Limit, b.Offset)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"namespaces": ns})
	return nil
}
