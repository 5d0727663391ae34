// State operations and cancellation of LangGraph.js graphs through the
// official JS SDK, as the reference servers answer them
// (testdata/graphs/js-agent/stateops.json, served at AGENT_URL): cancel is
// recorded before it answers, supersteps on thread create, and
// updateState as a node of a graph a factory builds from the config.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Client } from "@langchain/langgraph-sdk";

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const client = new Client({ apiUrl: process.env.AGENT_URL, callerOptions: { maxRetries: 0 } });

// A lingering run, once its node is running.
async function startedRun() {
  const thread = await client.threads.create();
  let runId;
  for await (const chunk of client.runs.stream(thread.thread_id, "lingering", { input: {}, streamMode: ["custom"] })) {
    if (chunk.event === "metadata") runId = chunk.data.run_id;
    if (chunk.event === "custom") break;
  }
  return [thread.thread_id, runId];
}

async function status(promise) {
  try {
    await promise;
    return 200;
  } catch (err) {
    return err.status;
  }
}

test("a cancelled run reads interrupted as soon as cancel answers", async () => {
  const [threadId, runId] = await startedRun();
  const t0 = Date.now();
  await client.runs.cancel(threadId, runId); // no wait: 202
  assert.equal((await client.runs.get(threadId, runId)).status, "interrupted");
  // The node was still cleaning up (800 ms): the answer did not wait for it.
  assert.ok(Date.now() - t0 < 700, `cancel took ${Date.now() - t0} ms`);
  await client.runs.join(threadId, runId);
  assert.equal((await client.runs.get(threadId, runId)).status, "interrupted");
  assert.notEqual((await client.threads.get(threadId)).status, "busy");
});

test("a rollback cancel ends the run at once, then it is gone", async () => {
  const [threadId, runId] = await startedRun();
  await client.runs.cancel(threadId, runId, false, "rollback");
  // Ended right away: interrupted while it unwinds (the Python reference,
  // with nobody streaming it, deletes it at once).
  const right = await client.runs.get(threadId, runId).catch((err) => ({ status: err.status }));
  assert.ok(right.status === "interrupted" || right.status === 404, `right after a rollback: ${right.status}`);
  // Once it has unwound, the rollback deletes it.
  const until = Date.now() + 15000;
  while ((await client.threads.get(threadId)).status === "busy" && Date.now() < until) await sleep(20);
  assert.equal(await status(client.runs.get(threadId, runId)), 404);
});

test("supersteps on create apply each superstep as a checkpoint, as its nodes", async () => {
  const thread = await client.threads.create({
    graphId: "steps",
    supersteps: [
      { updates: [{ values: { steps: ["a"] }, asNode: "one" }] },
      { updates: [{ values: { steps: ["b"] }, asNode: "two" }] },
    ],
  });
  assert.deepEqual(thread.values, { steps: ["a", "b"] });
  const state = await client.threads.getState(thread.thread_id);
  assert.deepEqual(state.values, { steps: ["a", "b"] });
  assert.deepEqual(state.next, ["three"]);
  const history = await client.threads.getHistory(thread.thread_id);
  assert.deepEqual(history.filter((h) => h.metadata?.source === "update").map((h) => h.values), [{ steps: ["a", "b"] }, { steps: ["a"] }]);
  // The thread continues from where the supersteps left it.
  const out = await client.runs.wait(thread.thread_id, "steps", { input: null });
  assert.deepEqual(out.steps, ["a", "b", "three"]);
});

test("supersteps that fail leave no thread", async () => {
  const threadId = "5d0c7a52-3c1e-4f7a-8f0e-2b9d6c4a1e77";
  const bad = client.threads.create({
    threadId,
    graphId: "steps",
    supersteps: [
      { updates: [{ values: { steps: ["a"] }, asNode: "one" }] },
      { updates: [{ values: { steps: ["b"] }, asNode: "no_such_node" }] },
    ],
  });
  // The graph's refusal, in the reference's status.
  assert.equal(await status(bad), 400);
  assert.equal(await status(client.threads.get(threadId)), 404);
});

test("updateState as a node of a graph built from the assistant's config", async () => {
  const assistant = await client.assistants.create({ graphId: "configured", config: { configurable: { nodes: ["draft", "review"] } } });
  const thread = await client.threads.create();
  assert.deepEqual(await client.runs.wait(thread.thread_id, assistant.assistant_id, { input: {} }), { trail: ["draft", "review"] });
  // "draft" exists only in the graph made from the assistant's config.
  await client.threads.updateState(thread.thread_id, { values: { trail: ["edited"] }, asNode: "draft" });
  const state = await client.threads.getState(thread.thread_id);
  assert.deepEqual(state.values.trail, ["draft", "review", "edited"]);
  assert.deepEqual(state.next, ["review"]);
});

test("updateState as a node of a graph built from the run's config", async () => {
  const thread = await client.threads.create();
  await client.runs.wait(thread.thread_id, "configured", { input: {}, config: { configurable: { nodes: ["plan", "act"] } } });
  await client.threads.updateState(thread.thread_id, { values: { trail: ["fixed"] }, asNode: "act" });
  const state = await client.threads.getState(thread.thread_id);
  assert.deepEqual(state.values.trail, ["plan", "act", "fixed"]);
  assert.deepEqual(state.next, []);
});
