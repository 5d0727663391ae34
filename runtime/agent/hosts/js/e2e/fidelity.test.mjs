// State, store and streaming fidelity of LangGraph.js graphs
// (testdata/graphs/js-agent) served by a real `slipway agent` (AGENT_URL),
// driven through the official @langchain/langgraph-sdk.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Client } from "@langchain/langgraph-sdk";

const client = new Client({ apiUrl: process.env.AGENT_URL, callerOptions: { maxRetries: 0 } });

async function collect(stream) {
  const out = [];
  for await (const chunk of stream) out.push(chunk);
  return out;
}

test("the store from inside a graph: a node reads API items and its writes are visible through the API", async () => {
  const user = `u${Date.now()}`;
  await client.store.putItem(["memories", user], "profile", { name: "Ada", likes: "tea" });
  const chunks = await collect(
    client.runs.stream(null, "memory", { input: { user, note: "buy tea" }, streamMode: ["custom", "values"] }),
  );
  assert.ok(!chunks.some((c) => c.event === "error"), JSON.stringify(chunks));
  const custom = chunks.filter((c) => c.event === "custom").map((c) => c.data);
  assert.deepEqual(custom[0], { profile: { name: "Ada", likes: "tea" } });
  assert.deepEqual(custom[1], { found: ["last_note"] });
  const seen = chunks.filter((c) => c.event === "values").at(-1).data.seen;
  assert.deepEqual(seen.profile, { name: "Ada", likes: "tea" });
  assert.deepEqual(seen.found, [[["memories", user], "last_note"]]);

  const item = await client.store.getItem(["memories", user], "last_note");
  assert.deepEqual(item.value, { text: "buy tea" });
  assert.deepEqual(item.namespace, ["memories", user]);
  const gone = await client.store.getItem(["memories", user], "scratch").catch((err) => (err.status === 404 ? null : Promise.reject(err)));
  assert.equal(gone, null, "the node's delete reached the store");
  const search = await client.store.searchItems(["memories", user]);
  assert.deepEqual(search.items.map((i) => i.key).sort(), ["last_note", "profile"]);
});

test("a subgraph: stream_subgraphs names events mode|namespace; its state, checkpoint_ns and interrupt", async () => {
  const thread = await client.threads.create();
  const chunks = await collect(
    client.runs.stream(thread.thread_id, "parent", { input: { topic: " boats " }, streamMode: ["updates", "values"], streamSubgraphs: true }),
  );
  assert.ok(!chunks.some((c) => c.event === "error"), JSON.stringify(chunks));
  const names = chunks.map((c) => c.event);
  const sub = names.filter((n) => n.startsWith("updates|"));
  assert.ok(sub.length >= 1, names.join(","));
  assert.match(sub[0], /^updates\|editor:[0-9a-f-]+$/);
  const write = chunks.find((c) => c.event === sub[0]);
  assert.deepEqual(write.data, { write: { draft: "a draft about boats" } });
  assert.ok(names.some((n) => /^values\|editor:/.test(n)), names.join(","));
  assert.ok(names.includes("updates") && names.includes("values"), "the root graph's events keep their plain names");

  // The subgraph stopped at interrupt(): the thread is interrupted.
  const t = await client.threads.get(thread.thread_id);
  assert.equal(t.status, "interrupted");
  const [, interrupts] = Object.entries(t.interrupts)[0];
  assert.deepEqual(interrupts[0].value, { draft: "a draft about boats" });

  const state = await client.threads.getState(thread.thread_id);
  assert.deepEqual(state.next, ["editor"]);
  const ns = state.tasks[0].checkpoint.checkpoint_ns;
  assert.match(ns, /^editor:/);
  assert.deepEqual(state.tasks[0].interrupts[0].value, { draft: "a draft about boats" });

  // subgraphs: true puts the subgraph's state inside the task.
  const deep = await client.threads.getState(thread.thread_id, undefined, { subgraphs: true });
  assert.deepEqual(deep.tasks[0].state.values, { topic: "boats", draft: "a draft about boats" });
  assert.deepEqual(deep.tasks[0].state.next, ["check"]);
  const atCheckpoint = await client.threads.getState(thread.thread_id, { checkpoint_id: state.checkpoint.checkpoint_id }, { subgraphs: true });
  assert.deepEqual(atCheckpoint.tasks[0].state.next, ["check"]);
  const byId = await client.threads.getState(thread.thread_id, state.checkpoint.checkpoint_id, { subgraphs: true });
  assert.deepEqual(byId.tasks[0].state.values.draft, "a draft about boats");

  // checkpoint_ns names the subgraph's own state.
  const child = await client.threads.getState(thread.thread_id, { checkpoint_ns: ns });
  assert.deepEqual(child.values.draft, "a draft about boats");
  assert.deepEqual(child.next, ["check"]);
  assert.equal(child.checkpoint.checkpoint_ns, ns);
  const childHistory = await client.threads.getHistory(thread.thread_id, { checkpoint: { checkpoint_ns: ns } });
  assert.ok(childHistory.length >= 2 && childHistory.every((h) => h.checkpoint.checkpoint_ns === ns), JSON.stringify(childHistory.map((h) => h.checkpoint)));

  // A namespace without checkpoints has an empty state, as LangGraph reads it.
  const none = await client.threads.getState(thread.thread_id, { checkpoint_ns: "nowhere:1" });
  assert.deepEqual([none.values, none.next], [{}, []]);

  const out = await client.runs.wait(thread.thread_id, "parent", { command: { resume: "yes" } });
  assert.equal(out.published, "a draft about boats");
  assert.equal((await client.threads.get(thread.thread_id)).status, "idle");
});

test("interrupt_before and interrupt_after on runs stop the graph there; a null input goes on", async () => {
  const thread = await client.threads.create();
  await client.runs.wait(thread.thread_id, "steps", { input: {}, interruptBefore: ["two"] });
  let state = await client.threads.getState(thread.thread_id);
  assert.deepEqual(state.values.steps, ["one"]);
  assert.deepEqual(state.next, ["two"]);
  assert.equal((await client.threads.get(thread.thread_id)).status, "interrupted");

  await client.runs.wait(thread.thread_id, "steps", { input: null, interruptAfter: ["two"] });
  state = await client.threads.getState(thread.thread_id);
  assert.deepEqual(state.values.steps, ["one", "two"]);
  assert.deepEqual(state.next, ["three"]);

  const values = await client.runs.wait(thread.thread_id, "steps", { input: null });
  assert.deepEqual(values.steps, ["one", "two", "three"]);
  assert.equal((await client.threads.get(thread.thread_id)).status, "idle");

  // "*" stops before every node.
  const every = await client.threads.create();
  await client.runs.wait(every.thread_id, "steps", { input: {}, interruptBefore: "*" });
  assert.deepEqual((await client.threads.getState(every.thread_id)).next, ["one"]);
  await client.runs.wait(every.thread_id, "steps", { input: null, interruptAfter: "*" });
  const after = await client.threads.getState(every.thread_id);
  assert.deepEqual([after.values.steps, after.next], [["one"], ["two"]]);
});

test("interrupts compiled into a graph stop its assistants' runs too", async () => {
  const assistant = await client.assistants.create({ graphId: "gated", config: { configurable: { delay_ms: 0 } } });
  const thread = await client.threads.create();
  await client.runs.wait(thread.thread_id, assistant.assistant_id, { input: {} });
  let state = await client.threads.getState(thread.thread_id);
  assert.deepEqual([state.values.steps, state.next], [["one"], ["two"]]);
  assert.equal((await client.threads.get(thread.thread_id)).status, "interrupted");
  await client.runs.wait(thread.thread_id, assistant.assistant_id, { input: null });
  state = await client.threads.getState(thread.thread_id);
  assert.deepEqual([state.values.steps, state.next], [["one", "two"], ["three"]]);
  const values = await client.runs.wait(thread.thread_id, assistant.assistant_id, { input: null });
  assert.deepEqual(values.steps, ["one", "two", "three"]);
});

test("time travel: a run from an earlier checkpoint (checkpoint_id or checkpoint) and a fork through update_state", async () => {
  const thread = await client.threads.create();
  await client.runs.wait(thread.thread_id, "steps", { input: {} });
  const history = await client.threads.getHistory(thread.thread_id);
  assert.deepEqual(history.map((h) => h.metadata.step), [3, 2, 1, 0, -1]);
  const afterOne = history.find((h) => h.metadata.step === 1);
  assert.deepEqual(afterOne.next, ["two"]);

  // Replay from after "one": "two" and "three" run again on a new branch.
  const replay = await client.runs.wait(thread.thread_id, "steps", { input: null, checkpointId: afterOne.checkpoint.checkpoint_id });
  assert.deepEqual(replay.steps, ["one", "two", "three"]);
  // LangGraph starts the branch with a "fork" checkpoint whose parent is the chosen one.
  const replayed = await client.threads.getHistory(thread.thread_id, { limit: 3 });
  assert.equal(replayed.length, 3);
  assert.deepEqual(replayed.map((h) => h.metadata.source), ["loop", "loop", "fork"]);
  assert.equal(replayed[2].parent_checkpoint.checkpoint_id, afterOne.checkpoint.checkpoint_id, "the branch starts at the chosen checkpoint");

  // The same through the checkpoint object.
  await client.runs.wait(thread.thread_id, "steps", { input: null, checkpoint: { checkpoint_id: afterOne.checkpoint.checkpoint_id } });
  const again = await client.threads.getHistory(thread.thread_id, { limit: 3 });
  assert.equal(again[2].parent_checkpoint.checkpoint_id, afterOne.checkpoint.checkpoint_id);

  // A fork: update the state as it was after "one", then run on from it.
  const fork = await client.threads.updateState(thread.thread_id, {
    values: { steps: ["edited"] },
    asNode: "one",
    checkpointId: afterOne.checkpoint.checkpoint_id,
  });
  const forked = await client.threads.getState(thread.thread_id);
  assert.equal(forked.checkpoint.checkpoint_id, fork.checkpoint.checkpoint_id);
  assert.deepEqual(forked.values.steps, ["one", "edited"]);
  assert.deepEqual(forked.next, ["two"]);
  assert.equal(forked.parent_checkpoint.checkpoint_id, afterOne.checkpoint.checkpoint_id);
  const out = await client.runs.wait(thread.thread_id, "steps", { input: null });
  assert.deepEqual(out.steps, ["one", "edited", "two", "three"]);
});

test("threads.copy copies a host thread's checkpoints; history filters by metadata, before and limit", async () => {
  const thread = await client.threads.create();
  await client.runs.wait(thread.thread_id, "steps", { input: {} });
  const copy = await client.threads.copy(thread.thread_id);
  assert.notEqual(copy.thread_id, thread.thread_id);
  const [a, b] = await Promise.all([client.threads.getState(thread.thread_id), client.threads.getState(copy.thread_id)]);
  assert.deepEqual(b.values, a.values);
  assert.equal(b.checkpoint.thread_id, copy.thread_id);
  assert.equal(b.checkpoint.checkpoint_id, a.checkpoint.checkpoint_id);
  const ha = await client.threads.getHistory(thread.thread_id);
  const hb = await client.threads.getHistory(copy.thread_id);
  assert.deepEqual(hb.map((h) => h.checkpoint.checkpoint_id), ha.map((h) => h.checkpoint.checkpoint_id));
  // The copy goes its own way.
  await client.threads.updateState(copy.thread_id, { values: { steps: ["copy only"] }, asNode: "three" });
  assert.deepEqual((await client.threads.getState(thread.thread_id)).values.steps, ["one", "two", "three"]);
  assert.deepEqual((await client.threads.getState(copy.thread_id)).values.steps, ["one", "two", "three", "copy only"]);

  const loops = await client.threads.getHistory(thread.thread_id, { metadata: { source: "loop" } });
  assert.deepEqual(loops.map((h) => h.metadata.step), [3, 2, 1, 0]);
  const input = await client.threads.getHistory(thread.thread_id, { metadata: { source: "input" } });
  assert.deepEqual(input.map((h) => h.metadata.step), [-1]);
  const before = await client.threads.getHistory(thread.thread_id, { before: { configurable: { checkpoint_id: ha[1].checkpoint.checkpoint_id } }, limit: 2 });
  assert.deepEqual(before.map((h) => h.metadata.step), [1, 0]);
  // The reference server takes before as a checkpoint id string only.
  const beforeId = await client.threads.getHistory(thread.thread_id, { before: ha[1].checkpoint.checkpoint_id, limit: 2 });
  assert.deepEqual(beforeId.map((h) => h.metadata.step), [1, 0]);
  const one = await client.threads.getHistory(thread.thread_id, { checkpoint: { checkpoint_id: ha[2].checkpoint.checkpoint_id } });
  assert.deepEqual(one.map((h) => h.checkpoint.checkpoint_id), [ha[2].checkpoint.checkpoint_id]);
});

test("a host graph's drawing (with xray), schemas and subgraphs come from the compiled graph", async () => {
  const flat = await client.assistants.getGraph("parent");
  assert.deepEqual(flat.nodes.map((n) => n.id).sort(), ["__end__", "__start__", "editor", "plan", "publish"]);
  assert.deepEqual(
    flat.edges.map((e) => `${e.source}>${e.target}`).sort(),
    ["__start__>plan", "editor>publish", "plan>editor", "publish>__end__"],
  );
  const xray = await client.assistants.getGraph("parent", { xray: true });
  const ids = xray.nodes.map((n) => n.id);
  assert.ok(ids.includes("editor:write") && ids.includes("editor:check"), ids.join(","));
  await assert.rejects(client.assistants.getGraph("parent", { xray: "deep" }), (err) => err.status === 422);
  const one = await client.assistants.getGraph("parent", { xray: 1 });
  assert.ok(one.nodes.some((n) => n.id === "editor:write"));

  // Typed schemas of a zod-state graph, with its context schema.
  const typed = await client.assistants.getSchemas("memory");
  assert.equal(typed.graph_id, "memory");
  assert.equal(typed.state_schema.properties.user.type, "string");
  assert.equal(typed.state_schema.properties.user.description, "whose memories");
  assert.deepEqual(Object.keys(typed.input_schema.properties).sort(), ["note", "seen", "user"]);
  assert.deepEqual(typed.context_schema.properties.tone.enum, ["plain", "warm"]);
  // An Annotation-state graph: its channels.
  const plain = await client.assistants.getSchemas("parent");
  assert.deepEqual(Object.keys(plain.state_schema.properties).sort(), ["approved", "draft", "published", "topic"]);

  const subs = await client.assistants.getSubgraphs("parent");
  assert.deepEqual(Object.keys(subs), ["editor"]);
  // The reference server's subgraph shape: {state, input, output, config}.
  assert.deepEqual(Object.keys(subs.editor.state.properties).sort(), ["approved", "draft", "topic"]);
  assert.deepEqual(Object.keys(await client.assistants.getSubgraphs("parent", { namespace: "editor", recurse: true })), ["editor"]);
  assert.deepEqual(await client.assistants.getSubgraphs("steps"), {});
});

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function waitStatus(threadId, runId, want, ms = 10000) {
  const end = Date.now() + ms;
  for (;;) {
    const run = await client.runs.get(threadId, runId);
    if (want.includes(run.status) || Date.now() > end) return run;
    await sleep(50);
  }
}

test("the events mode streams LangChain's streamEvents v2 beside the other modes", async () => {
  const chunks = await collect(client.runs.stream(null, "react", { input: { messages: [{ role: "user", content: "weather in Lima" }] }, streamMode: ["events", "updates"] }));
  assert.equal(chunks[0].event, "metadata");
  const events = chunks.filter((c) => c.event === "events").map((c) => c.data);
  const kinds = new Set(events.map((e) => e.event));
  for (const k of ["on_chain_start", "on_chain_end", "on_chat_model_start", "on_chat_model_stream", "on_chat_model_end", "on_tool_start", "on_tool_end"]) {
    assert.ok(kinds.has(k), `${k} in ${[...kinds].join(",")}`);
  }
  assert.equal(events[0].event, "on_chain_start");
  assert.equal(events[0].run_id, chunks[0].data.run_id, "the root run is the API's run");
  const token = events.find((e) => e.event === "on_chat_model_stream");
  assert.equal(token.metadata.langgraph_node, "agent");
  assert.equal(typeof token.data.chunk.content, "string");
  const tool = events.find((e) => e.event === "on_tool_end");
  assert.equal(tool.name, "get_weather");
  assert.ok(!events.some((e) => e.event === "on_chain_stream" && e.run_id === chunks[0].data.run_id), "the root's stream events become the other modes");
  assert.deepEqual(chunks.filter((c) => c.event === "updates").map((c) => Object.keys(c.data)[0]), ["agent", "tools", "agent"]);
});

test("debug, tasks and checkpoints modes", async () => {
  const chunks = await collect(client.runs.stream(null, "steps", { input: {}, streamMode: ["debug", "tasks", "checkpoints"] }));
  const debug = chunks.filter((c) => c.event === "debug").map((c) => c.data);
  assert.deepEqual([...new Set(debug.map((d) => d.type))].sort(), ["checkpoint", "task", "task_result"]);
  const tasks = chunks.filter((c) => c.event === "tasks").map((c) => c.data);
  assert.deepEqual(tasks.filter((t) => "input" in t).map((t) => t.name), ["one", "two", "three"]);
  const results = tasks.filter((t) => "result" in t);
  assert.deepEqual(results.map((t) => t.name), ["one", "two", "three"]);
  assert.deepEqual(results[0].result, { steps: ["one"] });
  const cps = chunks.filter((c) => c.event === "checkpoints").map((c) => c.data);
  assert.deepEqual(cps.map((c) => c.metadata.step), [-1, 0, 1, 2, 3]);
  assert.deepEqual(cps.at(-1).values.steps, ["one", "two", "three"]);
  assert.deepEqual(cps[1].next, ["one"]);
  // As the reference server shapes them: checkpoint references beside the configs.
  const last = cps.at(-1);
  assert.equal(last.checkpoint.checkpoint_id, last.config.configurable.checkpoint_id);
  assert.equal(last.parent_checkpoint.checkpoint_id, cps.at(-2).checkpoint.checkpoint_id);
  assert.equal(last.parent_config.configurable.checkpoint_id, cps.at(-2).checkpoint.checkpoint_id);
  assert.ok(!("parentConfig" in last));
  assert.ok(!Object.keys(last.config.configurable).some((k) => k.startsWith("__")), Object.keys(last.config.configurable).join(","));
  const dcp = debug.find((d) => d.type === "checkpoint").payload;
  assert.ok(dcp.checkpoint.checkpoint_id && "parent_checkpoint" in dcp);
});

test("an error event carries the error's type and message; the run ends error", async () => {
  const thread = await client.threads.create();
  const chunks = await collect(
    client.runs.stream(thread.thread_id, "steps", { input: {}, config: { configurable: { fail: "two" } }, streamMode: ["updates"] }),
  );
  const err = chunks.find((c) => c.event === "error");
  assert.deepEqual(err.data, { error: "RangeError", message: "step two failed" });
  const [run] = await client.runs.list(thread.thread_id);
  assert.equal(run.status, "error");
  assert.equal((await client.threads.get(thread.thread_id)).status, "error");
  assert.deepEqual((await client.threads.getState(thread.thread_id)).values.steps, ["one"]);

  // config.recursion_limit reaches LangGraph (as recursionLimit): three steps do not fit in two.
  const limited = await collect(client.runs.stream(null, "steps", { input: {}, config: { recursion_limit: 2 }, streamMode: ["updates"] }));
  assert.equal(limited.find((c) => c.event === "error")?.data.error, "GraphRecursionError", JSON.stringify(limited));
});

test("resumable streams: joinStream replays from the start and resumes after Last-Event-ID", async () => {
  const thread = await client.threads.create();
  const run = await client.runs.create(thread.thread_id, "steps", {
    input: {},
    config: { configurable: { delay_ms: 150 } },
    streamMode: ["custom", "updates"],
    streamResumable: true,
  });
  const all = await collect(client.runs.joinStream(thread.thread_id, run.run_id, { lastEventId: "-1" }));
  const names = all.map((c) => c.event);
  assert.equal(names[0], "metadata");
  assert.deepEqual(names.filter((n) => n === "custom").length, 3);
  assert.deepEqual(names.filter((n) => n === "updates").length, 3);
  // Resume after the second event: exactly what followed it, again.
  const rest = await collect(client.runs.joinStream(thread.thread_id, run.run_id, { lastEventId: all[1].id }));
  assert.deepEqual(rest.map((c) => [c.id, c.event]), all.slice(2).map((c) => [c.id, c.event]));
});

test("on_disconnect cancel: a client that goes away cancels its run in the host", async () => {
  const thread = await client.threads.create();
  const controller = new AbortController();
  let runId;
  try {
    for await (const chunk of client.runs.stream(thread.thread_id, "steps", {
      input: {},
      config: { configurable: { delay_ms: 400 } },
      streamMode: ["custom"],
      onDisconnect: "cancel",
      signal: controller.signal,
    })) {
      if (chunk.event === "metadata") runId = chunk.data.run_id;
      if (chunk.event === "custom") controller.abort();
    }
  } catch (err) {
    assert.equal(err.name, "AbortError");
  }
  const run = await waitStatus(thread.thread_id, runId, ["interrupted", "success", "error"]);
  assert.equal(run.status, "interrupted");
  const state = await client.threads.getState(thread.thread_id);
  assert.ok(state.values.steps.length < 3, JSON.stringify(state.values));
});
