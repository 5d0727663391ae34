"""A graph factory: a function of the run's config, called per run."""

from typing_extensions import TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph


class State(TypedDict, total=False):
    text: str


def make_graph(config: RunnableConfig):
    style = (config.get("configurable") or {}).get("style", "plain")

    def shout(state: State) -> dict:
        text = state.get("text", "")
        return {"text": text.upper() if style == "loud" else text}

    return StateGraph(State).add_node("shout", shout).add_edge(START, "shout").add_edge("shout", END)
