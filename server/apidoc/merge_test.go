package apidoc

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// TestMerge: the custom routes' operations join the document, win over
// the API's on the same path and method, keep the API's other methods;
// components merge by name; what is not an operation is dropped; a
// document that is not JSON is an error.
func TestMerge(t *testing.T) {
	base := `{"openapi":"3.1.0","info":{"title":"API","version":"1"},"tags":[{"name":"Threads"}],
		"paths":{"/threads":{"post":{"summary":"create"}}},"components":{"schemas":{"Thread":{"type":"object"}}}}`
	for _, tc := range []struct {
		name, extra string
		want        map[string]any // JSON paths (dot-separated) to the value wanted; nil value: absent
		err         string
	}{
		{"a new path", `{"paths":{"/custom/hello":{"get":{"summary":"hi"}}}}`,
			map[string]any{"paths./custom/hello.get.summary": "hi", "paths./threads.post.summary": "create", "info.title": "API"}, ""},
		{"a method beside the API's", `{"paths":{"/threads":{"delete":{"summary":"app's"}}}}`,
			map[string]any{"paths./threads.delete.summary": "app's", "paths./threads.post.summary": "create"}, ""},
		{"the app's operation wins", `{"paths":{"/threads":{"post":{"summary":"shadow"}}}}`,
			map[string]any{"paths./threads.post.summary": "shadow"}, ""},
		{"components and tags", `{"tags":[{"name":"Threads"},{"name":"Custom"}],"components":{"schemas":{"Item":{"type":"string"}}}}`,
			map[string]any{"components.schemas.Item.type": "string", "components.schemas.Thread.type": "object"}, ""},
		{"not operations", `{"paths":{"/x":{"parameters":[],"get":"junk","summary":"s"},"/y":7}}`,
			map[string]any{"paths./x": nil, "paths./y": nil}, ""},
		{"not JSON", `{"paths":`, nil, "custom routes' document"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := Merge([]byte(base), []byte(tc.extra))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v; want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var doc map[string]any
			if err := json.Unmarshal(out, &doc); err != nil {
				t.Fatal(err)
			}
			for path, want := range tc.want {
				var v any = doc
				for _, k := range strings.Split(path, ".") {
					m, _ := v.(map[string]any)
					v = m[k]
				}
				if want == nil && v != nil || want != nil && !reflect.DeepEqual(v, want) {
					t.Errorf("%s = %v; want %v", path, v, want)
				}
			}
			if _, err := RenderHTML(out, "openapi.json"); err != nil {
				t.Errorf("the merged document does not render: %v", err)
			}
		})
	}
}
