// Slipway's JavaScript language host (protocol version 1, see the README,
// "Language hosts"). Slipway starts one per agent, with the deployment's
// node, as `node host.mjs <config.json>`, and talks to it over fd 3:
// newline-delimited JSON, {"id","m","p"} requests, {"id","r"|"e"} replies,
// {"m","p"} notifications, in both directions.
//
// The host is stateless: it imports the user's graphs, runs them with a
// checkpointer whose storage is Slipway (saver.mjs), and streams their
// events back. Slipway owns every durable byte.
import net from "node:net";
import fs from "node:fs";
import path from "node:path";
import { register, createRequire } from "node:module";
import { pathToFileURL } from "node:url";
import { createSaver } from "./saver.mjs";
import { createStore } from "./store.mjs";
import { schemasOf as schemasFor } from "./schemas.mjs";

// A user's console.log must never reach the channel or be mistaken for
// protocol: everything written to stdout goes to stderr, which Slipway logs.
process.stdout.write = process.stderr.write.bind(process.stderr);

// LangChain makes a LangSmith RunTree for every runnable call, and each of
// its UUIDs draws 16 bytes from crypto.getRandomValues: a native call apiece,
// about 5% of the host's CPU on a small graph. Small requests are served from
// the same CSPRNG, drawn 8 KiB at a time (as node's own randomUUID batches);
// the bytes and every other request are what the native call gives.
{
  const native = globalThis.crypto.getRandomValues.bind(globalThis.crypto);
  const pool = new Uint8Array(8192);
  let at = pool.length;
  globalThis.crypto.getRandomValues = function getRandomValues(array) {
    if (!(array instanceof Uint8Array) || array.byteLength > 64) return native(array);
    if (at + array.byteLength > pool.length) {
      native(pool);
      at = 0;
    }
    array.set(pool.subarray(at, at + array.byteLength));
    pool.fill(0, at, at + array.byteLength); // a byte is handed out once
    at += array.byteLength;
    return array;
  };
}

// The platform's logger, which graphs reach with getLogger() of
// @langchain/langgraph-sdk/logging (it throws where none is registered):
// winston's leveled methods and child(), one line per entry on stderr,
// which Slipway writes to the deployment's log.
{
  const levels = ["error", "warn", "info", "http", "verbose", "debug", "silly"];
  const make = (defaults) => {
    const write = (level, message, ...meta) => {
      const fields = Object.assign({}, defaults, ...meta.filter((m) => m && typeof m === "object" && !(m instanceof Error)));
      for (const m of meta) if (m instanceof Error) fields.error = m.stack || String(m);
      if (message && typeof message === "object" && !(message instanceof Error)) {
        Object.assign(fields, message);
        message = fields.message ?? "";
        delete fields.message;
      }
      const extra = Object.keys(fields).length ? " " + JSON.stringify(fields) : "";
      process.stderr.write(`[${level}] ${message instanceof Error ? message.stack : String(message ?? "")}${extra}\n`);
    };
    const logger = { log: (level, message, ...meta) => write(level, message, ...meta), child: (meta) => make({ ...defaults, ...meta }) };
    for (const level of levels) logger[level] = (message, ...meta) => write(level, message, ...meta);
    return logger;
  };
  globalThis[Symbol.for("langgraph.api.sdk-logger")] = make({});
}

const PROTOCOL = 1;
const MAX_FRAME = 32 << 20;
const cfg = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
register("./hooks.mjs", import.meta.url, { data: { projectDir: cfg.project_dir } });

// ---- channel --------------------------------------------------------------

const sock = new net.Socket({ fd: 3, readable: true, writable: true });
let nextId = 0;
const pending = new Map(); // id → {resolve, reject}
const handlers = {};

// Frames produced in the same turn of the event loop (a run's events, its
// saver's calls, other runs' replies) leave in one write: fewer system
// calls here and fewer reads in Slipway.
let outbox = [];
function send(msg) {
  const line = JSON.stringify(msg);
  if (line.length > MAX_FRAME) throw new Error(`message of ${line.length} bytes exceeds the host protocol's ${MAX_FRAME}`);
  if (outbox.push(line) === 1) setImmediate(flush);
}

function flush() {
  const lines = outbox;
  outbox = [];
  sock.write(lines.join("\n") + "\n");
}

function call(m, p) {
  const id = ++nextId;
  return new Promise((resolve, reject) => {
    pending.set(id, { resolve, reject });
    send({ id, m, p });
  });
}

function notify(m, p) {
  send({ m, p });
}

let buf = "";
sock.setEncoding("utf8");
sock.on("data", (chunk) => {
  buf += chunk;
  let i;
  while ((i = buf.indexOf("\n")) >= 0) {
    const line = buf.slice(0, i);
    buf = buf.slice(i + 1);
    if (line.trim()) receive(JSON.parse(line));
  }
  if (buf.length > MAX_FRAME) {
    console.error("slipway host: frame too long from Slipway");
    process.exit(70);
  }
});
// Slipway went away: nothing is left to serve.
sock.on("end", () => process.exit(0));
sock.on("error", () => process.exit(0));

function receive(msg) {
  if (msg.m === undefined) {
    const p = pending.get(msg.id);
    if (!p) return;
    pending.delete(msg.id);
    if (msg.e) p.reject(Object.assign(new Error(msg.e.message), { name: msg.e.type || "Error" }));
    else p.resolve(msg.r);
    return;
  }
  const h = handlers[msg.m];
  if (msg.id === undefined) {
    h?.(msg.p ?? {});
    return;
  }
  Promise.resolve()
    .then(() => {
      if (!h) throw new Error(`unknown method ${msg.m}`);
      return h(msg.p ?? {});
    })
    .then(
      (r) => send({ id: msg.id, r: r ?? null }),
      (err) => send({ id: msg.id, e: errorOf(err) }),
    );
}

function errorOf(err) {
  return { type: err?.name || "Error", message: String(err?.message ?? err) };
}

// ---- loading --------------------------------------------------------------

const requireFromProject = createRequire(path.join(cfg.project_dir, "package.json"));
function projectVersion(pkg) {
  try {
    const dir = path.dirname(requireFromProject.resolve(`${pkg}/package.json`));
    return JSON.parse(fs.readFileSync(path.join(dir, "package.json"), "utf8")).version;
  } catch {
    try {
      let dir = path.dirname(requireFromProject.resolve(pkg));
      while (dir !== path.dirname(dir)) {
        const f = path.join(dir, "package.json");
        if (fs.existsSync(f)) {
          const j = JSON.parse(fs.readFileSync(f, "utf8"));
          if (j.name === pkg) return j.version;
        }
        dir = path.dirname(dir);
      }
    } catch {}
    return "";
  }
}

let lg, saver, store, graphSaver, preferStreaming;
const LANGGRAPH_VERSION = projectVersion("@langchain/langgraph");
const graphs = {}; // id → {graph} | {factory}
const results = {};
try {
  lg = await import("@langchain/langgraph");
  const cp = await import("@langchain/langgraph-checkpoint");
  saver = createSaver(cp, call);
  store = createStore(cp, call);
  graphSaver = mergingSaver(saver);
  const { BaseCallbackHandler } = await import("@langchain/core/callbacks/base");
  // A handler whose only effect is to make chat models stream (as under the
  // reference, which always streams events): it ignores every callback, so
  // LangChain neither calls nor queues anything for it.
  preferStreaming = BaseCallbackHandler.fromMethods({});
  Object.assign(preferStreaming, {
    lc_prefer_streaming: true, awaitHandlers: true, ignoreLLM: true, ignoreChain: true,
    ignoreAgent: true, ignoreRetriever: true, ignoreRetry: true, ignoreCustomEvent: true,
  });
} catch (err) {
  // No graph loads half-prepared (without Slipway's checkpointer): each
  // reports this error.
  lg = undefined;
  for (const id of Object.keys(cfg.graphs)) results[id] = { ok: false, error: `cannot import @langchain/langgraph from ${cfg.project_dir}: ${err.message}` };
}
if (lg) {
  for (const [id, spec] of Object.entries(cfg.graphs)) {
    try {
      const mod = await import(pathToFileURL(spec.file).href);
      let g = mod[spec.export];
      if (g === undefined) throw new Error(`${spec.source} has no export named "${spec.export}"`);
      // A graph compiled by an async function and exported as its Promise.
      if (typeof g?.then === "function") g = await g;
      if (typeof g === "function" && typeof g.compile !== "function" && typeof g.stream !== "function") {
        graphs[id] = { factory: g };
      } else {
        graphs[id] = { graph: prepare(g) };
      }
      results[id] = { ok: true };
    } catch (err) {
      results[id] = { ok: false, error: `${spec.source}: ${err?.stack || err}` };
    }
  }
}

// The project's custom routes: an app with a fetch(Request) method (Hono's,
// or any other built on the web standard Request and Response).
let httpApp, httpMounted, httpResult;

// mountBeforeAPI mounts a Hono app in an app of its own class (the
// project's Hono version, not one of Slipway's) whose notFound handler
// records, in the request's env, that no route of the app served the
// request: Slipway then serves it with its agent API, as the reference
// servers mount the app before their own routes. The app's middleware has
// run by then; the headers it added come back with the record, and so
// does the request body if the middleware changed it: set as the
// reference's "langgraph:body" context variable, as a new c.req.raw, or
// (Hono versions that cache the parsed object) by changing the object
// c.req.json() returned. Any other app answers for itself, and its 404
// passes the request on.
function mountBeforeAPI(app) {
  const Ctor = Object.getPrototypeOf(app)?.constructor;
  if (typeof Ctor !== "function" || typeof app.route !== "function" || typeof app.notFound !== "function" || !Array.isArray(app.routes)) return undefined;
  const outer = new Ctor();
  outer.route("/", app);
  outer.notFound(async (c) => {
    const pass = c.env?.[passOn];
    if (!pass) return c.text("404 Not Found", 404);
    pass.fallthrough = true;
    let body = c.get("langgraph:body");
    if (body == null && c.req.raw !== pass.request) {
      body = c.req.raw.bodyUsed ? await c.req.arrayBuffer() : await c.req.raw.arrayBuffer();
    } else if (body == null && Object.keys(c.req.bodyCache ?? {}).length > 0) {
      body = await c.req.arrayBuffer();
    }
    if (body != null) {
      pass.body = Buffer.from(typeof body === "string" ? body : await new Response(body).arrayBuffer());
    }
    return c.body(null, 404);
  });
  return outer;
}

// appOpenAPI is the app's routes as an OpenAPI document, for Slipway to
// merge into the deployment's /openapi.json: the app's own document when
// it makes one (@hono/zod-openapi), else one operation per route Hono
// lists (middleware, registered for every method, is not a route).
async function appOpenAPI(app) {
  const info = { title: "Custom routes", version: "0.0.0" };
  try {
    if (typeof app.getOpenAPI31Document === "function") return await app.getOpenAPI31Document({ openapi: "3.1.0", info });
    if (typeof app.getOpenAPIDocument === "function") return await app.getOpenAPIDocument({ openapi: "3.0.0", info });
    if (!Array.isArray(app.routes)) return undefined;
    const paths = {};
    for (const r of app.routes) {
      const method = String(r.method).toLowerCase();
      if (!["get", "post", "put", "patch", "delete", "head", "options"].includes(method) || typeof r.path !== "string" || r.path.includes("*")) continue;
      const params = [];
      const path = r.path.replace(/:([A-Za-z0-9_]+)(\{[^}]*\})?\??/g, (_, name) => (params.push(name), `{${name}}`));
      (paths[path] ??= {})[method] = {
        summary: `${method.toUpperCase()} ${path}`,
        tags: ["Custom routes"],
        ...(params.length ? { parameters: params.map((name) => ({ name, in: "path", required: true, schema: { type: "string" } })) } : {}),
        responses: { default: { description: "The project's app answers." } },
      };
    }
    return { openapi: "3.1.0", info, paths };
  } catch (err) {
    console.error(`slipway host: the custom routes' OpenAPI document could not be made: ${err?.message ?? err}`);
    return undefined;
  }
}

// passOn keys the record mountBeforeAPI's notFound fills in the env of
// a request.
const passOn = Symbol("slipway.passOn");
if (cfg.http) {
  try {
    const mod = await import(pathToFileURL(cfg.http.file).href);
    const app = mod[cfg.http.export];
    if (app === undefined) throw new Error(`${cfg.http.source} has no export named "${cfg.http.export}"`);
    if (typeof app?.fetch !== "function") throw new Error(`${cfg.http.source}:${cfg.http.export} is not an app with a fetch method (such as new Hono())`);
    httpApp = app;
    httpMounted = mountBeforeAPI(app);
    httpResult = { ok: true, openapi: await appOpenAPI(app) };
  } catch (err) {
    httpResult = { ok: false, error: `${cfg.http.source}: ${err?.stack || err}` };
  }
}

// graphSaver is the saver graphs run with: a checkpoint's metadata also
// records its config's metadata — for a run, its configurable keys, the
// assistant's and the run's metadata, graph and assistant ids (execute) —
// so history can be filtered by them, as the reference servers'
// checkpointers record them. The saver stores metadata as given.
function mergingSaver(saver) {
  const s = Object.create(saver);
  s.put = (config, checkpoint, metadata, newVersions) => saver.put(config, checkpoint, { ...config?.metadata, ...metadata }, newVersions);
  return s;
}

// Configurable keys a checkpoint's metadata does not repeat: LangGraph's
// internals, and what names the checkpoint itself.
const EXCLUDED_CONFIGURABLE = new Set(["checkpoint_ns", "checkpoint_id", "run_id", "thread_id"]);
function publicConfigurable(configurable) {
  return Object.fromEntries(Object.entries(configurable ?? {}).filter(([k]) => !k.startsWith("__") && !EXCLUDED_CONFIGURABLE.has(k)));
}

// prepare compiles a StateGraph and gives a compiled graph Slipway's
// checkpointer and store, whatever the user compiled it with.
function prepare(g) {
  const compiled = typeof g?.compile === "function" && typeof g?.stream !== "function" ? g.compile() : g;
  if (typeof compiled?.stream !== "function") throw new Error("the export is not a LangGraph graph (no stream method)");
  compiled.checkpointer = graphSaver;
  compiled.store = store;
  return compiled;
}


async function graphFor(id, config) {
  const entry = graphs[id];
  if (!entry) throw Object.assign(new Error(`graph "${id}" is not loaded by this host`), { name: "GraphNotFound" });
  if (entry.graph) return entry.graph;
  return prepare(await entry.factory(config));
}

// ---- serialisation --------------------------------------------------------

// ser turns LangChain objects into the plain dicts the API shows
// (messages as {type, content, id, ...}), as the reference servers do.
function ser(v) {
  if (v === undefined) return null;
  return JSON.parse(
    JSON.stringify(v, function (key, value) {
      const raw = this[key];
      if (raw != null && typeof raw === "object" && typeof raw.toDict === "function") {
        const { type, data } = raw.toDict();
        return { ...data, type };
      }
      if (raw instanceof Error) return { type: raw.name, message: raw.message };
      return value;
    }) ?? "null",
  );
}

function ref(config) {
  const c = config?.configurable ?? {};
  return { thread_id: c.thread_id, checkpoint_ns: c.checkpoint_ns ?? "", checkpoint_id: c.checkpoint_id };
}

function stateOut(s) {
  const tasks = (s.tasks ?? []).map((t) => ({
    id: t.id,
    name: t.name,
    path: ser(t.path ?? []),
    error: t.error ? String(t.error?.message ?? t.error) : null,
    interrupts: ser(t.interrupts ?? []),
    checkpoint: t.state?.configurable ? ref(t.state) : null,
    state: t.state && !t.state.configurable ? stateOut(t.state) : null,
    result: t.result === undefined ? null : ser(t.result),
  }));
  return {
    values: ser(s.values ?? {}),
    next: s.next ?? [],
    tasks,
    checkpoint: s.config ? ref(s.config) : null,
    metadata: ser(s.metadata ?? {}),
    created_at: s.createdAt ?? null,
    parent_checkpoint: s.parentConfig ? ref(s.parentConfig) : null,
    interrupts: tasks.flatMap((t) => t.interrupts),
  };
}

// ---- runs -----------------------------------------------------------------

// The API's shape of the checkpoints LangGraph streams (checkpoints mode,
// and debug's checkpoint and task_result chunks), as the reference server
// shows them: each config also as a checkpoint reference (checkpoint,
// parent_checkpoint), snake_case parent_config, no internal configurable
// keys (`__pregel_…`), and a task's subgraph config as its checkpoint.
function checkpointRef(config, needId = true) {
  const c = config?.configurable;
  if (!c || typeof c.thread_id !== "string" || (needId && typeof c.checkpoint_id !== "string")) return null;
  return { thread_id: c.thread_id, checkpoint_id: c.checkpoint_id || null, checkpoint_ns: c.checkpoint_ns || "", checkpoint_map: c.checkpoint_map || null };
}

function publicConfig(config) {
  if (!config?.configurable) return config;
  const { callbacks, ...rest } = config;
  return { ...rest, configurable: Object.fromEntries(Object.entries(config.configurable).filter(([k]) => !k.startsWith("__"))) };
}

function shapeTask(task) {
  const ref = task?.state?.configurable ? checkpointRef(task.state, false) : null;
  if (!ref) return task;
  const { state, ...rest } = task;
  return { ...rest, checkpoint: ref };
}

function shapeCheckpoint(payload) {
  const { parentConfig, ...rest } = payload;
  return {
    ...rest,
    config: publicConfig(payload.config),
    parent_config: publicConfig(parentConfig),
    checkpoint: checkpointRef(payload.config),
    parent_checkpoint: checkpointRef(parentConfig),
    tasks: (payload.tasks ?? []).map(shapeTask),
  };
}

function shapeChunk(mode, data) {
  if (mode === "checkpoints") return shapeCheckpoint(data);
  if (mode === "tasks") return shapeTask(data);
  if (mode === "debug" && data?.type === "checkpoint") return { ...data, payload: shapeCheckpoint(data.payload) };
  if (mode === "debug" && data?.type === "task_result") return { ...data, payload: shapeTask(data.payload) };
  return data;
}

const runs = new Map(); // run id → {controller, done}
const LIB_MODES = new Set(["values", "updates", "custom", "debug", "tasks", "checkpoints"]);

function commandOf(c) {
  if (!c) return null;
  const goto = c.goto === undefined ? undefined : [].concat(c.goto).map((g) => (typeof g === "string" ? g : new lg.Send(g.node, g.input)));
  return new lg.Command({ resume: c.resume, update: c.update ?? undefined, goto });
}

handlers.run = async (p) => {
  const controller = new AbortController();
  let finished;
  const done = new Promise((r) => (finished = r));
  runs.set(p.run_id, { controller, done });
  try {
    return await execute(p, controller.signal);
  } catch (err) {
    if (controller.signal.aborted) return { status: "interrupted" };
    return { status: "error", error: errorOf(err) };
  } finally {
    runs.delete(p.run_id);
    finished();
  }
};

handlers.cancel = async (p) => {
  const r = runs.get(p.run_id);
  if (!r) return { cancelled: false };
  r.controller.abort();
  await r.done; // acknowledged only once the run has unwound
  return { cancelled: true };
};

async function execute(p, signal) {
  // The API's config is snake_case (recursion_limit); LangGraph.js reads
  // recursionLimit. Like the reference server, the run's configurable
  // also names its graph and assistant.
  const ids = { graph_id: p.graph_id, assistant_id: p.assistant_id };
  const { recursion_limit: recursionLimit, ...apiConfig } = p.config ?? {};
  const config = {
    ...apiConfig,
    configurable: {
      ...(p.config?.configurable ?? {}),
      thread_id: p.thread_id,
      run_id: p.run_id,
      graph_id: p.graph_id,
      ...(p.assistant_id ? { assistant_id: p.assistant_id } : {}),
    },
    metadata: {
      ...publicConfigurable(p.config?.configurable),
      ...(p.config?.metadata ?? {}),
      ...(p.metadata ?? {}),
      ...ids,
      run_attempt: 1,
      langgraph_version: LANGGRAPH_VERSION,
    },
  };
  if (recursionLimit !== undefined) config.recursionLimit = recursionLimit;
  if (p.checkpoint_id) config.configurable.checkpoint_id = p.checkpoint_id;
  const graph = await graphFor(p.graph_id, config);
  const modes = p.stream_mode ?? ["values"];
  const lib = new Set(modes.filter((m) => LIB_MODES.has(m)));
  if (modes.includes("messages") || modes.includes("messages-tuple")) lib.add("messages");
  // `messages` completes a message when the state shows it (values), as
  // the reference servers do: the input, a tool's answer, a streamed answer.
  if (modes.includes("messages")) lib.add("values");
  if (lib.size === 0) lib.add("values");
  // Chat models stream their answer even when the client did not ask for
  // messages, as under the reference servers (which always stream
  // events): a model can answer differently streamed than invoked.
  if (!lib.has("messages") && preferStreaming) config.callbacks = [preferStreaming];
  const input = p.command ? commandOf(p.command) : (p.input ?? null);
  // One mode goes as a string, its chunks coming bare (or [ns, chunk]) in
  // every @langchain/langgraph: before 0.2.2x a one-mode list did the same
  // instead of [mode, chunk] (the official templates' lock files pin
  // 0.2.5 to 0.2.11), so a list would be read wrongly there.
  const single = lib.size === 1 ? [...lib][0] : null;
  const options = {
    ...config,
    context: p.context ?? undefined,
    streamMode: single ?? [...lib],
    subgraphs: !!p.subgraphs,
    signal,
    interruptBefore: p.interrupt_before ?? undefined,
    interruptAfter: p.interrupt_after ?? undefined,
  };
  const emit = (event, data) => notify("event", { run_id: p.run_id, event, data });
  const partial = new Map(); // message id → accumulated chunk
  const completed = new Set(); // ids of messages sent as messages/complete
  const handle = (chunk) => {
    const [ns, mode, data] = single ? (p.subgraphs ? [chunk[0], single, chunk[1]] : [[], single, chunk]) : p.subgraphs ? chunk : [[], ...chunk];
    const suffix = ns.length ? "|" + ns.join("|") : "";
    if (mode === "messages") {
      if (modes.includes("messages-tuple")) emit("messages" + suffix, ser(data));
      if (modes.includes("messages")) {
        // Partial messages are a chat model's chunks, accumulated.
        const [msg, metadata] = data;
        const id = msg?.id;
        const isChunk = typeof msg?.concat === "function" && /Chunk$/.test(msg?.constructor?.name ?? "");
        if (id && isChunk) {
          // The metadata of the model's run, as a stream of events shows it:
          // without the tags LangGraph adds to message tuples.
          const { tags, ...runMetadata } = metadata ?? {};
          if (!partial.has(id)) emit("messages/metadata" + suffix, { [id]: { metadata: ser(runMetadata) } });
          const acc = partial.has(id) ? partial.get(id).concat(msg) : msg;
          partial.set(id, acc);
          emit("messages/partial" + suffix, [ser(acc)]);
        }
      }
      return;
    }
    if (modes.includes(mode)) emit(mode + suffix, ser(shapeChunk(mode, data)));
    if (modes.includes("messages") && !ns.length && data && typeof data === "object" && "messages" in data && typeof data._getType !== "function") {
      const fresh = [].concat(data.messages ?? []).filter((m) => m?.id && !completed.has(m.id));
      for (const m of fresh) completed.add(m.id);
      if (fresh.length) emit("messages/complete", ser(fresh));
    }
  };
  if (modes.includes("events")) {
    // The events mode is LangChain's streamEvents (v2) on the graph, as
    // the reference server streams it: the root run's own on_chain_stream
    // events carry the other modes' chunks, every other event goes out
    // as an `events` event. Only runs that ask for it pay for the
    // callbacks.
    const events = graph.streamEvents(input, { ...options, version: "v2", runId: p.run_id });
    for await (const ev of events) {
      if (ev.tags?.includes("langsmith:hidden")) continue;
      if (ev.event === "on_chain_stream" && ev.run_id === p.run_id) {
        handle(ev.data.chunk);
        continue;
      }
      emit("events", ser(ev));
    }
  } else {
    for await (const chunk of await graph.stream(input, options)) handle(chunk);
  }
  const state = await graph.getState({ configurable: { thread_id: p.thread_id, checkpoint_ns: "" } });
  const out = stateOut(state);
  return { status: "success", values: out.values, next: out.next, tasks: out.tasks, interrupts: out.interrupts };
}

// ---- custom routes --------------------------------------------------------

handlers.http = async (p) => {
  if (!httpApp) throw new Error("this project has no custom routes");
  const headers = new Headers();
  for (const [k, v] of p.headers ?? []) headers.append(k, v);
  const init = { method: p.method, headers };
  if (p.body_streamed && p.method !== "GET" && p.method !== "HEAD") {
    // A large or chunked upload: each read asks Slipway for what has
    // arrived, so the app consumes it as the client sends it. No chunk is
    // asked for before the app reads (a high-water mark of 0; the default
    // of 1 pulls at once): a body the app leaves alone is the agent API's
    // whole when the request falls through to it.
    init.body = new ReadableStream(
      {
        async pull(controller) {
          const chunk = await call("http.read", { stream_id: p.stream_id });
          if (chunk.body) controller.enqueue(Buffer.from(chunk.body, "base64"));
          if (chunk.eof) controller.close();
        },
      },
      { highWaterMark: 0 },
    );
    init.duplex = "half";
  } else if (p.body && p.method !== "GET" && p.method !== "HEAD") init.body = Buffer.from(p.body, "base64");
  const request = new Request(new URL(p.url, `http://${headers.get("host") || "localhost"}`), init);
  let res;
  if (httpMounted && p.fallthrough) {
    const pass = { request };
    res = await httpMounted.fetch(request, { [passOn]: pass });
    if (pass.fallthrough) {
      const out = { fallthrough: true, headers: [...res.headers.entries()] };
      if (pass.body) Object.assign(out, { body_replaced: true, body: pass.body.toString("base64") });
      return out;
    }
  } else {
    res = await httpApp.fetch(request);
    // An app Slipway cannot mount answers for itself; its 404 is the API's.
    if (p.fallthrough && res.status === 404) return { fallthrough: true, headers: [] };
  }
  const type = res.headers.get("content-type") ?? "";
  if (res.body && p.stream_id && /^(text\/event-stream|application\/x-ndjson)/.test(type)) {
    // Streamed: each chunk is a call Slipway answers once it has written
    // it to the client, so a slow (or departed) client stops the app.
    await call("http.start", { stream_id: p.stream_id, status: res.status, headers: [...res.headers.entries()] });
    const reader = res.body.getReader();
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        await call("http.chunk", { stream_id: p.stream_id, body: Buffer.from(value).toString("base64") });
      }
    } catch (err) {
      reader.cancel(err).catch(() => {});
      throw err;
    }
    return { streamed: true };
  }
  const body = Buffer.from(await res.arrayBuffer());
  return { status: res.status, headers: [...res.headers.entries()], body: body.toString("base64") };
};

// ---- state ----------------------------------------------------------------

function stateConfig(p) {
  const c = { thread_id: p.thread_id, checkpoint_ns: p.checkpoint_ns ?? "" };
  if (p.checkpoint_id) c.checkpoint_id = p.checkpoint_id;
  return { configurable: c };
}

// The config a factory builds the thread's graph with for a read or an
// update of its state: the thread's config (its assistant's and its runs',
// sent by the engine), as the reference calls getGraph with it.
function factoryConfig(p, config) {
  const tc = p.config ?? {};
  return { ...tc, configurable: { ...(tc.configurable ?? {}), ...config.configurable } };
}

handlers.state = async (p) => {
  const config = stateConfig(p);
  const graph = await graphFor(p.graph_id, factoryConfig(p, config));
  return stateOut(await graph.getState(config, { subgraphs: !!p.subgraphs }));
};

handlers.history = async (p) => {
  const config = stateConfig(p);
  const graph = await graphFor(p.graph_id, factoryConfig(p, config));
  const out = [];
  const opts = { limit: p.limit || undefined, filter: p.filter ?? undefined };
  if (p.before) opts.before = { configurable: { checkpoint_id: p.before } };
  for await (const s of graph.getStateHistory(config, opts)) out.push(stateOut(s));
  return out;
};

handlers.update_state = async (p) => {
  const config = stateConfig(p);
  // The new checkpoint's metadata names its graph, as a run's do.
  config.metadata = { graph_id: p.graph_id };
  const graph = await graphFor(p.graph_id, factoryConfig(p, config));
  const next = await graph.updateState(config, p.values ?? null, p.as_node || undefined);
  return { checkpoint: ref(next), state: stateOut(await graph.getState({ configurable: { thread_id: p.thread_id, checkpoint_ns: "" } })) };
};

// Supersteps of a thread's create request: each a checkpoint with its
// updates, each applied as its node (values, or a command).
handlers.bulk_update_state = async (p) => {
  const config = stateConfig(p);
  config.metadata = { graph_id: p.graph_id };
  const graph = await graphFor(p.graph_id, factoryConfig(p, config));
  if (typeof graph.bulkUpdateState !== "function") throw new Error("this project's @langchain/langgraph has no bulkUpdateState: supersteps need a newer version");
  const steps = (p.supersteps ?? []).map((s) => ({
    updates: (s.updates ?? []).map((u) => ({ values: u.command ? commandOf(u.command) : (u.values ?? null), asNode: u.as_node || undefined })),
  }));
  const next = await graph.bulkUpdateState(config, steps);
  return { checkpoint: ref(next), state: stateOut(await graph.getState({ configurable: { thread_id: p.thread_id, checkpoint_ns: "" } })) };
};

// ---- graph descriptions ---------------------------------------------------

// The drawable graph as the reference server answers
// GET /assistants/{id}/graph: LangChain's Graph JSON, xray expanding
// subgraphs (true, or a depth).
handlers.graph = async (p) => {
  const graph = await graphFor(p.graph_id, p.config ?? {});
  const opts = { ...(p.config ?? {}), xray: p.xray ?? undefined };
  // @langchain/langgraph before 0.2.2x (the official templates' lock
  // files) has only the synchronous getGraph.
  const drawable = typeof graph.getGraphAsync === "function" ? await graph.getGraphAsync(opts) : await graph.getGraph(opts);
  return ser(drawable.toJSON());
};

// The libraries schemas.mjs converts with, from the project: imported on
// first use, so start-up does not pay for them; a project whose LangGraph
// has no zod/schema (0.2.x) gets null for it.
let schemaLibs;
async function schemaLib() {
  schemaLibs ??= Promise.all([
    import("@langchain/langgraph/zod/schema").catch(() => null),
    Promise.all([import("@langchain/core/utils/json_schema"), import("@langchain/core/utils/types")])
      .then(([j, t]) => ({ toJsonSchema: j.toJsonSchema, isZodSchemaV3: t.isZodSchemaV3, isZodSchemaV4: t.isZodSchemaV4 }))
      .catch(() => null),
  ]).then(([schema, core]) => ({ schema, core }));
  return schemaLibs;
}

async function schemasOf(graph) {
  return schemasFor(graph, await schemaLib());
}

function omitNull(o) {
  for (const k of Object.keys(o)) if (o[k] == null) delete o[k];
  return ser(o);
}

// As the reference server: the context schema is also the config schema
// (JavaScript graphs cannot tell them apart), and a schema the graph does
// not define is left out.
handlers.schemas = async (p) => {
  const s = await schemasOf(await graphFor(p.graph_id, p.config ?? {}));
  return omitNull({ graph_id: p.graph_id, input_schema: s.input, output_schema: s.output, state_schema: s.state, config_schema: s.config, context_schema: s.config });
};

// subgraphs: {namespace: {state, input, output, config}} of the graph's
// subgraphs, under p.namespace, recursively when p.recurse (the reference
// server's shape, which is not the /schemas one).
handlers.subgraphs = async (p) => {
  const graph = await graphFor(p.graph_id, p.config ?? {});
  const out = {};
  // Older @langchain/langgraph: the synchronous getSubgraphs, or none.
  const subgraphs = typeof graph.getSubgraphsAsync === "function" ? graph.getSubgraphsAsync(p.namespace || undefined, !!p.recurse)
    : typeof graph.getSubgraphs === "function" ? graph.getSubgraphs(p.namespace || undefined, !!p.recurse) : [];
  for await (const [ns, sub] of subgraphs) {
    out[ns] = omitNull(await schemasOf(sub));
  }
  return out;
};

notify("ready", {
  protocol: PROTOCOL,
  language: "javascript",
  runtime: `node ${process.version}`,
  langgraph: LANGGRAPH_VERSION,
  graphs: results,
  http: httpResult,
});
