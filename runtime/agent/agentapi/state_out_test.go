package agentapi

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"slipway/runtime/agent"
)

// TestThreadStateHasTheModelsFields: the API's state names every field of
// the engine's, so a field added there is not lost here.
func TestThreadStateHasTheModelsFields(t *testing.T) {
	names := func(v any) []string {
		var out []string
		ty := reflect.TypeOf(v)
		for i := range ty.NumField() {
			out = append(out, strings.Split(ty.Field(i).Tag.Get("json"), ",")[0])
		}
		slices.Sort(out)
		return out
	}
	if m, api := names(agent.Checkpoint{}), names(threadState{}); !slices.Equal(m, api) {
		t.Fatalf("agent.Checkpoint's fields %v, threadState's %v", m, api)
	}
}
