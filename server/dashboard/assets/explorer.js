// The dashboard's agent explorer (#/d/{id}/agent/{thread}): the
// deployment's agent API through /agents/{name}, with the signed-in cookie.
// Loaded after app.js, whose helpers (el, api, page, ...) it uses.
"use strict";

// ---- agent explorer: the deployment's agent API through /agents/{name} ----

// streamSSE POSTs body and calls onEvent(event, data) for each server-sent event.
async function streamSSE(path, body, onEvent) {
  const res = await api("POST", path, body, { raw: true });
  if (!res.ok) throw new APIError(res.status, (await res.text()));
  const reader = res.body.getReader();
  stop.push(() => reader.cancel());
  const dec = new TextDecoder();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += dec.decode(value, { stream: true });
    let i;
    while ((i = buf.indexOf("\n\n")) >= 0) {
      const chunk = buf.slice(0, i); buf = buf.slice(i + 2);
      let event = "message", data = "";
      for (const line of chunk.split("\n")) {
        if (line.startsWith("event:")) event = line.slice(6).trim();
        else if (line.startsWith("data:")) data += (data ? "\n" : "") + line.slice(5).trim();
      }
      if (data) onEvent(event, data);
    }
  }
}

// messageText is a message's content as text (a string, or content parts).
function messageText(c) {
  return typeof c === "string" ? c : (Array.isArray(c) ? c.map((p) => typeof p === "string" ? p : p.text || "").join("") : "");
}

// roleOf names who wrote a message: LangChain's type, or an OpenAI-style role.
function roleOf(m) {
  const t = String(m.type || m.role || "").replace(/MessageChunk$|Chunk$/, "").toLowerCase();
  return { human: "human", user: "human", ai: "ai", assistant: "ai", tool: "tool", system: "system" }[t] || t || "message";
}
const roleNames = { human: "Human", ai: "AI", tool: "Tool", system: "System" };

// chatView shows a thread's messages: roles, tool calls with their
// arguments, tool results, and an AI message growing token by token as
// the run streams (messages-tuple chunks appended to one text node).
function chatView() {
  const list = el("ol", { id: "chat", class: "chat", "aria-label": "Messages", tabindex: "0" });
  const byID = new Map();
  const bubble = (m) => {
    const role = roleOf(m);
    const text = document.createTextNode(messageText(m.content));
    const li = el("li", { class: "chat-msg role-" + role, "data-role": role, "data-id": m.id || "" },
      el("span", { class: "chat-role" }, roleNames[role] || role, role === "tool" && m.name ? ` (${m.name})` : ""),
      el("p", { class: "chat-text" }, text));
    li.text = text;
    const calls = el("ul", { class: "tool-calls" });
    li.calls = calls;
    li.append(calls);
    showCalls(li, m.tool_calls);
    return li;
  };
  const showCalls = (li, calls) => {
    li.calls.replaceChildren(...(calls || []).map((c) => el("li", { class: "tool-call" },
      "Tool call ", el("code", {}, c.name || "?"), " ", el("code", {}, JSON.stringify(c.args ?? {})))));
  };
  const add = (m) => {
    const li = bubble(m);
    if (m.id) byID.set(m.id, li);
    list.append(li);
    return li;
  };
  return {
    el: list,
    render(messages) { byID.clear(); list.replaceChildren(); (messages || []).forEach(add); },
    // chunk takes one messages-tuple event's message: a chunk extends the
    // message of its id, a whole message replaces it.
    chunk(m) {
      if (!m || typeof m !== "object") return;
      const li = m.id && byID.get(m.id);
      if (!li) { add(m); return; }
      if (/Chunk$/.test(m.type || "")) {
        const t = messageText(m.content);
        if (t) li.text.data += t;
        if ((m.tool_calls || []).length) showCalls(li, m.tool_calls);
      } else {
        li.text.data = messageText(m.content);
        showCalls(li, m.tool_calls);
      }
    },
  };
}

// resolve follows a property schema's $ref and picks the non-null branch
// of an anyOf/oneOf (Optional[...] in Python).
function resolve(root, p) {
  for (let i = 0; i < 5 && p; i++) {
    if (p.$ref) { p = (root.$defs || root.definitions || {})[p.$ref.split("/").pop()] || {}; continue; }
    const alts = p.anyOf || p.oneOf;
    if (alts && !p.type) { const nn = alts.filter((a) => a.type !== "null"); if (nn.length === 1) { p = { ...nn[0], title: p.title, description: p.description }; continue; } }
    break;
  }
  return p || {};
}

// schemaForm builds the run's input form from the graph's input JSON
// Schema: a field per property (string, number, integer, boolean, enum,
// list of strings; "messages" as a text box sent as a human message;
// anything else as JSON), validated inline, with a Raw JSON toggle.
function schemaForm(schema) {
  const props = Object.entries((schema && schema.properties) || {});
  const required = new Set((schema && schema.required) || []);
  const raw = el("textarea", { id: "run-input", spellcheck: "false", "aria-describedby": "run-input-error" }, '{"messages": [{"role": "user", "content": "hello"}]}');
  const rawErr = el("p", { class: "field-error", id: "run-input-error" });
  const fields = props.map(([name, p0]) => {
    const p = resolve(schema, p0);
    const id = "in-" + name.replace(/[^A-Za-z0-9_-]/g, "_");
    let kind = "json";
    if (name === "messages" && p.type === "array" && p.items) kind = "messages";
    else if (Array.isArray(p.enum)) kind = "enum";
    else if (["string", "number", "integer", "boolean"].includes(p.type)) kind = p.type;
    else if (p.type === "array" && resolve(schema, p.items || {}).type === "string") kind = "lines";
    const errID = id + "-error";
    const common = { id, name, "aria-describedby": errID };
    let input;
    if (kind === "enum") input = el("select", common, required.has(name) ? "" : el("option", { value: "" }, "(none)"), p.enum.map((v) => el("option", { value: JSON.stringify(v) }, String(v))));
    else if (kind === "boolean") input = el("input", { ...common, type: "checkbox" });
    else if (kind === "number" || kind === "integer") input = el("input", { ...common, type: "number", step: kind === "integer" ? "1" : "any" });
    else if (kind === "string") input = el("input", { ...common, type: "text", autocomplete: "off" });
    else input = el("textarea", { ...common, spellcheck: "false", class: kind === "messages" ? "" : "mono" });
    const hint = { messages: "Sent as a human message.", lines: "One item a line.", json: "JSON." }[kind];
    const err = el("p", { class: "field-error", id: errID });
    const wrap = el("div", { class: "field" + (kind === "boolean" ? " check" : "") },
      kind === "boolean" ? el("label", { for: id }, input, " ", p.title || name) : [el("label", { for: id }, (p.title || name) + (required.has(name) ? " (required)" : "")), input],
      hint || p.description ? el("p", { class: "hint" }, [hint, p.description].filter(Boolean).join(" ")) : "", err);
    const read = () => {
      const v = input.value;
      switch (kind) {
        case "boolean": return input.checked ? true : undefined;
        case "enum": return v === "" ? undefined : JSON.parse(v);
        case "number": case "integer": {
          if (v.trim() === "") return undefined;
          const n = Number(v);
          if (!Number.isFinite(n) || (kind === "integer" && !Number.isInteger(n))) throw new Error(kind === "integer" ? "Must be a whole number." : "Must be a number.");
          return n;
        }
        case "string": return v === "" ? undefined : v;
        case "messages": return v.trim() === "" ? undefined : [{ role: "human", content: v }];
        case "lines": { const l = v.split("\n").map((s) => s.trim()).filter(Boolean); return l.length ? l : undefined; }
        default: if (v.trim() === "") return undefined; try { return JSON.parse(v); } catch { throw new Error("Not valid JSON."); }
      }
    };
    return { name, kind, wrap, input, err, read };
  });
  const toggle = el("input", { type: "checkbox", id: "raw-json" });
  const formBox = el("div", { id: "input-fields" }, fields.map((f) => f.wrap));
  const rawBox = el("div", { id: "raw-box" }, el("label", { for: "run-input" }, "Input (JSON)"), raw, rawErr);
  const setErr = (input, err, text) => { err.textContent = text || ""; if (text) input.setAttribute("aria-invalid", "true"); else input.removeAttribute("aria-invalid"); };
  // formValue reads the fields, marking each invalid one; null if any is.
  const formValue = () => {
    const out = {};
    let ok = true;
    for (const f of fields) {
      try {
        const v = f.read();
        if (v === undefined && required.has(f.name)) throw new Error("Required.");
        if (v !== undefined) out[f.name] = v;
        setErr(f.input, f.err, "");
      } catch (e) { ok = false; setErr(f.input, f.err, e.message); }
    }
    return ok ? out : null;
  };
  const showRaw = (on) => {
    formBox.hidden = on; rawBox.hidden = !on;
    if (on) { const v = formValue(); if (v && Object.keys(v).length) raw.value = JSON.stringify(v, null, 2); }
  };
  toggle.addEventListener("change", () => showRaw(toggle.checked));
  // A form of JSON boxes only (no schema, or the agent's placeholder for
  // a graph that publishes none) helps nobody: Raw JSON is the default.
  if (fields.every((f) => f.kind === "json")) toggle.checked = true;
  showRaw(toggle.checked);
  return {
    el: el("div", {}, fields.length ? el("p", {}, el("label", { for: "raw-json", class: "inline" }, toggle, " Raw JSON")) : el("p", { class: "hint" }, "This graph publishes no input schema: its input is JSON."), formBox, rawBox),
    // value is the run's input, or null after showing what is wrong.
    value() {
      if (!toggle.checked) return formValue();
      try { const v = JSON.parse(raw.value); setErr(raw, rawErr, ""); return v; } catch { setErr(raw, rawErr, "Not valid JSON."); return null; }
    },
  };
}

// historyTree orders checkpoints (newest first, as the API lists them)
// into branches: the first child of a checkpoint continues its branch,
// each later child starts a new one (a fork).
function historyTree(history) {
  const kids = new Map();
  const parentOf = (h) => h.parent_checkpoint && h.parent_checkpoint.checkpoint_id;
  const cid = (h) => h.checkpoint && h.checkpoint.checkpoint_id;
  const oldest = [...history].reverse();
  for (const h of oldest) { const p = parentOf(h); if (p) (kids.get(p) || kids.set(p, []).get(p)).push(cid(h)); }
  const branch = new Map();
  let next = 1;
  for (const h of oldest) {
    const p = parentOf(h), id = cid(h);
    if (!p || !branch.has(p)) { if (!branch.has(id)) branch.set(id, next++); continue; }
    branch.set(id, kids.get(p)[0] === id ? branch.get(p) : next++);
  }
  return { branch, kids, parentOf, cid };
}

async function explorerPage(id, threadID) {
  let d;
  try { d = await api("GET", "/v2/deployments/" + id); } catch (e) { page("Agent explorer", errorBox(e)); return; }
  const base = "/agents/" + encodeURIComponent(d.name);
  const out = el("div");
  page("Agent explorer: " + d.name, el("p", {}, el("a", { href: "#/d/" + id }, "← " + d.name)), out);
  let assistants = [], threads = [];
  try {
    assistants = await api("POST", base + "/assistants/search", { limit: 100 });
    threads = await api("POST", base + "/threads/search", { limit: 20 });
  } catch (e) {
    if (e.status !== 403) { out.replaceChildren(errorBox(e)); return; }
    // Refused outright (a key of another workspace, an organization key
    // without X-Tenant-Id): a thread can still be opened by its id.
    const tid = el("input", { id: "open-thread", class: "mono", autocomplete: "off" });
    out.append(el("section", {}, el("p", { class: "hint" }, "Listing graphs and threads needs a role in this deployment's workspace. ",
      "A thread can still be read by its id."), el("form", { onsubmit: (ev) => { ev.preventDefault(); location.hash = `#/d/${id}/agent/${tid.value.trim()}`; } },
      el("label", { for: "open-thread" }, "Thread id"), tid, " ", el("button", { type: "submit" }, "Open"))));
  }
  out.append(roleHint("explorer-role-hint", "Starting threads and runs") || "");
  let thread = null;
  if (threadID) { try { thread = await api("GET", `${base}/threads/${threadID}`); } catch { thread = null; } }
  // The assistant runs use: the thread's own, else the one picked last here.
  const prefKey = "slipway-explorer-assistant:" + id;
  const chosen = (thread && thread.metadata && thread.metadata.assistant_id) || sessionStorage.getItem(prefKey);
  const pickA = el("select", { id: "assistant" }, assistants.map((a) => el("option", { value: a.assistant_id, selected: a.assistant_id === chosen },
    `${a.name || a.graph_id} (graph ${a.graph_id}, v${a.version ?? 1})`)));
  // A thread's assistant that could not be listed (searches refused) is
  // still the one its graph and schema are read from.
  if (thread && chosen && !assistants.some((a) => a.assistant_id === chosen)) {
    pickA.append(el("option", { value: chosen, selected: true }, `graph ${(thread.metadata && thread.metadata.graph_id) || "?"} (${short(chosen)})`));
  }
  const assistantItem = (a) => {
    const versions = el("ol", { class: "versions" });
    return el("li", { "data-assistant": a.assistant_id }, el("strong", {}, a.graph_id), " ", a.name && a.name !== a.graph_id ? a.name + " " : "",
      el("span", { class: "hint" }, "version " + (a.version ?? 1)), " ", el("span", { class: "mono hint" }, a.assistant_id),
      el("details", {}, el("summary", {}, "Configuration, context and versions"),
        el("pre", {}, JSON.stringify({ config: a.config || {}, context: a.context || {}, metadata: a.metadata || {} }, null, 2)),
        el("button", { type: "button", onclick: async (ev) => {
          try {
            const vs = await api("POST", `${base}/assistants/${a.assistant_id}/versions`, { limit: 20 });
            versions.replaceChildren(...vs.map((v) => el("li", {}, `version ${v.version} · ${when(v.created_at)} · `,
              el("code", {}, JSON.stringify({ config: v.config || {}, context: v.context || {} })))));
          } catch (e) { versions.replaceChildren(el("li", {}, errorBox(e))); }
          ev.target.textContent = "Reload versions";
        } }, "Show versions"), versions));
  };
  out.append(
    el("section", {}, el("h2", {}, "Graphs and assistants"),
      pickA.options.length ? el("p", {}, el("label", { for: "assistant" }, "Assistant for runs"), pickA) : "",
      el("ul", { id: "assistants" }, assistants.map(assistantItem))),
    el("section", {}, el("h2", {}, "Threads"),
      el("ul", { id: "threads" }, threads.map((t) => el("li", {}, el("a", { href: `#/d/${id}/agent/${t.thread_id}` }, short(t.thread_id)), " ",
        statusBadge(t.status), " ", el("span", { class: "hint" }, (t.metadata && t.metadata.graph_id) || "")))),
      me.can_write ? el("button", { type: "button", id: "new-thread", onclick: async () => {
        const t = await api("POST", base + "/threads", {});
        location.hash = `#/d/${id}/agent/${t.thread_id}`;
      } }, "New thread") : ""));
  if (!threadID) { pickA.addEventListener("change", () => sessionStorage.setItem(prefKey, pickA.value)); return; }
  await threadView(out, { base, threadID, pickA, prefKey });
}

// threadView is the explorer of one thread: its graph (the running node
// highlighted as the run streams), chat, input form, interrupts, streamed
// events, state, runs and checkpoint history with forking.
async function threadView(out, { base, threadID, pickA, prefKey }) {
  const canWrite = me.can_write;
  const aid = () => pickA.value;
  const msg = el("div");
  // Graph: drawn for the chosen assistant, subgraphs with xray.
  const xray = el("input", { type: "checkbox", id: "xray" });
  const graphBox = el("div", { id: "graph", class: "graph-box", tabindex: "0", role: "group", "aria-label": "Graph drawing" });
  const running = el("p", { id: "running-node", class: "hint", "aria-live": "polite" });
  // Breakpoints: the run pauses before the ticked nodes (interrupt_before).
  const breakBox = el("fieldset", { id: "breakpoints", class: "breakpoints" });
  const breakpoints = () => [...breakBox.querySelectorAll("input:checked")].map((c) => c.value);
  const showBreakpoints = (g) => {
    const keep = new Set(breakpoints());
    const names = (g.nodes || []).map((n) => n.id).filter((n) => !n.startsWith("__") && !n.includes(":"));
    breakBox.replaceChildren(el("legend", {}, "Pause before"), ...names.map((n) => el("label", { class: "inline" },
      el("input", { type: "checkbox", value: n, checked: keep.has(n), onchange: (ev) => drawn && drawn.breakpoint(n, ev.target.checked) }), " " + n + " ")));
    breakBox.hidden = !canWrite || !names.length;
  };
  let drawn = null;
  const loadGraph = async () => {
    if (!aid()) return;
    try {
      const g = await api("GET", `${base}/assistants/${aid()}/graph${xray.checked ? "?xray=true" : ""}`);
      const a = pickA.selectedOptions[0];
      drawn = drawGraph(g, "Graph of " + (a ? a.textContent : aid()));
      graphBox.replaceChildren(drawn.svg);
      showBreakpoints(g);
      breakpoints().forEach((n) => drawn.breakpoint(n, true));
    } catch (e) { drawn = null; graphBox.replaceChildren(errorBox(e)); }
  };
  xray.addEventListener("change", loadGraph);
  // nodeFor maps a task to the drawn node: "sub:node" for a subgraph's
  // task (its namespace "sub:<task id>|..."), or the nearest drawn parent.
  const nodeFor = (ns, name) => {
    const path = (ns ? ns.split("|").map((s) => s.split(":")[0]) : []).concat(name);
    for (let i = path.length; i > 0; i--) { const id = path.slice(0, i).join(":"); if (drawn && drawn.has(id)) return id; }
    return null;
  };

  const chat = chatView();
  // Enter sends, Shift+Enter starts a new line (as in chat tools).
  const chatInput = el("textarea", { id: "chat-input", rows: 2, "aria-describedby": "chat-hint", onkeydown: (ev) => {
    if (ev.key === "Enter" && !ev.shiftKey && !ev.isComposing) { ev.preventDefault(); ev.target.form.requestSubmit(); }
  } });
  const chatSection = el("section", { id: "chat-panel" }, el("h2", {}, "Chat"), chat.el,
    canWrite ? el("form", { id: "chat-form", onsubmit: (ev) => {
      ev.preventDefault();
      if (!chatInput.value.trim()) return;
      const input = { messages: [{ role: "human", content: chatInput.value }] };
      chatInput.value = "";
      run({ input });
    } }, el("label", { for: "chat-input" }, "Message"), chatInput,
      el("p", { class: "hint", id: "chat-hint" }, "Enter sends; Shift+Enter starts a new line. Sent as the next run's input."), el("p", {}, el("button", { class: "primary", type: "submit" }, "Send"))) : "");
  chatSection.hidden = true;

  const formBox = el("div");
  let form = null;
  const loadSchema = async () => {
    let schemas = {};
    if (aid()) try { schemas = await api("GET", `${base}/assistants/${aid()}/schemas`); } catch { schemas = {}; }
    form = schemaForm(schemas.input_schema || {});
    formBox.replaceChildren(form.el);
    const has = (s) => !!(s && s.properties && s.properties.messages);
    chatSection.hidden = !(has(schemas.input_schema) || has(schemas.state_schema));
  };
  pickA.addEventListener("change", () => { sessionStorage.setItem(prefKey, pickA.value); loadGraph(); loadSchema(); });

  const stateBox = el("pre", { id: "state", tabindex: "0", "aria-label": "State values" }), runsList = el("ul", { id: "runs" }), historyList = el("ol", { id: "history" });
  const interruptsBox = el("div", { id: "interrupts" });
  const forkBox = el("div", { id: "fork-box" });
  const events = el("ol", { class: "events", id: "events", "aria-live": "off", tabindex: "0", "aria-label": "Streamed events" });
  let streaming = false;

  const resumeForm = (interrupts) => {
    const value = el("input", { id: "resume-value", value: '"yes"', class: "mono", "aria-describedby": "resume-error" });
    const asText = el("input", { type: "checkbox", id: "resume-text" });
    const err = el("p", { class: "field-error", id: "resume-error" });
    return el("form", { id: "resume-form", onsubmit: (ev) => {
      ev.preventDefault();
      let v = value.value;
      if (!asText.checked) { try { v = JSON.parse(v); } catch { err.textContent = "Not valid JSON: tick “as text” to send it as a string."; value.setAttribute("aria-invalid", "true"); return; } }
      err.textContent = ""; value.removeAttribute("aria-invalid");
      run({ input: null, command: { resume: v } });
    } }, el("label", { for: "resume-value" }, "Resume with (JSON value)"), value, " ",
    el("label", { for: "resume-text", class: "inline" }, asText, " as text"), " ",
    el("button", { type: "submit" }, "Resume"), err,
    interrupts.length > 1 ? el("p", { class: "hint" }, "One value resumes every pending interrupt.") : "");
  };

  // refresh reads the thread's state, runs and checkpoint history again:
  // on opening the thread and after each run's stream ends.
  const refresh = async () => {
    const [state, history, runs] = await Promise.all([
      api("GET", `${base}/threads/${threadID}/state`),
      api("GET", `${base}/threads/${threadID}/history?limit=50`),
      api("GET", `${base}/threads/${threadID}/runs`)]);
    stateBox.textContent = JSON.stringify(state.values, null, 2);
    if (state.values && Array.isArray(state.values.messages)) { chatSection.hidden = false; chat.render(state.values.messages); }
    const interrupts = [...(state.tasks || []).flatMap((t) => (t.interrupts || []).map((i) => ({ ...i, node: t.name }))),
      ...(state.interrupts || []).filter((i) => !(state.tasks || []).some((t) => (t.interrupts || []).some((j) => j.id && j.id === i.id)))];
    interruptsBox.replaceChildren(...(interrupts.length ? [
      el("h2", {}, "Interrupted"),
      el("p", { class: "s-warn", id: "interrupted" }, "This thread is interrupted and waits for a value."),
      el("ul", { class: "interrupts" }, interrupts.map((i) => el("li", {}, i.node ? el("strong", {}, i.node + ": ") : "",
        el("pre", { class: "interrupt-value", tabindex: "0" }, JSON.stringify(i.value, null, 2))))),
      canWrite ? resumeForm(interrupts) : ""] : (state.next || []).length ? [
      // Stopped with nodes still to run and nothing asked: a breakpoint
      // (or a run that failed); going on is a run without input.
      el("h2", {}, "Paused"),
      el("p", { class: "s-warn", id: "paused" }, "This thread stopped before: " + state.next.join(", ") + "."),
      canWrite ? el("p", {}, el("button", { type: "button", id: "continue", onclick: () => run({ input: null }) }, "Continue")) : ""] : []));
    runsList.replaceChildren(...runs.map((r) => el("li", {}, el("span", { class: "mono" }, short(r.run_id)), " ", statusBadge(r.status), " ", when(r.created_at))));
    showHistory(history, state.checkpoint && state.checkpoint.checkpoint_id);
  };

  const showHistory = (history, current) => {
    const { branch, kids, parentOf, cid } = historyTree(history);
    historyList.replaceChildren(...history.map((h) => {
      const id = cid(h), p = parentOf(h), md = h.metadata || {};
      const forked = p && kids.get(p).length > 1 && kids.get(p)[0] !== id;
      const forkPoint = (kids.get(id) || []).length > 1;
      return el("li", { "data-checkpoint": id, "data-parent": p || "", "data-branch": branch.get(id), "data-fork": forked ? "true" : null },
        el("details", {}, el("summary", {}, el("span", { class: "mono" }, short(id)), ` step ${md.step ?? "?"} · ${md.source || "?"}`,
          ` · next: ${(h.next || []).join(", ") || "—"} · branch ${branch.get(id)}`,
          forked ? el("span", { class: "badge s-warn fork-badge" }, "fork") : "", forkPoint ? el("span", { class: "badge s-idle" }, "fork point") : "",
          id === current ? el("span", { class: "badge s-ok" }, "current") : "", " ", el("span", { class: "hint" }, when(h.created_at))),
          el("p", { class: "hint" }, "Parent: ", el("span", { class: "mono" }, p ? short(p) : "—"), md.run_id ? ` · run ${short(md.run_id)}` : ""),
          el("pre", { tabindex: "0" }, JSON.stringify(h.values, null, 2)),
          canWrite ? el("button", { type: "button", class: "fork-here", onclick: () => forkForm(h) }, "Fork from this checkpoint") : ""));
    }));
  };

  // forkForm edits a checkpoint's values; on submit the keys that changed
  // are written as a new checkpoint after it (POST /threads/{id}/state
  // with its checkpoint_id: through the graph's reducers, as Studio does)
  // and a run starts from there: a new branch.
  const forkForm = (h) => {
    const id = h.checkpoint.checkpoint_id;
    const text = el("textarea", { id: "fork-values", spellcheck: "false", rows: 10, "aria-describedby": "fork-error" }, JSON.stringify(h.values || {}, null, 2));
    const err = el("p", { class: "field-error", id: "fork-error" });
    forkBox.replaceChildren(el("form", { id: "fork-form", onsubmit: async (ev) => {
      ev.preventDefault();
      let values;
      try { values = JSON.parse(text.value); } catch { values = undefined; }
      if (!values || typeof values !== "object" || Array.isArray(values)) { err.textContent = "The state must be a JSON object."; text.setAttribute("aria-invalid", "true"); return; }
      err.textContent = ""; text.removeAttribute("aria-invalid");
      const changed = Object.fromEntries(Object.entries(values).filter(([k, v]) => JSON.stringify(v) !== JSON.stringify((h.values || {})[k])));
      let from = id;
      if (Object.keys(changed).length) {
        try { from = (await api("POST", `${base}/threads/${threadID}/state`, { values: changed, checkpoint_id: id })).checkpoint.checkpoint_id; }
        catch (e) { err.textContent = e.message; return; }
      }
      forkBox.replaceChildren();
      await run({ input: null, checkpoint_id: from });
    } }, el("h3", {}, "Fork from checkpoint ", el("span", { class: "mono" }, short(id))),
    el("label", { for: "fork-values" }, "State values (JSON; the keys you change are written through the graph's reducers)"), text, err,
    el("p", {}, el("button", { class: "primary", type: "submit" }, "Fork and run"), " ", el("button", { type: "button", onclick: () => forkBox.replaceChildren() }, "Cancel"))));
    text.focus();
  };

  // show applies one streamed event to the page.
  const show = (event, data) => {
    events.append(eventItem(event, data));
    const [mode, ns] = [event.split("|")[0], event.split("|").slice(1).join("|")];
    let v;
    try { v = JSON.parse(data); } catch { return; }
    if (mode === "messages" && Array.isArray(v)) { chatSection.hidden = false; chat.chunk(v[0]); }
    else if (mode === "values" && !ns && v && Array.isArray(v.messages)) { chatSection.hidden = false; chat.render(v.messages); }
    else if (mode === "tasks" && v && v.name) {
      const node = nodeFor(ns, v.name), done = "result" in v || "error" in v;
      if (node) drawn.mark(node, done ? "done" : "running");
      running.textContent = done ? `Finished: ${node || v.name}` : `Running: ${node || v.name}`;
    }
  };
  // Events are shown frame by frame: a burst that arrives in one read
  // (a fast model's tokens) still shows the answer growing and each node
  // lit, and a long backlog drains in an eighth per frame, so the page
  // never lags the stream by more than a few dozen frames.
  const queue = [];
  let draining = null;
  const frame = (f) => document.hidden ? setTimeout(f, 0) : requestAnimationFrame(f);
  const enqueue = (event, data) => {
    queue.push([event, data]);
    if (draining) return;
    draining = new Promise((done) => {
      const step = () => {
        for (const [e, d] of queue.splice(0, Math.max(1, Math.ceil(queue.length / 8)))) show(e, d);
        if (queue.length) frame(step); else { draining = null; done(); }
      };
      frame(step);
    });
  };

  // run streams a run on the thread (values, updates, messages-tuple and
  // tasks, with subgraphs): events listed, tokens into the chat, the
  // running node marked in the graph; then the thread is read again.
  const run = async (body) => {
    if (streaming) return;
    streaming = true;
    msg.replaceChildren(); events.replaceChildren();
    if (drawn) drawn.clear();
    running.textContent = "Run started.";
    let ok = true;
    try {
      await streamSSE(`${base}/threads/${threadID}/runs/stream`, {
        assistant_id: aid(), stream_mode: ["values", "updates", "messages-tuple", "tasks"], stream_subgraphs: true,
        ...(breakpoints().length ? { interrupt_before: breakpoints() } : {}), ...body,
      }, enqueue);
    } catch (e) { ok = false; msg.replaceChildren(errorBox(e)); }
    if (draining) await draining;
    streaming = false;
    running.textContent = ok ? "Run ended." : "The run's stream broke.";
    // The run has ended (or its stream broke): show what it left.
    try { await refresh(); } catch (e) { ok = false; msg.append(errorBox(e)); }
    if (ok) events.append(el("li", { id: "run-done" }, "(end of stream)"));
  };

  const runForm = canWrite ? el("form", { id: "run-form", onsubmit: (ev) => {
    ev.preventDefault();
    const input = form && form.value();
    if (input !== null && input !== undefined) run({ input });
  } }, formBox, el("p", {}, el("button", { class: "primary", type: "submit" }, "Start a run"))) : "";

  // Shown once its parts are loaded: a test (or a user) never acts on a
  // form whose schema has not arrived yet.
  await Promise.all([loadGraph(), loadSchema(), refresh()]);
  out.append(el("div", { id: "thread" }, el("h2", {}, "Thread " + threadID),
    el("div", { class: "explorer-grid" },
      el("section", { id: "graph-panel" }, el("h2", {}, "Graph"),
        el("p", {}, el("label", { for: "xray", class: "inline" }, xray, " Show subgraphs (xray)")), graphBox, running, breakBox),
      el("div", {}, chatSection, canWrite ? el("section", { id: "input-panel" }, el("h2", {}, "Input"), runForm) : "")),
    interruptsBox, msg,
    el("section", {}, el("h2", {}, "Streamed events"), events),
    el("section", {}, el("h2", {}, "State"), stateBox),
    el("section", {}, el("h2", {}, "Runs"), runsList),
    el("section", {}, el("h2", {}, "History (checkpoints)"), el("p", { class: "hint" }, "Newest first. A fork starts a new branch from its parent checkpoint."), historyList, forkBox)));
}

// eventItem shows one streamed event: its name, the text of the messages
// it carries (values: {messages}, updates: {node: {messages}}, messages:
// [chunk, metadata]), and its data pretty-printed.
function eventItem(event, data) {
  let v;
  try { v = JSON.parse(data); } catch { return el("li", {}, el("strong", {}, event), " ", el("span", { class: "mono" }, data)); }
  const msgs = [];
  const take = (o) => { if (o && Array.isArray(o.messages)) msgs.push(...o.messages); };
  if (Array.isArray(v)) { if (v[0] && v[0].content !== undefined) msgs.push(v[0]); } else if (v && typeof v === "object") { take(v); Object.values(v).forEach(take); }
  const text = (c) => typeof c === "string" ? c : (Array.isArray(c) ? c.map((p) => typeof p === "string" ? p : p.text || "").join("") : "");
  return el("li", {}, el("strong", {}, event),
    msgs.map((m) => el("p", { class: "event-msg" }, el("em", {}, (m.type || m.role || "message") + ": "), text(m.content))),
    el("pre", {}, JSON.stringify(v, null, 2)));
}
