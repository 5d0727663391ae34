// The agent explorer's graph drawing: GET /assistants/{id}/graph (nodes,
// edges, conditional edges; with ?xray=true a subgraph's nodes are named
// "sub:node") laid out in layers and drawn as SVG. No library: a longest-
// path layering over the graph without its back edges, then two sweeps
// ordering each layer by the barycenter of its neighbours.
"use strict";

// layoutGraph places the nodes: layer (row) and order within it. Back
// edges (those closing a cycle, found by a depth-first walk from
// __start__) are left out of the layering and drawn as loops.
function layoutGraph(nodes, edges) {
  const ids = nodes.map((n) => n.id);
  const out = new Map(ids.map((id) => [id, []]));
  for (const e of edges) if (out.has(e.source) && out.has(e.target)) out.get(e.source).push(e.target);
  const back = new Set(), state = new Map();
  const visit = (id) => {
    state.set(id, 1);
    for (const t of out.get(id)) {
      if (state.get(t) === 1) back.add(id + "\u0000" + t);
      else if (!state.has(t)) visit(t);
    }
    state.set(id, 2);
  };
  if (out.has("__start__")) visit("__start__");
  for (const id of ids) if (!state.has(id)) visit(id);
  const fwd = edges.filter((e) => out.has(e.source) && out.has(e.target) && !back.has(e.source + "\u0000" + e.target) && e.source !== e.target);
  // Longest path from the sources: a node sits below everything leading to it.
  const layer = new Map(ids.map((id) => [id, 0]));
  for (let changed = true, n = 0; changed && n <= ids.length; n++) {
    changed = false;
    for (const e of fwd) if (layer.get(e.target) < layer.get(e.source) + 1) { layer.set(e.target, layer.get(e.source) + 1); changed = true; }
  }
  const depth = Math.max(0, ...layer.values());
  if (layer.has("__end__")) layer.set("__end__", Math.max(depth, 1));
  const rows = [];
  for (const id of ids) (rows[layer.get(id)] ||= []).push(id);
  for (let i = 0; i < rows.length; i++) rows[i] ||= [];
  const pos = new Map();
  const index = () => rows.forEach((r) => r.forEach((id, i) => pos.set(id, i)));
  index();
  const bary = (id, dir) => {
    const near = fwd.filter((e) => (dir > 0 ? e.target === id : e.source === id)).map((e) => pos.get(dir > 0 ? e.source : e.target));
    return near.length ? near.reduce((a, b) => a + b, 0) / near.length : pos.get(id);
  };
  for (const dir of [1, -1, 1]) {
    const order = dir > 0 ? rows.map((_, i) => i) : rows.map((_, i) => rows.length - 1 - i);
    for (const i of order) { const b = new Map(rows[i].map((id) => [id, bary(id, dir)])); rows[i].sort((x, y) => b.get(x) - b.get(y)); index(); }
  }
  return { rows, layer, back };
}

// drawGraph returns the SVG of a graph and a function marking a node
// "running" or "done" (or clearing it: null).
function drawGraph(graph, title) {
  const nodes = graph.nodes || [], edges = graph.edges || [];
  const { rows, back } = layoutGraph(nodes, edges);
  const label = (id) => id === "__start__" ? "start" : id === "__end__" ? "end" : id;
  const H = 34, GAP_X = 28, GAP_Y = 64, PAD = 28;
  const width = (id) => Math.max(70, label(id).length * 8 + 28);
  const rowW = rows.map((r) => r.reduce((a, id) => a + width(id), 0) + GAP_X * Math.max(0, r.length - 1));
  const W = Math.max(240, ...rowW) + 2 * PAD + 60;
  const box = new Map();
  rows.forEach((r, i) => {
    let x = (W - rowW[i]) / 2;
    for (const id of r) { box.set(id, { x, y: PAD + i * (H + GAP_Y), w: width(id), h: H }); x += width(id) + GAP_X; }
  });
  const Hgt = PAD * 2 + rows.length * H + Math.max(0, rows.length - 1) * GAP_Y;
  const titleID = "graph-title-" + Math.random().toString(36).slice(2);
  const described = edges.map((e) => `${label(e.source)} to ${label(e.target)}${e.conditional ? " (conditional)" : ""}`).join("; ");
  const svg = svgEl("svg", { class: "graph", viewBox: `0 0 ${W} ${Hgt}`, width: W, height: Hgt, role: "img", "aria-labelledby": titleID },
    svgEl("title", { id: titleID }, `${title}: nodes ${nodes.map((n) => label(n.id)).join(", ")}. Edges: ${described}.`),
    svgEl("defs", {}, svgEl("marker", { id: "arrow", viewBox: "0 0 10 10", refX: "9", refY: "5", markerWidth: "7", markerHeight: "7", orient: "auto-start-reverse" },
      svgEl("path", { d: "M0,0 L10,5 L0,10 z", class: "graph-arrow" }))));
  // Subgraphs (xray): one box around the nodes sharing a "sub:" prefix.
  const groups = new Map();
  for (const n of nodes) {
    const i = n.id.lastIndexOf(":");
    if (i > 0) (groups.get(n.id.slice(0, i)) || groups.set(n.id.slice(0, i), []).get(n.id.slice(0, i))).push(n.id);
  }
  for (const [name, members] of groups) {
    const bs = members.map((id) => box.get(id)).filter(Boolean);
    const x0 = Math.min(...bs.map((b) => b.x)) - 12, y0 = Math.min(...bs.map((b) => b.y)) - 20;
    const x1 = Math.max(...bs.map((b) => b.x + b.w)) + 12, y1 = Math.max(...bs.map((b) => b.y + b.h)) + 10;
    svg.append(svgEl("g", { class: "graph-group", "data-subgraph": name },
      svgEl("rect", { x: x0, y: y0, width: x1 - x0, height: y1 - y0, rx: 8 }),
      svgEl("text", { x: x0 + 8, y: y0 + 13 }, name)));
  }
  for (const e of edges) {
    const a = box.get(e.source), b = box.get(e.target);
    if (!a || !b) continue;
    let d;
    if (back.has(e.source + "\u0000" + e.target) || b.y <= a.y) {
      // A loop back up, on the outer side of the source (its left when it
      // sits left of the middle), so it does not cross its row.
      const left = a.x + a.w / 2 < W / 2, side = (n) => left ? n.x : n.x + n.w;
      const x0 = side(a), y0 = a.y + a.h / 2, x1 = side(b), y1 = b.y + b.h / 2;
      const bend = left ? Math.min(x0, x1) - 40 : Math.max(x0, x1) + 40;
      d = `M${x0},${y0} C${bend},${y0} ${bend},${y1} ${x1 + (left ? -2 : 2)},${y1}`;
    } else {
      const x0 = a.x + a.w / 2, y0 = a.y + a.h, x1 = b.x + b.w / 2, y1 = b.y - 2, m = (y0 + y1) / 2;
      d = `M${x0},${y0} C${x0},${m} ${x1},${m} ${x1},${y1}`;
    }
    svg.append(svgEl("path", { d, class: "graph-edge" + (e.conditional ? " conditional" : ""), "marker-end": "url(#arrow)",
      "data-edge": `${e.source}->${e.target}` }));
  }
  const shapes = new Map();
  for (const n of nodes) {
    const b = box.get(n.id);
    const special = n.id === "__start__" || n.id === "__end__";
    const g = svgEl("g", { class: "graph-node" + (special ? " terminal" : ""), "data-node": n.id },
      svgEl("rect", { x: b.x, y: b.y, width: b.w, height: b.h, rx: special ? b.h / 2 : 6 }),
      svgEl("text", { x: b.x + b.w / 2, y: b.y + b.h / 2 + 5, "text-anchor": "middle" }, label(n.id)));
    shapes.set(n.id, g);
    svg.append(g);
  }
  const mark = (id, how) => {
    const g = shapes.get(id);
    if (!g) return;
    g.classList.remove("running", "done");
    if (how) g.classList.add(how);
  };
  const breakpoint = (id, on) => { const g = shapes.get(id); if (g) g.classList.toggle("breakpoint", on); };
  return { svg, mark, breakpoint, has: (id) => shapes.has(id), clear: () => shapes.forEach((g) => g.classList.remove("running", "done")) };
}
