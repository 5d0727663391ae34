// Differential test: the same calls through the official
// @langchain/langgraph-sdk against the reference JavaScript server
// (REFERENCE_URL: @langchain/langgraph-api run by `langgraphjs dev`) and
// against `slipway agent` (AGENT_URL), both serving the graphs of
// testdata/graphs/js-agent/diff.json. Each scenario records what a client
// sees (SSE events in order, run results, state, history); ids and times
// are replaced by stable placeholders and the two records must be equal
// but for the differences allowed in allowlist.mjs, each of which the
// README lists with its reason.
import { test } from "node:test";
import { writeFileSync } from "node:fs";
import assert from "node:assert/strict";
import { Client } from "@langchain/langgraph-sdk";
import { allowed } from "./allowlist.mjs";
import { normalise, diff } from "./normalise.mjs";
import { apiScenarios } from "./api.scenarios.mjs";

const servers = {
  reference: new Client({ apiUrl: process.env.REFERENCE_URL, callerOptions: { maxRetries: 0 } }),
  slipway: new Client({ apiUrl: process.env.AGENT_URL, callerOptions: { maxRetries: 0 } }),
};
const human = (content) => ({ messages: [{ role: "user", content }] });

async function collect(stream) {
  const out = [];
  for await (const { event, data } of stream) out.push({ event, data });
  return out;
}

// Scenarios take a client and return what it saw.
const scenarios = {
  async "react: stream values, updates, messages-tuple, custom and debug; state and history"(c) {
    const { thread_id } = await c.threads.create();
    const events = await collect(
      c.runs.stream(thread_id, "react", {
        input: human("weather in Paris"),
        streamMode: ["values", "updates", "messages-tuple", "custom", "debug"],
      }),
    );
    const state = await c.threads.getState(thread_id);
    const history = await c.threads.getHistory(thread_id);
    return { events, state, history };
  },

  async "react: wait, then a second turn on the same thread"(c) {
    const { thread_id } = await c.threads.create();
    const first = await c.runs.wait(thread_id, "react", { input: human("weather in Rome") });
    const second = await c.runs.wait(thread_id, "react", { input: human("and in Oslo") });
    const thread = await c.threads.get(thread_id);
    return { first, second, thread: { status: thread.status, values: thread.values }, history: await c.threads.getHistory(thread_id) };
  },

  async "react: stream messages (partial and complete)"(c) {
    const { thread_id } = await c.threads.create();
    return { events: await collect(c.runs.stream(thread_id, "react", { input: human("weather in Lima"), streamMode: ["messages"] })) };
  },

  async "approval: interrupt, state and thread, Command resume, history"(c) {
    const { thread_id } = await c.threads.create();
    const interrupted = await collect(
      c.runs.stream(thread_id, "approval", { input: { request: "deploy" }, streamMode: ["values", "updates", "debug"] }),
    );
    const stateAtInterrupt = await c.threads.getState(thread_id);
    const thread = await c.threads.get(thread_id);
    const resumed = await collect(
      c.runs.stream(thread_id, "approval", { command: { resume: "yes" }, streamMode: ["values", "updates"] }),
    );
    const state = await c.threads.getState(thread_id);
    const history = await c.threads.getHistory(thread_id);
    return {
      interrupted,
      stateAtInterrupt,
      thread: { status: thread.status, values: thread.values, interrupts: thread.interrupts },
      resumed,
      state,
      history,
    };
  },

  async "approval: wait at the interrupt, then resume with wait"(c) {
    const { thread_id } = await c.threads.create();
    const atInterrupt = await c.runs.wait(thread_id, "approval", { input: { request: "rollback" } });
    const done = await c.runs.wait(thread_id, "approval", { command: { resume: "no" } });
    return { atInterrupt, done };
  },

  async "approval: Command with update and goto, update_state as a node at the interrupt"(c) {
    const first = (await c.threads.create()).thread_id;
    await c.runs.wait(first, "approval", { input: { request: "scale" } });
    const jumped = await c.runs.wait(first, "approval", { command: { update: { decision: "no" }, goto: "act" } });
    const second = (await c.threads.create()).thread_id;
    await c.runs.wait(second, "approval", { input: { request: "purge" } });
    await c.threads.updateState(second, { values: { decision: "yes", log: ["approved by hand"] }, asNode: "review" });
    const afterUpdate = await c.threads.getState(second);
    const finished = await c.runs.wait(second, "approval", { input: null });
    return { jumped, jumpedHistory: await c.threads.getHistory(first), afterUpdate, finished };
  },

  async "steps: updates, custom, values, debug, tasks and checkpoints"(c) {
    const { thread_id } = await c.threads.create();
    const events = await collect(
      c.runs.stream(thread_id, "steps", { input: {}, streamMode: ["updates", "custom", "values", "debug", "tasks", "checkpoints"] }),
    );
    return { events, state: await c.threads.getState(thread_id) };
  },

  async "steps: update_state as a node, then a run from there"(c) {
    const { thread_id } = await c.threads.create();
    await c.runs.wait(thread_id, "steps", { input: {} });
    const updated = await c.threads.updateState(thread_id, { values: { steps: ["edited"] }, asNode: "two" });
    const afterUpdate = await c.threads.getState(thread_id);
    const rerun = await c.runs.wait(thread_id, "steps", { input: null });
    const history = await c.threads.getHistory(thread_id);
    return { updated, afterUpdate, rerun, history };
  },

  async "steps: interrupt_before, run metadata and configurable in history, a filter, time travel"(c) {
    const { thread_id } = await c.threads.create();
    const paused = await c.runs.wait(thread_id, "steps", {
      input: {},
      interruptBefore: ["two"],
      metadata: { origin: "diff" },
      config: { configurable: { delay_ms: 0 } },
    });
    const atPause = await c.threads.getState(thread_id);
    const resumed = await c.runs.wait(thread_id, "steps", { input: null });
    const filtered = await c.threads.getHistory(thread_id, { metadata: { origin: "diff" } });
    const history = await c.threads.getHistory(thread_id);
    // Run again from the checkpoint before "two": history forks there.
    const fork = history.find((h) => h.next.includes("two"));
    const replayed = await c.runs.wait(thread_id, "steps", { input: null, checkpointId: fork.checkpoint.checkpoint_id });
    return { paused, atPause, resumed, filtered, replayed, after: await c.threads.getHistory(thread_id) };
  },

  async "typed: a TypeScript graph, wait and state"(c) {
    const { thread_id } = await c.threads.create();
    const result = await c.runs.wait(thread_id, "typed", { input: { name: "Ada" } });
    return { result, state: await c.threads.getState(thread_id) };
  },

  async "steps: the events stream mode"(c) {
    const { thread_id } = await c.threads.create();
    return { events: await collect(c.runs.stream(thread_id, "steps", { input: {}, streamMode: ["events"] })) };
  },

  // Streamed without stream_subgraphs: the reference server 2.0.0 fails
  // any run streaming subgraphs of this LangGraph version (a TypeError in
  // its preprocessDebugCheckpoint), so subgraph events are compared by the
  // end-to-end suite only.
  async "diff_parent: a subgraph, its state with subgraphs and history"(c) {
    const { thread_id } = await c.threads.create();
    const events = await collect(
      c.runs.stream(thread_id, "diff_parent", {
        input: { topic: "tides" },
        streamMode: ["values", "updates", "custom", "debug"],
      }),
    );
    const state = await c.threads.getState(thread_id, undefined, { subgraphs: true });
    const history = await c.threads.getHistory(thread_id);
    return { events, state, history };
  },
};

for (const [name, run] of Object.entries({ ...scenarios, ...apiScenarios })) {
  test(name, async () => {
    const seen = {};
    for (const [server, client] of Object.entries(servers)) seen[server] = normalise(await run(client), (path) => allowed(name, path));
    // Allowed differences were left out by normalise: whatever differs now
    // is unexpected.
    const differences = diff(seen.reference, seen.slipway);
    // DIFF_DUMP=<dir>: both normalised records of each scenario, to read a difference whole.
    if (process.env.DIFF_DUMP) writeFileSync(`${process.env.DIFF_DUMP}/${name.replace(/[^a-z0-9]+/gi, "_")}.json`, JSON.stringify(seen, null, 1));
    if (process.env.DIFF_VERBOSE) for (const d of differences) console.log(`DIFF ${name.split(":")[0]} ${d.path}\n  ref: ${d.reference}\n  got: ${d.slipway}`);
    assert.deepEqual(differences, [], `unexpected differences from the reference in "${name}"`);
  });
}
