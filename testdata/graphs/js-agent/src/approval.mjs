// Human in the loop: `review` stops the run with interrupt() until a run
// answers with Command({resume}).
import { StateGraph, Annotation, START, END, interrupt } from "@langchain/langgraph";

const State = Annotation.Root({
  request: Annotation(),
  decision: Annotation(),
  log: Annotation({ reducer: (a, b) => a.concat(b), default: () => [] }),
});

export const graph = new StateGraph(State)
  .addNode("prepare", (s) => ({ log: [`prepared ${s.request}`] }))
  .addNode("review", (s) => {
    const answer = interrupt({ question: `approve ${s.request}?` });
    return { decision: answer, log: [`reviewed: ${answer}`] };
  })
  .addNode("act", (s) => ({ log: [s.decision === "yes" ? `did ${s.request}` : `skipped ${s.request}`] }))
  .addEdge(START, "prepare")
  .addEdge("prepare", "review")
  .addEdge("review", "act")
  .addEdge("act", END)
  .compile();
