// Three nodes in a row, each waiting `configurable.delay_ms` (default 0)
// and writing progress (with the host's pid) to the custom stream: slow
// runs for cancellation, multitask strategies and host crashes; fast ones
// for benchmarks. `configurable.fail` names a node that throws a RangeError.
import { StateGraph, Annotation, START, END } from "@langchain/langgraph";

const State = Annotation.Root({
  steps: Annotation({ reducer: (a, b) => a.concat(b), default: () => [] }),
});

const node = (name) => async (state, config) => {
  const ms = Number(config?.configurable?.delay_ms ?? 0);
  if (ms > 0) {
    await new Promise((resolve, reject) => {
      const t = setTimeout(resolve, ms);
      config?.signal?.addEventListener("abort", () => { clearTimeout(t); reject(new Error("aborted")); }, { once: true });
    });
  }
  if (config?.configurable?.fail === name) throw new RangeError(`step ${name} failed`);
  config?.writer?.({ node: name, done: state.steps.length + 1, pid: process.pid });
  return { steps: [name] };
};

const builder = new StateGraph(State)
  .addNode("one", node("one"))
  .addNode("two", node("two"))
  .addNode("three", node("three"))
  .addEdge(START, "one")
  .addEdge("one", "two")
  .addEdge("two", "three")
  .addEdge("three", END);

export const graph = builder.compile();

// The same graph compiled to stop before "three" and after "one".
export const gated = builder.compile({ interruptBefore: ["three"], interruptAfter: ["one"] });
