// Long-term memory: `remember` reads the user's profile (put through the
// store API), writes a note to the store and reports what it did on the
// custom stream (config.writer).
import { StateGraph, Annotation, START, END } from "@langchain/langgraph";

const State = Annotation.Root({
  user: Annotation(),
  note: Annotation(),
  seen: Annotation(),
});

export const graph = new StateGraph(State)
  .addNode("remember", async (s, config) => {
    const ns = ["memories", s.user];
    const profile = await config.store.get(ns, "profile");
    config.writer?.({ profile: profile?.value ?? null });
    await config.store.put(ns, "last_note", { text: s.note });
    await config.store.put(ns, "scratch", { text: "temporary" });
    await config.store.delete(ns, "scratch");
    const found = await config.store.search(["memories"], { filter: { text: s.note } });
    config.writer?.({ found: found.map((i) => i.key) });
    return { seen: { profile: profile?.value ?? null, found: found.map((i) => [i.namespace, i.key]) } };
  })
  .addEdge(START, "remember")
  .addEdge("remember", END)
  .compile();
