// Drives a real `slipway agent` (AGENT_URL) through the official
// @langchain/langgraph-sdk, the way users of the hosted product do.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Client } from "@langchain/langgraph-sdk";

const client = new Client({ apiUrl: process.env.AGENT_URL, callerOptions: { maxRetries: 0 } });
const human = (content) => ({ messages: [{ role: "user", content }] });

test("reject while the first run finishes; state holds only its messages", async () => {
  const thread = await client.threads.create();
  const first = await client.runs.create(thread.thread_id, "echo", { input: { ...human("hello"), sleep: 1 } });
  await assert.rejects(
    client.runs.create(thread.thread_id, "echo", { input: human("second"), multitaskStrategy: "reject" }),
    (err) => err.status === 409 && err.message.includes("Thread is already running a task"),
  );
  await client.runs.join(thread.thread_id, first.run_id);
  const state = await client.threads.getState(thread.thread_id);
  const msgs = state.values.messages;
  assert.equal(msgs.length, 2);
  assert.deepEqual(msgs.map((m) => [m.type, m.content]), [["human", "hello"], ["ai", "hello"]]);
  const run = await client.runs.get(thread.thread_id, first.run_id);
  assert.equal(run.status, "success");
});

test("interrupt, rollback and enqueue", async () => {
  const t1 = await client.threads.create();
  const slow = await client.runs.create(t1.thread_id, "echo", { input: { ...human("one"), sleep: 5 } });
  await new Promise((r) => setTimeout(r, 200));
  const fast = await client.runs.create(t1.thread_id, "echo", { input: human("two"), multitaskStrategy: "interrupt" });
  await client.runs.join(t1.thread_id, fast.run_id);
  assert.equal((await client.runs.get(t1.thread_id, slow.run_id)).status, "interrupted");

  const t2 = await client.threads.create();
  const doomed = await client.runs.create(t2.thread_id, "echo", { input: { ...human("one"), sleep: 5 } });
  await new Promise((r) => setTimeout(r, 200));
  const kept = await client.runs.create(t2.thread_id, "echo", { input: human("two"), multitaskStrategy: "rollback" });
  await client.runs.join(t2.thread_id, kept.run_id);
  await assert.rejects(client.runs.get(t2.thread_id, doomed.run_id), (err) => String(err).includes("404"));
  assert.deepEqual((await client.threads.getState(t2.thread_id)).values.messages.map((m) => m.content), ["two", "two"]);

  const t3 = await client.threads.create();
  const a = await client.runs.create(t3.thread_id, "echo", { input: { ...human("a"), sleep: 0.3 } });
  const b = await client.runs.create(t3.thread_id, "echo", { input: human("b"), multitaskStrategy: "enqueue" });
  assert.equal(b.status, "pending");
  await client.runs.join(t3.thread_id, b.run_id);
  assert.equal((await client.runs.get(t3.thread_id, a.run_id)).status, "success");
  assert.deepEqual((await client.threads.getState(t3.thread_id)).values.messages.map((m) => m.content), ["a", "a", "b", "b"]);
});

test("runs.stream yields metadata, values and updates", async () => {
  const thread = await client.threads.create();
  const events = [];
  let created;
  for await (const chunk of client.runs.stream(thread.thread_id, "echo", {
    input: human("stream me"),
    streamMode: ["values", "updates"],
    onRunCreated: (meta) => { created = meta; },
  })) {
    events.push(chunk);
  }
  assert.equal(events[0].event, "metadata");
  assert.ok(created?.run_id, "onRunCreated saw the run id from Content-Location");
  const updates = events.filter((e) => e.event === "updates");
  assert.equal(updates.length, 1);
  assert.equal(updates[0].data.echo.messages[0].content, "stream me");
  const last = events.filter((e) => e.event === "values").at(-1);
  assert.deepEqual(last.data.messages.map((m) => m.type), ["human", "ai"]);
});

test("runs.wait returns the final values; a failed run raises", async () => {
  const thread = await client.threads.create();
  const values = await client.runs.wait(thread.thread_id, "echo", { input: human("wait for me") });
  assert.equal(values.messages.at(-1).content, "wait for me");
  await assert.rejects(client.runs.wait(thread.thread_id, "echo", { input: { sleep: "forever" } }), /GraphError/);
  // The thread shows its last run's error (the SDK's Thread.error).
  const failed = await client.threads.get(thread.thread_id);
  assert.equal(failed.status, "error");
  assert.equal(failed.error?.error, "GraphError");
  await client.runs.wait(thread.thread_id, "echo", { input: human("again") });
  assert.equal((await client.threads.get(thread.thread_id)).error, null);
  const stateless = await client.runs.wait(null, "echo", { input: human("no thread") });
  assert.equal(stateless.messages.at(-1).content, "no thread");
});

test("runs.cancel interrupts a running run", async () => {
  const thread = await client.threads.create();
  const run = await client.runs.create(thread.thread_id, "echo", { input: { ...human("long"), sleep: 10 } });
  await new Promise((r) => setTimeout(r, 200));
  await client.runs.cancel(thread.thread_id, run.run_id, true);
  assert.equal((await client.runs.get(thread.thread_id, run.run_id)).status, "interrupted");
  // The thread's error says so, in the reference's words.
  assert.deepEqual((await client.threads.get(thread.thread_id)).error, {
    error: "UserInterrupt",
    message: "interrupt requested via POST /threads/{thread_id}/runs/{run_id}/cancel",
  });
  const runs = await client.runs.list(thread.thread_id);
  assert.equal(runs.length, 1);
});

test("threads: search and history", async () => {
  const tag = `t-${Date.now()}`;
  const thread = await client.threads.create({ metadata: { tag } });
  await client.runs.wait(thread.thread_id, "echo", { input: human("one") });
  await client.runs.wait(thread.thread_id, "echo", { input: human("two") });
  const found = await client.threads.search({ metadata: { tag } });
  assert.equal(found.length, 1);
  assert.equal(found[0].thread_id, thread.thread_id);
  assert.equal(found[0].status, "idle");
  const history = await client.threads.getHistory(thread.thread_id, { limit: 10 });
  assert.ok(history.length >= 4, `history has ${history.length} states`);
  assert.equal(history[0].values.messages.length, 4, "newest first");
  const copy = await client.threads.copy(thread.thread_id);
  assert.equal((await client.threads.getState(copy.thread_id)).values.messages.length, 4);
  await client.threads.update(thread.thread_id, { metadata: { more: 1 } });
  assert.equal((await client.threads.get(thread.thread_id)).metadata.more, 1);
  await client.threads.delete(copy.thread_id);
  await assert.rejects(client.threads.get(copy.thread_id), (err) => String(err).includes("404"));
});

test("store: put, get, search", async () => {
  await client.store.putItem(["users", "u1"], "prefs", { theme: "dark" });
  await client.store.putItem(["users", "u2"], "prefs", { theme: "light" });
  const item = await client.store.getItem(["users", "u1"], "prefs");
  assert.deepEqual(item.value, { theme: "dark" });
  const all = await client.store.searchItems(["users"]);
  assert.equal(all.items.length, 2);
  const dark = await client.store.searchItems(["users"], { filter: { theme: "dark" } });
  assert.deepEqual(dark.items.map((i) => i.namespace), [["users", "u1"]]);
  await client.store.deleteItem(["users", "u2"], "prefs");
  assert.equal((await client.store.searchItems(["users"])).items.length, 1);
});

test("assistants: the graph's default assistant, and a new one", async () => {
  const found = await client.assistants.search({ graphId: "echo" });
  assert.ok(found.length >= 1);
  const created = await client.assistants.create({ graphId: "echo", name: "polite echo", metadata: { team: "a" } });
  const thread = await client.threads.create();
  const values = await client.runs.wait(thread.thread_id, created.assistant_id, { input: human("via assistant") });
  assert.equal(values.messages.at(-1).content, "via assistant");
});

test("assistants: search sorted by name and by creation", async () => {
  for (const name of ["sort-b", "Sort-A", "sort-c"]) {
    await client.assistants.create({ graphId: "echo", name, metadata: { sorted: "yes" } });
  }
  const byName = await client.assistants.search({ metadata: { sorted: "yes" }, sortBy: "name", sortOrder: "asc" });
  assert.deepEqual(byName.map((a) => a.name), ["Sort-A", "sort-b", "sort-c"]);
  const oldest = await client.assistants.search({ metadata: { sorted: "yes" }, sortBy: "created_at", sortOrder: "asc" });
  assert.deepEqual(oldest.map((a) => a.name), ["sort-b", "Sort-A", "sort-c"]);
});

test("assistants: versions, and going back to one", async () => {
  const a = await client.assistants.create({ graphId: "echo", name: "v1" });
  await client.assistants.update(a.assistant_id, { name: "v2" });
  const versions = await client.assistants.getVersions(a.assistant_id);
  assert.deepEqual(versions.map((v) => [v.version, v.name]), [[2, "v2"], [1, "v1"]]);
  const back = await client.assistants.setLatest(a.assistant_id, 1);
  assert.equal(back.name, "v1");
  assert.equal((await client.assistants.get(a.assistant_id)).version, 1);
  await assert.rejects(client.assistants.setLatest(a.assistant_id, 7), (err) => err.status === 404);
});

test("runs.createBatch and the state at an earlier checkpoint", async () => {
  const runs = await client.runs.createBatch([
    { assistantId: "echo", input: human("b1") },
    { assistantId: "echo", input: human("b2") },
  ]);
  assert.equal(runs.length, 2);
  assert.notEqual(runs[0].run_id, runs[1].run_id);
  assert.notEqual(runs[0].thread_id, runs[1].thread_id, "each stateless run has its own thread");

  const thread = await client.threads.create();
  await client.runs.wait(thread.thread_id, "echo", { input: human("first") });
  await client.runs.wait(thread.thread_id, "echo", { input: human("second") });
  const history = await client.threads.getHistory(thread.thread_id, { limit: 10 });
  const afterFirst = history.find((s) => s.values.messages?.length === 2);
  assert.ok(afterFirst, "history holds the state after the first run");
  for (const at of [afterFirst.checkpoint, afterFirst.checkpoint.checkpoint_id]) {
    const then = await client.threads.getState(thread.thread_id, at);
    assert.deepEqual(then.values.messages.map((m) => m.content), ["first", "first"]);
  }
  assert.equal((await client.threads.getState(thread.thread_id)).values.messages.length, 4);
});

test("human in the loop: a command graph interrupts, command.resume answers", async () => {
  const thread = await client.threads.create();
  const run = await client.runs.create(thread.thread_id, "counter", { input: { interrupt: "approve the refund?" } });
  await client.runs.join(thread.thread_id, run.run_id);
  const asking = await client.threads.get(thread.thread_id);
  assert.equal(asking.status, "interrupted");
  const state = await client.threads.getState(thread.thread_id);
  assert.deepEqual(state.interrupts.map((i) => i.value), ["approve the refund?"]);
  const values = await client.runs.wait(thread.thread_id, "counter", { command: { resume: "yes" } });
  assert.equal(values.messages.at(-1).content, "resumed with yes");
  const answered = await client.threads.get(thread.thread_id);
  assert.equal(answered.status, "idle");
  assert.deepEqual(answered.interrupts, {});
});

test("crons: create on a thread and stateless, search, count, update, delete", async () => {
  const thread = await client.threads.create();
  const input = { messages: [{ role: "user", content: "tick" }] };
  const onThread = await client.crons.createForThread(thread.thread_id, "echo", {
    schedule: "*/5 * * * *", input, metadata: { owner: "js" },
  });
  assert.equal(onThread.thread_id, thread.thread_id);
  assert.equal(onThread.schedule, "*/5 * * * *");
  assert.equal(onThread.enabled, true);
  assert.equal(onThread.on_run_completed, null);
  assert.equal(onThread.payload.config.configurable.cron_id, onThread.cron_id);
  const next = new Date(onThread.next_run_date);
  assert.ok(next > new Date() && next.getUTCMinutes() % 5 === 0 && next.getUTCSeconds() === 0, onThread.next_run_date);

  const stateless = await client.crons.create("echo", { schedule: "0 9 * * 1", input, onRunCompleted: "keep", enabled: false });
  assert.equal(stateless.thread_id, null);
  assert.equal(stateless.on_run_completed, "keep");
  assert.equal(stateless.enabled, false);

  const all = await client.crons.search({ assistantId: onThread.assistant_id, limit: 10 });
  assert.ok(all.some((c) => c.cron_id === onThread.cron_id) && all.some((c) => c.cron_id === stateless.cron_id));
  const mine = await client.crons.search({ threadId: thread.thread_id });
  assert.deepEqual(mine.map((c) => c.cron_id), [onThread.cron_id]);
  const disabled = await client.crons.search({ enabled: false, select: ["cron_id", "enabled"] });
  assert.ok(disabled.every((c) => Object.keys(c).length === 2 && c.enabled === false));
  assert.ok(disabled.some((c) => c.cron_id === stateless.cron_id));
  const sorted = await client.crons.search({ sortBy: "next_run_date", sortOrder: "asc", limit: 100 });
  for (let i = 1; i < sorted.length; i++) assert.ok(sorted[i - 1].next_run_date <= sorted[i].next_run_date);
  assert.equal(await client.crons.count({ threadId: thread.thread_id }), 1);

  const updated = await client.crons.update(stateless.cron_id, { schedule: "30 8 * * *", enabled: true, metadata: { v: 2 } });
  assert.equal(updated.schedule, "30 8 * * *");
  assert.equal(updated.enabled, true);
  assert.equal(updated.metadata.v, 2);
  assert.equal(new Date(updated.next_run_date).getUTCHours(), 8);

  await assert.rejects(client.crons.create("echo", { schedule: "every minute" }), /422|Invalid cron schedule/);
  await client.crons.delete(onThread.cron_id);
  await client.crons.delete(stateless.cron_id);
  assert.equal(await client.crons.count({ threadId: thread.thread_id }), 0);
  await assert.rejects(client.crons.delete(onThread.cron_id), /404|not found/);
});
