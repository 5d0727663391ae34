// Graphs for state operations and cancellation through the SDK.
//
// `configured` is built by a factory from the config: its nodes are
// `configurable.nodes` (default ["only"]), in a row, each adding its name to
// `trail` — a state update as one of them needs the graph built from the
// thread's config. `lingering` is a node that takes `configurable.linger_ms`
// (default 800) to stop once its run is aborted: cleanup after a cancel, so
// a run is still unwinding after the cancel request.
import { StateGraph, Annotation, START, END } from "@langchain/langgraph";

const State = Annotation.Root({
  trail: Annotation({ reducer: (a, b) => a.concat(b), default: () => [] }),
});

export function configured(config) {
  const names = config?.configurable?.nodes ?? ["only"];
  const g = new StateGraph(State);
  let prev = START;
  for (const name of names) {
    g.addNode(name, () => ({ trail: [name] }));
    g.addEdge(prev, name);
    prev = name;
  }
  g.addEdge(prev, END);
  return g;
}

async function linger(state, config) {
  const ms = Number(config?.configurable?.linger_ms ?? 800);
  config?.writer?.({ started: true });
  await new Promise((resolve, reject) => {
    const t = setTimeout(resolve, 30000);
    config?.signal?.addEventListener("abort", () => {
      clearTimeout(t);
      setTimeout(() => reject(new Error("aborted")), ms); // cleanup that takes a while
    }, { once: true });
  });
  return { trail: ["lingered"] };
}

export const lingering = new StateGraph(State).addNode("linger", linger).addEdge(START, "linger").addEdge("linger", END).compile();
