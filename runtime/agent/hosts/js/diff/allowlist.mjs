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
    // Not in streamed events: there both show checkpoint_map.
    path: /^(?!(events|interrupted|resumed)\.)[^]*\.checkpoint_map$/,
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
  // ---- the rest of the API (api.scenarios.mjs) ----
  {
    scenario: /^(assistants|threads|runs|errors):/,
    path: /\.detail$/,
    reason: "error words: the JS development server answers errors as plain text, some without the id (\"Assistant not found\"); Slipway answers {\"detail\": ...} worded as the Python reference server (\"Assistant <id> not found\"). Statuses are compared",
  },
  {
    // The SDK's patchState sends PATCH /threads/{id}/state, which no
    // server routes.
    scenario: /^threads:/,
    path: /^patch\.status$/,
    reason: "a method a path does not have: Slipway answers 405 Method Not Allowed, as the Python reference server (Starlette) does; the JS development server (Hono) answers 404",
  },
  {
    scenario: /^errors:/,
    path: /^(badBody|badField|badRun|badThreadId)\.status$/,
    reason: "a malformed request: the JS development server answers 400 with a zod report, Slipway 422 with [{loc, msg, type}] as the Python reference server",
  },
  {
    scenario: /^errors:/,
    path: /^busy\.status$/,
    reason: "a run refused by multitask_strategy reject while the thread is busy: 409 Conflict on Slipway and the Python reference server, 422 on the JS development server",
  },
  {
    scenario: /^assistants: create/,
    path: /^sortedByName(\.|$)/,
    reason: "the JS development server ignores sort_by and sort_order in assistant search (always newest first); Slipway sorts as asked, as the Python reference server does",
  },
  {
    scenario: /^assistants: graph/,
    path: /^(subgraphs|recursive)(\.|$)/,
    reason: "the JS development server answers 500 for the subgraphs of a JavaScript (not TypeScript) graph with an Annotation state (its TypeScript parser has no types to read); Slipway lists them with their channels",
  },
  {
    scenario: /^threads: create/,
    path: /^(byValues|copy\.values|copy\.metadata\.thread_id)(\.|$)|^[a-z]+(\.\d+)?\.values$|\.config\.configurable$/,
    reason: "thread records: Slipway shows a thread that never ran with values {} (the JS development server leaves values out and its values filter matches such a thread), a copy with its values and its source's metadata, and omits an empty config.configurable",
  },
  {
    scenario: /^threads: state of a thread without checkpoints/,
    path: /^[a-zA-Z]+\.metadata$/,
    reason: "the state of a thread without checkpoints: Slipway answers metadata null, as the Python reference server does; the JS development server leaves it out (both answer checkpoint and created_at null)",
  },
  {
    scenario: /^runs: create/,
    path: /\.kwargs\.(config|context|resumable|subgraphs|temporary)$|\.multitask_strategy$|^(run|second)\.status$|^listed(\.|$)/,
    reason: "run records: both reference servers store the run's resolved config (its ids, the merged metadata) and the flags they run with in its kwargs; Slipway keeps the config the client gave (null when none) and resolves it when the run starts. The JS development server also defaults multitask_strategy to reject (Slipway and the Python reference server: enqueue) and ignores offset in runs.list; whether a new run is still pending depends on when the worker picks it up",
  },
  {
    path: /^[a-zA-Z]+(\.\d+)?\.error$/,
    reason: "a thread's error (the JS SDK's Thread.error): Slipway shows its last run's failure or cancel, null after a success, as the Python reference server does; the JS development server leaves it out",
  },
  {
    scenario: /^runs: cancel/,
    path: /^(status|threadStatus)$/,
    reason: "owned elsewhere (cancel timing): a cancelled run is interrupted on Slipway and the Python reference server; the JS development server reports the abort error the node throws",
  },
];

export function allowed(scenario, path) {
  return allowlist.some((a) => (!a.scenario || a.scenario.test(scenario)) && a.path.test(path));
}
