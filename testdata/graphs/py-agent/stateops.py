"""Graphs for state operations and cancellation through the SDK.

`configured` is built by a factory from the config: its nodes are
`configurable.nodes` (default ["only"]), in a row, each adding its name to
`trail` — a state update as one of them needs the graph built from the
thread's config. `lingering` is a node that takes `configurable.linger_ms`
(default 800) to stop once cancelled: cleanup after a cancel, so a run is
still unwinding after the cancel request."""

import asyncio
import operator
from typing import Annotated

from typing_extensions import TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.config import get_stream_writer
from langgraph.graph import END, START, StateGraph


class State(TypedDict, total=False):
    trail: Annotated[list[str], operator.add]


def add(name: str):
    def run(state: State) -> dict:
        return {"trail": [name]}

    return run


def configured(config: RunnableConfig):
    names = (config.get("configurable") or {}).get("nodes") or ["only"]
    g = StateGraph(State)
    prev = START
    for name in names:
        g.add_node(name, add(name))
        g.add_edge(prev, name)
        prev = name
    g.add_edge(prev, END)
    return g


async def linger(state: State, config: RunnableConfig) -> dict:
    ms = float((config.get("configurable") or {}).get("linger_ms") or 800)
    get_stream_writer()({"started": True})
    try:
        await asyncio.sleep(30)
    except asyncio.CancelledError:
        await asyncio.sleep(ms / 1000)  # cleanup that takes a while
        raise
    return {"trail": ["lingered"]}


lingering = StateGraph(State).add_node("linger", linger).add_edge(START, "linger").add_edge("linger", END).compile()
