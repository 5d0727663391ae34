// Drives a deployment from pages of other origins in headless Chromium,
// run by server/processtest/cors_browser_test.go. ALLOWED and DENIED serve the same
// page (the official JS SDK, bundled, and a script calling it); only
// ALLOWED is in SLIPWAY_CORS_ALLOW_ORIGINS. Exits non-zero on a failed
// expectation.
import { createRequire } from "node:module";

const env = (k) => { if (!process.env[k]) throw new Error(`${k} is not set`); return process.env[k]; };
const { chromium } = createRequire(env("E2E") + "/")("playwright-core");

function check(cond, what) {
  if (!cond) throw new Error("expectation failed: " + what);
  console.log("ok:", what);
}

const browser = await chromium.launch({ executablePath: env("CHROMIUM"), args: ["--no-sandbox"] });
try {
  const page = await browser.newPage();
  page.on("console", (m) => console.log("page:", m.text()));
  // The calls a frontend (agent-chat-ui, useStream) makes: a thread, a run
  // on it, its result, with the key in X-Api-Key.
  const drive = (withKey) => page.evaluate(async ({ api, key, withKey }) => {
    const client = new LangGraphSDK.Client({ apiUrl: api, apiKey: withKey ? key : null, defaultHeaders: {}, callerOptions: { maxRetries: 0 } });
    try {
      const thread = await client.threads.create();
      const run = await client.runs.create(thread.thread_id, "echo", { input: { messages: [{ role: "human", content: "hi" }] } });
      await client.runs.join(thread.thread_id, run.run_id);
      const state = await client.threads.getState(thread.thread_id);
      return { ok: true, thread: thread.thread_id, run: run.run_id, messages: state.values.messages.length };
    } catch (e) {
      return { ok: false, error: String(e && e.message || e), status: e && e.status };
    }
  }, { api: env("API"), key: env("KEY"), withKey });

  await page.goto(env("ALLOWED") + "/");
  const origin = await page.evaluate(() => location.origin);
  check(origin !== new URL(env("API")).origin, `the page's origin ${origin} is not the deployment's`);
  const good = await drive(true);
  console.log("allowed origin, with key:", JSON.stringify(good));
  check(good.ok && good.thread && good.run && good.messages >= 2, "an allowed origin creates a thread and a run through the deployment URL with the SDK");
  const nokey = await drive(false);
  console.log("allowed origin, no key:", JSON.stringify(nokey));
  check(!nokey.ok && nokey.status === 401, "without the key the same page gets a readable 401");

  await page.goto(env("DENIED") + "/");
  const bad = await drive(true);
  console.log("other origin, with key:", JSON.stringify(bad));
  check(!bad.ok && bad.status === undefined, "an origin not allowed is blocked by the browser (no readable answer)");
} finally {
  await browser.close();
}
