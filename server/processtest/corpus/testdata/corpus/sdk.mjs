// Runs one corpus project's graph through the official JS SDK (run with
// node --input-type=module from the JS SDK suite's directory). PROJECT,
// AGENT_URL, LANGGRAPH_API_KEY; prints one JSON line: {"answer": ...} when
// the run completed, {"error": ...} when it failed.
import { Client } from "@langchain/langgraph-sdk";

const client = new Client({ apiUrl: process.env.AGENT_URL, apiKey: process.env.LANGGRAPH_API_KEY });
const hi = { messages: [{ role: "user", content: "hi" }] };
const fake = { model: "openai/gpt-4o-mini" };
const last = (out) => out.messages[out.messages.length - 1].content;

const scenarios = {
  "new-langgraphjs-project": async () => last(await client.runs.wait(null, "agent", { input: hi })),
  "react-agent-js": async () => last(await client.runs.wait(null, "agent", { input: hi, config: { configurable: fake } })),
  "memory-agent-js": async () => {
    const thread = await client.threads.create();
    return last(await client.runs.wait(thread.thread_id, "agent", { input: hi, config: { configurable: { ...fake, userId: "corpus" } } }));
  },
  "langgraphjs-studio-starter": async () => last(await client.runs.wait(null, "agent", { input: hi })),
};

try {
  const run = scenarios[process.env.PROJECT];
  if (!run) throw new Error(`no scenario for ${process.env.PROJECT}`);
  console.log(JSON.stringify({ answer: await run() }));
} catch (err) {
  console.log(JSON.stringify({ error: `${err?.name}: ${err?.message}` }));
}
