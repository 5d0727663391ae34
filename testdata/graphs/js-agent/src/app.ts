// The project's custom routes ("http": {"app": ...} in configured.json):
// a Hono app the JavaScript host serves for paths the agent API does not own.
import { Hono } from "hono";

export const app = new Hono();

app.get("/custom/hello", (c) => c.json({ hello: c.req.query("name") ?? "world", greeting: process.env.GREETING ?? null }));

app.post("/custom/echo", async (c) => {
  const body = await c.req.json();
  c.header("X-Custom-Route", "yes");
  return c.json({ method: c.req.method, got: body }, 201);
});
