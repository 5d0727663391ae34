package controlplane

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"slipway/server/httpx"
	"slipway/server/httpx/validate"
)

const vTestUUID = "0190f3b2-6c5e-7d3a-9b1c-2f4e5d6a7b8c"

// vBase returns a valid create body (as a generic map) for src.
func vBase(src string) map[string]any {
	m := map[string]any{
		"name":                   "my-agent",
		"source":                 src,
		"source_config":          map[string]any{},
		"source_revision_config": map[string]any{},
		"secrets":                []any{map[string]any{"name": "OPENAI_API_KEY", "value": "sk-1"}},
	}
	switch src {
	case SourceInternalSource, SourceGitHub:
		vSet(m, "langgraph.json", "source_revision_config", "graph_config_path")
	case SourceInternalDocker:
		vSet(m, "registry.example/app:1", "source_revision_config", "image_uri")
	case SourceExternalDocker:
		vSet(m, "registry.example/app:1", "source_revision_config", "image_uri")
		vSet(m, vTestUUID, "source_config", "listener_id")
		vSet(m, map[string]any{"k8s_namespace": "agents"}, "source_config", "listener_config")
		vSet(m, "https://agent.example.com", "source_config", "custom_url")
		m["secret_references"] = []any{map[string]any{"name": "DB_PASSWORD", "secret_name": "db", "secret_key": "password"}}
	}
	return m
}

// vSet puts val at path in m, creating maps on the way; an int element
// indexes an existing list.
func vSet(m map[string]any, val any, path ...any) {
	var cur any = m
	for i, p := range path {
		last := i == len(path)-1
		switch k := p.(type) {
		case string:
			mm := cur.(map[string]any)
			if last {
				mm[k] = val
				return
			}
			if _, ok := mm[k]; !ok || mm[k] == nil {
				mm[k] = map[string]any{}
			}
			cur = mm[k]
		case int:
			arr := cur.([]any)
			if last {
				arr[k] = val
				return
			}
			cur = arr[k]
		}
	}
}

func vDel(m map[string]any, path ...string) {
	var cur = m
	for _, p := range path[:len(path)-1] {
		cur = cur[p].(map[string]any)
	}
	delete(cur, path[len(path)-1])
}

func vMustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type vWantErr struct {
	loc []any
	typ string
}

func vLocOf(parts ...any) []any { return append([]any{"body"}, parts...) }

// vCheckErrs asserts err is a ValidationError with exactly the wanted
// (loc, type) pairs, in any order.
func vCheckErrs(t *testing.T, err error, want ...vWantErr) {
	t.Helper()
	if len(want) == 0 {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return
	}
	var ve *httpx.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("want ValidationError %v, got %v", want, err)
	}
	got := map[string]int{}
	for _, e := range ve.Errors {
		if e.Msg == "" {
			t.Errorf("empty msg at %v", e.Loc)
		}
		got[fmt.Sprintf("%v|%s", e.Loc, e.Type)]++
	}
	for _, w := range want {
		k := fmt.Sprintf("%v|%s", w.loc, w.typ)
		if got[k] == 0 {
			t.Errorf("missing error %s; got %v", k, ve.Errors)
		}
		got[k]--
	}
	for k, n := range got {
		if n > 0 {
			t.Errorf("unexpected error %s; all: %v", k, ve.Errors)
		}
	}
}

func TestDecodeCreateHappyPaths(t *testing.T) {
	for _, src := range []string{SourceInternalSource, SourceInternalDocker, SourceExternalDocker} {
		t.Run(src, func(t *testing.T) {
			req, err := DecodeCreate(vMustJSON(t, vBase(src)))
			if err != nil {
				t.Fatal(err)
			}
			if req.Name != "my-agent" || req.Source != src || len(req.Secrets) != 1 {
				t.Fatalf("decoded %+v", req)
			}
		})
	}
	// What the official deploy client sends (with the revision fields this
	// validator requires on create), plus its extra fields.
	m := vBase(SourceInternalSource)
	vSet(m, "dev", "source_config", "deployment_type")
	m["revision_source"] = "internal_source"
	m["tracked_packages"] = []any{"langgraph"}
	if _, err := DecodeCreate(vMustJSON(t, m)); err != nil {
		t.Fatal(err)
	}
	// Every optional ResourceSpec shape at once.
	m = vBase(SourceExternalDocker)
	vSet(m, map[string]any{
		"min_scale": 1, "max_scale": 3, "cpu": 0.54, "memory_mb": 512,
		"labels": map[string]any{"team": "a"}, "annotations": map[string]any{"x": "y"},
		"service_account_name": "sa", "image_pull_secrets": []any{map[string]any{"name": "regcred"}},
		"volumes":       []any{map[string]any{"name": "data", "emptyDir": map[string]any{}}},
		"volume_mounts": []any{map[string]any{"name": "data", "mountPath": "/data", "readOnly": true}},
		"init_containers": []any{map[string]any{"name": "init", "image": "busybox", "command": []any{"true"},
			"env": []any{map[string]any{"name": "A", "value": "1"}, map[string]any{"name": "B", "valueFrom": map[string]any{"secretKeyRef": map[string]any{}}}}}},
		"sidecars": []any{map[string]any{"name": "proxy", "image": "envoy", "imagePullPolicy": "IfNotPresent", "restartPolicy": "Always",
			"resources": map[string]any{"limits": map[string]any{"cpu": "1"}}, "volumeMounts": []any{map[string]any{"name": "data", "mountPath": "/d"}}}},
	}, "source_config", "resource_spec")
	req, err := DecodeCreate(vMustJSON(t, m))
	if err != nil {
		t.Fatal(err)
	}
	rs := req.SourceConfig.ResourceSpec
	if *rs.CPU != 0.5 || *rs.CPULimit != 1.0 || *rs.MemoryLimitMB != 1024 || *rs.QueueMinScale != 1 {
		t.Fatalf("not normalized: cpu=%v cpu_limit=%v", *rs.CPU, *rs.CPULimit)
	}
}

// createRuleCase is one create request that a rule refuses.
type createRuleCase struct {
	name string
	src  string
	mut  func(m map[string]any)
	raw  string // used instead of base+mut when vSet
	want []vWantErr
}

// createRuleCases has one case per create rule; validate_http_test.go
// replays them against a real server.
func createRuleCases() []createRuleCase {
	rs := func(m map[string]any, val any, key string) { vSet(m, val, "source_config", "resource_spec", key) }
	rsLoc := func(parts ...any) []any { return vLocOf(append([]any{"source_config", "resource_spec"}, parts...)...) }
	return []createRuleCase{
		// decoding
		{name: "empty body", raw: " ", want: []vWantErr{{vLocOf(), "missing"}}},
		{name: "invalid json", raw: `{"name":`, want: []vWantErr{{vLocOf(), "json_invalid"}}},
		{name: "trailing data", raw: `{} {}`, want: []vWantErr{{vLocOf(), "json_invalid"}}},
		{name: "body not object", raw: `[1]`, want: []vWantErr{{vLocOf(), "dict_type"}}},
		{name: "all required missing", raw: `{}`, want: []vWantErr{
			{vLocOf("name"), "missing"}, {vLocOf("source"), "missing"}, {vLocOf("source_config"), "missing"},
			{vLocOf("source_revision_config"), "missing"}, {vLocOf("secrets"), "missing"}}},
		{name: "unknown top-level field", src: SourceInternalSource, mut: func(m map[string]any) { m["color"] = "red" },
			want: []vWantErr{{vLocOf("color"), "extra_forbidden"}}},
		{name: "unknown nested field", src: SourceInternalSource, mut: func(m map[string]any) {
			rs(m, []any{map[string]any{"name": "data", "bogus": 1}}, "volumes")
		}, want: []vWantErr{{rsLoc("volumes", 0, "bogus"), "extra_forbidden"}}},
		{name: "name wrong type", src: SourceInternalSource, mut: func(m map[string]any) { m["name"] = 5 },
			want: []vWantErr{{vLocOf("name"), "string_type"}}},
		{name: "name null", src: SourceInternalSource, mut: func(m map[string]any) { m["name"] = nil },
			want: []vWantErr{{vLocOf("name"), "string_type"}}},
		{name: "source_config null", src: SourceInternalSource, mut: func(m map[string]any) { m["source_config"] = nil },
			want: []vWantErr{{vLocOf("source_config"), "dict_type"}}},
		{name: "secrets null", src: SourceInternalSource, mut: func(m map[string]any) { m["secrets"] = nil },
			want: []vWantErr{{vLocOf("secrets"), "list_type"}}},
		{name: "cpu wrong type", src: SourceInternalSource, mut: func(m map[string]any) { rs(m, "1", "cpu") },
			want: []vWantErr{{rsLoc("cpu"), "float_type"}}},
		{name: "memory fractional", src: SourceInternalSource, mut: func(m map[string]any) { rs(m, 1.5, "memory_mb") },
			want: []vWantErr{{rsLoc("memory_mb"), "int_type"}}},
		{name: "build_on_push wrong type", src: SourceInternalSource, mut: func(m map[string]any) { vSet(m, "yes", "source_config", "build_on_push") },
			want: []vWantErr{{vLocOf("source_config", "build_on_push"), "bool_type"}}},
		{name: "labels value type", src: SourceInternalSource, mut: func(m map[string]any) { rs(m, map[string]any{"a": 1}, "labels") },
			want: []vWantErr{{rsLoc("labels", "a"), "string_type"}}},
		{name: "volumes not list", src: SourceInternalSource, mut: func(m map[string]any) { rs(m, map[string]any{}, "volumes") },
			want: []vWantErr{{rsLoc("volumes"), "list_type"}}},
		{name: "secret missing value", src: SourceInternalSource, mut: func(m map[string]any) { m["secrets"] = []any{map[string]any{"name": "A"}} },
			want: []vWantErr{{vLocOf("secrets", 0, "value"), "missing"}}},
		{name: "container missing image", src: SourceInternalSource, mut: func(m map[string]any) {
			rs(m, []any{map[string]any{"name": "s"}}, "sidecars")
		}, want: []vWantErr{{rsLoc("sidecars", 0, "image"), "missing"}}},

		// name
		{name: "name empty", src: SourceInternalSource, mut: func(m map[string]any) { m["name"] = "" },
			want: []vWantErr{{vLocOf("name"), "value_error"}}},
		{name: "name uppercase", src: SourceInternalSource, mut: func(m map[string]any) { m["name"] = "MyAgent" },
			want: []vWantErr{{vLocOf("name"), "string_pattern_mismatch"}}},
		{name: "name too long", src: SourceInternalSource, mut: func(m map[string]any) { m["name"] = strings.Repeat("a", 64) },
			want: []vWantErr{{vLocOf("name"), "string_pattern_mismatch"}}},
		{name: "name leading dash", src: SourceInternalSource, mut: func(m map[string]any) { m["name"] = "-a" },
			want: []vWantErr{{vLocOf("name"), "string_pattern_mismatch"}}},

		// source
		{name: "source unknown", src: SourceInternalSource, mut: func(m map[string]any) { m["source"] = "ftp" },
			want: []vWantErr{{vLocOf("source"), "enum"}}},
		{name: "source github", src: SourceGitHub,
			want: []vWantErr{{vLocOf("source"), "enum"}}},
		{name: "revision_source differs", src: SourceInternalSource, mut: func(m map[string]any) { m["revision_source"] = "internal_docker" },
			want: []vWantErr{{vLocOf("revision_source"), "value_error"}}},

		// only for github
		{name: "integration_id on internal_source", src: SourceInternalSource, mut: func(m map[string]any) { vSet(m, vTestUUID, "source_config", "integration_id") },
			want: []vWantErr{{vLocOf("source_config", "integration_id"), "value_error"}}},
		{name: "integration_id not uuid", src: SourceGitHub, mut: func(m map[string]any) { vSet(m, "nope", "source_config", "integration_id") },
			want: []vWantErr{{vLocOf("source"), "enum"}, {vLocOf("source_config", "integration_id"), "uuid_parsing"}}},
		{name: "repo_url on internal_docker", src: SourceInternalDocker, mut: func(m map[string]any) { vSet(m, "https://github.com/a/b", "source_config", "repo_url") },
			want: []vWantErr{{vLocOf("source_config", "repo_url"), "value_error"}}},
		{name: "deployment_type on external_docker", src: SourceExternalDocker, mut: func(m map[string]any) { vSet(m, "dev", "source_config", "deployment_type") },
			want: []vWantErr{{vLocOf("source_config", "deployment_type"), "value_error"}}},
		{name: "deployment_type enum", src: SourceInternalSource, mut: func(m map[string]any) { vSet(m, "huge", "source_config", "deployment_type") },
			want: []vWantErr{{vLocOf("source_config", "deployment_type"), "enum"}}},
		{name: "build_on_push on internal_source", src: SourceInternalSource, mut: func(m map[string]any) { vSet(m, false, "source_config", "build_on_push") },
			want: []vWantErr{{vLocOf("source_config", "build_on_push"), "value_error"}}},
		{name: "repo_ref on internal_source", src: SourceInternalSource, mut: func(m map[string]any) { vSet(m, "main", "source_revision_config", "repo_ref") },
			want: []vWantErr{{vLocOf("source_revision_config", "repo_ref"), "value_error"}}},
		{name: "repo_commit_sha read-only", src: SourceInternalSource, mut: func(m map[string]any) { vSet(m, "abc", "source_revision_config", "repo_commit_sha") },
			want: []vWantErr{{vLocOf("source_revision_config", "repo_commit_sha"), "value_error"}}},
		{name: "build_on_push with tag", src: SourceGitHub, mut: func(m map[string]any) {
			vSet(m, true, "source_config", "build_on_push")
			vSet(m, "refs/tags/v1", "source_revision_config", "repo_ref")
		}, want: []vWantErr{{vLocOf("source"), "enum"}, {vLocOf("source_config", "build_on_push"), "value_error"}}},

		// only for external_docker
		{name: "custom_url on internal_docker", src: SourceInternalDocker, mut: func(m map[string]any) { vSet(m, "https://x", "source_config", "custom_url") },
			want: []vWantErr{{vLocOf("source_config", "custom_url"), "value_error"}}},
		{name: "listener_id on internal_source", src: SourceInternalSource, mut: func(m map[string]any) { vSet(m, vTestUUID, "source_config", "listener_id") },
			want: []vWantErr{{vLocOf("source_config", "listener_id"), "value_error"}}},
		{name: "listener_id not uuid", src: SourceExternalDocker, mut: func(m map[string]any) { vSet(m, "x", "source_config", "listener_id") },
			want: []vWantErr{{vLocOf("source_config", "listener_id"), "uuid_parsing"}}},
		{name: "listener_config on internal_docker", src: SourceInternalDocker, mut: func(m map[string]any) {
			vSet(m, map[string]any{"k8s_namespace": "a"}, "source_config", "listener_config")
		}, want: []vWantErr{{vLocOf("source_config", "listener_config"), "value_error"}}},
		{name: "k8s_namespace not a label", src: SourceExternalDocker, mut: func(m map[string]any) {
			vSet(m, "Bad_NS", "source_config", "listener_config", "k8s_namespace")
		}, want: []vWantErr{{vLocOf("source_config", "listener_config", "k8s_namespace"), "string_pattern_mismatch"}}},
		{name: "secret_references on internal_source", src: SourceInternalSource, mut: func(m map[string]any) {
			m["secret_references"] = []any{map[string]any{"name": "A", "secret_name": "s", "secret_key": "k"}}
		}, want: []vWantErr{{vLocOf("secret_references"), "value_error"}}},
		{name: "secret_reference missing key", src: SourceExternalDocker, mut: func(m map[string]any) {
			m["secret_references"] = []any{map[string]any{"name": "A", "secret_name": "s"}}
		}, want: []vWantErr{{vLocOf("secret_references", 0, "secret_key"), "missing"}}},
		{name: "secret_reference empty secret_name", src: SourceExternalDocker, mut: func(m map[string]any) {
			m["secret_references"] = []any{map[string]any{"name": "A", "secret_name": "", "secret_key": "k"}}
		}, want: []vWantErr{{vLocOf("secret_references", 0, "secret_name"), "value_error"}}},
		{name: "secret_reference name not identifier", src: SourceExternalDocker, mut: func(m map[string]any) {
			m["secret_references"] = []any{map[string]any{"name": "1A", "secret_name": "s", "secret_key": "k"}}
		}, want: []vWantErr{{vLocOf("secret_references", 0, "name"), "string_pattern_mismatch"}}},

		// revision fields by source
		{name: "source_tarball_path on internal_docker", src: SourceInternalDocker, mut: func(m map[string]any) { vSet(m, "uploads/x.tgz", "source_revision_config", "source_tarball_path") },
			want: []vWantErr{{vLocOf("source_revision_config", "source_tarball_path"), "value_error"}}},
		{name: "image_uri on internal_source", src: SourceInternalSource, mut: func(m map[string]any) { vSet(m, "img", "source_revision_config", "image_uri") },
			want: []vWantErr{{vLocOf("source_revision_config", "image_uri"), "value_error"}}},
		{name: "image_uri empty", src: SourceInternalDocker, mut: func(m map[string]any) { vSet(m, "", "source_revision_config", "image_uri") },
			want: []vWantErr{{vLocOf("source_revision_config", "image_uri"), "value_error"}}},
		{name: "graph_config_path required internal_source", src: SourceInternalSource, mut: func(m map[string]any) { vDel(m, "source_revision_config", "graph_config_path") },
			want: []vWantErr{{vLocOf("source_revision_config", "graph_config_path"), "missing"}}},
		{name: "graph_config_path on external_docker", src: SourceExternalDocker, mut: func(m map[string]any) { vSet(m, "langgraph.json", "source_revision_config", "graph_config_path") },
			want: []vWantErr{{vLocOf("source_revision_config", "graph_config_path"), "value_error"}}},
		{name: "langgraph_config_path on internal_docker", src: SourceInternalDocker, mut: func(m map[string]any) { vSet(m, "langgraph.json", "source_revision_config", "langgraph_config_path") },
			want: []vWantErr{{vLocOf("source_revision_config", "langgraph_config_path"), "value_error"}}},
		{name: "both config path names differ", src: SourceInternalSource, mut: func(m map[string]any) { vSet(m, "other.json", "source_revision_config", "langgraph_config_path") },
			want: []vWantErr{{vLocOf("source_revision_config", "langgraph_config_path"), "value_error"}}},

		// secrets
		{name: "secret name not identifier", src: SourceInternalSource, mut: func(m map[string]any) { m["secrets"] = []any{map[string]any{"name": "MY-KEY", "value": "v"}} },
			want: []vWantErr{{vLocOf("secrets", 0, "name"), "string_pattern_mismatch"}}},
		{name: "secret name duplicate", src: SourceInternalSource, mut: func(m map[string]any) {
			m["secrets"] = []any{map[string]any{"name": "A", "value": "v"}, map[string]any{"name": "A", "value": "w"}}
		}, want: []vWantErr{{vLocOf("secrets", 1, "name"), "value_error"}}},
		{name: "secret redacted value", src: SourceInternalSource, mut: func(m map[string]any) { m["secrets"] = []any{map[string]any{"name": "A", "value": RedactedSecret}} },
			want: []vWantErr{{vLocOf("secrets", 0, "value"), "value_error"}}},

		// resource spec bounds
		{name: "cpu too low", src: SourceInternalSource, mut: func(m map[string]any) { rs(m, 0.04, "cpu") },
			want: []vWantErr{{rsLoc("cpu"), "greater_than_equal"}}},
		{name: "cpu too high", src: SourceInternalSource, mut: func(m map[string]any) { rs(m, 8.1, "cpu") },
			want: []vWantErr{{rsLoc("cpu"), "less_than_equal"}}},
		{name: "queue_cpu too high", src: SourceInternalSource, mut: func(m map[string]any) { rs(m, 9, "queue_cpu") },
			want: []vWantErr{{rsLoc("queue_cpu"), "less_than_equal"}}},
		{name: "redis_cpu too low", src: SourceInternalSource, mut: func(m map[string]any) { rs(m, 0, "redis_cpu") },
			want: []vWantErr{{rsLoc("redis_cpu"), "greater_than_equal"}}},
		{name: "cpu_limit too high", src: SourceInternalSource, mut: func(m map[string]any) { rs(m, 16.1, "cpu_limit") },
			want: []vWantErr{{rsLoc("cpu_limit"), "less_than_equal"}}},
		{name: "queue_cpu_limit too low", src: SourceInternalSource, mut: func(m map[string]any) { rs(m, 0.01, "queue_cpu_limit") },
			want: []vWantErr{{rsLoc("queue_cpu_limit"), "greater_than_equal"}}},
		{name: "redis_cpu_limit too high", src: SourceInternalSource, mut: func(m map[string]any) { rs(m, 17, "redis_cpu_limit") },
			want: []vWantErr{{rsLoc("redis_cpu_limit"), "less_than_equal"}}},
		{name: "cpu_limit below cpu", src: SourceInternalSource, mut: func(m map[string]any) { rs(m, 2, "cpu"); rs(m, 1, "cpu_limit") },
			want: []vWantErr{{rsLoc("cpu_limit"), "value_error"}}},
		{name: "queue_cpu_limit below derived queue_cpu", src: SourceInternalSource, mut: func(m map[string]any) { rs(m, 4, "cpu"); rs(m, 2, "queue_cpu_limit") },
			want: []vWantErr{{rsLoc("queue_cpu_limit"), "value_error"}}},
		{name: "memory_limit below memory", src: SourceInternalSource, mut: func(m map[string]any) { rs(m, 512, "memory_mb"); rs(m, 256, "memory_limit_mb") },
			want: []vWantErr{{rsLoc("memory_limit_mb"), "value_error"}}},
		{name: "redis_memory_limit below request", src: SourceInternalSource, mut: func(m map[string]any) { rs(m, 512, "redis_memory_mb"); rs(m, 256, "redis_memory_limit_mb") },
			want: []vWantErr{{rsLoc("redis_memory_limit_mb"), "value_error"}}},
		{name: "memory below docker minimum", src: SourceInternalSource, mut: func(m map[string]any) { rs(m, 5, "memory_mb") },
			want: []vWantErr{{rsLoc("memory_mb"), "greater_than_equal"}}},
		{name: "memory too high", src: SourceInternalSource, mut: func(m map[string]any) { rs(m, MaxMemoryMB+1, "memory_mb") },
			want: []vWantErr{{rsLoc("memory_mb"), "less_than_equal"}}},
		{name: "negative scale", src: SourceInternalSource, mut: func(m map[string]any) { rs(m, -1, "min_scale") },
			want: []vWantErr{{rsLoc("min_scale"), "greater_than_equal"}}},
		{name: "scale too high", src: SourceInternalSource, mut: func(m map[string]any) { rs(m, MaxScale+1, "queue_max_scale") },
			want: []vWantErr{{rsLoc("queue_max_scale"), "less_than_equal"}}},
		{name: "max_scale below min_scale", src: SourceInternalSource, mut: func(m map[string]any) { rs(m, 3, "min_scale"); rs(m, 2, "max_scale") },
			want: []vWantErr{{rsLoc("max_scale"), "value_error"}}},
		{name: "db_storage_gi zero", src: SourceInternalSource, mut: func(m map[string]any) { rs(m, 0, "db_storage_gi") },
			want: []vWantErr{{rsLoc("db_storage_gi"), "greater_than_equal"}}},
		{name: "db_max_connections negative", src: SourceInternalSource, mut: func(m map[string]any) { rs(m, -5, "db_max_connections") },
			want: []vWantErr{{rsLoc("db_max_connections"), "greater_than_equal"}}},

		// volumes, mounts, containers
		{name: "volume name not label", src: SourceInternalSource, mut: func(m map[string]any) { rs(m, []any{map[string]any{"name": "Data"}}, "volumes") },
			want: []vWantErr{{rsLoc("volumes", 0, "name"), "string_pattern_mismatch"}}},
		{name: "volume name duplicate", src: SourceInternalSource, mut: func(m map[string]any) {
			rs(m, []any{map[string]any{"name": "d"}, map[string]any{"name": "d"}}, "volumes")
		}, want: []vWantErr{{rsLoc("volumes", 1, "name"), "value_error"}}},
		{name: "volume mount unknown volume", src: SourceInternalSource, mut: func(m map[string]any) {
			rs(m, []any{map[string]any{"name": "d"}}, "volumes")
			rs(m, []any{map[string]any{"name": "e", "mountPath": "/e"}}, "volume_mounts")
		}, want: []vWantErr{{rsLoc("volume_mounts", 0, "name"), "value_error"}}},
		{name: "volume mount relative path", src: SourceInternalSource, mut: func(m map[string]any) {
			rs(m, []any{map[string]any{"name": "d"}}, "volumes")
			rs(m, []any{map[string]any{"name": "d", "mountPath": "rel"}}, "volume_mounts")
		}, want: []vWantErr{{rsLoc("volume_mounts", 0, "mountPath"), "value_error"}}},
		{name: "container volumeMount unknown volume", src: SourceInternalSource, mut: func(m map[string]any) {
			rs(m, []any{map[string]any{"name": "s", "image": "i", "volumeMounts": []any{map[string]any{"name": "x", "mountPath": "/x"}}}}, "sidecars")
		}, want: []vWantErr{{rsLoc("sidecars", 0, "volumeMounts", 0, "name"), "value_error"}}},
		{name: "container name not label", src: SourceInternalSource, mut: func(m map[string]any) {
			rs(m, []any{map[string]any{"name": "My_Init", "image": "i"}}, "init_containers")
		}, want: []vWantErr{{rsLoc("init_containers", 0, "name"), "string_pattern_mismatch"}}},
		{name: "container name duplicate across lists", src: SourceInternalSource, mut: func(m map[string]any) {
			rs(m, []any{map[string]any{"name": "a", "image": "i"}}, "init_containers")
			rs(m, []any{map[string]any{"name": "a", "image": "i"}}, "sidecars")
		}, want: []vWantErr{{rsLoc("sidecars", 0, "name"), "value_error"}}},
		{name: "container image empty", src: SourceInternalSource, mut: func(m map[string]any) {
			rs(m, []any{map[string]any{"name": "a", "image": ""}}, "sidecars")
		}, want: []vWantErr{{rsLoc("sidecars", 0, "image"), "value_error"}}},
		{name: "imagePullPolicy enum", src: SourceInternalSource, mut: func(m map[string]any) {
			rs(m, []any{map[string]any{"name": "a", "image": "i", "imagePullPolicy": "Sometimes"}}, "sidecars")
		}, want: []vWantErr{{rsLoc("sidecars", 0, "imagePullPolicy"), "enum"}}},
		{name: "restartPolicy enum", src: SourceInternalSource, mut: func(m map[string]any) {
			rs(m, []any{map[string]any{"name": "a", "image": "i", "restartPolicy": "Never"}}, "sidecars")
		}, want: []vWantErr{{rsLoc("sidecars", 0, "restartPolicy"), "enum"}}},
		{name: "env name not identifier", src: SourceInternalSource, mut: func(m map[string]any) {
			rs(m, []any{map[string]any{"name": "a", "image": "i", "env": []any{map[string]any{"name": "X-Y", "value": "1"}}}}, "sidecars")
		}, want: []vWantErr{{rsLoc("sidecars", 0, "env", 0, "name"), "string_pattern_mismatch"}}},
		{name: "env value with valueFrom", src: SourceInternalSource, mut: func(m map[string]any) {
			rs(m, []any{map[string]any{"name": "a", "image": "i", "env": []any{map[string]any{"name": "X", "value": "1", "valueFrom": map[string]any{}}}}}, "init_containers")
		}, want: []vWantErr{{rsLoc("init_containers", 0, "env", 0, "valueFrom"), "value_error"}}},
		{name: "image_pull_secret empty name", src: SourceInternalSource, mut: func(m map[string]any) {
			rs(m, []any{map[string]any{"name": ""}}, "image_pull_secrets")
		}, want: []vWantErr{{rsLoc("image_pull_secrets", 0, "name"), "value_error"}}},

		// several at once
		{name: "errors are collected", src: SourceInternalSource, mut: func(m map[string]any) {
			m["name"] = "Bad Name"
			rs(m, 100, "cpu")
			vSet(m, "https://x", "source_config", "custom_url")
		}, want: []vWantErr{{vLocOf("name"), "string_pattern_mismatch"}, {rsLoc("cpu"), "less_than_equal"}, {vLocOf("source_config", "custom_url"), "value_error"}}},
	}
}

func TestDecodeCreateRules(t *testing.T) {
	cases := createRuleCases()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body := []byte(tc.raw)
			if tc.raw == "" {
				m := vBase(tc.src)
				if tc.mut != nil {
					tc.mut(m)
				}
				body = vMustJSON(t, m)
			}
			req, err := DecodeCreate(body)
			if err == nil {
				t.Fatalf("want errors %v, got request %+v", tc.want, req)
			}
			vCheckErrs(t, err, tc.want...)
		})
	}
}

func TestConfigPathAlias(t *testing.T) {
	for _, tc := range []struct {
		name string
		rc   map[string]any
	}{
		{"spec name", map[string]any{"graph_config_path": "a/langgraph.json"}},
		{"alias", map[string]any{"langgraph_config_path": "a/langgraph.json"}},
		{"both equal", map[string]any{"graph_config_path": "a/langgraph.json", "langgraph_config_path": "a/langgraph.json"}},
		{"alias with null spec name", map[string]any{"graph_config_path": nil, "langgraph_config_path": "a/langgraph.json"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := vBase(SourceInternalSource)
			m["source_revision_config"] = tc.rc
			req, err := DecodeCreate(vMustJSON(t, m))
			if err != nil {
				t.Fatal(err)
			}
			if req.SourceRevisionConfig.GraphConfigPath == nil || *req.SourceRevisionConfig.GraphConfigPath != "a/langgraph.json" {
				t.Fatalf("got %v", req.SourceRevisionConfig.GraphConfigPath)
			}
			out := string(vMustJSON(t, req.SourceRevisionConfig))
			if !strings.Contains(out, `"graph_config_path":"a/langgraph.json"`) || strings.Contains(out, "langgraph_config_path") {
				t.Fatalf("output %s", out)
			}
		})
	}
	var rc SourceRevisionConfig
	if err := json.Unmarshal([]byte(`{"graph_config_path":"a","langgraph_config_path":"b"}`), &rc); err == nil {
		t.Fatal("UnmarshalJSON accepted differing names")
	}
}

func vPtr[T any](v T) *T { return &v }

func TestNormalize(t *testing.T) {
	r := ResourceSpec{
		MinScale: vPtr(1), MaxScale: vPtr(4), CPU: vPtr(0.25), MemoryMB: vPtr(512),
		RedisCPU: vPtr(0.5), RedisMemoryMB: vPtr(256), DBCPU: vPtr(1.04), DBMemoryMB: vPtr(1024),
	}
	r.Normalize()
	checks := []struct {
		name      string
		got, want any
	}{
		{"cpu rounded", *r.CPU, 0.3},
		{"cpu_limit", *r.CPULimit, 0.6},
		{"memory_limit_mb", *r.MemoryLimitMB, 1024},
		{"queue_min_scale", *r.QueueMinScale, 1},
		{"queue_max_scale", *r.QueueMaxScale, 4},
		{"queue_cpu", *r.QueueCPU, 0.3},
		{"queue_cpu_limit", *r.QueueCPULimit, 0.6},
		{"queue_memory_mb", *r.QueueMemoryMB, 512},
		{"queue_memory_limit_mb", *r.QueueMemoryLimitMB, 1024},
		{"redis_cpu_limit", *r.RedisCPULimit, 1.0},
		{"redis_memory_limit_mb", *r.RedisMemoryLimitMB, 256},
		{"db_cpu rounded", *r.DBCPU, 1.0},
		{"db_cpu_limit", *r.DBCPULimit, 2.0},
		{"db_memory_limit_mb", *r.DBMemoryLimitMB, 2048},
	}
	for _, c := range checks {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	// Explicit values are kept; queue values from explicit queue requests.
	r = ResourceSpec{CPU: vPtr(1.0), CPULimit: vPtr(1.5), QueueCPU: vPtr(2.0), QueueMemoryMB: vPtr(100), MemoryMB: vPtr(50)}
	r.Normalize()
	if *r.CPULimit != 1.5 || *r.QueueCPULimit != 4.0 || *r.QueueMemoryLimitMB != 200 || *r.QueueMemoryMB != 100 {
		t.Errorf("explicit values: %+v", r)
	}
	// Nothing vSet → nothing derived.
	r = ResourceSpec{}
	r.Normalize()
	if !reflect.DeepEqual(r, ResourceSpec{}) {
		t.Errorf("empty spec changed: %+v", r)
	}
	var nilSpec *ResourceSpec
	nilSpec.Normalize()
}

func TestRoundCPU(t *testing.T) {
	for in, want := range map[float64]float64{0.05: 0.1, 0.04: 0, 0.15: 0.2, 7.96: 8, 1.25: 1.3, 2: 2, 0.333: 0.3} {
		if got := RoundCPU(in); got != want {
			t.Errorf("RoundCPU(%v) = %v, want %v", in, got, want)
		}
	}
}

func TestCreatesRevision(t *testing.T) {
	for _, tc := range []struct {
		body string
		want bool
	}{
		{`{}`, false},
		{`{"secrets": null, "source_config": null, "source_revision_config": null}`, false},
		{`{"source_config": {"install_command": "npm ci"}}`, false},
		{`{"source_config": {"resource_spec": null}}`, false},
		{`{"source_revision_config": {}}`, false},
		{`{"source_revision_config": {"image_uri": null}}`, false},
		{`{"secret_references": []}`, false},
		{`{"revision_source": "internal_source"}`, false},
		{`{"secrets": []}`, true},
		{`{"secrets": [{"name": "A", "value": "b"}]}`, true},
		{`{"source_config": {"resource_spec": {}}}`, true},
		{`{"source_revision_config": {"graph_config_path": "g.json"}}`, true},
		{`{"source_revision_config": {"langgraph_config_path": "g.json"}}`, true},
		{`{"source_revision_config": {"source_tarball_path": "uploads/x"}}`, true},
	} {
		req, err := DecodePatch([]byte(tc.body), vCurDeployment(SourceInternalSource))
		if err != nil {
			t.Fatalf("%s: %v", tc.body, err)
		}
		if got := req.CreatesRevision(); got != tc.want {
			t.Errorf("%s: CreatesRevision = %v, want %v", tc.body, got, tc.want)
		}
	}
	for _, p := range []*PatchRequest{
		{SourceRevisionConfig: &SourceRevisionConfig{RepoRef: vPtr("main")}},
		{SourceRevisionConfig: &SourceRevisionConfig{ImageURI: vPtr("img")}},
	} {
		if !p.CreatesRevision() {
			t.Errorf("%+v should create a revision", p.SourceRevisionConfig)
		}
	}
	var nilP *PatchRequest
	if nilP.CreatesRevision() {
		t.Error("nil patch creates a revision")
	}
}

func vCurDeployment(src string) *Deployment {
	d := &Deployment{
		ID: vTestUUID, Name: "my-agent", Source: src, Status: DeploymentReady,
		Secrets: []Secret{{Name: "OPENAI_API_KEY", Value: "sk-1"}},
	}
	switch src {
	case SourceInternalSource:
		d.SourceConfig.DeploymentType = vPtr("dev")
		d.SourceRevisionConfig.GraphConfigPath = vPtr("langgraph.json")
	case SourceInternalDocker:
		d.SourceRevisionConfig.ImageURI = vPtr("img:1")
	case SourceExternalDocker:
		d.SourceConfig.ListenerID = vPtr(vTestUUID)
		d.SourceConfig.ListenerConfig = &ListenerConfig{K8sNamespace: vPtr("agents")}
		d.SourceRevisionConfig.ImageURI = vPtr("img:1")
	case SourceGitHub:
		d.SourceConfig.IntegrationID = vPtr(vTestUUID)
		d.SourceConfig.RepoURL = vPtr("https://github.com/a/b")
		d.SourceConfig.BuildOnPush = vPtr(true)
		d.SourceRevisionConfig.RepoRef = vPtr("main")
	}
	return d
}

// patchRuleCase is one PATCH body against a deployment of source src.
type patchRuleCase struct {
	name string
	src  string
	body string
	want []vWantErr // nil: accepted
}

// patchRuleCases has one case per PATCH rule; validate_http_test.go
// replays the refused ones against a real server.
func patchRuleCases() []patchRuleCase {
	upperUUID := strings.ToUpper(vTestUUID)
	return []patchRuleCase{
		// accepted
		{"official client source upload", SourceInternalSource, `{"revision_source":"internal_source","source_revision_config":{"source_tarball_path":"uploads/a.tgz","langgraph_config_path":"langgraph.json"},"source_config":{"install_command":"npm ci","build_command":null}}`, nil},
		{"official client image route", SourceInternalDocker, `{"revision_source":"internal_docker","source_revision_config":{"image_uri":"img:2"}}`, nil},
		{"same immutable values", SourceExternalDocker, `{"name":"my-agent","source":"external_docker","source_config":{"listener_id":"` + upperUUID + `","listener_config":{"k8s_namespace":"agents"}}}`, nil},
		{"same deployment_type", SourceInternalSource, `{"source_config":{"deployment_type":"dev"}}`, nil},
		{"github same values", SourceGitHub, `{"source_config":{"integration_id":"` + vTestUUID + `","repo_url":"https://github.com/a/b"},"source_revision_config":{"repo_ref":"develop"}}`, nil},
		{"null everything", SourceExternalDocker, `{"source_config":null,"source_revision_config":null,"secrets":null,"secret_references":null,"revision_source":null}`, nil},
		{"resource spec", SourceExternalDocker, `{"source_config":{"resource_spec":{"cpu":1,"memory_mb":1024}}}`, nil},
		{"tracked_packages", SourceInternalSource, `{"tracked_packages":{"langgraph":"0.2"}}`, nil},

		// decoding
		{"unknown field", SourceInternalSource, `{"image_version":"1"}`, []vWantErr{{vLocOf("image_version"), "extra_forbidden"}}},
		{"invalid json", SourceInternalSource, `{`, []vWantErr{{vLocOf(), "json_invalid"}}},
		{"secrets type", SourceInternalSource, `{"secrets":{}}`, []vWantErr{{vLocOf("secrets"), "list_type"}}},

		// immutable
		{"name changed", SourceInternalSource, `{"name":"other"}`, []vWantErr{{vLocOf("name"), "value_error"}}},
		{"source changed", SourceInternalSource, `{"source":"internal_docker"}`, []vWantErr{{vLocOf("source"), "value_error"}}},
		{"integration_id changed", SourceGitHub, `{"source_config":{"integration_id":"0190f3b2-6c5e-7d3a-9b1c-2f4e5d6a7b8d"}}`, []vWantErr{{vLocOf("source_config", "integration_id"), "value_error"}}},
		{"repo_url changed", SourceGitHub, `{"source_config":{"repo_url":"https://github.com/a/c"}}`, []vWantErr{{vLocOf("source_config", "repo_url"), "value_error"}}},
		{"deployment_type changed", SourceInternalSource, `{"source_config":{"deployment_type":"prod"}}`, []vWantErr{{vLocOf("source_config", "deployment_type"), "value_error"}}},
		{"listener_id changed", SourceExternalDocker, `{"source_config":{"listener_id":"0190f3b2-6c5e-7d3a-9b1c-2f4e5d6a7b8d"}}`, []vWantErr{{vLocOf("source_config", "listener_id"), "value_error"}}},
		{"listener_config changed", SourceExternalDocker, `{"source_config":{"listener_config":{"k8s_namespace":"other"}}}`, []vWantErr{{vLocOf("source_config", "listener_config", "k8s_namespace"), "value_error"}}},
		{"revision_source differs", SourceInternalSource, `{"revision_source":"internal_docker"}`, []vWantErr{{vLocOf("revision_source"), "value_error"}}},
		{"revision_source unknown", SourceInternalSource, `{"revision_source":"ftp"}`, []vWantErr{{vLocOf("revision_source"), "enum"}}},

		// source rules against the current source
		{"integration_id on internal_source", SourceInternalSource, `{"source_config":{"integration_id":"` + vTestUUID + `"}}`, []vWantErr{{vLocOf("source_config", "integration_id"), "value_error"}}},
		{"image_uri on internal_source", SourceInternalSource, `{"source_revision_config":{"image_uri":"x"}}`, []vWantErr{{vLocOf("source_revision_config", "image_uri"), "value_error"}}},
		{"graph_config_path on internal_docker", SourceInternalDocker, `{"source_revision_config":{"graph_config_path":"g.json"}}`, []vWantErr{{vLocOf("source_revision_config", "graph_config_path"), "value_error"}}},
		{"source_tarball_path on external_docker", SourceExternalDocker, `{"source_revision_config":{"source_tarball_path":"u"}}`, []vWantErr{{vLocOf("source_revision_config", "source_tarball_path"), "value_error"}}},
		{"secret_references on internal_docker", SourceInternalDocker, `{"secret_references":[{"name":"A","secret_name":"s","secret_key":"k"}]}`, []vWantErr{{vLocOf("secret_references"), "value_error"}}},
		{"custom_url on internal_source", SourceInternalSource, `{"source_config":{"custom_url":"https://x"}}`, []vWantErr{{vLocOf("source_config", "custom_url"), "value_error"}}},
		{"repo_ref tag with stored build_on_push", SourceGitHub, `{"source_revision_config":{"repo_ref":"refs/tags/v1"}}`, []vWantErr{{vLocOf("source_revision_config", "repo_ref"), "value_error"}}},
		{"build_on_push with tag in same patch", SourceGitHub, `{"source_config":{"build_on_push":true},"source_revision_config":{"repo_ref":"refs/tags/v1"}}`, []vWantErr{{vLocOf("source_config", "build_on_push"), "value_error"}}},

		// secrets and resource spec
		{"redacted secret sent back", SourceInternalSource, `{"secrets":[{"name":"OPENAI_API_KEY","value":"**********"}]}`, []vWantErr{{vLocOf("secrets", 0, "value"), "value_error"}}},
		{"secret name invalid", SourceInternalSource, `{"secrets":[{"name":"a b","value":"x"}]}`, []vWantErr{{vLocOf("secrets", 0, "name"), "string_pattern_mismatch"}}},
		{"secret reference clashes with secret", SourceExternalDocker, `{"secret_references":[{"name":"OPENAI_API_KEY","secret_name":"s","secret_key":"k"}]}`, []vWantErr{{vLocOf("secret_references", 0, "name"), "value_error"}}},
		{"cpu bound", SourceExternalDocker, `{"source_config":{"resource_spec":{"cpu":0.01}}}`, []vWantErr{{vLocOf("source_config", "resource_spec", "cpu"), "greater_than_equal"}}},
	}
}

func TestDecodePatch(t *testing.T) {
	upperUUID := strings.ToUpper(vTestUUID)
	cases := patchRuleCases()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, err := DecodePatch([]byte(tc.body), vCurDeployment(tc.src))
			vCheckErrs(t, err, tc.want...)
			if tc.want == nil && req == nil {
				t.Fatal("nil request")
			}
		})
	}
	if _, err := DecodePatch([]byte(`{}`), nil); err == nil {
		t.Fatal("nil current deployment accepted")
	}
	// Normalized, canonical output.
	req, err := DecodePatch([]byte(`{"source_config":{"listener_id":"`+upperUUID+`","resource_spec":{"cpu":0.26}}}`), vCurDeployment(SourceExternalDocker))
	if err != nil {
		t.Fatal(err)
	}
	if *req.SourceConfig.ListenerID != vTestUUID || *req.SourceConfig.ResourceSpec.CPULimit != 0.6 {
		t.Fatalf("not normalized: %v %v", *req.SourceConfig.ListenerID, *req.SourceConfig.ResourceSpec.CPULimit)
	}
}

// listenerCase is one listener request body.
type listenerCase struct {
	name string
	body string
	want []vWantErr // nil: accepted
}

// listenerCreateCases and listenerPatchCases are replayed over HTTP by
// validate_http_test.go; patch cases apply to a listener with compute_id
// cluster-1 and compute type k8s.
func listenerCreateCases() []listenerCase {
	return []listenerCase{
		{"ok", `{"compute_type":"k8s","compute_id":"cluster-1","compute_config":{"k8s_namespaces":["default","agents"]},"version":"1"}`, nil},
		{"ok null namespaces", `{"compute_type":"k8s","compute_id":"c","compute_config":{"k8s_namespaces":null}}`, nil},
		{"missing", `{}`, []vWantErr{{vLocOf("compute_type"), "missing"}, {vLocOf("compute_id"), "missing"}, {vLocOf("compute_config"), "missing"}}},
		{"compute_type enum", `{"compute_type":"ecs","compute_id":"c","compute_config":{}}`, []vWantErr{{vLocOf("compute_type"), "enum"}}},
		{"compute_id empty", `{"compute_type":"k8s","compute_id":" ","compute_config":{}}`, []vWantErr{{vLocOf("compute_id"), "value_error"}}},
		{"namespace not label", `{"compute_type":"k8s","compute_id":"c","compute_config":{"k8s_namespaces":["ok","Not OK"]}}`, []vWantErr{{vLocOf("compute_config", "k8s_namespaces", 1), "string_pattern_mismatch"}}},
		{"namespace duplicate", `{"compute_type":"k8s","compute_id":"c","compute_config":{"k8s_namespaces":["a","a"]}}`, []vWantErr{{vLocOf("compute_config", "k8s_namespaces", 1), "value_error"}}},
		{"namespace type", `{"compute_type":"k8s","compute_id":"c","compute_config":{"k8s_namespaces":[1]}}`, []vWantErr{{vLocOf("compute_config", "k8s_namespaces", 0), "string_type"}}},
		{"unknown field", `{"compute_type":"k8s","compute_id":"c","compute_config":{},"id":"x"}`, []vWantErr{{vLocOf("id"), "extra_forbidden"}}},
	}
}

func listenerPatchCases() []listenerCase {
	return []listenerCase{
		{"ok", `{"compute_config":{"k8s_namespaces":["b"]}}`, nil},
		{"same immutable values", `{"compute_type":"k8s","compute_id":"cluster-1"}`, nil},
		{"compute_type changed", `{"compute_type":"ecs"}`, []vWantErr{{vLocOf("compute_type"), "value_error"}}},
		{"compute_id changed", `{"compute_id":"cluster-2"}`, []vWantErr{{vLocOf("compute_id"), "value_error"}}},
		{"namespace not label", `{"compute_config":{"k8s_namespaces":["-x"]}}`, []vWantErr{{vLocOf("compute_config", "k8s_namespaces", 0), "string_pattern_mismatch"}}},
	}
}

func TestDecodeListenerRules(t *testing.T) {
	cur := &Listener{ID: vTestUUID, ComputeType: "k8s", ComputeID: "cluster-1", ComputeConfig: ListenerComputeConfig{K8sNamespaces: []string{"a"}}}
	create := listenerCreateCases()
	for _, tc := range create {
		t.Run("create "+tc.name, func(t *testing.T) {
			_, err := DecodeListenerCreate([]byte(tc.body))
			vCheckErrs(t, err, tc.want...)
		})
	}
	patch := listenerPatchCases()
	for _, tc := range patch {
		t.Run("patch "+tc.name, func(t *testing.T) {
			_, err := DecodeListenerPatch([]byte(tc.body), cur)
			vCheckErrs(t, err, tc.want...)
		})
	}
}

func TestRedacted(t *testing.T) {
	d := &Deployment{Secrets: []Secret{{Name: "A", Value: "real"}}}
	r := d.Redacted()
	if r.Secrets[0].Value != RedactedSecret || d.Secrets[0].Value != "real" {
		t.Fatalf("redaction: %+v / %+v", r.Secrets, d.Secrets)
	}
	empty := (&Deployment{}).Redacted()
	if b := vMustJSON(t, empty); !strings.Contains(string(b), `"secrets":[]`) || !strings.Contains(string(b), `"url":null`) {
		t.Fatalf("json %s", b)
	}
}

func TestErrorCap(t *testing.T) {
	m := vBase(SourceInternalSource)
	secrets := []any{}
	for i := 0; i < 500; i++ {
		secrets = append(secrets, map[string]any{"name": "1bad", "value": "v"})
	}
	m["secrets"] = secrets
	_, err := DecodeCreate(vMustJSON(t, m))
	var ve *httpx.ValidationError
	if !errors.As(err, &ve) || len(ve.Errors) != validate.MaxErrors {
		t.Fatalf("got %v errors", len(ve.Errors))
	}
}

// TestDockerCreateWithoutImage: the official deploy client creates docker
// deployments with an empty source_revision_config and PATCHes image_uri
// later; the spec does not require image_uri on create.
func TestDockerCreateWithoutImage(t *testing.T) {
	for _, src := range []string{SourceInternalDocker, SourceExternalDocker} {
		m := vBase(src)
		vDel(m, "source_revision_config", "image_uri")
		if _, err := DecodeCreate(vMustJSON(t, m)); err != nil {
			t.Errorf("%s without image_uri: %v", src, err)
		}
	}
}
