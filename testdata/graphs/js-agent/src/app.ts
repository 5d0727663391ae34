// The project's custom routes ("http": {"app": ...} in configured.json):
// a Hono app mounted before the agent API. Its middleware sees every
// request, the API's too; what none of its routes serves is the API's.
import { createHash } from "node:crypto";
import { Hono } from "hono";
import { streamSSE } from "hono/streaming";

export const app = new Hono();

// Middleware on every request: ?intercept answers here, before the API;
// every other answer (the API's included) gets x-app-middleware.
app.use(async (c, next) => {
  if (c.req.query("intercept") != null) return c.json({ intercepted: c.req.path });
  await next();
  c.header("x-app-middleware", "true");
});

// Middleware that changes the body of the API's POST /threads: an
// x-stamp header becomes the new thread's metadata.stamped.
app.use(async (c, next) => {
  const stamp = c.req.header("x-stamp");
  if (stamp && c.req.method === "POST" && c.req.path === "/threads") {
    const body = await c.req.json();
    body.metadata = { ...body.metadata, stamped: stamp };
    c.req.raw = new Request(c.req.raw, { body: JSON.stringify(body) });
  }
  await next();
});

// The same through the reference's hook: the body set as the context
// variable "langgraph:body" is the body the API reads.
app.use(async (c, next) => {
  const stamp = c.req.header("x-stamp-var");
  if (stamp && c.req.method === "POST" && c.req.path === "/threads") {
    const body = await c.req.json();
    body.metadata = { ...body.metadata, stamped_var: stamp };
    c.set("langgraph:body", JSON.stringify(body));
  }
  await next();
});

// Middleware that takes its time before it passes a request on, and
// leaves the body alone (a slow authorization check, say): the API still
// reads the whole body, however large.
app.use(async (c, next) => {
  if (c.req.header("x-slow-middleware")) await new Promise((resolve) => setTimeout(resolve, 50));
  await next();
});

// A route on a path of the API's: the app's route wins.
app.get("/assistants/app-owned", (c) => c.json({ owner: "app" }));

app.get("/custom/hello", (c) => c.json({ hello: c.req.query("name") ?? "world", greeting: process.env.GREETING ?? null }));

app.post("/custom/echo", async (c) => {
  const body = await c.req.json();
  c.header("X-Custom-Route", "yes");
  return c.json({ method: c.req.method, got: body }, 201);
});

// A server-sent event stream that sends "second" only once
// POST /custom/release/:id has been called: a client that reads "first"
// before releasing it sees the answer stream, not arrive whole at the end.
const gates = new Map<string, () => void>();
const released = new Set<string>();

app.get("/custom/events", (c) =>
  streamSSE(c, async (stream) => {
    const id = c.req.query("id") ?? "none";
    await stream.writeSSE({ event: "first", data: id });
    if (!released.has(id)) await new Promise<void>((resolve) => gates.set(id, resolve));
    await stream.writeSSE({ event: "second", data: id });
  }),
);

app.post("/custom/release/:id", (c) => {
  const id = c.req.param("id");
  released.add(id);
  gates.get(id)?.();
  gates.delete(id);
  return c.json({ released: id });
});

// An upload the app consumes as it arrives: GET /custom/upload/:id tells
// how many bytes of upload :id the app has read so far, so a client can
// see it reading before the upload ends (a buffered body would show 0).
const uploaded = new Map<string, number>();

app.post("/custom/upload/:id", async (c) => {
  const id = c.req.param("id");
  const hash = createHash("sha256");
  let bytes = 0;
  const body = c.req.raw.body;
  if (body) {
    const reader = body.getReader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      bytes += value.length;
      hash.update(value);
      uploaded.set(id, bytes);
    }
  }
  return c.json({ bytes, sha256: hash.digest("hex") });
});

app.get("/custom/upload/:id", (c) => c.json({ bytes: uploaded.get(c.req.param("id")) ?? 0 }));
