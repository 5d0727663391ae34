// Generative UI: the node pushes a UI message (typedUi, the SDK's helper)
// for the "weather" component of src/ui.tsx ("ui" in configured.json).
import { StateGraph, Annotation, START, END } from "@langchain/langgraph";
import { typedUi, uiMessageReducer } from "@langchain/langgraph-sdk/react-ui/server";
import type { LangGraphRunnableConfig } from "@langchain/langgraph";

const State = Annotation.Root({
  city: Annotation<string>(),
  ui: Annotation({ reducer: uiMessageReducer, default: () => [] }),
});

export const graph = new StateGraph(State)
  .addNode("show", (s: typeof State.State, config: LangGraphRunnableConfig) => {
    typedUi(config).push({ name: "weather", props: { city: s.city } });
    return {};
  })
  .addEdge(START, "show")
  .addEdge("show", END)
  .compile();
