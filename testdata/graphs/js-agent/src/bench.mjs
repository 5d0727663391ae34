// The benchmark graph both servers run (runtime/agent/loadtool):
// three nodes, the middle one calling a fake chat model, so a run costs
// what a small real graph costs (three supersteps, four checkpoints, one
// model call) without a network.
import { StateGraph, MessagesAnnotation, START, END } from "@langchain/langgraph";
import { FakeListChatModel } from "@langchain/core/utils/testing";
import { SystemMessage } from "@langchain/core/messages";

const model = new FakeListChatModel({ responses: ["Noted.", "Understood.", "All right."] });

export const graph = new StateGraph(MessagesAnnotation)
  .addNode("prepare", () => ({ messages: [new SystemMessage("Answer briefly.")] }))
  .addNode("model", async (s) => ({ messages: [await model.invoke(s.messages)] }))
  .addNode("finish", (s) => ({ messages: [] }))
  .addEdge(START, "prepare")
  .addEdge("prepare", "model")
  .addEdge("model", "finish")
  .addEdge("finish", END)
  .compile();
