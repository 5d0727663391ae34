package controlplane

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"

	"slipway/server/servertest"
)

// The Test functions that drive these checks live in package
// controlplane_test (validate_http_test.go), which may start the control
// plane in-process (package apptest imports this package); the case
// tables they replay are this package's own.

// HTTPErrs is httpErrs for the external tests.
var HTTPErrs = httpErrs

// httpErrs returns the (loc, type) pairs of a 422 response, checking each
// has a message.
func httpErrs(t *testing.T, r *servertest.Response) []string {
	t.Helper()
	if r.Status != 422 {
		t.Fatalf("status %d, want 422: %s", r.Status, r.Body)
	}
	var body struct {
		Detail []struct {
			Loc  []any  `json:"loc"`
			Msg  string `json:"msg"`
			Type string `json:"type"`
		} `json:"detail"`
	}
	if err := json.Unmarshal(r.Body, &body); err != nil {
		t.Fatalf("422 body is not an HTTPValidationError: %s", r.Body)
	}
	var out []string
	for _, e := range body.Detail {
		if e.Msg == "" {
			t.Errorf("empty msg at %v", e.Loc)
		}
		out = append(out, locKey(e.Loc, e.Type))
	}
	sort.Strings(out)
	return out
}

// locKey renders a loc the same way for wanted ([]any with ints) and
// decoded (JSON numbers) errors.
func locKey(loc []any, typ string) string {
	parts := make([]string, len(loc))
	for i, l := range loc {
		switch v := l.(type) {
		case float64:
			parts[i] = fmt.Sprint(int(v))
		default:
			parts[i] = fmt.Sprint(v)
		}
	}
	return strings.Join(parts, ".") + "|" + typ
}

func wantKeys(want []vWantErr) []string {
	var out []string
	for _, w := range want {
		out = append(out, locKey(w.loc, w.typ))
	}
	sort.Strings(out)
	return out
}

func assertSame(t *testing.T, got, want []string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("errors over HTTP:\n  got  %v\n  want %v", got, want)
	}
}

// CreateRulesOverHTTP sends every refused create case of the
// validator's table to a server: 422 with exactly the same loc/type
// pairs, and nothing created.
func CreateRulesOverHTTP(t *testing.T, s *servertest.Server) {
	for _, tc := range createRuleCases() {
		t.Run(tc.name, func(t *testing.T) {
			var body any = tc.raw
			if tc.raw == "" {
				m := vBase(tc.src)
				if tc.mut != nil {
					tc.mut(m)
				}
				body = string(vMustJSON(t, m))
			}
			assertSame(t, httpErrs(t, s.Do("POST", "/v2/deployments", body)), wantKeys(tc.want))
		})
	}
	if got := s.Do("GET", "/v2/deployments", nil).Map()["resources"].([]any); len(got) != 0 {
		t.Fatalf("refused creates stored %d deployments", len(got))
	}
}

// PatchRulesOverHTTP sends every refused PATCH case to a real
// deployment of the case's source, and checks the deployment is unchanged.
// Cases whose current deployment is a github one cannot be set up over
// HTTP (github is refused on create) and are covered in-process only.
func PatchRulesOverHTTP(t *testing.T, s *servertest.Server) {
	listener := s.Do("POST", "/v2/listeners", map[string]any{"compute_type": "k8s", "compute_id": "c1",
		"compute_config": map[string]any{"k8s_namespaces": []any{"agents"}}}).Map()["id"].(string)
	deps := map[string]string{}
	for _, src := range []string{SourceInternalSource, SourceInternalDocker, SourceExternalDocker} {
		m := vBase(src)
		m["name"] = "patch-" + strings.ReplaceAll(src, "_", "-")
		switch src {
		case SourceInternalSource:
			vSet(m, "dev", "source_config", "deployment_type")
		case SourceInternalDocker:
			vSet(m, "img:1", "source_revision_config", "image_uri")
		case SourceExternalDocker:
			vSet(m, listener, "source_config", "listener_id")
			vSet(m, "img:1", "source_revision_config", "image_uri")
		}
		r := s.Do("POST", "/v2/deployments", m)
		if r.Status != 201 {
			t.Fatalf("create %s: %d %s", src, r.Status, r.Body)
		}
		deps[src] = r.Map()["id"].(string)
	}
	snapshot := func() string {
		var b strings.Builder
		for _, src := range []string{SourceInternalSource, SourceInternalDocker, SourceExternalDocker} {
			d := s.Do("GET", "/v2/deployments/"+deps[src], nil).Map()
			raw, _ := json.Marshal([]any{d["name"], d["source_config"], d["source_revision_config"], d["secrets"],
				d["secret_references"], d["latest_revision_id"]})
			b.Write(raw)
		}
		return b.String()
	}
	before := snapshot()
	skipped := 0
	for _, tc := range patchRuleCases() {
		if tc.want == nil {
			continue
		}
		if tc.src == SourceGitHub {
			skipped++
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			assertSame(t, httpErrs(t, s.Do("PATCH", "/v2/deployments/"+deps[tc.src], tc.body)), wantKeys(tc.want))
		})
	}
	if after := snapshot(); after != before {
		t.Fatalf("refused PATCHes changed stored deployments:\nbefore %s\nafter  %s", before, after)
	}
	t.Logf("%d github-only PATCH cases are covered in-process only", skipped)
}

// ListenerRulesOverHTTP replays the listener cases.
func ListenerRulesOverHTTP(t *testing.T, s *servertest.Server) {
	l := s.Do("POST", "/v2/listeners", map[string]any{"compute_type": "k8s", "compute_id": "cluster-1",
		"compute_config": map[string]any{"k8s_namespaces": []any{"a"}}})
	if l.Status != 201 {
		t.Fatalf("listener: %d %s", l.Status, l.Body)
	}
	id := l.Map()["id"].(string)
	for _, tc := range listenerCreateCases() {
		if tc.want == nil {
			continue
		}
		t.Run("create "+tc.name, func(t *testing.T) {
			assertSame(t, httpErrs(t, s.Do("POST", "/v2/listeners", tc.body)), wantKeys(tc.want))
		})
	}
	for _, tc := range listenerPatchCases() {
		if tc.want == nil {
			continue
		}
		t.Run("patch "+tc.name, func(t *testing.T) {
			assertSame(t, httpErrs(t, s.Do("PATCH", "/v2/listeners/"+id, tc.body)), wantKeys(tc.want))
		})
	}
	if got := s.Do("GET", "/v2/listeners/"+id, nil).Map(); got["compute_id"] != "cluster-1" ||
		fmt.Sprint(got["compute_config"]) != "map[k8s_namespaces:[a]]" {
		t.Fatalf("refused requests changed the listener: %v", got)
	}
}
