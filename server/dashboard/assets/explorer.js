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
  const pickA = el("select", { id: "assistant" }, assistants.map((a) => el("option", { value: a.assistant_id }, `${a.name || a.graph_id} (graph ${a.graph_id})`)));
  out.append(
    el("section", {}, el("h2", {}, "Graphs and assistants"), el("ul", { id: "assistants" }, assistants.map((a) => el("li", {}, el("strong", {}, a.graph_id), " ", el("span", { class: "mono hint" }, a.assistant_id))))),
    el("section", {}, el("h2", {}, "Threads"),
      el("ul", { id: "threads" }, threads.map((t) => el("li", {}, el("a", { href: `#/d/${id}/agent/${t.thread_id}` }, short(t.thread_id)), " ", statusBadge(t.status)))),
      me.can_write ? el("button", { type: "button", id: "new-thread", onclick: async () => {
        const t = await api("POST", base + "/threads", {});
        location.hash = `#/d/${id}/agent/${t.thread_id}`;
      } }, "New thread") : ""));
  if (!threadID) return;
  const stateBox = el("pre", { id: "state" }), runsList = el("ul", { id: "runs" }), historyList = el("ol", { id: "history" });
  const interruptedBox = el("div");
  // refresh reads the thread's state, runs and checkpoint history again:
  // on opening the thread and after each run's stream ends.
  const refresh = async () => {
    const [state, history, runs] = await Promise.all([
      api("GET", `${base}/threads/${threadID}/state`),
      api("GET", `${base}/threads/${threadID}/history?limit=10`),
      api("GET", `${base}/threads/${threadID}/runs`)]);
    stateBox.textContent = JSON.stringify(state.values, null, 2);
    const interrupted = (state.tasks || []).some((t) => (t.interrupts || []).length) || (state.interrupts || []).length;
    interruptedBox.replaceChildren(interrupted ? el("p", { class: "s-warn", id: "interrupted" }, "This thread is interrupted and waits for a value.") : "");
    runsList.replaceChildren(...runs.map((r) => el("li", {}, el("span", { class: "mono" }, short(r.run_id)), " ", statusBadge(r.status), " ", when(r.created_at))));
    historyList.replaceChildren(...history.map((h) => el("li", {}, el("details", {},
      el("summary", {}, short(h.checkpoint && h.checkpoint.checkpoint_id), " ", when(h.created_at)),
      el("pre", {}, JSON.stringify(h.values, null, 2))))));
  };
  await refresh();
  const events = el("ol", { class: "events", id: "events", "aria-live": "polite", tabindex: "0" });
  const input = el("textarea", { id: "run-input", spellcheck: "false" }, '{"messages": [{"role": "user", "content": "hello"}]}');
  const resume = el("input", { id: "resume-value", value: '"yes"', class: "mono" });
  const msg = el("div");
  const run = (body) => async (ev) => {
    ev.preventDefault();
    msg.replaceChildren(); events.replaceChildren();
    let ok = true;
    try {
      const b = body();
      await streamSSE(`${base}/threads/${threadID}/runs/stream`, { assistant_id: pickA.value, stream_mode: ["values", "updates"], ...b },
        (event, data) => events.append(eventItem(event, data)));
    } catch (e) { ok = false; msg.replaceChildren(errorBox(e)); }
    // The run has ended (or its stream broke): show what it left.
    try { await refresh(); } catch (e) { ok = false; msg.append(errorBox(e)); }
    if (ok) events.append(el("li", { id: "run-done" }, "(end of stream)"));
  };
  const parse = (text) => { try { return JSON.parse(text); } catch { throw new Error("Not JSON: " + text); } };
  out.append(el("section", { id: "thread" }, el("h2", {}, "Thread " + threadID),
    el("h2", {}, "State"), stateBox,
    interruptedBox,
    me.can_write ? el("form", { id: "run-form", onsubmit: run(() => ({ input: parse(input.value) })) },
      el("label", { for: "assistant" }, "Assistant"), pickA,
      el("label", { for: "run-input" }, "Input (JSON)"), input,
      el("p", {}, el("button", { class: "primary", type: "submit" }, "Start a run"))) : "",
    me.can_write ? el("form", { id: "resume-form", onsubmit: run(() => ({ input: null, command: { resume: parse(resume.value) } })) },
      el("label", { for: "resume-value" }, "Resume with (JSON value)"), resume, " ",
      el("button", { type: "submit" }, "Resume")) : "",
    msg,
    el("h2", {}, "Streamed events"), events,
    el("h2", {}, "Runs"), runsList,
    el("h2", {}, "History (checkpoints)"), historyList));
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
