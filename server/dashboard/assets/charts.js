// Slipway dashboard: a deployment's charts, drawn as small SVGs from
// GET /v2/deployments/{id}/metrics (the series Slipway keeps in memory).
// Uses el and api from app.js. Every chart says its latest values in its
// caption, which is also the SVG's accessible name.
"use strict";

const chartW = 320, chartH = 120, padL = 44, padR = 8, padT = 8, padB = 18;

// The run outcomes, each with its colour (a class: c-ok is var(--ok), in
// light and dark schemes) and a dash, so that lines differ by more than
// colour.
const chartOutcomes = [
  { key: "success", label: "success", color: "ok", dash: "" },
  { key: "error", label: "error", color: "bad", dash: "4 2" },
  { key: "timeout", label: "timeout", color: "warn", dash: "1 2" },
  { key: "cancelled", label: "cancelled", color: "muted", dash: "6 2 1 2" },
  { key: "interrupted", label: "interrupted", color: "accent", dash: "2 2" },
];

function fmtNum(v, unit) {
  if (v === null || v === undefined) return "—";
  if (unit === "bytes") {
    const u = ["B", "KiB", "MiB", "GiB", "TiB"];
    let i = 0;
    while (v >= 1024 && i < u.length - 1) { v /= 1024; i++; }
    return `${v < 10 && i ? v.toFixed(1) : Math.round(v)} ${u[i]}`;
  }
  if (unit === "s") return v < 1 ? `${Math.round(v * 1000)} ms` : `${v.toFixed(v < 10 ? 2 : 0)} s`;
  const s = Math.abs(v) >= 100 || Number.isInteger(v) ? String(Math.round(v)) : v.toFixed(2);
  return unit ? `${s} ${unit}` : s;
}

function hhmm(t) { return new Date(t).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" }); }

// lineChart draws series [{label, color, dash, values}] over times; a
// null value breaks its line.
function lineChart(times, series, unit) {
  let max = 0;
  for (const s of series) for (const v of s.values) if (v !== null && v > max) max = v;
  if (max === 0) max = 1;
  const t0 = times.length ? Date.parse(times[0]) : 0, t1 = times.length ? Date.parse(times[times.length - 1]) : 1;
  const x = (t) => padL + (t1 > t0 ? (Date.parse(t) - t0) / (t1 - t0) : 1) * (chartW - padL - padR);
  const y = (v) => padT + (1 - v / max) * (chartH - padT - padB);
  const svg = svgEl("svg", { viewBox: `0 0 ${chartW} ${chartH}`, class: "chart-svg", focusable: "false" },
    svgEl("line", { x1: padL, x2: chartW - padR, y1: y(0), y2: y(0), class: "chart-axis" }),
    svgEl("line", { x1: padL, x2: chartW - padR, y1: y(max), y2: y(max), class: "chart-grid" }),
    svgEl("text", { x: padL - 4, y: y(max) + 4, class: "chart-label", "text-anchor": "end" }, fmtNum(max, unit === "bytes" ? "bytes" : unit === "s" ? "s" : "")),
    svgEl("text", { x: padL - 4, y: y(0) + 4, class: "chart-label", "text-anchor": "end" }, "0"));
  if (times.length) {
    svg.append(svgEl("text", { x: padL, y: chartH - 4, class: "chart-label" }, hhmm(times[0])),
      svgEl("text", { x: chartW - padR, y: chartH - 4, class: "chart-label", "text-anchor": "end" }, hhmm(times[times.length - 1])));
  }
  for (const s of series) {
    let d = "", pen = "M";
    s.values.forEach((v, i) => {
      if (v === null || v === undefined) { pen = "M"; return; }
      d += `${pen}${x(times[i]).toFixed(1)},${y(v).toFixed(1)}`;
      pen = "L";
    });
    if (d) svg.append(svgEl("path", { d, "stroke-dasharray": s.dash, class: "chart-line c-" + s.color }));
    // A value with no neighbour draws no line: a dot shows it.
    s.values.forEach((v, i) => {
      const none = (j) => s.values[j] === null || s.values[j] === undefined;
      if (!none(i) && none(i - 1) && none(i + 1)) svg.append(svgEl("circle", { cx: x(times[i]).toFixed(1), cy: y(v).toFixed(1), r: 2.5, class: "chart-dot c-" + s.color }));
    });
  }
  return svg;
}

// chartFigure is one chart: a heading, the SVG (named by the caption), a
// legend and the caption with the latest values.
function chartFigure(id, title, times, series, unit, summary) {
  const cap = el("figcaption", { id: `chart-${id}-summary`, class: "chart-summary" }, summary);
  const svg = lineChart(times, series, unit);
  svg.setAttribute("role", "img");
  svg.setAttribute("aria-labelledby", `chart-${id}-title chart-${id}-summary`);
  const legend = series.length > 1 ? el("ul", { class: "chart-legend", "aria-hidden": "true" }, series.map((s) =>
    el("li", {}, el("span", { class: `chart-key c-${s.color}` + (s.dash ? " dashed" : "") }), s.label))) : "";
  return el("figure", { class: "chart", id: `chart-${id}` }, el("h3", { id: `chart-${id}-title` }, title), svg, legend, cap);
}

const last = (values) => { for (let i = values.length - 1; i >= 0; i--) if (values[i] !== null && values[i] !== undefined) return values[i]; return null; };

// chartsBody draws the five charts of one answer of the API.
function chartsBody(m) {
  const span = m.window === "24h" ? "the last 24 hours" : "the last hour";
  const pts = m.points;
  const times = pts.map((p) => p.time);
  const col = (f) => pts.map((p) => (p[f] === undefined ? null : p[f]));
  const total = chartOutcomes.reduce((n, o) => n + (m.run_totals[o.key] || 0), 0);
  // Runs per minute: each point's count over its interval.
  const perMin = (o) => pts.map((p) => (p.runs && p.seconds > 0 ? (p.runs[o.key] || 0) * 60 / p.seconds : null));
  const outcomes = chartOutcomes.filter((o) => o.key === "success" || o.key === "error" || m.run_totals[o.key] > 0);
  const runsSummary = `${total} runs ended in ${span}: ` +
    outcomes.map((o) => `${m.run_totals[o.key] || 0} ${o.label}`).join(", ") + ".";
  const p50 = col("p50_seconds"), p95 = col("p95_seconds"), pending = col("pending_runs"), running = col("running_runs");
  const cpu = col("cpu_cores"), mem = col("memory_bytes");
  const latest = (name, v, unit) => `${name} ${fmtNum(v, unit)}`;
  const empty = pts.length ? "" : " No sample yet: the first comes within one interval of the agent serving.";
  return [
    chartFigure("runs", "Runs by outcome (per minute)", times,
      outcomes.map((o) => ({ label: o.label, color: o.color, dash: o.dash, values: perMin(o) })), "", runsSummary + empty),
    chartFigure("duration", "Run duration", times,
      [{ label: "p50", color: "accent", dash: "", values: p50 }, { label: "p95", color: "warn", dash: "4 2", values: p95 }], "s",
      `Latest: ${latest("p50", last(p50), "s")}, ${latest("p95", last(p95), "s")}.`),
    chartFigure("pending", "Pending and running runs", times,
      [{ label: "pending", color: "warn", dash: "", values: pending }, { label: "running", color: "ok", dash: "4 2", values: running }], "",
      `Now: ${fmtNum(last(pending))} pending, ${fmtNum(last(running))} running.`),
    chartFigure("cpu", "CPU (cores)", times, [{ label: "CPU", color: "accent", dash: "", values: cpu }], "",
      `Latest: ${fmtNum(last(cpu))} cores.` + (cpu.every((v) => v === null) ? " Not measured: the host gives Slipway no cgroup for this deployment." : "")),
    chartFigure("memory", "Memory", times, [{ label: "memory", color: "accent", dash: "", values: mem }], "bytes",
      `Latest: ${fmtNum(last(mem), "bytes")}.` + (mem.every((v) => v === null) ? " Not measured." : "")),
  ];
}

// deploymentCharts is the deployment page's charts section: the last hour,
// or 24 hours, refreshed every sample interval while it is on the page.
function deploymentCharts(id) {
  let windowName = "1h", timer = null;
  const grid = el("div", { class: "charts", id: "charts", "aria-live": "off" });
  const status = el("p", { class: "hint", id: "charts-status" });
  const pick = (w) => el("button", { type: "button", "aria-pressed": String(w === windowName), "data-window": w, onclick: () => {
    windowName = w;
    for (const b of toggle.querySelectorAll("button")) b.setAttribute("aria-pressed", String(b.dataset.window === w));
    load();
  } }, w === "1h" ? "Last hour" : "Last 24 hours");
  const toggle = el("div", { class: "row chart-toggle", role: "group", "aria-label": "Chart window" }, pick("1h"), pick("24h"));
  const section = el("section", { id: "charts-section", "aria-labelledby": "charts-heading" },
    el("h2", { id: "charts-heading" }, "Charts"), toggle, grid, status);
  async function load() {
    if (timer && !section.isConnected) { clearInterval(timer); return; }
    try {
      const m = await api("GET", `/v2/deployments/${id}/metrics?window=${windowName}`);
      grid.replaceChildren(...chartsBody(m));
      status.textContent = `Updated ${new Date().toLocaleTimeString()}; one point every ${m.step_seconds >= 60 ? m.step_seconds / 60 + " minutes" : m.step_seconds + " s"}. Kept in memory: the charts start empty when Slipway restarts.`;
      if (!timer) {
        // Refresh at the sample interval (the 1h window's step).
        const step = windowName === "1h" ? m.step_seconds : 10;
        timer = setInterval(load, Math.max(1, step) * 1000);
      }
    } catch (e) {
      status.textContent = "Charts unavailable: " + e.message;
    }
  }
  load();
  return section;
}
