"""A graph factory: a function of the run's config, called per run. Its
style comes from the config, else from PY_AGENT_STYLE (set by the "env" of
langgraph.json)."""

import os

from typing_extensions import TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph


class State(TypedDict, total=False):
    text: str


def make_graph(config: RunnableConfig):
    style = (config.get("configurable") or {}).get("style") or os.environ.get("PY_AGENT_STYLE", "plain")

    def shout(state: State) -> dict:
        text = state.get("text", "")
        return {"text": text.upper() if style == "loud" else text}

    return StateGraph(State).add_node("shout", shout).add_edge(START, "shout").add_edge("shout", END)
