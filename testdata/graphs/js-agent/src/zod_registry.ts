// A graph whose state is a zod (v4) object with LangGraph's registry:
// a reducer and a default on one key, an input and an output schema of
// their own, and a runtime context schema.
import { StateGraph, START, END } from "@langchain/langgraph";
import { registry } from "@langchain/langgraph/zod";
import { z } from "zod/v4";

const State = z.object({
  question: z.string(),
  log: z
    .array(z.string())
    .register(registry, { reducer: { fn: (a: string[], b: string[] | string) => a.concat(b), schema: z.union([z.string(), z.array(z.string())]) }, default: () => [] }),
  answer: z.string().optional(),
});
const Input = z.object({ question: z.string() });
const Output = z.object({ answer: z.string().optional(), log: z.array(z.string()) });
const Context = z.object({ tone: z.enum(["plain", "loud"]).default("plain") });

export const graph = new StateGraph({ state: State, input: Input, output: Output, context: Context })
  .addNode("reply", (s: z.infer<typeof State>, runtime: { context?: { tone?: string } }) => {
    const answer = `${s.question}? yes`;
    return { answer: runtime?.context?.tone === "loud" ? answer.toUpperCase() : answer, log: `answered ${s.question}` };
  })
  .addEdge(START, "reply")
  .addEdge("reply", END)
  .compile();
