// A graph with a runtime context schema: `context` on a run (or on its
// assistant) reaches the node as runtime.context.
import { StateGraph, Annotation, START, END } from "@langchain/langgraph";
import { z } from "zod";

const State = Annotation.Root({
  question: Annotation<string>(),
  answer: Annotation<string>(),
});

const Context = z.object({ user: z.string().optional() });

export const graph = new StateGraph(State, Context)
  .addNode("respond", (s: typeof State.State, runtime: { context?: { user?: string }; configurable?: Record<string, unknown> }) => {
    const punctuation = String(runtime?.configurable?.punctuation ?? ".");
    return { answer: `${s.question} for ${runtime?.context?.user ?? "nobody"}${punctuation}` };
  })
  .addEdge(START, "respond")
  .addEdge("respond", END)
  .compile();
