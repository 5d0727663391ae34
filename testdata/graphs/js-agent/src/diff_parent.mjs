// A parent graph with a compiled subgraph as one of its nodes, for the
// differential test: subgraph streaming (`mode|namespace` events), state
// with subgraphs, and a custom stream written from inside the subgraph.
import { StateGraph, Annotation, START, END } from "@langchain/langgraph";

const State = Annotation.Root({
  topic: Annotation(),
  findings: Annotation({ reducer: (a, b) => b, default: () => [] }),
  notes: Annotation({ reducer: (a, b) => a.concat(b), default: () => [] }),
});

// The subgraph shares `topic` with its parent and returns its own
// `findings`, which the parent's `outro` reads.
const ChildState = Annotation.Root({
  topic: Annotation(),
  findings: Annotation({ reducer: (a, b) => a.concat(b), default: () => [] }),
});

const child = new StateGraph(ChildState)
  .addNode("research", (s, config) => {
    config?.writer?.({ researching: s.topic });
    return { findings: [`researched ${s.topic}`] };
  })
  .addNode("summarise", (s) => ({ findings: [`summary of ${s.findings.length} findings`] }))
  .addEdge(START, "research")
  .addEdge("research", "summarise")
  .addEdge("summarise", END)
  .compile();

export const graph = new StateGraph(State)
  .addNode("intro", (s) => ({ notes: [`about ${s.topic}`] }))
  .addNode("child", child)
  .addNode("outro", (s) => ({ notes: [`done: ${s.findings.join("; ")}`] }))
  .addEdge(START, "intro")
  .addEdge("intro", "child")
  .addEdge("child", "outro")
  .addEdge("outro", END)
  .compile();
