package ocsftest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
)

var (
	loadOnce   sync.Once
	loaded     *Schema
	loadErr    error
	schemaPath string
)

func schema(t *testing.T) *Schema {
	t.Helper()
	loadOnce.Do(func() {
		schemaPath = SchemaDir()
		loaded, loadErr = Load(schemaPath)
	})
	if schemaPath == "" {
		t.Fatal("OCSF schema not found at testdata/ocsf-schema-1.7.0 in the module")
	}
	if loadErr != nil {
		t.Fatalf("Load(%q): %v", schemaPath, loadErr)
	}
	return loaded
}

// validEvent is a complete API Activity (6003) event as Slipway emits it,
// built fresh for every case so mutations do not leak.
func validEvent() map[string]any {
	return map[string]any{
		"activity_id":   1,
		"activity_name": "Create",
		"category_uid":  6,
		"category_name": "Application Activity",
		"class_uid":     6003,
		"class_name":    "API Activity",
		"type_uid":      600301,
		"type_name":     "API Activity: Create",
		"severity_id":   1,
		"severity":      "Informational",
		"time":          int64(1763830000123),
		"status_id":     1,
		"status":        "Success",
		"message":       "create_api_key",
		"metadata": map[string]any{
			"version":     "1.7.0",
			"uid":         "8d0f5a3e-0d7c-4bf1-9a5e-6f1f5f0c2b11",
			"logged_time": int64(1763830000130),
			"product":     map[string]any{"name": "Slipway", "vendor_name": "Slipway", "version": "0.1.0"},
		},
		"actor": map[string]any{
			"user": map[string]any{"uid": "u-1", "credential_uid": nil, "type_id": 1, "type": "User"},
		},
		"api": map[string]any{
			"operation": "create_api_key",
			"request":   map[string]any{"uid": "req-1"},
			"response":  map[string]any{"code": 200},
			"service":   map[string]any{"name": "slipway"},
		},
		"src_endpoint": map[string]any{"ip": "203.0.113.7", "port": 51234, "intermediate_ips": []any{"10.0.0.1"}},
		"http_request": map[string]any{
			"http_method": "POST",
			"url":         map[string]any{"path": "/api/v1/api-key"},
			"user_agent":  "curl/8.5.0",
		},
		"http_response": map[string]any{"code": 200},
		"resources":     []any{map[string]any{"uid": "key-1", "type": "api_key"}},
		"unmapped": map[string]any{
			"original_audit_log": map[string]any{
				"id": "a1", "operation_name": "create_api_key", "operation_succeeded": true,
				"enrichments": map[string]any{"resource_ids": []any{"key-1"}, "client_port": 51234},
			},
		},
	}
}

func obj(e map[string]any, path ...string) map[string]any {
	for _, p := range path {
		e = e[p].(map[string]any)
	}
	return e
}

func TestValidateEvent(t *testing.T) {
	s := schema(t)
	cases := []struct {
		name   string
		mutate func(e map[string]any)
		want   []string // substrings that must appear among the violations; nil = valid
	}{
		{"valid", func(map[string]any) {}, nil},
		{"valid without optional captions", func(e map[string]any) {
			for _, k := range []string{"activity_name", "category_name", "class_name", "type_name", "severity", "status"} {
				delete(e, k)
			}
		}, nil},
		{"valid with null optional attributes", func(e map[string]any) {
			e["status_detail"] = nil
			obj(e, "actor", "user")["email_addr"] = nil
		}, nil},
		{"valid activity Other with a source caption", func(e map[string]any) {
			e["activity_id"], e["activity_name"], e["type_uid"], e["type_name"] = 99, "Rotate", 600399, "API Activity: Rotate"
		}, nil},
		{"valid IPv6 endpoint", func(e map[string]any) { obj(e, "src_endpoint")["ip"] = "2001:db8::1" }, nil},
		{"valid declared trace profile", func(e map[string]any) {
			obj(e, "metadata")["profiles"] = []any{"trace"}
			e["trace"] = map[string]any{"uid": "4bf92f3577b34da6a3ce929d0e0e4736"}
		}, nil},
		{"valid datetime profile", func(e map[string]any) {
			obj(e, "metadata")["profiles"] = []any{"datetime"}
			e["time_dt"] = "2025-11-22T16:46:40.123Z"
		}, nil},
		{"valid json float into unmapped", func(e map[string]any) { obj(e, "unmapped")["ratio"] = 0.5 }, nil},

		// required attributes
		{"missing time", func(e map[string]any) { delete(e, "time") }, []string{"time: required attribute is missing"}},
		{"null severity_id", func(e map[string]any) { e["severity_id"] = nil }, []string{"severity_id: required attribute is missing"}},
		{"missing actor", func(e map[string]any) { delete(e, "actor") }, []string{"actor: required attribute is missing"}},
		{"missing src_endpoint", func(e map[string]any) { delete(e, "src_endpoint") }, []string{"src_endpoint: required attribute is missing"}},
		{"missing api.operation", func(e map[string]any) { delete(obj(e, "api"), "operation") }, []string{"api.operation: required attribute is missing"}},
		{"missing api.request.uid", func(e map[string]any) { delete(obj(e, "api", "request"), "uid") }, []string{"api.request.uid: required attribute is missing"}},
		{"missing metadata.product", func(e map[string]any) { delete(obj(e, "metadata"), "product") }, []string{"metadata.product: required attribute is missing"}},
		{"missing http_response.code", func(e map[string]any) { delete(obj(e, "http_response"), "code") }, []string{"http_response.code: required attribute is missing"}},
		{"missing metadata.version", func(e map[string]any) { delete(obj(e, "metadata"), "version") }, []string{"metadata.version: required attribute is missing"}},
		{"wrong metadata.version", func(e map[string]any) { obj(e, "metadata")["version"] = "1.1.0" }, []string{`metadata.version: must be "1.7.0"`}},
		{"declared cloud profile requires cloud", func(e map[string]any) { obj(e, "metadata")["profiles"] = []any{"cloud"} }, []string{"cloud: required attribute is missing"}},

		// types
		{"string class_uid", func(e map[string]any) { e["class_uid"] = "6003" }, []string{"class_uid: must be an integer"}},
		{"unknown class", func(e map[string]any) { e["class_uid"] = 6999 }, []string{"class_uid: no class 6999"}},
		{"float time", func(e map[string]any) { e["time"] = 1763830000123.5 }, []string{"time: must be timestamp_t"}},
		{"float activity_id", func(e map[string]any) { e["activity_id"] = 1.5 }, []string{"activity_id: must be integer_t"}},
		{"float http code", func(e map[string]any) { obj(e, "http_response")["code"] = 200.5 }, []string{"http_response.code: must be integer_t"}},
		{"time in seconds", func(e map[string]any) { e["time"] = 1763830000 }, []string{"time: 1763830000 is not epoch milliseconds"}},
		{"time in microseconds", func(e map[string]any) { e["time"] = int64(1763830000123000) }, []string{"time: 1763830000123000 is not epoch milliseconds"}},
		{"string time", func(e map[string]any) { e["time"] = "2025-11-22T16:46:40Z" }, []string{"time: must be timestamp_t"}},
		{"integer operation", func(e map[string]any) { obj(e, "api")["operation"] = 7 }, []string{"api.operation: must be string_t, got integer 7"}},
		{"string port", func(e map[string]any) { obj(e, "src_endpoint")["port"] = "80" }, []string{"src_endpoint.port: must be port_t (integer_t)"}},
		{"port out of range", func(e map[string]any) { obj(e, "src_endpoint")["port"] = 70000 }, []string{"src_endpoint.port: 70000 is outside the port_t range"}},
		{"bad ip", func(e map[string]any) { obj(e, "src_endpoint")["ip"] = "not-an-ip" }, []string{`src_endpoint.ip: "not-an-ip" is not a valid ip_t`}},
		{"bad intermediate ip", func(e map[string]any) { obj(e, "src_endpoint")["intermediate_ips"] = []any{"10.0.0.1", "nope"} }, []string{"src_endpoint.intermediate_ips[1]"}},
		{"resources not an array", func(e map[string]any) { e["resources"] = map[string]any{"uid": "k"} }, []string{"resources: must be an array of resource_details"}},
		{"intermediate_ips not an array", func(e map[string]any) { obj(e, "src_endpoint")["intermediate_ips"] = "10.0.0.1" }, []string{"src_endpoint.intermediate_ips: must be an array"}},
		{"array where single", func(e map[string]any) { e["message"] = []any{"a"} }, []string{"message: must be a single string_t"}},
		{"object is a string", func(e map[string]any) { e["api"] = "create_api_key" }, []string{"api: must be a api object"}},
		{"null array element", func(e map[string]any) { e["resources"] = []any{nil} }, []string{"resources[0]: must be resource_details, got null"}},
		{"resource item needs name or uid", func(e map[string]any) { e["resources"] = []any{map[string]any{"type": "api_key"}} }, []string{"resources[0]: object resource_details needs at least one of name, uid"}},
		{"boolean as string", func(e map[string]any) { obj(e, "actor", "user")["has_mfa"] = "true" }, []string{"actor.user.has_mfa: must be boolean_t"}},

		// enums and captions
		{"bad status_id", func(e map[string]any) { e["status_id"] = 7 }, []string{"status_id: 7 is not in the enum of status_id (0 Unknown, 1 Success, 2 Failure, 99 Other)"}},
		{"bad activity_id", func(e map[string]any) { e["activity_id"], e["type_uid"] = 5, 600305 }, []string{"activity_id: 5 is not in the enum"}},
		{"bad severity_id", func(e map[string]any) { e["severity_id"] = 9 }, []string{"severity_id: 9 is not in the enum"}},
		{"bad http method", func(e map[string]any) { obj(e, "http_request")["http_method"] = "post" }, []string{`http_request.http_method: "post" is not in the enum`}},
		{"bad user type_id", func(e map[string]any) { obj(e, "actor", "user")["type_id"] = 5 }, []string{"actor.user.type_id: 5 is not in the enum"}},
		{"wrong category_uid", func(e map[string]any) { e["category_uid"] = 3 }, []string{"category_uid: 3 is not in the enum of category_uid (6 Application Activity)"}},
		{"severity caption", func(e map[string]any) { e["severity"] = "Critical" }, []string{`severity: "Critical" does not match the caption "Informational" of severity_id 1`}},
		{"status caption", func(e map[string]any) { e["status"] = "OK" }, []string{`status: "OK" does not match the caption "Success"`}},
		{"activity caption", func(e map[string]any) { e["activity_name"] = "create" }, []string{`activity_name: "create" does not match the caption "Create"`}},
		{"class caption", func(e map[string]any) { e["class_name"] = "Api Activity" }, []string{`class_name: "Api Activity" does not match the caption "API Activity"`}},
		{"category caption", func(e map[string]any) { e["category_name"] = "Application" }, []string{`category_name: "Application" does not match`}},
		{"type caption", func(e map[string]any) { e["type_name"] = "API Activity: Read" }, []string{`type_name: "API Activity: Read" does not match the caption "API Activity: Create"`}},
		{"user type caption", func(e map[string]any) { obj(e, "actor", "user")["type"] = "Admin" }, []string{`actor.user.type: "Admin" does not match the caption "User" of type_id 1`}},
		{"wrong type_uid", func(e map[string]any) { e["type_uid"] = 600303 }, []string{"type_uid: 600303 is not class_uid*100 + activity_id = 600301"}},
		{"type_uid from another class", func(e map[string]any) { e["type_uid"] = 300201 }, []string{"type_uid: 300201 is not class_uid*100 + activity_id = 600301"}},

		// unknown attributes
		{"unknown top-level", func(e map[string]any) { e["colour"] = "red" }, []string{"colour: unknown attribute (not defined in class api_activity)"}},
		{"unknown nested", func(e map[string]any) { obj(e, "actor", "user")["api_key_id"] = "k" }, []string{"actor.user.api_key_id: unknown attribute (not defined in object user)"}},
		{"unknown null", func(e map[string]any) { obj(e, "api")["workspace_id"] = nil }, []string{"api.workspace_id: unknown attribute"}},
		{"unknown in array item", func(e map[string]any) { e["resources"] = []any{map[string]any{"uid": "k", "kind": "x"}} }, []string{"resources[0].kind: unknown attribute"}},
		{"profile attribute without the profile", func(e map[string]any) { e["trace"] = map[string]any{"uid": "t"} }, []string{`trace: attribute of profile "trace", which metadata.profiles does not declare`}},
		{"_dt without datetime profile", func(e map[string]any) { e["time_dt"] = "2025-11-22T16:46:40Z" }, []string{"time_dt: unknown attribute"}},
		{"unknown profile", func(e map[string]any) { obj(e, "metadata")["profiles"] = []any{"audit"} }, []string{`metadata.profiles[0]: unknown profile "audit"`}},

		// constraints
		{"src_endpoint with nothing", func(e map[string]any) { e["src_endpoint"] = map[string]any{} }, []string{"src_endpoint: object network_endpoint needs at least one of ip, uid, name, hostname, svc_name, instance_uid, interface_uid, interface_name, domain"}},
		{"src_endpoint with only a port", func(e map[string]any) { e["src_endpoint"] = map[string]any{"port": 443} }, []string{"src_endpoint: object network_endpoint needs at least one of"}},
		{"src_endpoint with a null ip", func(e map[string]any) { e["src_endpoint"] = map[string]any{"ip": nil} }, []string{"src_endpoint: object network_endpoint needs at least one of"}},
		{"empty actor", func(e map[string]any) { e["actor"] = map[string]any{} }, []string{"actor: object actor needs at least one of process, user"}},
		{"user with nothing", func(e map[string]any) { obj(e, "actor")["user"] = map[string]any{"type_id": 1} }, []string{"actor.user: object user needs at least one of account, name, uid"}},
		{"url with nothing", func(e map[string]any) { obj(e, "http_request")["url"] = map[string]any{"port": 443} }, []string{"http_request.url: object url needs at least one of url_string, path"}},

		// several at once
		{"several", func(e map[string]any) {
			delete(e, "time")
			e["status_id"] = 7
		}, []string{"time: required", "status_id: 7 is not in the enum"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := validEvent()
			tc.mutate(e)
			got := s.ValidateEvent(e)
			if tc.want == nil {
				if len(got) != 0 {
					t.Fatalf("valid event rejected:\n  %s", strings.Join(got, "\n  "))
				}
				return
			}
			all := strings.Join(got, "\n")
			for _, w := range tc.want {
				if !strings.Contains(all, w) {
					t.Errorf("violations do not mention %q; got:\n  %s", w, strings.Join(got, "\n  "))
				}
			}
		})
	}
}

// TestValidateJSON checks the decoded-JSON path: a float literal is not an
// integer even when its value is whole.
func TestValidateJSON(t *testing.T) {
	s := schema(t)
	b, err := json.Marshal(validEvent())
	if err != nil {
		t.Fatal(err)
	}
	if v := s.ValidateJSON(b); len(v) != 0 {
		t.Fatalf("valid JSON event rejected: %v", v)
	}
	bad := strings.Replace(string(b), `"severity_id":1`, `"severity_id":1.0`, 1)
	if bad == string(b) {
		t.Fatal("fixture did not contain severity_id")
	}
	if v := s.ValidateJSON([]byte(bad)); !strings.Contains(strings.Join(v, "\n"), "severity_id: must be integer_t") {
		t.Fatalf("1.0 accepted as an integer: %v", v)
	}
	if v := s.ValidateJSON([]byte(`[1]`)); len(v) == 0 {
		t.Fatal("a JSON array was accepted as an event")
	}
	if v := s.ValidateEvent(map[string]any{"metadata": map[string]any{}}); len(v) != 1 || !strings.HasPrefix(v[0], "class_uid:") {
		t.Fatalf("event without class_uid: %v", v)
	}
}

// TestRequiredAttributes pins what OCSF 1.7.0 itself marks "required" for
// API Activity (read from the JSON files, not assumed), so a schema upgrade
// that changes them is noticed.
func TestRequiredAttributes(t *testing.T) {
	s := schema(t)
	cases := map[string][]string{
		"":                 {"activity_id", "actor", "api", "category_uid", "class_uid", "metadata", "severity_id", "src_endpoint", "time", "type_uid"},
		"metadata":         {"product", "version"},
		"metadata.product": nil,
		"actor":            nil,
		"actor.user":       nil,
		"api":              {"operation"},
		"api.request":      {"uid"},
		"api.response":     nil,
		"api.service":      nil,
		"src_endpoint":     nil,
		"http_request":     nil,
		"http_response":    {"code"},
		"resources":        nil,
	}
	for path, want := range cases {
		got, err := s.RequiredAttributes(6003, path)
		if err != nil {
			t.Fatalf("%q: %v", path, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("required attributes of 6003 %q = %v, want %v", path, got, want)
		}
	}
	if _, err := s.RequiredAttributes(6003, "status"); err == nil {
		t.Error("a scalar path was accepted")
	}
	if s.Version() != "1.7.0" {
		t.Errorf("Version() = %q", s.Version())
	}
}

func TestSchemaDir(t *testing.T) {
	dir := SchemaDir()
	if dir == "" {
		t.Fatal("no schema at testdata/ocsf-schema-1.7.0 in the module")
	}
	if _, err := os.Stat(filepath.Join(dir, "events", "application", "api_activity.json")); err != nil {
		t.Fatalf("SchemaDir() = %q: %v", dir, err)
	}
	if _, err := Load(""); err == nil {
		t.Error(`Load("") succeeded`)
	}
	if _, err := Load(t.TempDir()); err == nil {
		t.Error("Load of an empty directory succeeded")
	}
}

func TestConcurrentValidation(t *testing.T) {
	s := schema(t)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if v := s.ValidateEvent(validEvent()); len(v) != 0 {
				t.Errorf("valid event rejected: %v", v)
			}
		}()
	}
	wg.Wait()
}
