// Scenarios over the rest of the agent API the JS SDK calls: assistants,
// threads, runs, store, custom routes and errors. Each takes a client and
// returns what it saw; diff.test.mjs runs them against both servers.
// Every scenario tags what it creates (metadata) and searches by that tag,
// so both servers' answers cover the same objects whatever ran before.

// failure runs a call that must fail and records what a client sees of the
// error: its status and the body's keys (Slipway keeps its documented
// {"detail": ...} shape; the words are compared where they matter).
async function failure(call) {
  try {
    await call();
  } catch (err) {
    let body;
    try {
      body = JSON.parse(err.text);
    } catch {
      body = err.text;
    }
    // The JS reference answers an error as text, Slipway (as the Python
    // reference) as {"detail": text}: the status and the words compare.
    return { status: err.status, detail: body && typeof body === "object" ? (body.detail ?? body.message ?? body) : body };
  }
  return { status: "no error" };
}

// raw: a request the SDK has no method for (or one it would refuse to
// send), through plain fetch.
async function raw(c, method, path, body) {
  const res = await fetch(c.threads.apiUrl + path, {
    method,
    headers: body === undefined ? {} : { "content-type": "application/json" },
    body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let json;
  try {
    json = JSON.parse(text);
  } catch {
    json = text;
  }
  return { status: res.status, body: json };
}

const shapeOf = (r) => ({ status: r.status, detail: r.body && typeof r.body === "object" ? (r.body.detail ?? r.body.message ?? r.body) : r.body });
const human = (content) => ({ messages: [{ role: "user", content }] });

export const apiScenarios = {
  async "assistants: create, get, update, versions, set latest, search, count, delete"(c) {
    const tag = { suite: "assistants-crud" };
    const created = await c.assistants.create({
      graphId: "steps",
      name: "stepper",
      description: "three steps",
      config: { configurable: { delay_ms: 0 } },
      metadata: { ...tag, kind: "first" },
    });
    const id = created.assistant_id;
    const got = await c.assistants.get(id);
    const updated = await c.assistants.update(id, { metadata: { ...tag, kind: "second" }, config: { configurable: { delay_ms: 1 } } });
    const versions = await c.assistants.getVersions(id);
    const latest = await c.assistants.setLatest(id, 1);
    const afterLatest = await c.assistants.get(id);
    const kept = await c.assistants.create({ graphId: "steps", assistantId: id, ifExists: "do_nothing" });
    const clash = await failure(() => c.assistants.create({ graphId: "steps", assistantId: id, ifExists: "raise" }));
    const second = await c.assistants.create({ graphId: "approval", name: "approver", metadata: tag });
    const search = await c.assistants.search({ metadata: tag });
    const page = await c.assistants.search({ metadata: tag, limit: 1, offset: 1 });
    const sortedByName = await c.assistants.search({ metadata: tag, sortBy: "name", sortOrder: "asc" });
    const byGraph = await c.assistants.search({ graphId: "approval", metadata: tag });
    const count = await c.assistants.count({ metadata: tag });
    const countGraph = await c.assistants.count({ metadata: tag, graphId: "steps" });
    await c.assistants.delete(second.assistant_id);
    const gone = await failure(() => c.assistants.get(second.assistant_id));
    const countAfter = await c.assistants.count({ metadata: tag });
    return { created, got, updated, versions, latest, afterLatest, kept, clash, search, page, sortedByName, byGraph, count, countGraph, gone, countAfter };
  },

  async "assistants: the system assistants of the graphs"(c) {
    const react = await c.assistants.search({ graphId: "react", metadata: { created_by: "system" } });
    const steps = await c.assistants.get("steps");
    return { react, steps, count: await c.assistants.count({ graphId: "react", metadata: { created_by: "system" } }) };
  },

  async "assistants: graph, xray, subgraphs"(c) {
    const either = (call) => call().catch((err) => ({ status: err.status }));
    return {
      steps: await either(() => c.assistants.getGraph("steps")),
      parent: await either(() => c.assistants.getGraph("diff_parent")),
      parentXray: await either(() => c.assistants.getGraph("diff_parent", { xray: true })),
      subgraphs: await either(() => c.assistants.getSubgraphs("diff_parent")),
      recursive: await either(() => c.assistants.getSubgraphs("diff_parent", { recurse: true })),
      zod: await either(() => c.assistants.getGraph("zod_registry")),
    };
  },

  async "assistants: schemas of zod-state, zod-registry and context graphs"(c) {
    return {
      zod_state: await c.assistants.getSchemas("zod_state"),
      zod_registry: await c.assistants.getSchemas("zod_registry"),
      contextual: await c.assistants.getSchemas("contextual"),
      subgraphs: await c.assistants.getSubgraphs("zod_registry"),
    };
  },

  // The reference reads an Annotation graph's value types from its
  // TypeScript source; Slipway has the channels only: the keys compare.
  async "assistants: the keys of an Annotation graph's schemas"(c) {
    const keys = (s) => (s && s.properties ? Object.keys(s.properties).sort() : s ?? null);
    const typed = await c.assistants.getSchemas("typed");
    return Object.fromEntries(["input_schema", "output_schema", "state_schema"].map((k) => [k, keys(typed[k])]));
  },

  async "assistants: a run with context on a context-schema graph"(c) {
    const { thread_id } = await c.threads.create();
    const loud = await c.runs.wait(thread_id, "zod_registry", { input: { question: "ready" }, context: { tone: "loud" } });
    const assistant = await c.assistants.create({ graphId: "contextual", context: { user: "ada" }, metadata: { suite: "context" } });
    const fromAssistant = await c.runs.wait(null, assistant.assistant_id, { input: { question: "tea" } });
    return { loud, state: await c.threads.getState(thread_id), assistant, fromAssistant };
  },

  async "zod_state: wait, stream values and updates, state"(c) {
    const { thread_id } = await c.threads.create();
    const events = [];
    for await (const { event, data } of c.runs.stream(thread_id, "zod_state", { input: { topic: "tides", words: 3 }, streamMode: ["values", "updates"] })) {
      events.push({ event, data });
    }
    return { events, state: await c.threads.getState(thread_id), history: await c.threads.getHistory(thread_id) };
  },

  async "threads: create, get, update, search, count, copy, delete"(c) {
    const tag = { suite: "threads-crud" };
    const a = await c.threads.create({ metadata: { ...tag, n: 1 } });
    const b = await c.threads.create({ metadata: { ...tag, n: 2 }, graphId: "steps" });
    const got = await c.threads.get(a.thread_id);
    const updated = await c.threads.update(a.thread_id, { metadata: { extra: "yes" } });
    await c.runs.wait(b.thread_id, "steps", { input: {} });
    const searched = await c.threads.search({ metadata: tag, sortBy: "created_at", sortOrder: "asc" });
    const idle = await c.threads.search({ metadata: tag, status: "idle", sortBy: "created_at", sortOrder: "desc", limit: 1 });
    const byValues = await c.threads.search({ metadata: tag, values: { steps: ["one", "two", "three"] } });
    const count = await c.threads.count({ metadata: tag });
    const countIdle = await c.threads.count({ metadata: tag, status: "idle" });
    const copy = await c.threads.copy(b.thread_id);
    const copyState = await c.threads.getState(copy.thread_id);
    const copyHistory = await c.threads.getHistory(copy.thread_id);
    const kept = await c.threads.create({ threadId: a.thread_id, ifExists: "do_nothing" });
    const clash = await failure(() => c.threads.create({ threadId: a.thread_id, ifExists: "raise" }));
    await c.threads.delete(a.thread_id);
    const gone = await failure(() => c.threads.get(a.thread_id));
    return { got, updated, searched, idle, byValues, count, countIdle, copy, copyState, copyHistory, kept, clash, gone, countAfter: await c.threads.count({ metadata: tag }) };
  },

  async "threads: state at a checkpoint, history paging, patch metadata, update_state without a node"(c) {
    // Each call records its answer or its error's status: one the
    // reference lacks does not hide the others.
    const either = (call) => call().catch((err) => ({ status: err.status }));
    const { thread_id } = await c.threads.create({ graphId: "steps" });
    await c.runs.wait(thread_id, "steps", { input: {} });
    const history = await c.threads.getHistory(thread_id);
    const mid = history[2].checkpoint;
    const atCheckpoint = await either(() => c.threads.getState(thread_id, mid));
    const atCheckpointId = await either(() => c.threads.getState(thread_id, mid.checkpoint_id));
    const page = await c.threads.getHistory(thread_id, { limit: 2 });
    const before = await either(() => c.threads.getHistory(thread_id, { limit: 2, before: page[1].checkpoint.checkpoint_id }));
    const patch = await either(() => c.threads.patchState(thread_id, { reviewed: true }));
    const patched = await c.threads.getState(thread_id);
    const updated = await either(() => c.threads.updateState(thread_id, { values: { steps: ["by hand"] } }));
    const afterUpdate = await c.threads.getState(thread_id);
    const fromCheckpoint = await either(() => c.threads.updateState(thread_id, { values: { steps: ["forked"] }, checkpointId: mid.checkpoint_id, asNode: "one" }));
    const afterFork = await c.threads.getState(thread_id);
    return { history, atCheckpoint, atCheckpointId, page, before, patch, patched, updated, afterUpdate, fromCheckpoint, afterFork };
  },

  async "runs: create, join, list, get, join stream, delete"(c) {
    const { thread_id } = await c.threads.create();
    const run = await c.runs.create(thread_id, "steps", { input: {}, metadata: { suite: "runs" } });
    const joined = await c.runs.join(thread_id, run.run_id);
    const got = await c.runs.get(thread_id, run.run_id);
    const second = await c.runs.create(thread_id, "steps", { input: {}, streamMode: ["updates"] });
    const events = [];
    for await (const { event, data } of c.runs.joinStream(thread_id, second.run_id)) events.push({ event, data });
    // In creation order: the JS development server lists oldest first.
    const list = (await c.runs.list(thread_id)).sort((x, y) => new Date(x.created_at) - new Date(y.created_at));
    const listed = await c.runs.list(thread_id, { limit: 1, offset: 1 });
    await c.runs.delete(thread_id, run.run_id);
    const gone = await failure(() => c.runs.get(thread_id, run.run_id));
    return { run, joined, got, second, events, list, listed, gone, after: await c.runs.list(thread_id) };
  },

  async "runs: stateless wait, stream and background"(c) {
    const waited = await c.runs.wait(null, "steps", { input: {} });
    const events = [];
    for await (const { event, data } of c.runs.stream(null, "typed", { input: { name: "Lin" }, streamMode: ["values", "updates"] })) events.push({ event, data });
    return { waited, events };
  },

  async "runs: cancel a slow run"(c) {
    const { thread_id } = await c.threads.create();
    const run = await c.runs.create(thread_id, "steps", { input: {}, config: { configurable: { delay_ms: 3000 } } });
    await new Promise((r) => setTimeout(r, 300));
    await c.runs.cancel(thread_id, run.run_id, true);
    const got = await c.runs.get(thread_id, run.run_id);
    const thread = await c.threads.get(thread_id);
    return { status: got.status, threadStatus: thread.status };
  },

  // The JS reference runs a thread's later runs with the config earlier
  // ones were given (the Python reference does not).
  async "runs: a later run continues with the thread's config"(c) {
    const { thread_id } = await c.threads.create();
    for (const config of [{ configurable: { fail: "three" } }, undefined]) {
      const run = await c.runs.create(thread_id, "steps", { input: {}, config });
      await c.runs.join(thread_id, run.run_id).catch(() => {});
    }
    const runs = await c.runs.list(thread_id);
    return { statuses: runs.map((r) => r.status), config: (await c.threads.get(thread_id)).config };
  },

  // The thread after an interrupt shows the state the run reached.
  async "runs: cancel a run after its first step"(c) {
    const { thread_id } = await c.threads.create();
    const run = await c.runs.create(thread_id, "steps", { input: {}, config: { configurable: { delay_ms: 1200 } } });
    for (let i = 0; i < 400; i++) {
      if ((await c.threads.getState(thread_id)).values?.steps?.length) break;
      await new Promise((r) => setTimeout(r, 20));
    }
    await c.runs.cancel(thread_id, run.run_id, true);
    const got = await c.runs.get(thread_id, run.run_id);
    const thread = await c.threads.get(thread_id);
    const state = await c.threads.getState(thread_id);
    return { status: got.status, threadStatus: thread.status, threadValues: thread.values, values: state.values, next: state.next };
  },

  async "threads: state of a thread without checkpoints"(c) {
    const { thread_id } = await c.threads.create();
    const { thread_id: withGraph } = await c.threads.create({ graphId: "steps" });
    return { fresh: await c.threads.getState(thread_id), withGraph: await c.threads.getState(withGraph) };
  },

  async "store: put, get, search, list namespaces, delete"(c) {
    const ns = ["diff", "users"];
    await c.store.putItem(ns, "ada", { name: "Ada", lang: "en" });
    await c.store.putItem(ns, "lin", { name: "Lin", lang: "zh" });
    await c.store.putItem(["diff", "teams"], "core", { size: 3 });
    const got = await c.store.getItem(ns, "ada");
    const missing = await c.store.getItem(ns, "nobody");
    const all = await c.store.searchItems(["diff"], { limit: 10 });
    const filtered = await c.store.searchItems(ns, { filter: { lang: "zh" } });
    const namespaces = await c.store.listNamespaces({ prefix: ["diff"] });
    const deep = await c.store.listNamespaces({ prefix: ["diff"], maxDepth: 1 });
    await c.store.deleteItem(ns, "ada");
    const deleted = await c.store.getItem(ns, "ada");
    const sortItems = (r) => ({ ...r, items: [...r.items].sort((x, y) => (x.key < y.key ? -1 : 1)) });
    return { got, missing, all: sortItems(all), filtered, namespaces, deep, deleted };
  },

  async "custom routes: the project's app"(c) {
    return {
      hello: await raw(c, "GET", "/custom/hello?name=diff"),
      echo: await raw(c, "POST", "/custom/echo", { a: 1 }),
    };
  },

  async "errors: 404, 409 and 422 statuses and shapes"(c) {
    const unknown = "00000000-0000-4000-8000-000000000000";
    const { thread_id } = await c.threads.create();
    return {
      assistant: await failure(() => c.assistants.get(unknown)),
      assistantGraph: await failure(() => c.assistants.getGraph(unknown)),
      thread: await failure(() => c.threads.get(unknown)),
      threadState: await failure(() => c.threads.getState(unknown)),
      run: await failure(() => c.runs.get(thread_id, unknown)),
      runOnUnknownAssistant: await failure(() => c.runs.wait(thread_id, unknown, { input: {} })),
      runOnUnknownGraph: await failure(() => c.runs.wait(thread_id, "no_such_graph", { input: {} })),
      badThreadId: shapeOf(await raw(c, "GET", "/threads/not-a-uuid")),
      badBody: shapeOf(await raw(c, "POST", "/threads", "{not json")),
      badField: shapeOf(await raw(c, "POST", "/threads/search", { limit: "many" })),
      badRun: shapeOf(await raw(c, "POST", `/threads/${thread_id}/runs`, { input: {} })),
      clash: await failure(() => c.threads.create({ threadId: thread_id, ifExists: "raise" })),
      busy: await (async () => {
        const slow = await c.runs.create(thread_id, "steps", { input: {}, config: { configurable: { delay_ms: 1500 } } });
        const r = await failure(() => c.runs.create(thread_id, "steps", { input: {}, multitaskStrategy: "reject" }));
        await c.runs.join(thread_id, slow.run_id);
        return r;
      })(),
    };
  },
};
