// Differences from the reference server that remain on purpose, each with
// its reason; the README's "Differences from the reference server" lists
// the same. An entry matches a field by the scenario's name (all when
// absent) and the field's path in what the scenario records (dot-separated
// keys and array indexes); matching fields are left out of the comparison
// on both sides.
export const allowlist = [
  {
    path: /(\.metadata|^events\.\d+\.data\.1)\.(langgraph_api_url|langgraph_host|langgraph_plan|ls_integration|user-agent)$|\.configurable\.user-agent$/,
    reason: "deployment facts the reference's API server adds to every run's metadata (its URL, plan, host kind, the client's user agent); Slipway's are not those of a LangGraph Platform deployment",
  },
  {
    path: /\.checkpoint_map$/,
    reason: "Slipway names a checkpoint by thread, namespace and id; the reference adds checkpoint_map (null outside subgraphs) to state and history",
  },
  {
    // A recorded state (`state`) or an entry of a recorded history
    // (`history.3`); not a thread's interrupts, which must match.
    path: /^(?!thread\.)[^.]+(\.\d+)?\.interrupts$/,
    reason: "Slipway's thread state also lists its tasks' interrupts at top level, as the Python reference server does; the JS reference only has them under tasks",
  },
  {
    path: /\.tool_call_chunks$/,
    reason: "the reference keeps an AI message chunk's empty tool_call_chunks in a task's result; Slipway shows the message as a message",
  },
  {
    path: /^(events|interrupted|resumed)\.\d+\.data\.payload\.tasks\.\d+\.(result|error)$/,
    reason: "the reference serialises a debug checkpoint event after LangGraph has gone on to run its next tasks and may show their result and error in it (it shares the task objects); Slipway serialises each event when it is produced",
  },
];

export function allowed(scenario, path) {
  return allowlist.some((a) => (!a.scenario || a.scenario.test(scenario)) && a.path.test(path));
}
