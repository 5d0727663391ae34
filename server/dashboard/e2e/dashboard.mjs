// The dashboard's browser steps, run by server/dashboard/browser_test.go
// against a real `slipway serve`. Each step waits for what a user would
// see; any failed expectation exits non-zero. Screenshots go to $SHOTS.
import { chromium } from "playwright-core";
import { env, check, a11y } from "./common.mjs";
import { mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";

const BASE = env("BASE"), SHOTS = env("SHOTS");
mkdirSync(SHOTS, { recursive: true });

async function shot(page, name) {
  await page.screenshot({ path: join(SHOTS, name + ".png"), fullPage: true });
}

// readmeShot is the top of the page, small enough for the README.
async function readmeShot(page, name) {
  await page.screenshot({ path: join(SHOTS, "readme-" + name + ".png"), clip: { x: 0, y: 0, width: 960, height: 720 } });
}

async function signIn(page, email, password) {
  await page.goto(BASE + "/#/signin");
  await page.fill("#email", email);
  await page.fill("#password", password);
  await page.click("#signin-password button[type=submit]");
  await page.waitForSelector("#deployments");
}

// waitLogEnd waits until the followed revision is final, having seen
// lines arrive while it was live, and returns its final status. The log
// goes on with the agent's output of a deployed revision: the status
// shown beside it says the revision is over.
const finalStatuses = ["DEPLOYED", "BUILD_FAILED", "DEPLOY_FAILED", "CREATE_FAILED", "SKIPPED"];
async function waitLogEnd(page) {
  await page.waitForSelector("#log-state:text('live')", { timeout: 30000 }).catch(() => {});
  await page.waitForFunction((f) => f.includes(document.querySelector("#log-status")?.textContent), finalStatuses, { timeout: 180000, polling: 200 });
  return page.textContent("#log-status");
}

// runDone waits until the explorer's run stream ended: "#run-done" once it
// ended cleanly, an error box when it broke. Either way a failure says
// what the page showed, not only that a selector never appeared.
async function runDone(page, what) {
  const shown = async () => page.textContent("#events").catch(() => "(no #events)");
  let end;
  try {
    end = await page.waitForSelector("#run-done, #main [role=alert]", { timeout: 60000 });
  } catch (e) {
    throw new Error(`${what}: the run stream did not end within 60 s; events so far: ${await shown()}`);
  }
  if ((await end.getAttribute("id")) !== "run-done") {
    throw new Error(`${what}: the run stream failed: ${await end.textContent()}; events: ${await shown()}`);
  }
  console.log(`${what}: streamed ${await shown()}`);
}

// ask writes a request for the Go test on stdout and waits for its answer.
const rl = createInterface({ input: process.stdin });
const answers = rl[Symbol.asyncIterator]();
async function ask(line) {
  console.log(line);
  return (await answers.next()).value;
}

const browser = await chromium.launch({ executablePath: env("CHROMIUM"), args: ["--no-sandbox"] });
try {
  const ctx = await browser.newContext({ viewport: { width: 1200, height: 900 }, acceptDownloads: true });
  const page = await ctx.newPage();
  page.on("dialog", (d) => d.accept());
  page.on("pageerror", (e) => console.log("page error:", e.message));

  // Sign in.
  await page.goto(BASE + "/");
  await page.waitForSelector("#signin-password");
  await a11y(page, "sign-in");
  await shot(page, "signin");
  await page.fill("#email", env("ADMIN_EMAIL"));
  await page.fill("#password", "not-the-password");
  await page.click("#signin-password button[type=submit]");
  await page.waitForSelector("main [role=alert]");
  check((await page.textContent("main [role=alert]")).includes("Invalid email or password"), "a wrong password is told, not a blank page");
  await signIn(page, env("ADMIN_EMAIL"), env("ADMIN_PASSWORD"));
  check(true, "signed in with a basic-auth user");

  // A new deployment from an uploaded archive; its build log streams live.
  await page.click("a[href='#/new']");
  await page.fill("#new-name", "web-agent");
  await page.setInputFiles("#new-archive", env("ARCHIVE"));
  await a11y(page, "new deployment");
  await page.click("#new-form button[type=submit]");
  await page.waitForSelector("#revisions");
  await page.waitForSelector("#log-state:text('live')", { timeout: 30000 });
  check(true, "the build log is followed live");
  check(await waitLogEnd(page) === "DEPLOYED", "the first revision ends DEPLOYED");
  check((await page.textContent("#log")).length > 0, "build and deploy lines were shown");
  // The view goes on with the agent's output once deployed.
  await page.waitForFunction(() => document.querySelector("#log")?.textContent.includes("slipway agent serving"), null, { timeout: 60000 });
  check(await page.textContent("#log-state") === "live", "the revision's log goes on with its agent's output once deployed");
  await page.reload();
  await page.waitForSelector("#revisions");
  await a11y(page, "deployment");
  await shot(page, "deployment");
  await readmeShot(page, "deployment");
  const firstRev = await page.getAttribute("#revisions tbody tr", "data-revision");

  // A second deployment from a folder packed in the browser.
  await page.goto(BASE + "/#/new");
  await page.fill("#new-name", "folder-agent");
  await page.setInputFiles("#new-folder", env("FOLDER"));
  await page.click("#new-form button[type=submit]");
  await page.waitForSelector("#revisions");
  check(await waitLogEnd(page) === "DEPLOYED", "a deployment from a folder packed in the browser ends DEPLOYED");

  // Keyboard: a page puts the focus on its content; Tab goes on from there
  // with a visible focus ring, and the skip link is the first stop of the page.
  await page.keyboard.press("Tab");
  const focus = await page.evaluate(() => ({
    inMain: document.getElementById("main").contains(document.activeElement),
    outline: getComputedStyle(document.activeElement).outlineStyle,
    skipFirst: document.querySelector("a[href], button, input, select, textarea").classList.contains("skip"),
  }));
  check(focus.inMain && focus.outline !== "none" && focus.skipFirst, `keyboard focus moves through the content with a visible ring (${JSON.stringify(focus)})`);

  // The list shows it with its status and a copyable URL; the filter narrows it.
  await page.goto(BASE + "/#/deployments");
  await page.waitForSelector("tr[data-name='web-agent']");
  await page.fill("#filter", "no-such");
  await page.waitForSelector("tr[data-name='web-agent']", { state: "detached" });
  await page.fill("#filter", "web");
  await page.waitForSelector("tr[data-name='web-agent'] .badge:text('READY')");
  await a11y(page, "deployments");
  await shot(page, "deployments");

  // Agent explorer: a run streams its events; an interrupt is resumed.
  await page.click("tr[data-name='web-agent'] a");
  await page.click("#explorer-link");
  await page.waitForSelector("#assistants li");
  await page.click("#new-thread");
  await page.waitForSelector("#run-form");
  const threadURL = page.url();
  const checkpointsBefore = await page.$$eval("#history li", (l) => l.length);
  await page.fill("#run-input", '{"messages": [{"role": "user", "content": "hello"}]}');
  await page.click("#run-form button[type=submit]");
  await runDone(page, "the first run");
  check((await page.textContent("#events")).includes("values"), "a run's streamed events are shown");
  // Without a reload the page shows what the run left: its output in the
  // state, the run with its final status, more checkpoints.
  const stateAfter = await page.textContent("#state");
  check(stateAfter.includes('"count": 1') && stateAfter.includes("5 characters"), "the state shows the run's output values: " + stateAfter);
  const runsAfter = await page.$$eval("#runs li", (l) => l.map((e) => e.textContent));
  check(runsAfter.length === 1 && runsAfter[0].includes("success"), "the runs list has the run with its final status: " + runsAfter.join(" | "));
  const checkpointsAfter = await page.$$eval("#history li", (l) => l.length);
  check(checkpointsAfter > checkpointsBefore, `the history lists more checkpoints (${checkpointsBefore} → ${checkpointsAfter})`);
  // An event's data is pretty-printed JSON (not a JSON string with escaped
  // quotes), and a message's text reads as text.
  const pres = await page.$$eval("#events li pre", (l) => l.map((e) => e.textContent));
  check(pres.some((t) => t.includes('\n  "count": 1')) && !pres.some((t) => t.includes('\\"')), "an event shows its data pretty-printed: " + pres[0]);
  check((await page.$$eval("#events .event-msg", (l) => l.map((e) => e.textContent))).some((t) => t === "ai: 5 characters"), "a streamed message's text is shown as text");
  await page.locator("#events").scrollIntoViewIfNeeded();
  await page.screenshot({ path: join(SHOTS, "readme-explorer.png"), fullPage: false });
  await page.fill("#run-input", '{"interrupt": "go on?"}');
  await page.click("#run-form button[type=submit]");
  await runDone(page, "the interrupting run");
  check(!!(await page.$("#interrupted")), "the thread reads as interrupted once the run ends, without a reload");
  await page.reload();
  await page.waitForSelector("#interrupted").catch(async (e) => {
    throw new Error(`the thread does not read as interrupted; its state: ${await page.textContent("#state").catch(() => "(none)")}: ${e.message}`);
  });
  check(true, "the thread reads as interrupted");
  await a11y(page, "agent explorer");
  await shot(page, "explorer");
  await page.fill("#resume-value", '"yes"');
  await page.click("#resume-form button[type=submit]");
  await runDone(page, "the resuming run");
  check(!(await page.$("#interrupted")) && (await page.textContent("#state")).includes("resumed with yes"), "after resuming, the state is read again: " + await page.textContent("#state"));
  check((await page.$$eval("#runs li", (l) => l.length)) === 3, "after resuming, the runs list has the resuming run");
  await page.reload();
  await page.waitForSelector("#state");
  check(!(await page.$("#interrupted")), "the resumed thread is no longer interrupted");

  // Set a secret: a new revision, followed until it serves.
  await page.goto(BASE + "/#/deployments");
  await page.click("tr[data-name='web-agent'] a");
  await page.waitForSelector("#secrets-form");
  await page.click("#secret-add");
  await page.fill("#secret-name-0", "GREETING");
  await page.fill("#secret-value-0", "hello-secret");
  await page.click("#secrets-form button[type=submit]");
  await page.waitForSelector("#secrets li:text('GREETING')");
  check(await waitLogEnd(page) === "DEPLOYED", "the secret's revision ends DEPLOYED");
  check(!(await page.content()).includes("hello-secret"), "the secret's value is not shown");

  // Roll back to the first revision, confirmed.
  await page.reload();
  await page.waitForSelector(`tr[data-revision='${firstRev}'] .rollback`);
  await page.click(`tr[data-revision='${firstRev}'] .rollback`);
  await page.waitForSelector(`tr[data-revision='${firstRev}']`);
  await page.waitForFunction((r) => document.querySelector("#log-source")?.value === r, firstRev, { timeout: 30000 }).catch(() => {});
  check(await page.inputValue("#log-source") === firstRev, "after a rollback the log view follows the rolled-back revision");
  await page.waitForFunction(() => document.querySelector("#log")?.textContent.includes("now serves the deployment"), null, { timeout: 120000 });
  const rolled = await page.textContent("#log");
  check(rolled.split("build started").length === 2 && rolled.split("now serves the deployment").length === 2,
    "a rollback shows its redeploy only, not the revision's first build again: " + rolled);
  await page.waitForFunction(async (rev) => {
    const res = await fetch(location.origin + "/v2/deployments?name_contains=web-agent");
    const d = (await res.json()).resources[0];
    return d.active_revision_id === rev;
  }, firstRev, { timeout: 120000, polling: 500 });
  check(true, "rolled back to the first revision");

  // The agent's own output, followed live.
  await page.selectOption("#log-source", "agent");
  await page.waitForFunction(() => document.querySelector("#log")?.textContent.includes("agent"), null, { timeout: 60000 });
  check(true, "the agent's output is followed");
  check(!(await page.textContent("#log")).includes('"path":"/ok"'), "no health check is in the agent's output");
  // Checked every 5 s: the count shows once the watcher checked the
  // rolled-back revision's agent.
  let counted = "";
  for (const end = Date.now() + 30000; !/^[1-9]\d* health checks/.test(counted) && Date.now() < end;) {
    await page.reload();
    await page.waitForSelector("#health-checks");
    counted = await page.textContent("#health-checks");
  }
  check(/^[1-9]\d* health checks/.test(counted), "the deployment page counts the health checks: " + counted);

  // A lost agent: the list shows the deployment unhealthy (red, with the
  // reason) until Slipway brings it back.
  const depID = page.url().split("#/d/")[1].split("/")[0];
  await page.goto(BASE + "/#/deployments");
  await page.waitForSelector("tr[data-name='web-agent'] .badge:text('READY')");
  const killed = await ask(`kill-agent ${depID}`);
  check(killed !== "killed 0", `the host killed the agent (${killed})`);
  let unhealthy = false;
  for (const end = Date.now() + 15000; !unhealthy && Date.now() < end;) {
    await page.reload();
    await page.waitForSelector("tr[data-name='web-agent'] .badge");
    unhealthy = await page.$("tr[data-name='web-agent'] .badge.s-bad") !== null;
    if (unhealthy) await shot(page, "unhealthy");
  }
  check(unhealthy, "a lost agent shows as unhealthy in the list: " + (await page.textContent("tr[data-name='web-agent'] .badge")));
  await page.waitForSelector("tr[data-name='web-agent'] .badge:text('READY')", { timeout: 60000 });
  check(true, "the deployment reads READY again once its agent is back");

  // Delete, once the name is typed.
  await page.goto(BASE + "/#/deployments");
  await page.click("tr[data-name='folder-agent'] a");
  await page.waitForSelector("#delete-confirm");
  check(await page.isDisabled("form:has(#delete-confirm) button[type=submit]"), "delete is disabled until the name is typed");
  await page.fill("#delete-confirm", "folder-agent");
  await page.click("form:has(#delete-confirm) button[type=submit]");
  await page.waitForSelector("#deployments");
  await page.waitForSelector("tr[data-name='folder-agent']", { state: "detached" });
  check(true, "a deployment is deleted after its name is typed");

  // An API key, shown once, then revoked.
  await page.goto(BASE + "/#/org");
  await page.waitForSelector("#key-form");
  await a11y(page, "organization");
  await page.fill("#key-description", "browser key");
  await page.click("#key-form button[type=submit]");
  const key = await page.textContent("#new-key-value");
  check(key.startsWith("slw_"), "the new key is shown");
  await shot(page, "organization");
  await page.click("tr:has-text('browser key') .revoke");
  await page.waitForSelector("tr:has-text('browser key')", { state: "detached" });
  check(!(await page.$("#new-key-value")), "the key is not shown again");
  await page.reload();
  await page.waitForSelector("#key-form");
  check(!(await page.content()).includes(key), "the key is not in the page after a reload");

  // A personal access token, shown once, then revoked.
  await page.fill("#pat-description", "browser token");
  await page.click("#pat-form button[type=submit]");
  check((await page.textContent("#new-pat-value")).startsWith("slw_"), "the new personal access token is shown");
  await page.click("#pat-table tr:has-text('browser token') .revoke");
  await page.waitForSelector("#pat-table tr:has-text('browser token')", { state: "detached" });
  check(true, "the personal access token is revoked");

  // An invitation with an organization role shows as pending.
  await page.fill("#invite-email", "invited@example.com");
  await page.selectOption("#invite-role", { label: "Organization User" });
  await page.click("#invite button[type=submit]");
  await page.waitForSelector("#members td:text('invited@example.com (invited)')");
  check(true, "an invitation is pending in the members list");

  // A user who signs in with a password, added with the Editor role: the
  // password is shown once, and with it they can deploy.
  await page.fill("#add-user-email", "editor@example.com");
  await page.selectOption("#add-user-role", { label: "Editor (deploys and runs agents)" });
  await page.click("#add-user-form button[type=submit]");
  await page.waitForSelector("#new-user-password");
  const editorPassword = (await page.textContent("#new-user-password")).trim();
  check(editorPassword.length >= 16, "the added user's password is shown once");
  await a11y(page, "organization with a new user");
  const ectx = await browser.newContext();
  const epage = await ectx.newPage();
  await signIn(epage, "editor@example.com", editorPassword);
  check(!!(await epage.$("a[href='#/new']")) && !(await epage.$("#role-hint")), "the added Editor has New deployment and no role hint");
  await ectx.close();

  // The audit log, filtered, has the events of what was done.
  await page.goto(BASE + "/#/audit");
  await page.waitForSelector("#audit[data-state=loaded]");
  await page.selectOption("#audit-ops", ["create_deployment", "update_deployment", "delete_deployment", "create_api_key", "delete_api_key"]);
  await page.click("#audit-form button[type=submit]");
  const wanted = ["create_deployment", "update_deployment", "delete_deployment", "create_api_key", "delete_api_key"];
  await page.waitForSelector("#audit[data-state=loaded]");
  const ops = await page.$$eval("#audit .op", (els) => els.map((e) => e.textContent));
  for (const op of wanted) check(ops.includes(op), `the audit log shows ${op}`);
  check(ops.every((op) => wanted.includes(op)), "the operations filter applies");
  await a11y(page, "audit log");
  await shot(page, "audit");
  const [download] = await Promise.all([page.waitForEvent("download"), page.click("#audit-export")]);
  const lines = readFileSync(await download.path(), "utf8").trim().split("\n");
  check(lines.length === ops.length && JSON.parse(lines[0]).api, "the export is the window's events as JSON Lines");

  // Paging: ten events a page, the next page by the cursor.
  await page.selectOption("#audit-ops", []);
  await page.selectOption("#audit-limit", "10");
  await page.click("#audit-form button[type=submit]");
  await page.waitForSelector("#audit[data-state=loaded]");
  check(await page.$$eval("#audit .audit-row", (r) => r.length) === 10, "a page holds ten events");
  await page.click("#audit-more");
  await page.waitForSelector("#audit[data-state=loaded]");
  check(await page.$$eval("#audit .audit-row", (r) => r.length) > 10, "the next page is added");
  check(true, "the next page of the audit log follows the cursor");
  await page.click("#audit .audit-row summary");
  check(JSON.parse(await page.textContent("#audit .audit-row pre")).metadata !== undefined, "an event's full OCSF JSON is shown");

  // CSP: an injected inline script does not run.
  const blocked = await page.evaluate(() => new Promise((resolve) => {
    document.addEventListener("securitypolicyviolation", (e) => resolve(e.violatedDirective), { once: true });
    const s = document.createElement("script");
    s.textContent = "window.__injected = true";
    document.body.append(s);
    setTimeout(() => resolve("none"), 2000);
  }));
  check(blocked.startsWith("script-src") && !(await page.evaluate(() => window.__injected)), "an injected inline script is refused by the CSP");

  // CSRF: a form on another origin posting to the API with the cookies is refused.
  await page.goto(env("EVIL"));
  await page.waitForURL(BASE + "/api/v1/api-key");
  const answer = await page.textContent("body");
  check(answer.includes("Cross-site request refused"), "a cross-site form post is refused: " + answer.trim());
  await page.goto(BASE + "/#/org");
  await page.waitForSelector("#key-table");
  check(!(await page.content()).includes("stolen"), "the cross-site post created nothing");

  // The workspace switcher: another workspace has none of this one's deployments.
  await page.goto(BASE + "/#/deployments");
  await page.waitForSelector("tr[data-name='web-agent']");
  await page.selectOption("#workspace", { label: "Second" });
  await page.waitForSelector("tr[data-name='web-agent']", { state: "detached" });
  await page.waitForSelector("main p.hint:text('No deployments yet.')");
  await page.selectOption("#workspace", { label: "Default" });
  await page.waitForSelector("tr[data-name='web-agent']");
  check(true, "the workspace switcher changes the workspace the pages act in");

  // Sign out: the session ends.
  await page.click("#signout");
  await page.waitForSelector("#signin-password");
  const after = await page.evaluate(async () => (await fetch("/ui/session")).status);
  check(after === 401, "signed out: the session no longer answers");
  await ctx.close();

  // A Viewer sees no write controls, and a write from its session is refused.
  const vctx = await browser.newContext({ viewport: { width: 390, height: 844 } }); // a phone
  const vpage = await vctx.newPage();
  await signIn(vpage, env("VIEWER_EMAIL"), env("VIEWER_PASSWORD"));
  check(!(await vpage.$("a[href='#/new']")), "a Viewer has no New deployment link");
  check((await vpage.textContent("#role-hint")).includes("Editor or Admin role"), "the deployments page tells a Viewer which role deploying needs");
  await vpage.click("tr[data-name='web-agent'] a");
  await vpage.waitForSelector("#revisions");
  check(!(await vpage.$(".rollback")) && !(await vpage.$("#secrets-form")) && !(await vpage.$("#delete-confirm")), "a Viewer sees no rollback, secrets or delete controls");
  await shot(vpage, "viewer-phone");
  const status = await vpage.evaluate(async () => {
    const csrf = document.cookie.split("; ").find((c) => c.startsWith("__Host-slipway_csrf=")).split("=")[1];
    const res = await fetch("/v2/deployments", { method: "POST", headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf },
      body: JSON.stringify({ name: "viewer-made", source: "internal_source", source_config: {}, source_revision_config: {}, secrets: [] }) });
    return res.status;
  });
  check(status === 403, "a Viewer's direct write is refused (403)");
  await vpage.click("#explorer-link");
  await vpage.waitForSelector("#assistants li");
  check((await vpage.textContent("#explorer-role-hint")).includes("Starting threads and runs needs"), "a Viewer lists graphs and threads in the explorer, told which role runs need");
  await vpage.goto(threadURL);
  await vpage.waitForSelector("#state");
  check(!(await vpage.$("#run-form")) && !(await vpage.$("#resume-form")), "a Viewer reads a thread in the explorer, without run controls");
  await vpage.goto(BASE + "/#/audit");
  await vpage.waitForSelector("#audit-why");
  check((await vpage.textContent("main")).includes("organization:manage") || (await vpage.textContent("#audit-why")).includes("role"), "the audit page tells a Viewer why it cannot read the log");
  await vctx.close();

  // Signing in with an API key works too (here a workspace Viewer's key).
  const kctx = await browser.newContext();
  const kpage = await kctx.newPage();
  await kpage.goto(BASE + "/#/signin");
  await kpage.fill("#apikey", env("VIEWER_KEY"));
  await kpage.click("#signin-key button[type=submit]");
  await kpage.waitForSelector("tr[data-name='web-agent']");
  check((await kpage.textContent("#whoami")) === "API key" && !(await kpage.$("a[href='#/new']")), "signed in with an API key, read-only");
  await kctx.close();
  console.log("all browser steps passed");
} finally {
  await browser.close();
  rl.close(); // stdin would keep the process alive
  process.stdin.destroy();
}
