// Loads a deployment's generative UI component in headless Chromium from a
// page of another origin (PAGE), as LoadExternalComponent does, run by
// server/processtest/ui_browser_test.go. Exits non-zero on a failed expectation.
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
  page.on("pageerror", (e) => console.log("page error:", e.message));
  await page.goto(env("PAGE") + "/");
  const got = await page.evaluate(async ({ api, key }) => {
    // What the SDK's bootstrapUiContext registers: the component store and
    // the modules the bundle imports (here a minimal JSX runtime).
    const rendered = new Promise((resolve) => {
      window[Symbol.for("LGUI_EXT_STORE")] = { respond: (id, comp, el) => resolve({ id, comp, el }) };
    });
    const h = (type, props) => {
      const el = document.createElement(type);
      if (props.className) el.className = props.className;
      for (const c of [].concat(props.children ?? [])) el.append(c);
      return el;
    };
    window[Symbol.for("LGUI_REQUIRE")] = (name) => {
      if (name === "react/jsx-runtime") return { jsx: h, jsxs: h, Fragment: "div" };
      throw new Error(`unexpected module ${name}`);
    };
    // LoadExternalComponent's steps.
    const client = new LangGraphSDK.Client({ apiUrl: api, apiKey: key, callerOptions: { maxRetries: 0 } });
    const html = await client["~ui"].getComponent("echo", "card");
    const host = document.createElement("div");
    host.id = "child-shadow-1";
    document.body.append(host);
    const root = host.attachShadow({ mode: "open" });
    root.appendChild(document.createRange().createContextualFragment(html.replace("{{shadowRootId}}", host.id)));
    const { id, comp, el } = await rendered;
    el.append(comp({ text: "hi" }));
    const link = root.querySelector("link");
    if (!link.sheet) await new Promise((resolve, reject) => { link.onload = resolve; link.onerror = () => reject(new Error("the stylesheet did not load")); });
    const b = root.querySelector("b.card");
    return { id, text: b?.textContent, color: b && getComputedStyle(b).color, script: root.querySelector("script")?.src, origin: location.origin };
  }, { api: env("API"), key: env("KEY") });
  console.log(JSON.stringify(got));
  check(got.origin !== new URL(env("API")).origin, "the page is on another origin than the deployment");
  check(new URL(got.script).pathname.startsWith("/ui-assets/"), `the script is fetched from the public UI files (${got.script})`);
  check(got.id === "child-shadow-1", "the script's onload rendered into the shadow root it was given");
  check(got.text === "hi", "the component rendered its props");
  check(got.color === "rgb(4, 5, 6)", `the component's stylesheet applies in the shadow root (${got.color})`);
} finally {
  await browser.close();
}
