"""The benchmark graph, as testdata/graphs/js-agent/src/bench.mjs is for
the JavaScript host: three nodes, the middle one calling a fake chat
model, so a run costs what a small real graph costs (three supersteps,
four checkpoints, one model call) without a network."""

from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import SystemMessage
from langgraph.graph import END, START, MessagesState, StateGraph

model = FakeListChatModel(responses=["Noted.", "Understood.", "All right."])


def call_model(state: MessagesState):
    return {"messages": [model.invoke(state["messages"])]}


builder = StateGraph(MessagesState)
builder.add_node("prepare", lambda state: {"messages": [SystemMessage("Answer briefly.")]})
builder.add_node("model", call_model)
builder.add_node("finish", lambda state: {"messages": []})
builder.add_edge(START, "prepare")
builder.add_edge("prepare", "model")
builder.add_edge("model", "finish")
builder.add_edge("finish", END)
graph = builder.compile()
