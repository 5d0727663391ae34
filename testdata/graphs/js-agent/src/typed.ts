// A TypeScript graph importing a local TypeScript module: Slipway loads it
// without a loader in the project.
import { StateGraph, Annotation, START, END } from "@langchain/langgraph";
import { greet } from "./greeting.js";

const State = Annotation.Root({
  name: Annotation<string>(),
  greeting: Annotation<string>(),
});

interface Greeted {
  greeting: string;
}

function greetNode(state: typeof State.State): Greeted {
  return { greeting: greet(state.name) };
}

export const graph = new StateGraph(State).addNode("greet", greetNode).addEdge(START, "greet").addEdge("greet", END).compile();
