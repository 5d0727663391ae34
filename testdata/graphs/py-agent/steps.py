"""Three nodes in a row, each waiting `configurable.delay_ms` (default 0)
and writing progress (with the host's pid) to the custom stream: slow runs
for cancellation, multitask strategies and host crashes. `configurable.fail`
names a node that raises a ValueError. `spin` is a synchronous node that
never returns, for cancellation past the grace period."""

import asyncio
import operator
import os
import time
from typing import Annotated

from typing_extensions import TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.config import get_stream_writer
from langgraph.graph import END, START, StateGraph


class State(TypedDict, total=False):
    steps: Annotated[list[str], operator.add]


def node(name: str):
    async def run(state: State, config: RunnableConfig) -> dict:
        conf = config.get("configurable") or {}
        ms = float(conf.get("delay_ms") or 0)
        if ms > 0:
            await asyncio.sleep(ms / 1000)
        if conf.get("fail") == name:
            raise ValueError(f"step {name} failed")
        print(f"node {name} ran")  # must not corrupt the host channel
        get_stream_writer()({"node": name, "done": len(state.get("steps") or []) + 1, "pid": os.getpid()})
        return {"steps": [name]}

    return run


graph = (
    StateGraph(State)
    .add_node("one", node("one"))
    .add_node("two", node("two"))
    .add_node("three", node("three"))
    .add_edge(START, "one")
    .add_edge("one", "two")
    .add_edge("two", "three")
    .add_edge("three", END)
    .compile()
)


def forever(state: State) -> dict:
    get_stream_writer()({"node": "spin", "pid": os.getpid()})
    while True:  # never yields: only a host restart ends it
        time.sleep(0.01)


spin = StateGraph(State).add_node("spin", forever).add_edge(START, "spin").add_edge("spin", END).compile()
