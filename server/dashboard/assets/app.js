// Slipway dashboard. A client of the same JSON API as the CLI and the SDKs:
// the browser sends the HttpOnly session cookie, and every change carries
// the X-CSRF-Token header (the server refuses a change without it). Text
// from the server is only ever set as textContent, never parsed as HTML.
"use strict";

const $main = document.getElementById("main");
const $nav = document.getElementById("nav");
let me = null; // GET /ui/session
let workspaces = [];
let stop = []; // what the current page must close when it is left (event sources, readers)

// svgEl is el for SVG (charts.js, explorer-graph.js): attributes that are
// undefined, null or "" are left out, so a chart's solid line has no dash.
const SVGNS = "http://www.w3.org/2000/svg";
function svgEl(tag, attrs, ...kids) {
  const e = document.createElementNS(SVGNS, tag);
  for (const [k, v] of Object.entries(attrs || {})) if (v !== undefined && v !== null && v !== "") e.setAttribute(k, v);
  for (const k of kids.flat()) if (k !== null && k !== undefined) e.append(k instanceof Node ? k : String(k));
  return e;
}

// el builds an element: el("a", {href: "#/x", class: "c"}, "text", child...).
function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else if (k === "text") e.textContent = v;
    else e.setAttribute(k, v === true ? "" : v);
  }
  for (const k of kids.flat()) if (k !== null && k !== undefined && k !== false) e.append(k instanceof Node ? k : String(k));
  return e;
}

function cookie(name) {
  const m = document.cookie.split("; ").find((c) => c.startsWith(name + "="));
  return m ? decodeURIComponent(m.slice(name.length + 1)) : "";
}

// cookiePrefix is how the server named the dashboard's cookies at sign-in:
// "__Host-" where the browser keeps Secure cookies (https, localhost),
// none on plain http elsewhere. The CSRF cookie, readable here, tells.
function cookiePrefix() { return cookie("__Host-slipway_csrf") ? "__Host-" : ""; }

class APIError extends Error {
  constructor(status, detail) {
    super(typeof detail === "string" ? detail : (detail || []).map((d) => `${(d.loc || []).join(".")}: ${d.msg}`).join("; ") || `HTTP ${status}`);
    this.status = status;
  }
}

// api calls the API; a change carries the CSRF token.
async function api(method, path, body, extra) {
  const headers = {};
  if (method !== "GET" && method !== "HEAD") headers["X-CSRF-Token"] = cookie(cookiePrefix() + "slipway_csrf");
  let payload;
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    payload = JSON.stringify(body);
  }
  const res = await fetch(path, { method, headers, body: payload, credentials: "same-origin", ...(extra || {}) });
  if (res.status === 401 && !path.startsWith("/ui/session")) {
    location.hash = "#/signin";
    throw new APIError(401, "Signed out: sign in again.");
  }
  if (extra && extra.raw) return res;
  const text = await res.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = text; }
  if (!res.ok) throw new APIError(res.status, data && data.detail !== undefined ? data.detail : text);
  return data;
}

function toast(msg) {
  const t = document.getElementById("toast");
  t.textContent = msg;
  setTimeout(() => { if (t.textContent === msg) t.textContent = ""; }, 4000);
}

function copyButton(text, label) {
  return el("button", { type: "button", "aria-label": label || "Copy", onclick: async () => {
    try { await navigator.clipboard.writeText(text); toast("Copied."); } catch { toast("Copy failed: select the text instead."); }
  } }, "Copy");
}

// short names a revision or run by the end of its id: ids are UUIDv7,
// whose first characters are a timestamp and alike for neighbours.
function short(id) { return id ? id.slice(-8) : "—"; }

function when(t) { return t ? new Date(t).toLocaleString() : "—"; }

// statusBadge colours a deployment's or revision's status; an unhealthy
// deployment (its health, or the UNKNOWN status) reads as such.
function statusBadge(status, health) {
  let text = status || "—", cls = "s-idle";
  if (health && health.status && health.status !== "healthy") { text = health.status.toUpperCase(); cls = "s-bad"; }
  else if (/READY|DEPLOYED/.test(text)) cls = "s-ok";
  else if (/FAILED|ERROR|UNKNOWN|UNHEALTHY/.test(text)) cls = "s-bad";
  else if (/QUEUED|BUILDING|DEPLOYING|AWAITING|CREATING|PENDING|RUNNING/.test(text)) cls = "s-warn";
  return el("span", { class: "badge " + cls, title: health && health.reason ? health.reason : null }, text);
}

function errorBox(err) { return el("p", { class: "error", role: "alert" }, err.message || String(err)); }

function page(title, ...kids) {
  document.title = title + " · Slipway";
  $main.replaceChildren(el("h1", {}, title), ...kids);
}

// roleHint says, to someone whose role only reads, what they can do and
// which role the rest needs: a page without write controls must not
// leave them guessing.
function roleHint(id, what) {
  if (me.can_write) return null;
  const who = me.kind === "session" ? `Your workspace role is ${me.workspace_role || "none"}` : "This key only reads";
  return el("p", { class: "hint", id }, `${who}: you can look at deployments, assistants and threads. ${what} needs the workspace Editor or Admin role, which an Organization Admin or Operator gives (Organization page, or slipway users add EMAIL --role editor).`);
}

// ---- navigation and session ----

function renderNav() {
  $nav.replaceChildren();
  if (!me) return;
  const ws = el("select", { id: "workspace", "aria-label": "Workspace", onchange: (e) => {
    const p = cookiePrefix();
    document.cookie = `${p}slipway_workspace=${encodeURIComponent(e.target.value)}; path=/; samesite=strict${p ? "; secure" : ""}`;
    init().then(route);
  } }, workspaces.map((w) => el("option", { value: w.id, selected: w.id === me.workspace_id }, w.display_name)));
  $nav.append(...[
    el("a", { href: "#/deployments" }, "Deployments"),
    me.can_write ? el("a", { href: "#/new" }, "New deployment") : null,
    el("a", { href: "#/org" }, "Organization"),
    el("a", { href: "#/audit" }, "Audit log"),
    el("span", { class: "spacer" }),
    workspaces.length ? ws : null,
    el("span", { class: "hint", id: "whoami" }, me.kind === "session" ? (me.organization_role || me.workspace_role || "member") : "API key"),
    el("button", { type: "button", id: "signout", onclick: signOut }, "Sign out"),
  ].filter(Boolean));
}

async function signOut() {
  await api("POST", "/ui/signout");
  me = null;
  renderNav();
  location.hash = "#/signin";
}

async function init() {
  try {
    me = await api("GET", "/ui/session");
  } catch (e) {
    me = null;
    return;
  }
  try { workspaces = await api("GET", "/api/v1/workspaces"); } catch { workspaces = []; }
  renderNav();
}

function signInPage() {
  const msg = el("div");
  const submit = (body) => async (ev) => {
    ev.preventDefault();
    msg.replaceChildren();
    try {
      await api("POST", "/ui/session", body());
      await init();
      // The server accepted the credential but the browser sent no cookie
      // back: it refused the Secure cookie of an http:// address.
      if (!me) throw new Error("Signed in, but this browser did not keep the sign-in cookie. Open the dashboard over https, or at http://localhost, where browsers keep Secure cookies.");
      location.hash = "#/deployments";
    } catch (e) { msg.replaceChildren(errorBox(e)); }
  };
  const email = el("input", { id: "email", type: "email", autocomplete: "username", required: true });
  const password = el("input", { id: "password", type: "password", autocomplete: "current-password", required: true });
  const key = el("input", { id: "apikey", type: "password", autocomplete: "off", required: true });
  page("Sign in",
    msg,
    el("section", {}, el("h2", {}, "With your email and password"),
      el("form", { id: "signin-password", onsubmit: submit(() => ({ email: email.value, password: password.value })) },
        el("label", { for: "email" }, "Email"), email,
        el("label", { for: "password" }, "Password"), password,
        el("p", {}, el("button", { class: "primary", type: "submit" }, "Sign in")))),
    el("section", {}, el("h2", {}, "With an API key"),
      el("form", { id: "signin-key", onsubmit: submit(() => ({ api_key: key.value })) },
        el("label", { for: "apikey" }, "API key or personal access token"), key,
        el("p", { class: "hint" }, "The key is kept in an HttpOnly cookie of this browser until you sign out."),
        el("p", {}, el("button", { type: "submit" }, "Sign in with the key")))));
}

// ---- deployments ----

async function deploymentsPage() {
  const filter = el("input", { id: "filter", type: "search", placeholder: "name contains…", "aria-label": "Filter by name" });
  const body = el("tbody");
  const out = el("div");
  const load = async () => {
    try {
      const q = filter.value ? "&name_contains=" + encodeURIComponent(filter.value) : "";
      const res = await api("GET", "/v2/deployments?limit=100" + q);
      body.replaceChildren(...res.resources.map((d) => el("tr", { "data-name": d.name },
        el("td", {}, el("a", { href: "#/d/" + d.id }, d.name)),
        el("td", {}, statusBadge(d.status, d.health)),
        el("td", {}, d.url ? el("span", {}, el("code", {}, d.url), " ", copyButton(d.url, "Copy the URL of " + d.name)) : "—"),
        el("td", { class: "opt mono" }, d.active_revision_id ? short(d.active_revision_id) : "—"),
        el("td", { class: "opt" }, when(d.updated_at)))));
      out.replaceChildren(res.resources.length ? "" : el("p", { class: "hint" }, "No deployments" + (filter.value ? " match." : " yet.")));
    } catch (e) { out.replaceChildren(errorBox(e)); }
  };
  let timer;
  filter.addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(load, 200); });
  page("Deployments",
    el("div", { class: "row" }, el("label", { for: "filter" }, "Filter"), filter,
      me.can_write ? el("a", { href: "#/new" }, "New deployment") : null),
    roleHint("role-hint", "Deploying"),
    el("div", { class: "scroll" }, el("table", { id: "deployments" },
      el("thead", {}, el("tr", {}, el("th", {}, "Name"), el("th", {}, "Status"), el("th", {}, "URL"),
        el("th", { class: "opt" }, "Active revision"), el("th", { class: "opt" }, "Last change"))), body)),
    out);
  await load();
  // Statuses change on their own (builds, health checks, deletions): the
  // list is read again every few seconds while it is shown.
  const poll = setInterval(load, 3000);
  stop.push(() => clearInterval(poll));
}

// logView follows a log endpoint over server-sent events, with pause.
// With final (the followed revision's status), the status is shown and
// read again every few seconds: a revision's log goes on with its agent's
// output once it is deployed, so the stream's end does not say it.
function logView(url, label, final) {
  const pre = el("pre", { class: "log", id: "log", tabindex: "0", "aria-label": label, "aria-live": "off" });
  const state = el("span", { class: "hint", id: "log-state" }, "connecting…");
  const status = el("span", { class: "hint", id: "log-status" });
  if (final) {
    const read = async () => { try { status.textContent = await final(); } catch { /* shown on the next read */ } };
    read();
    const poll = setInterval(read, 2000);
    stop.push(() => clearInterval(poll));
  }
  let paused = false, held = [];
  const pause = el("button", { type: "button", id: "log-pause", "aria-pressed": "false", onclick: () => {
    paused = !paused;
    pause.setAttribute("aria-pressed", String(paused));
    pause.textContent = paused ? "Resume" : "Pause";
    if (!paused) { held.forEach(add); held = []; }
  } }, "Pause");
  const add = (line) => {
    pre.append(el("span", { class: line.phase || "" }, `${new Date(line.timestamp).toLocaleTimeString()} ${line.phase || ""} ${line.message}\n`));
    pre.scrollTop = pre.scrollHeight;
  };
  const es = new EventSource(url);
  stop.push(() => es.close());
  es.onopen = () => { state.textContent = "live"; };
  es.addEventListener("log", (ev) => {
    const line = JSON.parse(ev.data);
    if (paused) held.push(line); else add(line);
  });
  es.addEventListener("end", async () => {
    es.close();
    state.textContent = "ended";
    // The stream ends when the revision is final: say how it ended.
    if (final) { try { state.textContent = "ended: " + await final(); } catch { /* the stream's end is said already */ } }
  });
  es.onerror = () => { if (es.readyState === EventSource.CLOSED) state.textContent = "closed"; else state.textContent = "reconnecting…"; };
  return el("div", {}, el("div", { class: "row" }, pause, state, status), pre);
}

// logFrom is where the log view of revision rid starts: after the lines
// it held when it was rolled back to (see rollback), so that the view
// shows the redeploy, not the revision's first build again.
function logFrom(rid) { return sessionStorage.getItem("slipway-log-from:" + rid) || ""; }

// rollbackFrom records the end of revision rid's log before its redeploy:
// the last build/deploy line's id and the last agent line's (numbered
// apart, per deployment), as the stream's Last-Event-ID "12-5".
async function rollbackFrom(id, rid) {
  const { logs } = await api("GET", `/v2/deployments/${id}/revisions/${rid}/logs`);
  let own = 0, agent = 0;
  for (const l of logs) { if (l.phase === "agent") agent = Math.max(agent, l.id); else own = Math.max(own, l.id); }
  sessionStorage.setItem("slipway-log-from:" + rid, `${own}-${agent}`);
}

async function deploymentPage(id) {
  let d;
  try { d = await api("GET", "/v2/deployments/" + id); } catch (e) { page("Deployment", errorBox(e)); return; }
  const revs = (await api("GET", `/v2/deployments/${id}/revisions?limit=50`)).resources;
  const logBox = el("div");
  const pick = el("select", { id: "log-source", "aria-label": "Log to follow", onchange: () => showLog() },
    revs.map((r) => el("option", { value: r.id, selected: r.id === d.latest_revision_id }, `Build, deploy and agent output of ${short(r.id)} (${r.status})`)),
    el("option", { value: "agent" }, "Agent output (every revision)"));
  const showLog = () => {
    stop.forEach((f) => f()); stop = [];
    const v = pick.value;
    logBox.replaceChildren(v === "agent"
      ? logView(`/v2/deployments/${id}/logs?follow=true`, "Agent output")
      : logView(`/v2/deployments/${id}/revisions/${v}/logs?follow=true&phase=build,deploy,agent` + (logFrom(v) ? "&last_event_id=" + logFrom(v) : ""),
        "Build, deploy and agent output",
        async () => (await api("GET", `/v2/deployments/${id}/revisions/${v}`)).status));
  };
  const revBody = el("tbody", {}, revs.map((r) => el("tr", { "data-revision": r.id },
    el("td", { class: "mono" }, short(r.id), r.is_active ? el("span", { class: "badge s-ok" }, " active") : ""),
    el("td", {}, statusBadge(r.status)),
    el("td", { class: "opt" }, when(r.created_at)),
    el("td", {}, me.can_write && r.status === "DEPLOYED" && !r.is_active
      ? el("button", { type: "button", class: "rollback", onclick: async () => {
        if (!confirm(`Roll ${d.name} back to revision ${short(r.id)}? It will replace the one serving now.`)) return;
        try { await rollbackFrom(id, r.id); await api("POST", `/v2/deployments/${id}/revisions/${r.id}/redeploy`); toast("Rolling back."); route(); }
        catch (e) { toast(e.message); }
      } }, "Roll back to this") : ""))));
  const spec = d.source_config && d.source_config.resource_spec;
  page(d.name,
    el("p", {}, statusBadge(d.status, d.health), " ",
      d.url ? el("span", {}, el("code", { id: "dep-url" }, d.url), " ", copyButton(d.url, "Copy the URL")) : "",
      " ", el("a", { href: `#/d/${id}/agent`, id: "explorer-link" }, "Agent explorer")),
    d.health && d.health.reason ? el("p", { class: "error" }, d.health.reason) : "",
    d.health ? el("p", { class: "hint", id: "health-checks" }, `${d.health.checks || 0} health checks (not in the agent's output)`) : "",
    deploymentCharts(id), // charts.js
    el("section", {}, el("h2", {}, "Revisions"), el("div", { class: "scroll" }, el("table", { id: "revisions" },
      el("thead", {}, el("tr", {}, el("th", {}, "Revision"), el("th", {}, "Status"), el("th", { class: "opt" }, "Created"), el("th", {}, ""))), revBody))),
    el("section", {}, el("h2", {}, "Logs"), el("label", { for: "log-source" }, "Follow"), pick, logBox),
    secretsSection(d),
    el("section", {}, el("h2", {}, "Resource spec"), el("pre", {}, JSON.stringify(spec || {}, null, 2)),
      el("p", { class: "hint" }, "Graph configuration: ", el("code", {}, (d.source_revision_config || {}).graph_config_path || "—"))),
    me.can_write ? deleteSection(d) : "");
  if (revs.length) showLog();
}

function secretsSection(d) {
  const names = (d.secrets || []).map((s) => s.name);
  const msg = el("div");
  const section = el("section", { id: "secrets" }, el("h2", {}, "Secrets"),
    el("ul", {}, names.length ? names.map((n) => el("li", { class: "secret" }, n)) : el("li", { class: "hint" }, "none")));
  if (!me.can_write) return section;
  // Values are never read back, and a change replaces the whole list: the
  // secrets kept must be given again, as the CLI asks too.
  const rows = el("div");
  const addRow = (name) => {
    const i = rows.children.length;
    const row = el("div", { class: "row" },
      el("label", { for: "secret-name-" + i }, "Name"), el("input", { id: "secret-name-" + i, class: "secret-name", value: name || "" }),
      el("label", { for: "secret-value-" + i }, "Value"), el("input", { id: "secret-value-" + i, class: "secret-value", type: "password", autocomplete: "off" }),
      el("button", { type: "button", onclick: () => row.remove(), "aria-label": "Unset " + (name || "this secret") }, "Unset"));
    rows.append(row);
  };
  names.forEach(addRow);
  section.append(el("form", { id: "secrets-form", onsubmit: async (ev) => {
    ev.preventDefault();
    const list = [...rows.children].map((r) => ({ name: r.querySelector(".secret-name").value.trim(), value: r.querySelector(".secret-value").value }))
      .filter((s) => s.name);
    if (list.some((s) => !s.value)) { msg.replaceChildren(errorBox(new Error("Give every kept secret its value again: values are never shown, and saving replaces them all."))); return; }
    try { await api("PATCH", "/v2/deployments/" + d.id, { secrets: list }); toast("Secrets saved: a new revision rolls out."); route(); }
    catch (e) { msg.replaceChildren(errorBox(e)); }
  } }, el("p", { class: "hint" }, "Values are never shown. Saving replaces the list and rolls out a new revision."), rows,
  el("div", { class: "row" }, el("button", { type: "button", id: "secret-add", onclick: () => addRow("") }, "Add a secret"),
    el("button", { type: "submit", class: "primary" }, "Save secrets")), msg));
  return section;
}

function deleteSection(d) {
  const input = el("input", { id: "delete-confirm", autocomplete: "off" });
  const btn = el("button", { type: "submit", class: "danger", disabled: true }, "Delete deployment");
  input.addEventListener("input", () => { btn.disabled = input.value !== d.name; });
  return el("section", {}, el("h2", {}, "Delete"),
    el("form", { onsubmit: async (ev) => {
      ev.preventDefault();
      if (input.value !== d.name) return;
      try { await api("DELETE", "/v2/deployments/" + d.id); location.hash = "#/deployments"; }
      catch (e) { toast(e.message); }
    } }, el("label", { for: "delete-confirm" }, `Type ${d.name} to delete it, its revisions and its agent's data`), input, " ", btn));
}

// ---- packing a folder chosen in the browser into a .tar.gz ----

// skipped mirrors what `slipway deploy` never packs (README, the CLI):
// version control, dependencies, virtual environments and .env files.
function skipped(path) {
  return path.split("/").some((p) => [".git", "node_modules", ".venv", "venv"].includes(p)) ||
    /(^|\/)\.env(\.(?!example$|sample$|template$|dist$)[^/]*)?$/.test(path);
}

// tarHeader is a ustar header; names longer than 100 bytes use the prefix field.
function tarHeader(name, size, mode, mtime) {
  const h = new Uint8Array(512), enc = new TextEncoder();
  let prefix = "";
  if (enc.encode(name).length > 100) {
    const cut = name.lastIndexOf("/", 155);
    prefix = name.slice(0, cut); name = name.slice(cut + 1);
  }
  const put = (off, len, str) => h.set(enc.encode(str).slice(0, len), off);
  const oct = (off, len, n) => put(off, len, n.toString(8).padStart(len - 1, "0") + "\0");
  put(0, 100, name); oct(100, 8, mode); oct(108, 8, 0); oct(116, 8, 0); oct(124, 12, size); oct(136, 12, mtime);
  put(148, 8, "        "); put(156, 1, "0"); put(257, 6, "ustar\0"); put(263, 2, "00"); put(345, 155, prefix);
  let sum = 0;
  for (const b of h) sum += b;
  put(148, 8, sum.toString(8).padStart(6, "0") + "\0 ");
  return h;
}

// packFolder tars the files of a folder input (their paths without the
// folder's own name) and gzips them with the browser's CompressionStream.
// Browsers do not expose file modes: files under bin/ are packed
// executable, everything else 0644.
async function packFolder(files) {
  const parts = [];
  let count = 0;
  for (const f of files) {
    const path = f.webkitRelativePath.split("/").slice(1).join("/");
    if (!path || skipped(path)) continue;
    const data = new Uint8Array(await f.arrayBuffer());
    const mode = /(^|\/)bin\//.test(path) ? 0o755 : 0o644;
    parts.push(tarHeader(path, data.length, mode, Math.floor(f.lastModified / 1000)), data, new Uint8Array((512 - (data.length % 512)) % 512));
    count++;
  }
  if (!count) throw new Error("The folder has nothing to pack.");
  parts.push(new Uint8Array(1024));
  const gz = new Blob(parts).stream().pipeThrough(new CompressionStream("gzip"));
  return new Response(gz).blob();
}

function newPage() {
  const name = el("input", { id: "new-name", required: true, pattern: "[a-zA-Z0-9][a-zA-Z0-9-]*", autocomplete: "off" });
  const config = el("input", { id: "new-config", value: "langgraph.json", required: true });
  const file = el("input", { id: "new-archive", type: "file", accept: ".tar.gz,.tgz,application/gzip" });
  const folder = el("input", { id: "new-folder", type: "file", webkitdirectory: true });
  const msg = el("div", { role: "status" });
  page("New deployment", el("form", { id: "new-form", onsubmit: async (ev) => {
    ev.preventDefault();
    try {
      let source = file.files[0];
      if (!source && folder.files.length) {
        msg.textContent = "Packing the folder…";
        source = await packFolder(folder.files);
      }
      if (!source) throw new Error("Choose a .tar.gz archive or a folder.");
      msg.textContent = "Creating…";
      const d = await api("POST", "/v2/deployments", { name: name.value, source: "internal_source", source_config: {},
        source_revision_config: { graph_config_path: config.value }, secrets: [] });
      msg.textContent = "Uploading…";
      const up = await api("POST", `/v2/deployments/${d.id}/upload-url`);
      // The signed URL is absolute (the public URL); the same path on this
      // origin keeps the upload same-origin behind any proxy.
      const u = new URL(up.upload_url, location.href);
      const res = await fetch(u.pathname + u.search, { method: "PUT", body: source, credentials: "omit" });
      if (!res.ok) throw new Error("Upload failed: " + (await res.text()));
      await api("PATCH", "/v2/deployments/" + d.id, { source_revision_config: { source_tarball_path: up.object_path } });
      location.hash = "#/d/" + d.id;
    } catch (e) { msg.replaceChildren(errorBox(e)); }
  } },
  el("label", { for: "new-name" }, "Name"), name,
  el("label", { for: "new-config" }, "Graph configuration path (in the archive)"), config,
  el("label", { for: "new-archive" }, "Source archive (.tar.gz)"), file,
  el("label", { for: "new-folder" }, "…or a folder, packed in the browser"), folder,
  el("p", { class: "hint" }, "A folder is packed without .git, node_modules, virtual environments and .env files; " +
    "browsers do not tell file modes, so only files under bin/ are made executable. " +
    "For full control pack it yourself: tar -czf app.tar.gz -C DIR ."),
  el("p", {}, el("button", { class: "primary", type: "submit" }, "Create and build")), msg));
}

// ---- organization ----

// addUserForm adds a user who signs in with a password, with an
// organization role and a role in the current workspace; the generated
// password is shown once.
async function addUserForm() {
  const roles = await api("GET", "/api/v1/orgs/current/roles");
  const opts = (scope, def) => roles.filter((r) => r.access_scope === scope)
    .map((r) => el("option", { value: r.id, selected: r.display_name === def }, r.display_name + (roleHelp[r.display_name] ? ` (${roleHelp[r.display_name]})` : "")));
  const email = el("input", { id: "add-user-email", type: "email", required: true, autocomplete: "off" });
  const name = el("input", { id: "add-user-name", autocomplete: "off" });
  const wsRole = el("select", { id: "add-user-role" }, opts("workspace", "Editor"));
  const orgRole = el("select", { id: "add-user-org-role" }, opts("organization", "Organization User"));
  const shown = el("div", { id: "add-user-result", role: "status" });
  return el("div", {}, el("form", { id: "add-user-form", onsubmit: async (ev) => {
    ev.preventDefault();
    const body = { email: email.value, role_id: orgRole.value, workspace_role_id: wsRole.value, workspace_ids: [me.workspace_id] };
    if (name.value) body.full_name = name.value;
    try {
      const [u] = await api("POST", "/api/v1/orgs/current/members/basic/batch", [body]);
      shown.replaceChildren(el("p", {}, `Added ${u.email}. Their password is shown once; pass it on now: `, el("code", { id: "new-user-password" }, u.password || ""), " ", copyButton(u.password || "", "Copy the password")));
      email.value = name.value = "";
    } catch (e) { shown.replaceChildren(errorBox(e)); }
  } }, el("label", { for: "add-user-email" }, "Email"), email, el("label", { for: "add-user-name" }, "Name (optional)"), name,
    el("label", { for: "add-user-role" }, "Workspace role"), wsRole, el("label", { for: "add-user-org-role" }, "Organization role"), orgRole,
    " ", el("button", { type: "submit" }, "Add user")), shown);
}

// roleHelp is what the built-in workspace roles let a user do.
const roleHelp = { Admin: "deploys, manages keys and members", Editor: "deploys and runs agents", Viewer: "reads only" };

async function orgPage() {
  const out = el("div");
  page("Organization", out);
  const sec = (title, id, body) => el("section", { id }, el("h2", {}, title), body);
  const safe = async (f) => { try { return await f(); } catch (e) { return errorBox(e); } };
  const info = await safe(() => api("GET", "/api/v1/orgs/current/info"));
  out.append(sec("Organization", "org-info", info instanceof Node ? info : el("p", {}, info.display_name, " ", el("span", { class: "hint mono" }, info.id))));
  out.append(sec("Members", "members", await safe(async () => {
    const m = await api("GET", "/api/v1/orgs/current/members");
    return el("div", { class: "scroll" }, el("table", {}, el("thead", {}, el("tr", {}, el("th", {}, "Email"), el("th", {}, "Organization role"))),
      el("tbody", {}, m.members.map((u) => el("tr", {}, el("td", {}, u.email), el("td", {}, u.org_role_name || "—"))),
        (m.pending || []).map((u) => el("tr", {}, el("td", {}, u.email, " (invited)"), el("td", {}, u.role_name || "—"))))));
  })));
  if (me.can_manage_organization) {
    const roles = await safe(() => api("GET", "/api/v1/orgs/current/roles"));
    const email = el("input", { id: "invite-email", type: "email", required: true });
    const role = el("select", { id: "invite-role" }, (Array.isArray(roles) ? roles : []).filter((r) => r.access_scope === "organization")
      .map((r) => el("option", { value: r.id }, r.display_name)));
    out.append(sec("Invite", "invite", el("form", { onsubmit: async (ev) => {
      ev.preventDefault();
      try { await api("POST", "/api/v1/orgs/current/members", { email: email.value, role_id: role.value }); toast("Invited."); route(); }
      catch (e) { toast(e.message); }
    } }, el("label", { for: "invite-email" }, "Email"), email, el("label", { for: "invite-role" }, "Role"), role, " ", el("button", { type: "submit" }, "Invite"))));
  }
  if (me.can_manage_organization) out.append(sec("Add a user", "add-user", await safe(addUserForm)));
  out.append(sec("Workspaces", "workspaces", el("ul", {}, workspaces.map((w) => el("li", {}, w.display_name, " ", el("span", { class: "hint mono" }, w.id))))));
  out.append(sec("Workspace API keys", "keys", me.can_admin_workspace ? await keyManager("workspace")
    : el("p", { class: "hint" }, "Workspace API keys are managed by the workspace's Admins.")));
  if (me.kind !== "service_key") out.append(sec("Personal access tokens", "pats", await keyManager("personal")));
  out.append(sec("Retention", "retention", await safe(async () => {
    const t = await api("GET", "/api/v1/orgs/ttl-settings");
    const days = el("input", { id: "retention-days", type: "number", min: 1, max: 400, value: t.audit_log_retention_days || "" });
    if (!me.can_manage_organization) return el("p", {}, `Audit events are kept ${t.audit_log_retention_days || 400} days.`);
    return el("form", { onsubmit: async (ev) => {
      ev.preventDefault();
      try { await api("PUT", "/api/v1/orgs/ttl-settings", { default_trace_tier: t.default_trace_tier || "longlived", audit_log_retention_days: days.value ? Number(days.value) : null }); toast("Saved."); }
      catch (e) { toast(e.message); }
    } }, el("label", { for: "retention-days" }, "Keep audit events (days, 1–400; empty: 400)"), days, " ", el("button", { type: "submit" }, "Save"));
  })));
}

// keyManager lists, creates (showing the new key once) and revokes one
// kind of key: the workspace's service keys, or the caller's personal
// access tokens.
async function keyManager(kind) {
  const ws = kind === "workspace";
  const path = ws ? "/api/v1/api-key" : "/api/v1/orgs/current/personal-access-tokens";
  const id = ws ? "key" : "pat";
  const box = el("div");
  const once = el("div", { id: `new-${id}` });
  const desc = el("input", { id: `${id}-description`, value: ws ? "dashboard key" : "my token" });
  const role = el("select", { id: "key-role" }, ["Viewer", "Editor", "Admin"].map((r) => el("option", { value: r }, r)));
  const readOnly = el("input", { id: "pat-read-only", type: "checkbox" });
  const tbody = el("tbody");
  const load = async () => {
    const keys = await api("GET", path);
    tbody.replaceChildren(...keys.map((k) => el("tr", { "data-key": k.id }, el("td", {}, k.description), el("td", { class: "mono" }, k.short_key),
      el("td", { class: "opt" }, k.read_only ? "read-only" : ""), el("td", { class: "opt" }, when(k.created_at)),
      el("td", {}, el("button", { type: "button", class: "danger revoke", "aria-label": `Revoke ${k.description}`, onclick: async () => {
        if (!confirm(`Revoke "${k.description}"? Whatever uses it stops working.`)) return;
        try { await api("DELETE", `${path}/${k.id}`); once.replaceChildren(); toast("Revoked."); await load(); }
        catch (e) { toast(e.message); }
      } }, "Revoke")))));
  };
  box.append(el("form", { id: `${id}-form`, onsubmit: async (ev) => {
    ev.preventDefault();
    try {
      const body = ws ? { description: desc.value, role_id: role.value } : { description: desc.value, read_only: readOnly.checked };
      const k = await api("POST", path, body);
      once.replaceChildren(el("div", { class: "key-once" }, el("p", {}, "Copy it now: it is shown only once."),
        el("code", { id: `new-${id}-value` }, k.key), " ", copyButton(k.key, "Copy the new key")));
      await load();
    } catch (e) { toast(e.message); }
  } }, el("label", { for: `${id}-description` }, "Description"), desc,
  ws ? [el("label", { for: "key-role" }, "Workspace role"), role] : el("label", {}, readOnly, " read-only"), " ",
  el("button", { type: "submit" }, ws ? "Create key" : "Create token")), once,
  el("div", { class: "scroll" }, el("table", { id: `${id}-table` }, el("thead", {}, el("tr", {}, el("th", {}, "Description"), el("th", {}, "Key"),
    el("th", { class: "opt" }, ""), el("th", { class: "opt" }, "Created"), el("th", {}, ""))), tbody)));
  try { await load(); } catch (e) { box.replaceChildren(errorBox(e)); }
  return box;
}

// ---- audit log ----

function isoLocal(d) { return new Date(d.getTime() - d.getTimezoneOffset() * 60000).toISOString().slice(0, 16); }

async function auditPage() {
  const out = el("div");
  const now = new Date();
  const start = el("input", { id: "audit-start", type: "datetime-local", value: isoLocal(new Date(now - 86400000)) });
  const end = el("input", { id: "audit-end", type: "datetime-local", value: isoLocal(new Date(now.getTime() + 3600000)) });
  let ops = [];
  try { ops = await api("GET", "/api/v1/audit-logs/operations"); } catch { ops = []; }
  const op = el("select", { id: "audit-ops", multiple: true, size: 5 }, ops.map((o) => el("option", { value: o }, o)));
  const size = el("select", { id: "audit-limit" }, [10, 50, 100].map((n) => el("option", { value: n, selected: n === 50 }, n)));
  const body = el("tbody");
  const more = el("button", { type: "button", id: "audit-more", hidden: true }, "Next page");
  let cursor = null;
  const query = (cur) => {
    const q = new URLSearchParams({ start_time: new Date(start.value).toISOString(), end_time: new Date(end.value).toISOString(), limit: size.value });
    for (const o of op.selectedOptions) q.append("operations", o.value);
    if (cur) q.set("cursor", cur);
    return "/api/v1/audit-logs?" + q;
  };
  const table = el("table", { id: "audit", "data-state": "loading" }, el("thead", {}, el("tr", {}, el("th", {}, "Time"), el("th", {}, "Operation"),
    el("th", {}, "Status"), el("th", { class: "opt" }, "Actor"), el("th", {}, ""))), body);
  const load = async (cur) => {
    table.dataset.state = "loading";
    try {
      const res = await api("GET", query(cur));
      if (!cur) body.replaceChildren();
      body.append(...res.items.map((ev) => el("tr", { class: "audit-row" },
        el("td", {}, when(ev.time)),
        el("td", { class: "mono op" }, (ev.api && ev.api.operation) || ev.type_name),
        el("td", {}, ev.status || ""),
        el("td", { class: "opt mono" }, (ev.actor && ev.actor.user && (ev.actor.user.email_addr || ev.actor.user.uid)) || ""),
        el("td", {}, el("details", {}, el("summary", {}, "Event JSON"), el("pre", {}, JSON.stringify(ev, null, 2)))))));
      cursor = res.cursor;
      more.hidden = !cursor;
      out.replaceChildren(body.children.length ? "" : el("p", { class: "hint" }, "No events in this window."));
      table.dataset.state = "loaded";
    } catch (e) {
      table.dataset.state = "failed";
      out.replaceChildren(errorBox(e));
      if (e.status === 403) out.append(el("p", { id: "audit-why" }, "Reading audit logs needs all three of: the Enterprise plan, the organization's can_use_audit_logs flag (slipway admin org set-flag ORG can_use_audit_logs true), and the Organization Admin or Operator role. The message above names the one missing."));
    }
  };
  more.addEventListener("click", () => load(cursor));
  const exportJSONL = async () => {
    const lines = [];
    let cur = null;
    do {
      const res = await api("GET", query(cur));
      res.items.forEach((ev) => lines.push(JSON.stringify(ev)));
      cur = res.cursor;
    } while (cur);
    const a = el("a", { href: URL.createObjectURL(new Blob([lines.join("\n") + "\n"], { type: "application/x-ndjson" })), download: "audit-log.jsonl" });
    document.body.append(a); a.click(); a.remove();
  };
  page("Audit log",
    el("form", { id: "audit-form", onsubmit: (ev) => { ev.preventDefault(); load(null); } },
      el("div", { class: "row" },
        el("div", {}, el("label", { for: "audit-start" }, "From"), start),
        el("div", {}, el("label", { for: "audit-end" }, "To"), end),
        el("div", {}, el("label", { for: "audit-ops" }, "Operations (none: all)"), op),
        el("div", {}, el("label", { for: "audit-limit" }, "Per page"), size)),
      el("p", {}, el("button", { type: "submit", class: "primary" }, "Show"), " ",
        el("button", { type: "button", id: "audit-export", onclick: () => exportJSONL().catch((e) => toast(e.message)) }, "Export JSON Lines"))),
    el("div", { class: "scroll" }, table),
    more, out);
  await load(null);
}

// ---- routing ----

async function route() {
  stop.forEach((f) => f());
  stop = [];
  const parts = location.hash.replace(/^#\/?/, "").split("/");
  if (!me && parts[0] !== "signin") await init();
  if (!me) { renderNav(); signInPage(); return; }
  try {
    switch (parts[0]) {
      case "signin": signInPage(); break;
      case "new": newPage(); break;
      case "d": parts[2] === "agent" ? await explorerPage(parts[1], parts[3]) : await deploymentPage(parts[1]); break;
      case "org": await orgPage(); break;
      case "audit": await auditPage(); break;
      default: await deploymentsPage();
    }
  } catch (e) { $main.append(errorBox(e)); }
  $main.focus({ preventScroll: true });
}

window.addEventListener("hashchange", route);
// After every deferred script ran: explorer.js defines explorerPage.
document.addEventListener("DOMContentLoaded", route);
