// A graph whose state is a plain zod object (no Annotation, no registry):
// its schemas come from the zod types.
import { StateGraph, START, END } from "@langchain/langgraph";
import { z } from "zod";

const State = z.object({
  topic: z.string().describe("what to write about"),
  words: z.number().int().optional(),
  draft: z.string().optional(),
});

export const graph = new StateGraph(State)
  .addNode("write", (s: z.infer<typeof State>) => ({ draft: `${s.topic}: ${"word ".repeat(s.words ?? 2).trim()}` }))
  .addEdge(START, "write")
  .addEdge("write", END)
  .compile();
