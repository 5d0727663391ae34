// The agent explorer's browser steps, run by
// server/dashboard/explorer_browser_test.go against a real `slipway serve`
// with testdata/graphs/py-agent deployed (real LangGraph graphs: react,
// approval, parent). Each step waits for what a user would see; a failed
// expectation exits non-zero. Screenshots go to $SHOTS.
import { chromium } from "playwright-core";
import { env, check, a11y } from "./common.mjs";
import { mkdirSync } from "node:fs";
import { join } from "node:path";

const BASE = env("BASE"), SHOTS = env("SHOTS"), DEP = env("DEPLOYMENT");
mkdirSync(SHOTS, { recursive: true });

// runDone waits until the run's stream ended cleanly ("#run-done"); a
// broken stream (an error box) fails with what the page showed.
async function runDone(page, what) {
  const end = await page.waitForSelector("#run-done, #main [role=alert]", { timeout: 60000 }).catch(async () => {
    throw new Error(`${what}: the run stream did not end within 60 s; events: ${await page.textContent("#events").catch(() => "?")}`);
  });
  if ((await end.getAttribute("id")) !== "run-done") throw new Error(`${what}: the run failed: ${await end.textContent()}`);
  check(true, what + ": the run's stream ended");
}

// openThread picks the assistant of graph on the explorer's page and
// starts a new thread with it.
async function openThread(page, graph) {
  await page.goto(`${BASE}/#/d/${DEP}/agent`);
  await page.waitForFunction(() => !document.getElementById("thread") && document.querySelector("#assistants li"));
  const value = await page.$eval("#assistant", (s, g) => [...s.options].find((o) => o.textContent.includes(`(graph ${g},`))?.value, graph);
  check(!!value, `the assistant of graph ${graph} is listed`);
  await page.selectOption("#assistant", value);
  await page.click("#new-thread");
  await page.waitForSelector("#graph svg .graph-node");
  await page.waitForSelector("#run-form");
}

const svgTexts = (page) => page.$$eval("#graph svg text", (l) => l.map((t) => t.textContent));

// watch records, in the page, the classes the graph's nodes take and the
// texts the AI message of the chat goes through while a run streams.
async function watch(page) {
  await page.evaluate(() => {
    const w = window.__watch = { running: [], aiTexts: [], batches: 0 };
    new MutationObserver((records) => {
      for (const r of records) {
        // Lit now, or lit before this change (oldValue).
        const g = r.target.closest && r.target.closest("[data-node]");
        if (g && (g.classList.contains("running") || /\brunning\b/.test(r.oldValue || ""))) w.running.push(g.getAttribute("data-node"));
      }
    }).observe(document.getElementById("graph"), { attributes: true, attributeFilter: ["class"], attributeOldValue: true, subtree: true });
    new MutationObserver((records) => {
      let grew = false;
      for (const r of records) {
        const li = r.target.parentElement && r.target.parentElement.closest("li[data-role=ai]");
        if (r.type === "characterData" && li) { w.aiTexts.push(r.oldValue, r.target.data); grew = true; }
      }
      if (grew) w.batches++;
    }).observe(document.getElementById("chat"), { characterData: true, characterDataOldValue: true, subtree: true, childList: true });
  });
}

const browser = await chromium.launch({ executablePath: env("CHROMIUM"), args: ["--no-sandbox"] });
try {
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await ctx.newPage();
  page.on("pageerror", (e) => console.log("page error:", e.message));
  await page.goto(BASE + "/#/signin");
  await page.fill("#email", env("EMAIL"));
  await page.fill("#password", env("PASSWORD"));
  await page.click("#signin-password button[type=submit]");
  await page.waitForSelector("#deployments");

  // ReAct agent: its graph (a conditional edge), then a chat answer that
  // streams token by token, with the tool call and its result.
  await openThread(page, "react");
  const reactTexts = await svgTexts(page);
  check(["start", "agent", "tools", "end"].every((n) => reactTexts.includes(n)), `react's graph is drawn: ${reactTexts}`);
  check((await page.$$("#graph .graph-edge.conditional")).length === 2, "react's two conditional edges are drawn dashed");
  check(!(await page.isHidden("#chat-panel")), "a graph with messages gets the chat view");
  await watch(page);
  // Typed and sent from the keyboard alone.
  await page.focus("#chat-input");
  await page.keyboard.type("weather in Paris");
  await page.keyboard.press("Enter");
  await runDone(page, "the chat message");
  const answer = "The tool says: It is sunny in Paris.";
  await page.waitForFunction((a) => [...document.querySelectorAll("#chat li[data-role=ai] .chat-text")].some((p) => p.textContent === a), answer);
  const w = await page.evaluate(() => window.__watch);
  const partial = [...new Set(w.aiTexts)].filter((t) => t && t !== answer && answer.startsWith(t));
  // Observer batches are separate tasks: the page rendered between them.
  check(partial.length >= 2 && w.batches >= 3, `the AI answer grew token by token: ${partial.length} partial texts shown (${JSON.stringify(partial.slice(0, 4))}...), over ${w.batches} renders`);
  check(w.running.includes("agent") && w.running.includes("tools"), `the running node was highlighted live: ${[...new Set(w.running)]}`);
  const roles = await page.$$eval("#chat > li", (l) => l.map((e) => e.getAttribute("data-role")));
  check(JSON.stringify(roles) === JSON.stringify(["human", "ai", "tool", "ai"]), `the chat shows human, AI, tool and AI messages: ${roles}`);
  const call = await page.textContent("#chat li[data-role=ai] .tool-call");
  check(call.includes("get_weather") && call.includes('"city":"Paris"'), `the tool call shows its name and arguments: ${call}`);
  check((await page.textContent("#chat li[data-role=tool]")).includes("It is sunny in Paris."), "the tool's result is shown");
  check((await page.textContent("#state")).includes(answer), "the state is read again after the run");
  await a11y(page, "agent explorer (chat and graph, after a run)");
  await page.locator("#thread").scrollIntoViewIfNeeded();
  await page.evaluate(() => document.getElementById("thread").scrollIntoView());
  await page.screenshot({ path: join(SHOTS, "explorer-chat.png") });

  // A breakpoint: the next message's run pauses before "tools"; Continue
  // goes on from there.
  await page.check("#breakpoints input[value=tools]");
  check(await page.$eval("#graph [data-node=tools]", (g) => g.classList.contains("breakpoint")), "a breakpoint is marked on its node");
  await page.fill("#chat-input", "weather in Rome");
  await page.click("#chat-form button[type=submit]");
  await runDone(page, "the run with a breakpoint");
  check((await page.textContent("#paused")).includes("tools"), "the thread shows it paused before tools");
  check(!(await page.textContent("#chat")).includes("sunny in Rome"), "the tool has not run yet");
  await page.click("#continue");
  await runDone(page, "the continued run");
  await page.waitForFunction(() => document.querySelector("#chat").textContent.includes("The tool says: It is sunny in Rome."));
  check(!(await page.$("#paused")), "continued, the run went through the tool to the answer");
  await page.uncheck("#breakpoints input[value=tools]");

  // The assistant's versions, listed on demand.
  await page.goto(`${BASE}/#/d/${DEP}/agent`);
  await page.waitForFunction(() => !document.getElementById("thread") && document.querySelector("#assistants li"));
  const reactItem = page.locator("#assistants > li", { has: page.locator("strong", { hasText: /^react$/ }) });
  await reactItem.locator("summary").click();
  check((await reactItem.locator("pre").textContent()).includes('"config"'), "an assistant shows its config and context");
  await reactItem.locator("button", { hasText: "Show versions" }).click();
  await reactItem.locator(".versions li").first().waitFor();
  check((await reactItem.locator(".versions li").first().textContent()).startsWith("version 1"), "an assistant's versions are listed");

  // The approval graph: its input form from the schema (validated), an
  // interrupt resumed from its form, then a fork from an earlier checkpoint.
  await openThread(page, "approval");
  const approvalTexts = await svgTexts(page);
  check(["prepare", "review", "act"].every((n) => approvalTexts.includes(n)), `approval's graph is drawn: ${approvalTexts}`);
  check(await page.isHidden("#chat-panel"), "a graph without messages has no chat view");
  check(!!(await page.$("#in-request")) && (await page.getAttribute("#in-log", "id")) === "in-log", "the input form has the schema's fields (request, log)");
  await page.check("#raw-json");
  await page.fill("#run-input", "{not json");
  await page.click("#run-form button[type=submit]");
  check((await page.textContent("#run-input-error")).includes("Not valid JSON") && (await page.getAttribute("#run-input", "aria-invalid")) === "true",
    "invalid raw JSON is refused inline");
  await page.uncheck("#raw-json");
  await page.fill("#in-request", "deploy");
  await page.click("#run-form button[type=submit]");
  await runDone(page, "the approval run");
  await page.waitForSelector("#interrupted");
  check((await page.textContent("#interrupts .interrupt-value")).includes("approve deploy?"), "the interrupt's value is shown");
  await page.check("#resume-text");
  await page.fill("#resume-value", "approved");
  await page.click("#resume-form button[type=submit]");
  await runDone(page, "the resume");
  const state = await page.textContent("#state");
  check(!(await page.$("#interrupted")) && state.includes("reviewed: approved") && state.includes("did deploy"), `resumed from the form, the run completed: ${state}`);

  // Fork: the checkpoint before "prepare" ran, with request edited.
  const step0 = page.locator("#history li", { hasText: "step 0 · loop" });
  check((await step0.count()) === 1, "the history lists the checkpoint of step 0");
  const forkedFrom = await step0.getAttribute("data-checkpoint");
  await step0.locator("summary").click();
  await step0.locator(".fork-here").click();
  const values = JSON.parse(await page.inputValue("#fork-values"));
  check(values.request === "deploy", "the fork editor holds the checkpoint's values");
  await page.fill("#fork-values", "{oops");
  await page.click("#fork-form button[type=submit]");
  check((await page.textContent("#fork-error")).includes("JSON object"), "invalid state JSON is refused inline");
  await page.fill("#fork-values", JSON.stringify({ ...values, request: "rollback" }, null, 2));
  await page.click("#fork-form button[type=submit]");
  await runDone(page, "the forked run");
  await page.waitForSelector("#interrupted");
  check((await page.textContent("#interrupts .interrupt-value")).includes("approve rollback?"), "the fork ran with the edited state");
  const fork = await page.$$eval("#history li[data-fork=true]", (l) => l.map((e) => ({ parent: e.getAttribute("data-parent"), branch: e.getAttribute("data-branch"), text: e.textContent })));
  check(fork.length === 1 && fork[0].parent === forkedFrom && fork[0].branch !== "1" && fork[0].text.includes("fork"),
    `the history shows the new branch from the forked checkpoint: ${JSON.stringify(fork)}`);
  const branches = await page.$$eval("#history li", (l) => [...new Set(l.map((e) => e.getAttribute("data-branch")))]);
  check(branches.length === 2, `the history keeps both branches: ${branches}`);
  await a11y(page, "agent explorer (interrupt, history with a fork)");
  await page.locator("#history li[data-fork=true] summary").click();
  await page.locator("#history").scrollIntoViewIfNeeded();
  await page.locator("section", { has: page.locator("#history") }).screenshot({ path: join(SHOTS, "explorer-history.png") });

  // Parent with a subgraph: xray draws the subgraph's nodes in a group,
  // and the subgraph's running node is highlighted.
  await openThread(page, "parent");
  const parentTexts = await svgTexts(page);
  check(["editor", "publish"].every((n) => parentTexts.includes(n)) && !parentTexts.includes("editor:draft"), `parent's graph is drawn: ${parentTexts}`);
  await page.check("#xray");
  await page.waitForSelector("#graph [data-subgraph=editor]");
  const xrayTexts = await svgTexts(page);
  check(["editor:draft", "editor:check", "publish"].every((n) => xrayTexts.includes(n)), `with xray the subgraph's nodes are drawn: ${xrayTexts}`);
  await watch(page);
  await page.fill("#in-topic", "cats");
  await page.click("#run-form button[type=submit]");
  await runDone(page, "the parent run");
  await page.waitForSelector("#interrupted");
  const pw = await page.evaluate(() => window.__watch);
  check(pw.running.includes("editor:draft"), `the subgraph's running node was highlighted: ${[...new Set(pw.running)]}`);
  await page.fill("#resume-value", '"fine"');
  await page.click("#resume-form button[type=submit]");
  await runDone(page, "the parent's resume");
  check((await page.textContent("#state")).includes("published"), "the parent run completed after the subgraph's interrupt");
} finally {
  await browser.close();
}
