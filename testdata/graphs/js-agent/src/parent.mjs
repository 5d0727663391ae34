// A parent graph with a subgraph node: `editor` (itself a graph) drafts
// and then asks for approval with interrupt(); the parent publishes.
import { StateGraph, Annotation, START, END, interrupt } from "@langchain/langgraph";

const Article = Annotation.Root({
  topic: Annotation(),
  draft: Annotation(),
  approved: Annotation(),
});

const editor = new StateGraph(Article)
  .addNode("write", (s) => ({ draft: `a draft about ${s.topic}` }))
  .addNode("check", (s) => ({ approved: interrupt({ draft: s.draft }) }))
  .addEdge(START, "write")
  .addEdge("write", "check")
  .addEdge("check", END)
  .compile();

const Parent = Annotation.Root({
  topic: Annotation(),
  draft: Annotation(),
  approved: Annotation(),
  published: Annotation(),
});

export const graph = new StateGraph(Parent)
  .addNode("plan", (s) => ({ topic: s.topic.trim() }))
  .addNode("editor", editor)
  .addNode("publish", (s) => ({ published: s.approved === "yes" ? s.draft : null }))
  .addEdge(START, "plan")
  .addEdge("plan", "editor")
  .addEdge("editor", "publish")
  .addEdge("publish", END)
  .compile();
