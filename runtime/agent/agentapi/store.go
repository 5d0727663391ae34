package agentapi

import (
	"errors"
	"net/http"
	"strings"

	"github.com/julienschmidt/httprouter"

	"slipway/runtime/agent"
	"slipway/server/httpx"
)

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
		return httpx.Unprocessable("value must be an object")
	}
	return noContent(w, a.Engine.PutItem(b.Namespace, b.Key, b.Value))
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
	return reply(w)(it, err)
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
	return noContent(w, a.Engine.DeleteItem(b.Namespace, b.Key))
}

func (a *API) searchItems(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	var b struct {
		Prefix []string       `json:"namespace_prefix"`
		Filter map[string]any `json:"filter"`
		Query  string         `json:"query"`
		page
	}
	if err := decodePage(r, &b, &b.page, 10); err != nil {
		return err
	}
	items, err := a.Engine.SearchItems(b.Prefix, b.Filter, b.Query, b.Limit, b.Offset)
	return reply(w)(map[string]any{"items": items}, err)
}

func (a *API) listNamespaces(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	var b struct {
		Prefix   []string `json:"prefix"`
		MaxDepth int      `json:"max_depth"`
		page
	}
	if err := decodePage(r, &b, &b.page, 100); err != nil {
		return err
	}
	ns, err := a.Engine.ListNamespaces(b.Prefix, b.MaxDepth, b.Limit, b.Offset)
	return reply(w)(map[string]any{"namespaces": ns}, err)
}
