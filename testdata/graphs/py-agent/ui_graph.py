"""Generative UI: the node pushes a UI message (LangGraph's
push_ui_message) for the "card" component of ui.jsx ("ui" in
langgraph.json)."""

from typing import Annotated

from typing_extensions import TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.graph.ui import AnyUIMessage, push_ui_message, ui_message_reducer


class State(TypedDict, total=False):
    text: str
    ui: Annotated[list[AnyUIMessage], ui_message_reducer]


def show(state: State) -> dict:
    push_ui_message("card", {"text": state.get("text", "")})
    return {}


graph = StateGraph(State).add_node("show", show).add_edge(START, "show").add_edge("show", END).compile()
