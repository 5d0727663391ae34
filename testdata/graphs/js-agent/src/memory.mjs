// Long-term memory: `remember` reads the user's profile (put through the
// store API), writes a note to the store and reports what it did on the
// custom stream (config.writer, getWriter()). Its state and context are zod objects,
// so its schemas are typed.
import { StateGraph, START, END, getStore, getWriter } from "@langchain/langgraph";
import { z } from "zod";

const State = z.object({
  user: z.string().describe("whose memories"),
  note: z.string(),
  seen: z.any().optional(),
});

const Context = z.object({ tone: z.enum(["plain", "warm"]).optional() });

export const graph = new StateGraph({ state: State, context: Context })
  .addNode("remember", async (s, config) => {
    const ns = ["memories", s.user];
    const profile = await config.store.get(ns, "profile");
    config.writer?.({ profile: profile?.value ?? null });
    await config.store.put(ns, "last_note", { text: s.note });
    // getStore() and getWriter() reach the same store and stream.
    await getStore().put(ns, "scratch", { text: "temporary" });
    await config.store.delete(ns, "scratch");
    const found = await config.store.search(["memories"], { filter: { text: s.note } });
    getWriter()?.({ found: found.map((i) => i.key) });
    return { seen: { profile: profile?.value ?? null, found: found.map((i) => [i.namespace, i.key]) } };
  })
  .addEdge(START, "remember")
  .addEdge("remember", END)
  .compile();
