package controlplane_test

import (
	"testing"

	"slipway/server/apptest"
	"slipway/server/controlplane"
)

// The validator's case tables replayed over HTTP against an in-process
// server (the runners are in validate_http_cases_test.go).

func TestCreateRulesOverHTTP(t *testing.T) {
	controlplane.CreateRulesOverHTTP(t, apptest.New(t, nil))
}

func TestPatchRulesOverHTTP(t *testing.T) {
	controlplane.PatchRulesOverHTTP(t, apptest.New(t, nil))
}

func TestListenerRulesOverHTTP(t *testing.T) {
	controlplane.ListenerRulesOverHTTP(t, apptest.New(t, nil))
}
