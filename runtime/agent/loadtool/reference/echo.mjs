// The reference server's equivalent of slipway's built-in echo graph: it
// appends an AI message repeating the last human message, after waiting
// input.sleep seconds when given.
import { Annotation, MessagesAnnotation, StateGraph } from "@langchain/langgraph";
import { AIMessage } from "@langchain/core/messages";

const State = Annotation.Root({
  ...MessagesAnnotation.spec,
  sleep: Annotation(),
});

async function echo(state) {
  if (typeof state.sleep === "number" && state.sleep > 0) {
    await new Promise((r) => setTimeout(r, state.sleep * 1000));
  }
  const last = [...state.messages].reverse().find((m) => m._getType() === "human");
  const text = typeof last?.content === "string" ? last.content : JSON.stringify(last?.content ?? "");
  return { messages: [new AIMessage(text)] };
}

export const graph = new StateGraph(State).addNode("echo", echo).addEdge("__start__", "echo").compile();
