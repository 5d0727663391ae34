// Cookie planting, run by server/dashboard/cookies_browser_test.go: a
// deployment's custom route answers every request with Set-Cookie headers
// naming the dashboard's cookies. Signed in to the dashboard, the browser
// opens that route (a navigation, and a fetch of the dashboard's own
// page); afterwards the dashboard's cookies must be the same and the
// session must still work. With AGENTS set (SLIPWAY_AGENTS_URL), the
// navigation must land on the agents origin instead.
import { chromium } from "playwright-core";
import { env, check } from "./common.mjs";

const BASE = env("BASE"), KEY = env("KEY"), DEP = env("DEP");
const AGENTS = process.env.AGENTS || "";
const route = `/agents/${DEP}/custom/plant`;

// slipwayCookies maps the name of each of the dashboard's cookies the
// browser holds for BASE to its value.
async function slipwayCookies(ctx) {
  const out = {};
  for (const c of await ctx.cookies(BASE)) if (/slipway_/i.test(c.name)) out[c.name] = c.value;
  return out;
}

const browser = await chromium.launch({ executablePath: env("CHROMIUM"), args: ["--no-sandbox"] });
try {
  const ctx = await browser.newContext();
  const page = await ctx.newPage();
  page.on("pageerror", (e) => console.log("page error:", e.message));
  await page.goto(BASE + "/#/signin");
  await page.fill("#apikey", KEY);
  await page.click("#signin-key button[type=submit]");
  await page.waitForSelector("#deployments");
  const before = await slipwayCookies(ctx);
  console.log("cookies after sign-in:", Object.keys(before).join(", "));
  check(Object.keys(before).length >= 2, "signed in: the browser holds the session and CSRF cookies");

  // unchanged fails unless the dashboard's cookies are as they were at sign-in.
  const unchanged = async (after) => {
    const now = await slipwayCookies(ctx);
    console.log(`cookies after ${after}:`, JSON.stringify(Object.keys(now)));
    check(JSON.stringify(now) === JSON.stringify(before),
      `the dashboard's cookies are unchanged after ${after} (before ${JSON.stringify(before)}, now ${JSON.stringify(now)})`);
  };

  // The attack, as a navigation: the deployment's page, opened in a tab.
  const tab = await ctx.newPage();
  const nav = await tab.goto(BASE + route);
  const landed = tab.url(), status = nav.status(), text = await tab.textContent("body");
  await tab.close();
  console.log(`navigation to ${BASE + route}: ${status} at ${landed}`);
  await unchanged("the deployment's page was opened");
  if (AGENTS) {
    check(landed.startsWith(AGENTS + route), "with an agents origin, the navigation was redirected there");
  } else {
    check(status === 200 && text.includes("planted"), "the deployment's page was served");
  }
  // ...and as a fetch made by the dashboard's page (what its agent explorer does).
  const fetched = await page.evaluate(async (path) => (await fetch(path, { credentials: "same-origin" })).status, route);
  await unchanged("the dashboard's page fetched the route");
  check(fetched === 200, `the dashboard's page fetched the route (${fetched})`);
  const own = (await ctx.cookies()).filter((c) => c.name === "theme");
  check(AGENTS ? own.every((c) => !c.domain.includes(new URL(BASE).hostname)) : own.length === 1,
    AGENTS ? "the dashboard's origin kept none of the deployment's cookies" : "the deployment's own cookie was kept");

  // The session still works: who am I, a change with the CSRF token, and the page.
  const who = await page.evaluate(async () => { const r = await fetch("/ui/session"); return [r.status, (await r.json()).kind]; });
  check(who[0] === 200 && who[1] === "service_key", `the session still authenticates (${who})`);
  const change = await page.evaluate(async () => {
    const csrf = document.cookie.split("; ").find((c) => /^(__Host-)?slipway_csrf=/.test(c)).split("=")[1];
    const r = await fetch("/api/v1/api-key", { method: "POST", headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf },
      body: JSON.stringify({ description: "after the planting", role_id: "Viewer" }) });
    return r.status;
  });
  check(change === 200, `a change with the CSRF token still passes (${change})`);
  await page.reload();
  await page.waitForSelector("#deployments");
  check(true, "the dashboard still shows the signed-in pages");
  check(Object.keys(before).every((n) => n.startsWith("__Host-")), "on this loopback origin the dashboard's cookies are __Host- prefixed");
  await page.click("#signout");
  await page.waitForSelector("#signin-key");
  check(Object.keys(await slipwayCookies(ctx)).length === 0, "signing out clears them");
} finally {
  await browser.close();
}
