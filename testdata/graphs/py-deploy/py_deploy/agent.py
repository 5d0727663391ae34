"""A graph of one node that greets: the project's dependency (langgraph)
comes from pyproject.toml and its greeting from langgraph.json's env."""

import os
from typing import TypedDict

from langgraph.graph import END, START, StateGraph


class State(TypedDict, total=False):
    name: str
    greeting: str


def greet(state: State) -> State:
    prefix = os.environ.get("PY_DEPLOY_GREETING", "hello")
    return {"greeting": f"{prefix}, {state.get('name', 'world')}"}


builder = StateGraph(State)
builder.add_node("greet", greet)
builder.add_edge(START, "greet")
builder.add_edge("greet", END)
graph = builder.compile()
