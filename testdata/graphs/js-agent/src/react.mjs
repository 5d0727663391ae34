// A ReAct-style agent: a chat model that calls a tool, a tool node, and the
// model again with the tool's answer. The models are LangChain's fakes, so
// runs are deterministic and need no network.
import { StateGraph, MessagesAnnotation, START, END } from "@langchain/langgraph";
import { ToolNode, toolsCondition } from "@langchain/langgraph/prebuilt";
import { tool } from "@langchain/core/tools";
import { AIMessageChunk } from "@langchain/core/messages";
import { FakeListChatModel, FakeStreamingChatModel } from "@langchain/core/utils/testing";
import { z } from "zod";

const getWeather = tool(async ({ city }) => `It is sunny in ${city}.`, {
  name: "get_weather",
  description: "The weather in a city",
  schema: z.object({ city: z.string() }),
});

async function agent(state) {
  const last = state.messages[state.messages.length - 1];
  if (last?._getType?.() === "tool") {
    const model = new FakeListChatModel({ responses: [`The tool says: ${last.content}`] });
    return { messages: [await model.invoke(state.messages)] };
  }
  const city = String(last?.content ?? "Paris").split(" ").pop();
  const model = new FakeStreamingChatModel({
    chunks: [new AIMessageChunk({ content: "", tool_calls: [{ name: "get_weather", args: { city }, id: `call_${state.messages.length}`, type: "tool_call" }] })],
  });
  return { messages: [await model.invoke(state.messages)] };
}

export const graph = new StateGraph(MessagesAnnotation)
  .addNode("agent", agent)
  .addNode("tools", new ToolNode([getWeather]))
  .addEdge(START, "agent")
  .addConditionalEdges("agent", toolsCondition, ["tools", END])
  .addEdge("tools", "agent")
  .compile();
