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

// A user's console.log must never reach the channel or be mistaken for
// protocol: everything written to stdout goes to stderr, which Slipway logs.
process.stdout.write = process.stderr.write.bind(process.stderr);

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

let lg, saver, graphSaver, preferStreaming;
const LANGGRAPH_VERSION = projectVersion("@langchain/langgraph");
const graphs = {}; // id → {graph} | {factory}
const results = {};
try {
  lg = await import("@langchain/langgraph");
  saver = createSaver(await import("@langchain/langgraph-checkpoint"), call);
  graphSaver = mergingSaver(saver);
  const { BaseCallbackHandler } = await import("@langchain/core/callbacks/base");
  preferStreaming = BaseCallbackHandler.fromMethods({});
  preferStreaming.lc_prefer_streaming = true;
} catch (err) {
  for (const id of Object.keys(cfg.graphs)) results[id] = { ok: false, error: `cannot import @langchain/langgraph from ${cfg.project_dir}: ${err.message}` };
}
if (lg) {
  for (const [id, spec] of Object.entries(cfg.graphs)) {
    try {
      const mod = await import(pathToFileURL(spec.file).href);
      const g = mod[spec.export];
      if (g === undefined) throw new Error(`${spec.source} has no export named "${spec.export}"`);
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
// checkpointer, whatever the user compiled it with.
function prepare(g) {
  const compiled = typeof g?.compile === "function" && typeof g?.stream !== "function" ? g.compile() : g;
  if (typeof compiled?.stream !== "function") throw new Error("the export is not a LangGraph graph (no stream method)");
  compiled.checkpointer = graphSaver;
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

// apiShape gives debug, checkpoints and tasks events the shape the
// reference servers stream: checkpoints named by {thread_id, checkpoint_ns,
// checkpoint_id, checkpoint_map}, parent_config in snake case, no internal
// configurable keys or callbacks, and a task's state as a checkpoint.
function apiShape(mode, data) {
  if (mode === "debug" && data?.type === "checkpoint") return { ...data, payload: debugCheckpoint(data.payload) };
  if (mode === "debug" && data?.type === "task_result") return { ...data, payload: debugTask(data.payload) };
  if (mode === "checkpoints") return debugCheckpoint(data);
  if (mode === "tasks") return debugTask(data);
  return data;
}

function checkpointOf(config, task = false) {
  const c = config?.configurable;
  if (!c?.thread_id || (!task && !c.checkpoint_id)) return null;
  return { thread_id: c.thread_id, checkpoint_id: c.checkpoint_id || null, checkpoint_ns: c.checkpoint_ns || "", checkpoint_map: c.checkpoint_map || null };
}

function publicConfig(config) {
  if (!config?.configurable || typeof config.configurable !== "object") return config;
  const { callbacks, ...rest } = config;
  return { ...rest, configurable: Object.fromEntries(Object.entries(config.configurable).filter(([k]) => !k.startsWith("__"))) };
}

function debugTask(task) {
  const checkpoint = task?.state?.configurable ? checkpointOf(task.state, true) : null;
  if (!checkpoint) return task;
  const { state, ...rest } = task;
  return { ...rest, checkpoint };
}

function debugCheckpoint(payload) {
  const { parentConfig, ...rest } = payload;
  return {
    ...rest,
    checkpoint: checkpointOf(payload.config),
    parent_checkpoint: checkpointOf(parentConfig),
    tasks: (payload.tasks ?? []).map(debugTask),
    config: publicConfig(payload.config),
    parent_config: publicConfig(parentConfig),
  };
}

// ---- runs -----------------------------------------------------------------

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
  const ids = { graph_id: p.graph_id, assistant_id: p.assistant_id };
  const config = {
    ...(p.config ?? {}),
    configurable: { ...(p.config?.configurable ?? {}), ...ids, thread_id: p.thread_id, run_id: p.run_id },
    metadata: {
      ...publicConfigurable(p.config?.configurable),
      ...(p.config?.metadata ?? {}),
      ...(p.metadata ?? {}),
      ...ids,
      run_attempt: 1,
      langgraph_version: LANGGRAPH_VERSION,
    },
  };
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
  const stream = await graph.stream(input, {
    ...config,
    context: p.context ?? undefined,
    streamMode: [...lib],
    subgraphs: !!p.subgraphs,
    signal,
    interruptBefore: p.interrupt_before ?? undefined,
    interruptAfter: p.interrupt_after ?? undefined,
  });
  const emit = (event, data) => notify("event", { run_id: p.run_id, event, data });
  const partial = new Map(); // message id → accumulated chunk
  const completed = new Set(); // ids of messages sent as messages/complete
  for await (const chunk of stream) {
    const [ns, mode, data] = p.subgraphs ? chunk : [[], ...chunk];
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
      continue;
    }
    if (modes.includes(mode)) emit(mode + suffix, ser(apiShape(mode, data)));
    if (modes.includes("messages") && !ns.length && data && typeof data === "object" && "messages" in data && typeof data._getType !== "function") {
      const fresh = [].concat(data.messages ?? []).filter((m) => m?.id && !completed.has(m.id));
      for (const m of fresh) completed.add(m.id);
      if (fresh.length) emit("messages/complete", ser(fresh));
    }
  }
  const state = await graph.getState({ configurable: { thread_id: p.thread_id, checkpoint_ns: "" } });
  const out = stateOut(state);
  return { status: "success", values: out.values, next: out.next, tasks: out.tasks, interrupts: out.interrupts };
}

// ---- state ----------------------------------------------------------------

function stateConfig(p) {
  const c = { thread_id: p.thread_id, checkpoint_ns: p.checkpoint_ns ?? "" };
  if (p.checkpoint_id) c.checkpoint_id = p.checkpoint_id;
  return { configurable: c };
}

handlers.state = async (p) => {
  const config = stateConfig(p);
  const graph = await graphFor(p.graph_id, config);
  return stateOut(await graph.getState(config, { subgraphs: !!p.subgraphs }));
};

handlers.history = async (p) => {
  const config = stateConfig(p);
  const graph = await graphFor(p.graph_id, config);
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
  const graph = await graphFor(p.graph_id, config);
  const next = await graph.updateState(config, p.values ?? null, p.as_node || undefined);
  return { checkpoint: ref(next), state: stateOut(await graph.getState({ configurable: { thread_id: p.thread_id, checkpoint_ns: "" } })) };
};

notify("ready", {
  protocol: PROTOCOL,
  language: "javascript",
  runtime: `node ${process.version}`,
  langgraph: LANGGRAPH_VERSION,
  graphs: results,
});
