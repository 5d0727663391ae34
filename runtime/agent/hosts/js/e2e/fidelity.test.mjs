// State, store and streaming fidelity of LangGraph.js graphs
// (testdata/graphs/js-agent) served by a real `slipway agent` (AGENT_URL),
// driven through the official @langchain/langgraph-sdk.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Client } from "@langchain/langgraph-sdk";

const client = new Client({ apiUrl: process.env.AGENT_URL, callerOptions: { maxRetries: 0 } });

async function collect(stream) {
  const out = [];
  for await (const chunk of stream) out.push(chunk);
  return out;
}

test("the store from inside a graph: a node reads API items and its writes are visible through the API", async () => {
  const user = `u${Date.now()}`;
  await client.store.putItem(["memories", user], "profile", { name: "Ada", likes: "tea" });
  const chunks = await collect(
    client.runs.stream(null, "memory", { input: { user, note: "buy tea" }, streamMode: ["custom", "values"] }),
  );
  assert.ok(!chunks.some((c) => c.event === "error"), JSON.stringify(chunks));
  const custom = chunks.filter((c) => c.event === "custom").map((c) => c.data);
  assert.deepEqual(custom[0], { profile: { name: "Ada", likes: "tea" } });
  const seen = chunks.filter((c) => c.event === "values").at(-1).data.seen;
  assert.deepEqual(seen.profile, { name: "Ada", likes: "tea" });
  assert.deepEqual(seen.found, [[["memories", user], "last_note"]]);

  const item = await client.store.getItem(["memories", user], "last_note");
  assert.deepEqual(item.value, { text: "buy tea" });
  assert.deepEqual(item.namespace, ["memories", user]);
  const gone = await client.store.getItem(["memories", user], "scratch").catch((err) => (err.status === 404 ? null : Promise.reject(err)));
  assert.equal(gone, null, "the node's delete reached the store");
  const search = await client.store.searchItems(["memories", user]);
  assert.deepEqual(search.items.map((i) => i.key).sort(), ["last_note", "profile"]);
});
