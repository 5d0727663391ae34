"""A graph of one node that greets, with the Poetry project's
dependencies (langgraph and six, from [tool.poetry.dependencies])."""

from typing import TypedDict

import six
from langgraph.graph import END, START, StateGraph


class State(TypedDict, total=False):
    name: str
    greeting: str


def greet(state: State) -> State:
    return {"greeting": six.ensure_str(f"hello from poetry, {state.get('name', 'world')}")}


builder = StateGraph(State)
builder.add_node("greet", greet)
builder.add_edge(START, "greet")
builder.add_edge("greet", END)
graph = builder.compile()
