package apidoc

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
)

// operationKeys are the keys of an OpenAPI path item that are operations.
var operationKeys = map[string]bool{"get": true, "put": true, "post": true, "delete": true,
	"options": true, "head": true, "patch": true, "trace": true}

// Merge adds extra, another OpenAPI document (a deployment's custom
// routes), to doc, as the reference server merges the custom app's
// document into its own: extra's operation wins where both have one
// (its route shadows the API's), components merge by name with extra's
// winning, tags are added once. doc's info stays. Path items keep their
// operations only, and an operation that is not an object is dropped, so
// that what the app's framework generated cannot break the page.
func Merge(doc, extra []byte) ([]byte, error) {
	var base map[string]any
	if err := json.Unmarshal(doc, &base); err != nil {
		return nil, fmt.Errorf("reading the document: %w", err)
	}
	var add map[string]any
	if err := json.Unmarshal(extra, &add); err != nil {
		return nil, fmt.Errorf("reading the custom routes' document: %w", err)
	}
	paths, _ := base["paths"].(map[string]any)
	if paths == nil {
		paths = map[string]any{}
		base["paths"] = paths
	}
	addPaths, _ := add["paths"].(map[string]any)
	for _, p := range slices.Sorted(maps.Keys(addPaths)) {
		item, _ := addPaths[p].(map[string]any)
		into, _ := paths[p].(map[string]any)
		if into == nil {
			into = map[string]any{}
		}
		for m, op := range item {
			if o, ok := op.(map[string]any); ok && operationKeys[m] {
				into[m] = o
			}
		}
		if len(into) > 0 {
			paths[p] = into
		}
	}
	if comps, ok := add["components"].(map[string]any); ok {
		into, _ := base["components"].(map[string]any)
		if into == nil {
			into = map[string]any{}
			base["components"] = into
		}
		for kind, v := range comps {
			defs, ok := v.(map[string]any)
			if !ok {
				continue
			}
			have, _ := into[kind].(map[string]any)
			if have == nil {
				have = map[string]any{}
				into[kind] = have
			}
			maps.Copy(have, defs)
		}
	}
	if tags, ok := add["tags"].([]any); ok {
		have, _ := base["tags"].([]any)
		seen := map[string]bool{}
		for _, t := range have {
			if m, ok := t.(map[string]any); ok {
				seen[fmt.Sprint(m["name"])] = true
			}
		}
		for _, t := range tags {
			if m, ok := t.(map[string]any); ok && !seen[fmt.Sprint(m["name"])] {
				seen[fmt.Sprint(m["name"])] = true
				have = append(have, m)
			}
		}
		base["tags"] = have
	}
	return json.Marshal(base)
}

// NewMergedHandlers is NewHandlers for d's document with extra merged
// in (see Merge). A document extra cannot be merged with, or whose page
// cannot be rendered, is left out: the API's own document is served, and
// the error is returned for the caller to log.
func NewMergedHandlers(d *Doc, jsonPath string, extra []byte) (*Handlers, error) {
	h := NewHandlers(d, jsonPath)
	if h.err != nil || len(extra) == 0 {
		return h, nil
	}
	merged, err := Merge(h.json, extra)
	if err != nil {
		return h, err
	}
	page, err := RenderHTML(merged, jsonPath)
	if err != nil {
		return h, fmt.Errorf("rendering the merged document: %w", err)
	}
	h.json, h.html = merged, page
	return h, nil
}
