// Opens a deployment's API reference (DOCS: its URL + /docs) in headless
// Chromium, run by server/processtest/docs_browser_test.go: refused before sign-in,
// rendered once signed in to the dashboard at BASE with KEY. Exits
// non-zero on a failed expectation.
import { createRequire } from "node:module";

const env = (k) => { if (!process.env[k]) throw new Error(`${k} is not set`); return process.env[k]; };
const { chromium } = createRequire(env("E2E") + "/")("playwright-core");
const BASE = env("BASE"), DOCS = env("DOCS");

function check(cond, what) {
  if (!cond) throw new Error("expectation failed: " + what);
  console.log("ok:", what);
}

const browser = await chromium.launch({ executablePath: env("CHROMIUM"), args: ["--no-sandbox"] });
try {
  const ctx = await browser.newContext();
  const page = await ctx.newPage();
  page.on("console", (m) => console.log("page:", m.text()));

  if (process.env.AGENTS) check(new URL(DOCS).origin !== new URL(BASE).origin, `the deployment's URL ${DOCS} is on the agents origin`);
  const before = await page.goto(DOCS);
  console.log(`before sign-in: ${before.status()} at ${page.url()}`);
  check(before.status() === 401, "a browser that is not signed in is refused");

  await page.goto(BASE + "/#/signin");
  await page.fill("#apikey", env("KEY"));
  await page.click("#signin-key button[type=submit]");
  await page.waitForSelector("#deployments");

  const nav = await page.goto(DOCS);
  console.log(`signed in: ${nav.status()} at ${page.url()}`);
  check(nav.status() === 200, `the page opens (${nav.status()})`);
  check(page.url().startsWith(BASE + "/agents/"), `on Slipway's own origin, where the sign-in counts (${page.url()})`);
  check((await page.title()).includes("API reference"), `its title (${await page.title()})`);
  const text = await page.textContent("body");
  for (const want of ["create_thread", "/threads/{thread_id}/history", "ErrorDetail"]) {
    check(text.includes(want), `the page lists ${want}`);
  }
  const bg = await page.evaluate(() => getComputedStyle(document.querySelector("header")).backgroundColor);
  check(bg === "rgb(15, 61, 86)", `its stylesheet applies under its Content-Security-Policy (header ${bg})`);

  const link = await page.getAttribute("header a", "href");
  const json = await page.goto(new URL(link, page.url()).href);
  const doc = JSON.parse(await json.text());
  check(json.status() === 200 && doc.paths["/threads"], `its link opens the deployment's document (${json.status()} at ${page.url()})`);
} finally {
  await browser.close();
}
