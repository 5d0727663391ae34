// Drives LangGraph.js graphs (testdata/graphs/js-agent) served by a real
// `slipway agent` (AGENT_URL) through the official @langchain/langgraph-sdk.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Client } from "@langchain/langgraph-sdk";

const client = new Client({ apiUrl: process.env.AGENT_URL, callerOptions: { maxRetries: 0 } });
const human = (content) => ({ messages: [{ role: "user", content }] });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function collect(stream) {
  const out = [];
  for await (const chunk of stream) out.push(chunk);
  return out;
}

async function waitStatus(threadId, runId, want, ms = 10000) {
  const end = Date.now() + ms;
  for (;;) {
    const run = await client.runs.get(threadId, runId);
    if (want.includes(run.status) || Date.now() > end) return run;
    await sleep(50);
  }
}

test("a ReAct agent with a tool node streams updates and message tuples; state and history come from its checkpoints", async () => {
  const thread = await client.threads.create();
  const chunks = await collect(
    client.runs.stream(thread.thread_id, "react", { input: human("weather in Paris"), streamMode: ["updates", "messages-tuple"] }),
  );
  assert.equal(chunks[0].event, "metadata");
  const updates = chunks.filter((c) => c.event === "updates").map((c) => Object.keys(c.data)[0]);
  assert.deepEqual(updates, ["agent", "tools", "agent"]);
  const tuples = chunks.filter((c) => c.event === "messages");
  assert.ok(tuples.length > 3, "model tokens arrive as message tuples");
  const [msg, meta] = tuples.at(-1).data;
  assert.equal(msg.type, "ai");
  assert.equal(meta.langgraph_node, "agent");

  const state = await client.threads.getState(thread.thread_id);
  assert.deepEqual(
    state.values.messages.map((m) => [m.type, m.content]),
    [["human", "weather in Paris"], ["ai", ""], ["tool", "It is sunny in Paris."], ["ai", "The tool says: It is sunny in Paris."]],
  );
  assert.equal(state.values.messages[1].tool_calls[0].name, "get_weather");
  assert.deepEqual(state.next, []);
  assert.equal(state.checkpoint.thread_id, thread.thread_id);
  const history = await client.threads.getHistory(thread.thread_id);
  assert.deepEqual(history.map((h) => h.metadata.step), [3, 2, 1, 0, -1]);
  assert.equal(history[1].checkpoint.checkpoint_id, state.parent_checkpoint.checkpoint_id);
  const t = await client.threads.get(thread.thread_id);
  assert.equal(t.status, "idle");
  assert.equal(t.values.messages.length, 4);

  // A second turn continues the conversation from the checkpoints.
  await client.runs.wait(thread.thread_id, "react", { input: human("and in Rome") });
  const after = await client.threads.getState(thread.thread_id);
  assert.equal(after.values.messages.length, 8);
  assert.equal(after.values.messages.at(-1).content, "The tool says: It is sunny in Rome.");
});

test("messages mode builds partial messages from the model's chunks", async () => {
  const thread = await client.threads.create();
  const chunks = await collect(client.runs.stream(thread.thread_id, "react", { input: human("weather in Oslo"), streamMode: "messages" }));
  const names = new Set(chunks.map((c) => c.event));
  assert.ok(names.has("messages/metadata") && names.has("messages/partial"), [...names].join(","));
  const partials = chunks.filter((c) => c.event === "messages/partial").map((c) => c.data[0]);
  assert.equal(partials.at(-1).content, "The tool says: It is sunny in Oslo.");
});

test("interrupt() leaves the thread interrupted; Command resume continues it", async () => {
  const thread = await client.threads.create();
  const chunks = await collect(client.runs.stream(thread.thread_id, "approval", { input: { request: "deploy" }, streamMode: ["updates"] }));
  const intr = chunks.find((c) => c.event === "updates" && c.data.__interrupt__);
  assert.deepEqual(intr.data.__interrupt__[0].value, { question: "approve deploy?" });
  const t = await client.threads.get(thread.thread_id);
  assert.equal(t.status, "interrupted");
  const [taskId, interrupts] = Object.entries(t.interrupts)[0];
  assert.deepEqual(interrupts[0].value, { question: "approve deploy?" });
  const state = await client.threads.getState(thread.thread_id);
  assert.deepEqual(state.next, ["review"]);
  assert.equal(state.tasks[0].id, taskId);
  assert.deepEqual(state.tasks[0].interrupts[0].value, { question: "approve deploy?" });

  const values = await client.runs.wait(thread.thread_id, "approval", { command: { resume: "yes" } });
  assert.deepEqual(values.log, ["prepared deploy", "reviewed: yes", "did deploy"]);
  const done = await client.threads.get(thread.thread_id);
  assert.equal(done.status, "idle");
  assert.deepEqual(done.interrupts, {});
});

test("a TypeScript graph importing a TypeScript module runs without a loader in the project", async () => {
  const out = await client.runs.wait(null, "typed", { input: { name: "Ada" } });
  assert.equal(out.greeting, "Hello, Ada!");
});

test("custom events and several modes at once", async () => {
  const chunks = await collect(client.runs.stream(null, "steps", { input: {}, streamMode: ["custom", "values", "updates"] }));
  assert.deepEqual(chunks.filter((c) => c.event === "custom").map((c) => c.data.node), ["one", "two", "three"]);
  assert.deepEqual(chunks.filter((c) => c.event === "updates").map((c) => Object.keys(c.data)[0]), ["one", "two", "three"]);
  assert.deepEqual(chunks.filter((c) => c.event === "values").at(-1).data.steps, ["one", "two", "three"]);
});

const slow = (ms) => ({ input: {}, config: { configurable: { delay_ms: ms } } });

test("multitask strategies on a host graph: reject (409), interrupt, rollback", async () => {
  const t1 = await client.threads.create();
  const first = await client.runs.create(t1.thread_id, "steps", slow(400));
  await assert.rejects(
    client.runs.create(t1.thread_id, "steps", { input: {}, multitaskStrategy: "reject" }),
    (err) =>
      err.status === 409 &&
      err.message.includes("Thread is already running a task. Wait for it to finish or choose a different multitask strategy."),
  );
  await client.runs.join(t1.thread_id, first.run_id);
  assert.equal((await client.runs.get(t1.thread_id, first.run_id)).status, "success");

  const t2 = await client.threads.create();
  const victim = await client.runs.create(t2.thread_id, "steps", slow(1500));
  await waitStatus(t2.thread_id, victim.run_id, ["running"]);
  const next = await client.runs.create(t2.thread_id, "steps", { input: {}, multitaskStrategy: "interrupt" });
  await client.runs.join(t2.thread_id, next.run_id);
  assert.equal((await client.runs.get(t2.thread_id, victim.run_id)).status, "interrupted");
  assert.equal((await client.runs.get(t2.thread_id, next.run_id)).status, "success");

  const t3 = await client.threads.create();
  const doomed = await client.runs.create(t3.thread_id, "steps", slow(600));
  // Let it persist a superstep or two, which the rollback must delete.
  await sleep(900);
  const kept = await client.runs.create(t3.thread_id, "steps", { input: {}, multitaskStrategy: "rollback" });
  await client.runs.join(t3.thread_id, kept.run_id);
  await assert.rejects(client.runs.get(t3.thread_id, doomed.run_id), (err) => String(err).includes("404"));
  const state = await client.threads.getState(t3.thread_id);
  assert.deepEqual(state.values.steps, ["one", "two", "three"]);
  const history = await client.threads.getHistory(t3.thread_id);
  assert.equal(history.length, 5, "only the kept run's checkpoints remain");
});

test("cancel aborts the run in the host; it ends interrupted keeping its progress", async () => {
  const thread = await client.threads.create();
  const run = await client.runs.create(thread.thread_id, "steps", slow(700));
  await sleep(1000);
  await client.runs.cancel(thread.thread_id, run.run_id, true);
  assert.equal((await client.runs.get(thread.thread_id, run.run_id)).status, "interrupted");
  const state = await client.threads.getState(thread.thread_id);
  assert.ok(state.values.steps.length >= 1 && state.values.steps.length < 3, JSON.stringify(state.values));
});

test("update_state as a node, and history", async () => {
  const thread = await client.threads.create();
  await client.runs.wait(thread.thread_id, "steps", { input: {} });
  await client.threads.updateState(thread.thread_id, { values: { steps: ["manual"] }, asNode: "three" });
  const state = await client.threads.getState(thread.thread_id);
  assert.deepEqual(state.values.steps, ["one", "two", "three", "manual"]);
  assert.equal(state.metadata.source, "update");
  const t = await client.threads.get(thread.thread_id);
  assert.deepEqual(t.values.steps, ["one", "two", "three", "manual"]);
});

test("kill -9 of the host mid-run: that run ends error, the next continues from the last durable checkpoint", async () => {
  const thread = await client.threads.create();
  let pid, runId;
  for await (const chunk of client.runs.stream(thread.thread_id, "steps", { ...slow(800), streamMode: ["custom"] })) {
    if (chunk.event === "metadata") runId = chunk.data.run_id;
    if (chunk.event === "custom") {
      pid = chunk.data.pid;
      break; // the run goes on: on_disconnect defaults to continue
    }
  }
  const run = { run_id: runId };
  assert.ok(pid > 0, "the graph reports the host's pid");
  // Kill once the first superstep is durable, while "two" is running.
  for (let i = 0; i < 100; i++) {
    const st = await client.threads.getState(thread.thread_id);
    if (st.values.steps?.length === 1) break;
    await sleep(20);
  }
  process.kill(pid, "SIGKILL");
  const ended = await waitStatus(thread.thread_id, run.run_id, ["error", "success"]);
  assert.equal(ended.status, "error");
  const before = await client.threads.getState(thread.thread_id);
  assert.deepEqual(before.values.steps, ["one"]);
  assert.deepEqual(before.next, ["two"]);
  // Input null resumes the pending task from the checkpoint.
  const values = await client.runs.wait(thread.thread_id, "steps", { input: null });
  assert.deepEqual(values.steps, ["one", "two", "three"]);
});
