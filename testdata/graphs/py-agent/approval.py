"""interrupt() in a node: the run stops for a human's answer, and
Command(resume=...) continues it. A synchronous graph, run as LangGraph
runs sync nodes (in a worker thread)."""

import operator
from typing import Annotated

from typing_extensions import TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt


class State(TypedDict, total=False):
    request: str
    log: Annotated[list[str], operator.add]


def prepare(state: State) -> dict:
    return {"log": [f"prepared {state['request']}"]}


def review(state: State) -> dict:
    answer = interrupt({"question": f"approve {state['request']}?"})
    return {"log": [f"reviewed: {answer}"]}


def act(state: State) -> dict:
    return {"log": [f"did {state['request']}"]}


graph = (
    StateGraph(State)
    .add_node("prepare", prepare)
    .add_node("review", review)
    .add_node("act", act)
    .add_edge(START, "prepare")
    .add_edge("prepare", "review")
    .add_edge("review", "act")
    .add_edge("act", END)
)  # left uncompiled: the host compiles a StateGraph
