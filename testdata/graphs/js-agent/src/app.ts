// The project's custom routes ("http": {"app": ...} in configured.json):
// a Hono app the JavaScript host serves for paths the agent API does not own.
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
