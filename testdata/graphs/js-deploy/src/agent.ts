// A TypeScript graph with a local module: deployed as it is, dependencies
// installed by the build from package-lock.json.
import { StateGraph, Annotation, START, END } from "@langchain/langgraph";
import { shout } from "./words.js";

const State = Annotation.Root({
  text: Annotation<string>(),
  reply: Annotation<string>(),
});

export const graph = new StateGraph(State)
  .addNode("respond", (s: typeof State.State) => ({ reply: shout(s.text) }))
  .addEdge(START, "respond")
  .addEdge("respond", END)
  .compile();
