package controlplane

import (
	"encoding/json"
	"errors"
	"testing"

	"slipway/server/httpx"
	"slipway/server/httpx/validate"
)

// vFuzzSeeds are valid and invalid request bodies shared by the fuzzers.
var vFuzzSeeds = []string{
	`{"name":"a","source":"internal_source","source_config":{},"source_revision_config":{"langgraph_config_path":"langgraph.json"},"secrets":[]}`,
	`{"name":"a","source":"internal_docker","source_config":{"deployment_type":"dev"},"source_revision_config":{"image_uri":"img"},"secrets":[{"name":"A","value":"b"}],"revision_source":"internal_docker","tracked_packages":["x"]}`,
	`{"name":"a","source":"external_docker","source_config":{"listener_id":"0190f3b2-6c5e-7d3a-9b1c-2f4e5d6a7b8c","listener_config":{"k8s_namespace":"ns"},"custom_url":"https://x","resource_spec":{"cpu":0.55,"memory_mb":512,"queue_cpu_limit":0.1,"volumes":[{"name":"v","emptyDir":{}}],"volume_mounts":[{"name":"v","mountPath":"/v"}],"sidecars":[{"name":"s","image":"i","env":[{"name":"E","valueFrom":{}}],"restartPolicy":"Always"}]}},"source_revision_config":{"image_uri":"img"},"secrets":[],"secret_references":[{"name":"R","secret_name":"s","secret_key":"k"}]}`,
	`{"name":"a","source":"github","source_config":{"build_on_push":true,"integration_id":"x"},"source_revision_config":{"repo_ref":"refs/tags/v1","graph_config_path":"g"},"secrets":[]}`,
	`{"name":"A B","source":"ftp","source_config":null,"source_revision_config":[],"secrets":{}}`,
	`{"name":"a","source":"internal_source","source_config":{"resource_spec":{"cpu":1e308,"memory_mb":-1,"min_scale":9223372036854775807,"labels":{"":"x"}}},"source_revision_config":{"graph_config_path":"a","langgraph_config_path":"b"},"secrets":[{"name":"1","value":"**********"}]}`,
	`{"revision_source":"internal_source","source_revision_config":{"source_tarball_path":"p","langgraph_config_path":"g"},"source_config":{"install_command":"npm ci"}}`,
	`{"name":"other","source_config":{"listener_id":"0190F3B2-6C5E-7D3A-9B1C-2F4E5D6A7B8C","listener_config":{"k8s_namespace":"x"}},"secrets":[{"name":"A","value":"v"},{"name":"A","value":"w"}]}`,
	`{"source_config":{"resource_spec":{"cpu":8,"cpu_limit":16,"memory_mb":1048576,"redis_memory_mb":6}}}`,
	`{"name":"a","name":"b","NAME":"c","source_config":{"listener_id":"x"},"source_config":{}}`,
	`{}`, `[]`, `null`, ``, `{"a":`, `{"secrets":[null]}`, `{"source_config":{"resource_spec":{"cpu":"1"}}}`,
}

func vSeed(f *testing.F) {
	for _, s := range vFuzzSeeds {
		f.Add([]byte(s))
	}
}

// vCheckFuzzErr asserts err is a well-formed 422.
func vCheckFuzzErr(t *testing.T, body []byte, err error) {
	t.Helper()
	var ve *httpx.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("%q: error is not a ValidationError: %v", body, err)
	}
	if len(ve.Errors) == 0 || len(ve.Errors) > validate.MaxErrors {
		t.Fatalf("%q: %d errors", body, len(ve.Errors))
	}
	for _, e := range ve.Errors {
		if len(e.Loc) == 0 || e.Loc[0] != "body" || e.Type == "" || e.Msg == "" {
			t.Fatalf("%q: malformed error %+v", body, e)
		}
		for _, p := range e.Loc[1:] {
			switch p.(type) {
			case string, int:
			default:
				t.Fatalf("%q: loc element %T in %v", body, p, e.Loc)
			}
		}
	}
}

func FuzzDecodeCreate(f *testing.F) {
	vSeed(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := DecodeCreate(body)
		if err != nil {
			vCheckFuzzErr(t, body, err)
			return
		}
		again, err := DecodeCreate(vMustJSON(t, req))
		if err != nil {
			t.Fatalf("%q decoded, but its re-encoding %s does not: %v", body, vMustJSON(t, req), err)
		}
		if a, b := vMustJSON(t, req), vMustJSON(t, again); string(a) != string(b) {
			t.Fatalf("not stable:\n%s\n%s", a, b)
		}
	})
}

func FuzzDecodePatch(f *testing.F) {
	vSeed(f)
	curs := []*Deployment{vCurDeployment(SourceInternalSource), vCurDeployment(SourceExternalDocker),
		vCurDeployment(SourceInternalDocker), vCurDeployment(SourceGitHub)}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, cur := range curs {
			req, err := DecodePatch(body, cur)
			if err != nil {
				vCheckFuzzErr(t, body, err)
				continue
			}
			enc := vMustJSON(t, req)
			again, err := DecodePatch(enc, cur)
			if err != nil {
				t.Fatalf("%q decoded, but its re-encoding %s does not: %v", body, enc, err)
			}
			if req.CreatesRevision() != again.CreatesRevision() {
				t.Fatalf("%q: CreatesRevision changed on re-encoding", body)
			}
			var m map[string]any
			if err := json.Unmarshal(enc, &m); err != nil {
				t.Fatal(err)
			}
		}
	})
}
