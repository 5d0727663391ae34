package agentapi

import (
	"bytes"
	"encoding/json"

	"slipway/runtime/agent"
)

// A run that stopped at an interrupt answers /wait with the values that
// carry it, as the Python reference does, even when LangGraph emits a
// later values chunk: after a Command with goto on an interrupted thread,
// LangGraph Python streams the goto node's write (which is not
// checkpointed: the step stopped at the interrupt) after the interrupt.
// The JS reference answers the last values chunk whatever it carries, and
// so does Slipway for graphs of the JavaScript host.

// answersInterrupt reports whether /wait answers the run's interrupt
// chunk: its thread ended at an interrupt and its graph is not a
// JavaScript one.
func (a *API) answersInterrupt(run agent.Run) bool {
	if run.ThreadID == "" {
		return false
	}
	if as, err := a.Engine.GetAssistant(run.AssistantID); err == nil && a.Engine.JSGraph(as.GraphID) {
		return false
	}
	st, err := a.Engine.GetState(run.ThreadID, "")
	return err == nil && len(st.Interrupts) > 0
}

// interruptedValues reports whether a values chunk carries interrupts.
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
