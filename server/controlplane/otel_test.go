package controlplane

import (
	"bytes"
	"maps"
	"testing"

	"slipway/storage"
)

// TestSpecGivesAgentsOperatorOTELEnv: the driver's spec of a revision (what
// the process and docker runtimes build the agent's environment from)
// carries the operator's OTEL_* variables, except those the deployment
// sets itself through a secret or a secret reference.
func TestSpecGivesAgentsOperatorOTELEnv(t *testing.T) {
	sealer, err := storage.NewSealer(bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	rc := &Reconciler{Sealer: sealer, OTELEnv: map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": "http://operator:4318", "OTEL_EXPORTER_OTLP_HEADERS": "x=1", "OTEL_TRACES_SAMPLER": "always_on"}}
	rev := &revisionRecord{Secrets: []Secret{
		{Name: "API_KEY", Value: sealer.Seal("k", "dep/API_KEY")},
		{Name: "OTEL_EXPORTER_OTLP_ENDPOINT", Value: sealer.Seal("http://mine:4318", "dep/OTEL_EXPORTER_OTLP_ENDPOINT")}},
		SecretReferences: []SecretReference{{Name: "OTEL_EXPORTER_OTLP_HEADERS", SecretName: "s", SecretKey: "k"}}}
	rev.DeploymentID = "dep"
	sp, err := rc.spec(rev)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"API_KEY": "k", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://mine:4318", "OTEL_TRACES_SAMPLER": "always_on"}
	if !maps.Equal(sp.Env, want) {
		t.Fatalf("spec env %v, want %v", sp.Env, want)
	}
}
