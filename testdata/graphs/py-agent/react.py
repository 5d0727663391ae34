"""A ReAct agent: a model node that calls a tool through a ToolNode, then
answers with the tool's result. The models are LangChain's fakes given the
message the agent decides on, so runs are deterministic without an API key:
FakeMessagesListChatModel for the tool call (GenericFakeChatModel's stream
drops tool calls), GenericFakeChatModel for the answer, which it streams
token by token."""

from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel, GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"It is sunny in {city}."


async def agent(state: MessagesState) -> dict:
    last = state["messages"][-1]
    if isinstance(last, ToolMessage):
        model = GenericFakeChatModel(messages=iter([AIMessage(content=f"The tool says: {last.content}")]))
    else:
        text = last.content if isinstance(last, HumanMessage) else ""
        city = text.rsplit(" ", 1)[-1] if text else "nowhere"
        call = {"name": "get_weather", "args": {"city": city}, "id": f"call_{len(state['messages'])}"}
        model = FakeMessagesListChatModel(responses=[AIMessage(content="", tool_calls=[call])])
    return {"messages": [await model.ainvoke(state["messages"])]}


graph = (
    StateGraph(MessagesState)
    .add_node("agent", agent)
    .add_node("tools", ToolNode([get_weather]))
    .add_edge(START, "agent")
    .add_conditional_edges("agent", tools_condition)
    .add_edge("tools", "agent")
    .compile()
)
