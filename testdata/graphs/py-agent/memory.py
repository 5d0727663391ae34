"""The store from inside a node, the runtime context, and custom events.
The node reads the user's profile (put through the API), counts its
visits in the store, and streams what it did."""

from dataclasses import dataclass
from typing_extensions import TypedDict

from langgraph.config import get_stream_writer
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime


@dataclass
class Context:
    user: str = "anonymous"


class State(TypedDict, total=False):
    greeting: str
    visits: int


async def remember(state: State, runtime: Runtime[Context]) -> dict:
    user = runtime.context.user if runtime.context else "anonymous"
    ns = ("users", user)
    profile = await runtime.store.aget(ns, "profile")
    seen = await runtime.store.aget(ns, "visits")
    visits = (seen.value["n"] if seen else 0) + 1
    await runtime.store.aput(ns, "visits", {"n": visits})
    name = profile.value.get("name", user) if profile else user
    get_stream_writer()({"user": user, "visits": visits})
    return {"greeting": f"Hello, {name}!", "visits": visits}


graph = StateGraph(State, context_schema=Context).add_node("remember", remember).add_edge(START, "remember").add_edge("remember", END).compile()


def remember_sync(state: State, runtime: Runtime[Context]) -> dict:
    # The same in a synchronous node (run in a worker thread): the store's
    # sync methods hand their calls to the host's event loop.
    user = runtime.context.user if runtime.context else "anonymous"
    ns = ("users", user)
    profile = runtime.store.get(ns, "profile")
    seen = runtime.store.get(ns, "visits")
    visits = (seen.value["n"] if seen else 0) + 1
    runtime.store.put(ns, "visits", {"n": visits})
    name = profile.value.get("name", user) if profile else user
    return {"greeting": f"Hello, {name}!", "visits": visits}


graph_sync = StateGraph(State, context_schema=Context).add_node("remember", remember_sync).add_edge(START, "remember").add_edge("remember", END).compile()
