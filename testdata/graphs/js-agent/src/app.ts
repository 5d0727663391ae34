// The project's custom routes ("http": {"app": ...} in configured.json):
// a Hono app the JavaScript host serves for paths the agent API does not own.
import { createHash } from "node:crypto";
import { Hono } from "hono";
import { streamSSE } from "hono/streaming";

export const app = new Hono();

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
