// A graph for the checkpointer conformance test only
// (runtime/agent/hosts/js/e2e/checkpointer.spec.mjs). Loaded by the
// JavaScript host like any graph, it is handed the host's checkpointer —
// the saver whose storage is `slipway agent`'s database — and, when
// SLIPWAY_TEST_SAVER_RELAY names a Unix socket path, serves that saver's
// methods on it, so the validation suite (which needs its own test runner
// process) calls the very saver the host runs graphs with.
//
// Frames are newline-delimited JSON: {"id", "m", "a"} with the method's
// arguments, and {"id", "r"} or {"id", "e"}. Arguments and results travel
// as the saver's own serializer's typed bytes, so values survive as they
// would inside the host.
import net from "node:net";
import { StateGraph, Annotation, START, END } from "@langchain/langgraph";

const State = Annotation.Root({ n: Annotation({ reducer: (a, b) => a + b, default: () => 0 }) });

export const graph = new StateGraph(State)
  .addNode("inc", () => ({ n: 1 }))
  .addEdge(START, "inc")
  .addEdge("inc", END)
  .compile();

const METHODS = new Set(["getTuple", "list", "put", "putWrites", "deleteThread"]);

async function serve(saver, { m, a }) {
  if (!METHODS.has(m)) throw new Error(`unknown saver method ${m}`);
  // JSON has no undefined: an omitted argument arrives as null.
  const args = (await saver.serde.loadsTyped(a.t, Buffer.from(a.b, "base64"))).map((v) => (v === null ? undefined : v));
  let out;
  if (m === "list") {
    out = [];
    for await (const tuple of saver.list(...args)) out.push(tuple);
  } else {
    out = await saver[m](...args);
  }
  const [t, b] = await saver.serde.dumpsTyped(out === undefined ? { undefined: true } : { value: out });
  return { t, b: Buffer.from(b).toString("base64") };
}

const socketPath = process.env.SLIPWAY_TEST_SAVER_RELAY;
if (socketPath) {
  net
    .createServer((conn) => {
      let buf = "";
      conn.setEncoding("utf8");
      conn.on("data", (chunk) => {
        buf += chunk;
        let i;
        while ((i = buf.indexOf("\n")) >= 0) {
          const req = JSON.parse(buf.slice(0, i));
          buf = buf.slice(i + 1);
          // The host sets the checkpointer of every graph it serves.
          Promise.resolve()
            .then(() => {
              if (!graph.checkpointer?.serde) throw new Error("the host has not given this graph its checkpointer");
              return serve(graph.checkpointer, req);
            })
            .then(
              (r) => conn.write(JSON.stringify({ id: req.id, r }) + "\n"),
              (err) => conn.write(JSON.stringify({ id: req.id, e: { type: err?.name || "Error", message: String(err?.message ?? err) } }) + "\n"),
            );
        }
      });
      conn.on("error", () => {});
    })
    .listen(socketPath);
}
