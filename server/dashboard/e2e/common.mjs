// What every browser script of the dashboard's tests shares: its
// settings from the environment, expectations that print what held, and
// the accessibility check.
import axe from "axe-core";

// env reads a setting the Go test passes; a missing one stops the script.
export const env = (k) => { if (!process.env[k]) throw new Error(`${k} is not set`); return process.env[k]; };

// check fails the script (exit non-zero) unless cond holds, and logs what held.
export function check(cond, what) {
  if (!cond) throw new Error("expectation failed: " + what);
  console.log("ok:", what);
}

// a11y runs axe-core in the page (evaluated through the devtools protocol,
// which the page's CSP does not govern) and fails on serious or critical
// violations.
export async function a11y(page, name) {
  await page.evaluate(axe.source);
  const res = await page.evaluate(() => window.axe.run(document, { resultTypes: ["violations"] }));
  const bad = res.violations.filter((v) => v.impact === "serious" || v.impact === "critical");
  for (const v of bad) console.log(`axe ${name}: ${v.impact} ${v.id}: ${v.help} (${v.nodes.map((n) => n.target.join(" ")).join(", ")})`);
  check(bad.length === 0, `${name}: no serious or critical accessibility violation (${res.violations.length} minor)`);
}
