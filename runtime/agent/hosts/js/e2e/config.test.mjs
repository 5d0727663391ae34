// Configuration, custom routes, API details and restarts of LangGraph.js
// graphs served by a real `slipway agent` (AGENT_URL), through the official
// @langchain/langgraph-sdk. SUITE picks the part the Go test runs now:
//   config          testdata/graphs/js-agent/configured.json (factories, env,
//                   LANGGRAPH_CONFIG, context, custom routes, API details)
//   restart-before  langgraph.json: leave a thread interrupted (its id in RESTART_FILE)
//   restart-after   the same data dir after `slipway agent` was killed and started again
//   deployed        testdata/graphs/js-deploy deployed by `slipway serve` (AGENT_URL is
//                   the deployment's URL, LANGGRAPH_API_KEY Slipway's key)
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import vm from "node:vm";
import { Client } from "@langchain/langgraph-sdk";

const url = process.env.AGENT_URL;
const client = new Client({ apiUrl: url, callerOptions: { maxRetries: 0 } });
const suite = process.env.SUITE ?? "config";
const only = (name) => ({ skip: suite !== name && `runs with SUITE=${name}` });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function collect(stream) {
  const out = [];
  for await (const chunk of stream) out.push(chunk);
  return out;
}

// ---- configured.json ---------------------------------------------------------

test("graph factories, sync and async, are called with the run's config; the project's env file reaches them", only("config"), async () => {
  for (const [graph, how] of [["made_sync", "sync factory"], ["made_async", "async factory"]]) {
    const thread = await client.threads.create();
    const loud = await client.runs.wait(thread.thread_id, graph, { input: { name: "Ann" }, config: { configurable: { style: "loud" } } });
    assert.equal(loud.reply, `BONJOUR ANN (${how})`);
    const plain = await client.runs.wait(null, graph, { input: { name: "Bob" } });
    assert.equal(plain.reply, `Bonjour Bob (${how})`);
    // State reads build the graph from the factory too.
    const state = await client.threads.getState(thread.thread_id);
    assert.equal(state.values.reply, `BONJOUR ANN (${how})`);
    assert.equal((await client.threads.getHistory(thread.thread_id)).length, 3);
  }
});

test("every graph has its system assistant at start-up, configured by LANGGRAPH_CONFIG", only("config"), async () => {
  for (const graphId of ["made_sync", "made_async", "contextual"]) {
    const found = await client.assistants.search({ graphId, metadata: { created_by: "system" } });
    assert.equal(found.length, 1, graphId);
    assert.equal(found[0].name, graphId);
  }
  const [sys] = await client.assistants.search({ graphId: "contextual" });
  assert.deepEqual(sys.config, { configurable: { punctuation: "!" } });
  assert.deepEqual(sys.context, { user: "system default" });
});

test("context on a run reaches the node; assistants carry config and context per graph, with versions", only("config"), async () => {
  const ask = async (assistantId, extra = {}) => (await client.runs.wait(null, assistantId, { input: { question: "tea" }, ...extra })).answer;
  assert.equal(await ask("contextual"), "tea for system default!");
  assert.equal(await ask("contextual", { context: { user: "bob" } }), "tea for bob!");
  // A run's configurable is merged key by key over its assistant's.
  assert.equal(await ask("contextual", { context: { user: "bob" }, config: { configurable: { other: 1 } } }), "tea for bob!");

  const a = await client.assistants.create({ graphId: "contextual", name: "Ann's helper", context: { user: "ann" }, config: { configurable: { punctuation: "?" } } });
  assert.equal(a.version, 1);
  assert.equal(await ask(a.assistant_id), "tea for ann?");
  const v2 = await client.assistants.update(a.assistant_id, { context: { user: "cid" } });
  assert.equal(v2.version, 2);
  assert.equal(await ask(a.assistant_id), "tea for cid?");
  const versions = await client.assistants.getVersions(a.assistant_id);
  assert.deepEqual(versions.map((v) => v.version).sort(), [1, 2]);
  await client.assistants.setLatest(a.assistant_id, 1);
  assert.equal(await ask(a.assistant_id), "tea for ann?");
});

test("custom routes: GET and POST reach the project's Hono app; the agent API keeps its own paths", only("config"), async () => {
  const get = await fetch(`${url}/custom/hello?name=sdk`);
  assert.equal(get.status, 200);
  assert.deepEqual(await get.json(), { hello: "sdk", greeting: "Bonjour" });

  const post = await fetch(`${url}/custom/echo`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ n: 1 }) });
  assert.equal(post.status, 201);
  assert.equal(post.headers.get("x-custom-route"), "yes");
  assert.deepEqual(await post.json(), { method: "POST", got: { n: 1 } });

  assert.deepEqual(await (await fetch(`${url}/ok`)).json(), { ok: true });
  assert.ok((await client.assistants.search({ graphId: "contextual" })).length > 0);
});

test("custom routes: the app is mounted before the API, its middleware sees the API's requests", only("config"), async () => {
  // What no route of the app serves is the API's, down to its own 404
  // (not Hono's plain-text one).
  const missing = await fetch(`${url}/custom/nothing`);
  assert.equal(missing.status, 404);
  assert.deepEqual(await missing.json(), { detail: "Not Found" });
  // The app's route shadows the API's path.
  assert.deepEqual(await (await fetch(`${url}/assistants/app-owned`)).json(), { owner: "app" });
  // Its middleware may answer an API request, and adds its headers to the API's answers.
  assert.deepEqual(await (await fetch(`${url}/info?intercept`)).json(), { intercepted: "/info" });
  const info = await fetch(`${url}/info`);
  assert.equal(info.status, 200);
  assert.equal(info.headers.get("x-app-middleware"), "true");
  // A body the middleware changes is the body the API reads: through the
  // SDK, the x-stamp header becomes the new thread's metadata.
  const stamped = new Client({ apiUrl: url, defaultHeaders: { "x-stamp": "by-middleware" }, callerOptions: { maxRetries: 0 } });
  const thread = await stamped.threads.create({ metadata: { mine: 1 } });
  assert.deepEqual(thread.metadata, { mine: 1, stamped: "by-middleware" });
  assert.equal((await client.threads.get(thread.thread_id)).metadata.stamped, "by-middleware");
  const viaVar = new Client({ apiUrl: url, defaultHeaders: { "x-stamp-var": "by-variable" }, callerOptions: { maxRetries: 0 } });
  assert.deepEqual((await viaVar.threads.create({ metadata: { mine: 2 } })).metadata, { mine: 2, stamped_var: "by-variable" });
  // The app's routes are in the deployment's document, as the reference merges them.
  const doc = await (await fetch(`${url}/openapi.json`)).json();
  assert.ok(doc.paths["/custom/hello"].get);
  assert.deepEqual(Object.keys(doc.paths["/custom/upload/{id}"]).sort(), ["get", "post"]);
  assert.equal(doc.paths["/custom/release/{id}"].post.parameters[0].name, "id");
  assert.ok(doc.paths["/assistants/app-owned"].get);
  assert.ok(doc.paths["/threads"].post, "the API's own operations stay");
  assert.ok((await (await fetch(`${url}/docs`)).text()).includes("/custom/echo"));
  // A body over 64 KiB streams to the host: left alone by the app (at
  // once, or after a middleware's wait), or changed by its middleware,
  // the API reads it whole.
  const slow = new Client({ apiUrl: url, defaultHeaders: { "x-slow-middleware": "1" }, callerOptions: { maxRetries: 0 } });
  for (const c of [client, slow, stamped]) {
    const big = await c.threads.create({ metadata: { big: "x".repeat(100_000) } });
    assert.equal((await client.threads.get(big.thread_id)).metadata.big.length, 100_000);
    assert.equal(big.metadata.stamped, c === stamped ? "by-middleware" : undefined);
  }
  // Runs and their streams pass through the app too.
  const out = await stamped.runs.wait(thread.thread_id, "contextual", { input: { question: "tea" } });
  assert.equal(out.answer, "tea for system default!");
});

test("generative UI: ui stream events, /ui/{graph} and its bundle, as LoadExternalComponent loads it", only("config"), async () => {
  // typedUi's messages pass through the stream as custom events, and reach the state.
  const thread = await client.threads.create();
  const chunks = await collect(client.runs.stream(thread.thread_id, "weather", { input: { city: "Paris" }, streamMode: ["custom", "values"] }));
  const ui = chunks.filter((c) => c.event === "custom").map((c) => c.data);
  assert.equal(ui.length, 1);
  assert.deepEqual({ type: ui[0].type, name: ui[0].name, props: ui[0].props }, { type: "ui", name: "weather", props: { city: "Paris" } });
  assert.ok(ui[0].id && ui[0].metadata.run_id);
  const state = await client.threads.getState(thread.thread_id);
  assert.deepEqual(state.values.ui.map((m) => m.name), ["weather"]);

  // The SDK's own call (LoadExternalComponent's): the HTML for the shadow root.
  const html = await client["~ui"].getComponent("weather", "weather");
  const css = /<link rel="stylesheet" href="([^"]+)"/.exec(html)?.[1];
  const js = /<script src="([^"]+)" onload='__LGUI_weather\.render\(&#34;weather&#34;, "\{\{shadowRootId\}\}"\)'><\/script>/.exec(html)?.[1];
  assert.ok(css && js, html);
  const style = await fetch(css);
  assert.match(style.headers.get("content-type"), /^text\/css/);
  assert.match(await style.text(), /rgb\(10, 20, 30\)/);
  const script = await fetch(js);
  assert.match(script.headers.get("content-type"), /^text\/javascript/);
  // Run the bundle as the page would: the SDK's globals provide React's
  // JSX runtime and the component store; render hands it the component.
  const rendered = [];
  const page = {
    document: { getElementById: (id) => ({ id, shadowRoot: { appendChild() {} } }), createElement: (tag) => ({ tag }) },
    [Symbol.for("LGUI_REQUIRE")]: (name) => {
      if (name === "react/jsx-runtime") return { jsx: (type, props) => ({ type, props }), jsxs: (type, props) => ({ type, props }), Fragment: "Fragment" };
      throw new Error(`unexpected module ${name}`);
    },
    [Symbol.for("LGUI_EXT_STORE")]: { respond: (id, comp, el) => rendered.push({ id, el, out: comp({ city: "Paris" }) }) },
  };
  page.window = page;
  vm.runInNewContext(`${await script.text()}\n__LGUI_weather.render("weather", "shadow-1");`, page);
  // (through JSON: the objects were made in the page's context, with its prototypes)
  assert.deepEqual(JSON.parse(JSON.stringify(rendered)), [{ id: "shadow-1", el: { tag: "div" }, out: { type: "div", props: { className: "weather", children: ["Weather in ", "Paris"] } } }]);

  await assert.rejects(client["~ui"].getComponent("nowhere", "weather"), /404/);
  assert.equal((await fetch(`${url}/ui/weather/nothing.js`)).status, 404);
});

test("custom routes: a server-sent event answer streams to the client as the app writes it", only("config"), async () => {
  // Buffered, the answer would never come: the app waits for a release.
  const res = await fetch(`${url}/custom/events?id=s1`, { signal: AbortSignal.timeout(10000) });
  assert.equal(res.status, 200);
  assert.match(res.headers.get("content-type"), /^text\/event-stream/);
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let text = "";
  while (!text.includes("event: first")) {
    const { done, value } = await reader.read();
    assert.ok(!done, `the stream ended before its first event: ${text}`);
    text += decoder.decode(value, { stream: true });
  }
  // The app holds "second" back until released: the first event came alone.
  assert.ok(!text.includes("second"), text);
  assert.equal((await fetch(`${url}/custom/release/s1`, { method: "POST" })).status, 200);
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    text += decoder.decode(value, { stream: true });
  }
  assert.match(text, /event: first\ndata: s1\n\nevent: second\ndata: s1\n/);
});

test("custom routes: a large or chunked upload streams to the app as it reads it", only("config"), async () => {
  const { createHash } = await import("node:crypto");
  const sha = (b) => createHash("sha256").update(b).digest("hex");
  // Sent chunked: the second part leaves only once the app has read the
  // first, which a buffered body would never let it do.
  const part = Buffer.alloc(100 * 1024, 7);
  let step = 0;
  const body = new ReadableStream({
    async pull(controller) {
      if (step === 0) controller.enqueue(part);
      if (step === 1) {
        for (let i = 0; ; i++) {
          const { bytes } = await (await fetch(`${url}/custom/upload/chunked`)).json();
          if (bytes >= part.length) break;
          assert.ok(i < 400, `the app had read ${bytes} bytes of the upload after 10 s`);
          await sleep(25);
        }
        controller.enqueue(part);
      }
      if (step === 2) controller.close();
      step++;
    },
  });
  const res = await fetch(`${url}/custom/upload/chunked`, { method: "POST", body, duplex: "half" });
  assert.equal(res.status, 200);
  const whole = Buffer.concat([part, part]);
  assert.deepEqual(await res.json(), { bytes: whole.length, sha256: sha(whole) });

  // A known length above the inline limit (64 KiB) streams too; a small
  // body still arrives whole.
  for (const size of [300 * 1024, 10]) {
    const data = Buffer.alloc(size, size % 251);
    const r = await fetch(`${url}/custom/upload/sized-${size}`, { method: "POST", body: data });
    assert.equal(r.status, 200);
    assert.deepEqual(await r.json(), { bytes: size, sha256: sha(data) });
  }
});

test("assistant search by name is a case-insensitive substring", only("config"), async () => {
  const found = await client.assistants.search({ name: "TEXTU" });
  assert.ok(found.some((a) => a.graph_id === "contextual" && a.name === "contextual"), JSON.stringify(found.map((a) => a.name)));
  assert.ok(found.every((a) => a.name.toLowerCase().includes("textu")));
});

test("after_seconds keeps a run pending until its time", only("config"), async () => {
  const thread = await client.threads.create();
  const run = await client.runs.create(thread.thread_id, "made_sync", { input: { name: "Later" }, afterSeconds: 1.5 });
  await sleep(500);
  assert.equal((await client.runs.get(thread.thread_id, run.run_id)).status, "pending");
  await client.runs.join(thread.thread_id, run.run_id);
  const done = await client.runs.get(thread.thread_id, run.run_id);
  assert.equal(done.status, "success");
  assert.ok(Date.parse(done.updated_at) - Date.parse(done.created_at) >= 1500, `${done.created_at} → ${done.updated_at}`);
});

test("Last-Event-ID -1 replays a resumable run's stream from the beginning", only("config"), async () => {
  const thread = await client.threads.create();
  const run = await client.runs.create(thread.thread_id, "made_sync", { input: { name: "Eve" }, streamMode: ["values"], streamResumable: true });
  await client.runs.join(thread.thread_id, run.run_id);
  const events = await collect(client.runs.joinStream(thread.thread_id, run.run_id, { lastEventId: "-1", streamMode: ["values"] }));
  assert.equal(events[0].event, "metadata");
  assert.equal(events[0].data.run_id, run.run_id);
  assert.deepEqual(events.filter((e) => e.event === "values").map((e) => e.data), [{ name: "Eve" }, { name: "Eve", reply: "Bonjour Eve (sync factory)" }]);
});

test("reading a missing store item gives null, as with the reference servers", only("config"), async () => {
  assert.equal(await client.store.getItem(["nobody", "here"], "nothing"), null);
  await client.store.putItem(["somebody"], "k", { v: 1 });
  assert.deepEqual((await client.store.getItem(["somebody"], "k")).value, { v: 1 });
});

// ---- restart of slipway agent ------------------------------------------------

test("restart, before: a thread left waiting at interrupt()", only("restart-before"), async () => {
  const thread = await client.threads.create();
  await client.runs.wait(thread.thread_id, "approval", { input: { request: "ship" } });
  const t = await client.threads.get(thread.thread_id);
  assert.equal(t.status, "interrupted");
  const state = await client.threads.getState(thread.thread_id);
  const history = await client.threads.getHistory(thread.thread_id);
  fs.writeFileSync(process.env.RESTART_FILE, JSON.stringify({ thread_id: thread.thread_id, state, history }));
});

test("restart, after: state, history and the pending interrupt survive, and the interrupt resumes", only("restart-after"), async () => {
  const before = JSON.parse(fs.readFileSync(process.env.RESTART_FILE, "utf8"));
  const id = before.thread_id;
  const t = await client.threads.get(id);
  assert.equal(t.status, "interrupted");
  assert.deepEqual(Object.values(t.interrupts)[0][0].value, { question: "approve ship?" });
  const state = await client.threads.getState(id);
  assert.deepEqual(state, before.state);
  assert.deepEqual(state.tasks[0].interrupts[0].value, { question: "approve ship?" });
  assert.deepEqual(await client.threads.getHistory(id), before.history);

  const out = await client.runs.wait(id, "approval", { command: { resume: "yes" } });
  assert.deepEqual(out.log, ["prepared ship", "reviewed: yes", "did ship"]);
  assert.equal((await client.threads.get(id)).status, "idle");
  assert.equal((await client.threads.getHistory(id)).length, before.history.length + 2);
});

// ---- a deployment through the control plane ------------------------------------

test("deployed: testdata/graphs/js-deploy answers through the deployment URL", only("deployed"), async () => {
  // A stream that broke right after a deploy was a proxy bug (the relay
  // closed the agent's connection under a quick answer; fixed, with
  // TestRelayIsFullDuplex): no retry here, a broken stream fails and says so.
  const thread = await client.threads.create();
  let chunks;
  try {
    chunks = await collect(client.runs.stream(thread.thread_id, "agent", { input: { text: "ship it" }, streamMode: ["updates"] }));
  } catch (err) {
    const runs = await client.runs.list(thread.thread_id);
    assert.fail(`the stream broke: ${err?.cause ?? err}; runs ${JSON.stringify(runs)}`);
  }
  if (chunks.length === 0) {
    const runs = await client.runs.list(thread.thread_id);
    assert.fail(`the stream ended without an event; runs ${JSON.stringify(runs)}`);
  }
  assert.equal(chunks[0].event, "metadata");
  const updates = chunks.filter((c) => c.event === "updates").map((c) => c.data);
  if (updates.length === 0) {
    const runs = await client.runs.list(thread.thread_id);
    assert.fail(`no updates: ${JSON.stringify(chunks)}; runs ${JSON.stringify(runs)}; state ${JSON.stringify(await client.threads.getState(thread.thread_id))}`);
  }
  assert.deepEqual(updates, [{ respond: { reply: "SHIP IT!" } }]);
  assert.deepEqual((await client.threads.getState(thread.thread_id)).values, { text: "ship it", reply: "SHIP IT!" });
  assert.equal((await client.runs.wait(null, "agent", { input: { text: "again" } })).reply, "AGAIN!");
});
