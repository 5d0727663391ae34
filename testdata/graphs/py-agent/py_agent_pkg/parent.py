"""A parent graph whose middle node is a compiled subgraph with an
interrupt, loaded by module spec ("py_agent_pkg.parent:graph")."""

import operator
from typing import Annotated

from typing_extensions import TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt


class State(TypedDict, total=False):
    topic: str
    log: Annotated[list[str], operator.add]


def draft(state: State) -> dict:
    return {"log": [f"draft about {state['topic']}"]}


def check(state: State) -> dict:
    verdict = interrupt({"check": state["topic"]})
    return {"log": [f"checked: {verdict}"]}


editor = StateGraph(State).add_node("draft", draft).add_node("check", check).add_edge(START, "draft").add_edge("draft", "check").add_edge("check", END).compile()


def publish(state: State) -> dict:
    return {"log": ["published"]}


graph = (
    StateGraph(State)
    .add_node("editor", editor)
    .add_node("publish", publish)
    .add_edge(START, "editor")
    .add_edge("editor", "publish")
    .add_edge("publish", END)
    .compile()
)
