// The deployment page's charts, run by server/dashboard/charts_browser_test.go
// against a real `slipway serve` whose agent ran SUCCESSES + FAILURES runs,
// with the charts sampled every second. Screenshots go to $SHOTS.
import { chromium } from "playwright-core";
import { env, check, a11y } from "./common.mjs";
import { mkdirSync } from "node:fs";
import { join } from "node:path";

const BASE = env("BASE"), SHOTS = env("SHOTS"), DEP = env("DEPLOYMENT");
const SUCCESSES = Number(env("SUCCESSES")), FAILURES = Number(env("FAILURES"));
mkdirSync(SHOTS, { recursive: true });

const browser = await chromium.launch({ executablePath: env("CHROMIUM"), args: ["--no-sandbox"] });
try {
  for (const scheme of ["light", "dark"]) {
    const ctx = await browser.newContext({ viewport: { width: 1200, height: 900 }, colorScheme: scheme });
    const page = await ctx.newPage();
    page.on("pageerror", (e) => console.log("page error:", e.message));
    await page.goto(BASE + "/#/signin");
    await page.fill("#email", env("EMAIL"));
    await page.fill("#password", env("PASSWORD"));
    await page.click("#signin-password button[type=submit]");
    await page.waitForSelector("#deployments");
    await page.goto(BASE + `/#/d/${DEP}`);
    await page.waitForSelector("#charts-section");

    // Within 30 s the run chart's summary counts the workload's runs.
    const total = SUCCESSES + FAILURES;
    const want = `${total} runs ended in the last hour: ${SUCCESSES} success, ${FAILURES} error`;
    const started = Date.now();
    try {
      await page.waitForFunction((w) => document.querySelector("#chart-runs-summary")?.textContent.startsWith(w), want, { timeout: 30000, polling: 250 });
    } catch (e) {
      throw new Error(`the run chart does not say "${want}" within 30 s; it says: ${await page.textContent("#chart-runs-summary").catch(() => "(no chart)")}`);
    }
    check(true, `${scheme}: the run chart counts the workload's runs in ${((Date.now() - started) / 1000).toFixed(1)} s: ${await page.textContent("#chart-runs-summary")}`);
    const charts = await page.$$eval("#charts figure", (fs) => fs.map((f) => ({
      title: f.querySelector("h3")?.textContent, label: f.querySelector("svg[role=img]")?.getAttribute("aria-labelledby"),
      caption: f.querySelector("figcaption")?.textContent, lines: f.querySelectorAll("path.chart-line").length })));
    check(charts.length === 5 && charts.every((c) => c.title && c.label && c.caption), `${scheme}: five charts, each titled, named and summarised: ${JSON.stringify(charts.map((c) => c.title))}`);
    check(charts[0].lines >= 2, `${scheme}: the run chart draws a line per outcome (${charts[0].lines})`);
    check(/p50 \d/.test(charts[1].caption) && /p95 \d/.test(charts[1].caption), `${scheme}: the duration chart says its latest p50 and p95: ${charts[1].caption}`);
    check(/Now: \d+ pending, \d+ running/.test(charts[2].caption), `${scheme}: the pending chart says the pending runs now: ${charts[2].caption}`);
    check(/\d/.test(charts[4].caption), `${scheme}: the memory chart says the latest memory: ${charts[4].caption}`);
    // The lines take the scheme's colours.
    const stroke = await page.$eval("#chart-runs path.chart-line", (p) => getComputedStyle(p).stroke);
    const bg = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
    check(stroke !== "none" && stroke !== bg, `${scheme}: the success line is drawn in ${stroke} on ${bg}`);

    // It refreshes by itself: the "updated" time moves on.
    const before = await page.textContent("#charts-status");
    await page.waitForFunction((b) => document.querySelector("#charts-status")?.textContent !== b, before, { timeout: 10000 });
    check(true, `${scheme}: the charts refresh while the page is open`);

    await a11y(page, `${scheme} deployment page with charts`);
    await page.locator("#charts-section").scrollIntoViewIfNeeded();
    await page.screenshot({ path: join(SHOTS, `deployment-charts-${scheme}.png`), fullPage: true });
    if (scheme === "light") {
      // For the README: the page's top and its charts.
      const box = await page.locator("#charts-section").boundingBox();
      await page.evaluate(() => window.scrollTo(0, 0));
      await page.screenshot({ path: join(SHOTS, "readme-deployment-charts.png"), clip: { x: 0, y: 0, width: 1200, height: Math.min(900, Math.ceil(box.y + box.height + 16)) } });
    }

    // The 24-hour window: the same runs, in 5-minute buckets.
    await page.click("#charts-section button[data-window='24h']");
    await page.waitForFunction((n) => document.querySelector("#chart-runs-summary")?.textContent.startsWith(`${n} runs ended in the last 24 hours`), total, { timeout: 10000 });
    check((await page.getAttribute("#charts-section button[data-window='24h']", "aria-pressed")) === "true", `${scheme}: the 24 h toggle is pressed and shows the same ${total} runs`);
    await ctx.close();
  }
} finally {
  await browser.close();
}
