package agentapi

import (
	"bytes"
	"encoding/json"
)

// interruptedValues reports whether a values chunk carries the run's
// interrupts. A run that stopped at an interrupt answers /wait with the
// values that carry it, as the reference does, even when LangGraph emits
// a later values chunk: after a Command with goto on an interrupted
// thread, LangGraph Python streams the goto node's write (which is not
// checkpointed: the step stopped at the interrupt) after the interrupt.
func interruptedValues(data json.RawMessage) bool {
	if !bytes.Contains(data, []byte(`"__interrupt__"`)) {
		return false
	}
	var v map[string]json.RawMessage
	if json.Unmarshal(data, &v) != nil {
		return false
	}
	raw, ok := v["__interrupt__"]
	if !ok {
		return false
	}
	var list []json.RawMessage
	return json.Unmarshal(raw, &list) == nil && len(list) > 0
}
