"""Graph factories of the signatures the reference server calls: a
ServerRuntime alone, a ServerRuntime and the config (in either order), and
an async context manager that the server exits when the graph is done."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from typing_extensions import TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph

if TYPE_CHECKING:  # as the reference's docs write it: resolved by name
    from langgraph_sdk.runtime import ServerRuntime


class State(TypedDict, total=False):
    built_for: str
    context: dict | None
    style: str | None
    entered: int
    exited: int


def graph_reporting(**fields) -> StateGraph:
    def report(state: State) -> dict:
        return {k: v() if callable(v) else v for k, v in fields.items()}

    return StateGraph(State).add_node("report", report).add_edge(START, "report").add_edge("report", END)


def with_runtime(runtime: ServerRuntime):
    ert = runtime.execution_runtime
    return graph_reporting(built_for=runtime.access_context, context=ert.context if ert else None)


def runtime_then_config(runtime: ServerRuntime, config: RunnableConfig):
    return graph_reporting(built_for=runtime.access_context, style=(config.get("configurable") or {}).get("style"))


counts = {"entered": 0, "exited": 0}


@contextlib.asynccontextmanager
async def managed(config: RunnableConfig):
    counts["entered"] += 1
    try:
        yield graph_reporting(entered=lambda: counts["entered"], exited=lambda: counts["exited"])
    finally:
        counts["exited"] += 1
