"""A graph for the checkpointer conformance test only
(runtime/agent/hosts/py/e2e/conformance.py). Loaded by the Python host like
any graph, it is handed the host's checkpointer — the saver whose storage
is `slipway agent`'s database — and, when SLIPWAY_TEST_SAVER_RELAY names a
Unix socket path, serves that saver's async methods on it, so the
conformance suite (which runs in its own process) calls the very saver the
host runs graphs with — its async methods, and its sync wrappers from a
worker thread.

Frames are newline-delimited JSON: {"id", "m", "a"} with the method's
arguments, and {"id", "r"} or {"id", "e"}. Arguments and results travel
pickled (base64): both ends are this project's Python and the socket is
the test's own, so values arrive exactly as the saver returned them.
"""

import asyncio
import base64
import json
import os
import pickle
import operator
from typing import Annotated

from typing_extensions import TypedDict

from langgraph.graph import END, START, StateGraph


class State(TypedDict):
    n: Annotated[int, operator.add]


def inc(state: State) -> dict:
    return {"n": 1}


graph = StateGraph(State).add_node("inc", inc).add_edge(START, "inc").add_edge("inc", END).compile()

METHODS = {"aget_tuple", "alist", "aput", "aput_writes", "adelete_thread"}
# The synchronous wrappers, called from a worker thread as a graph run
# with .invoke inside a thread would call them.
SYNC = {"get_tuple", "list", "put", "put_writes", "delete_thread"}


async def serve(m: str, a: str):
    saver = graph.checkpointer
    if saver is None or not hasattr(saver, "serde"):
        raise RuntimeError("the host has not given this graph its checkpointer")
    if m not in METHODS | SYNC:
        raise ValueError(f"unknown saver method {m}")
    args, kwargs = pickle.loads(base64.b64decode(a))
    if m == "list":
        out = await asyncio.to_thread(lambda: list(saver.list(*args, **kwargs)))
    elif m in SYNC:
        out = await asyncio.to_thread(getattr(saver, m), *args, **kwargs)
    elif m == "alist":
        out = [t async for t in saver.alist(*args, **kwargs)]
    else:
        out = await getattr(saver, m)(*args, **kwargs)
    return base64.b64encode(pickle.dumps(out)).decode()


async def client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    async def one(req: dict) -> None:
        try:
            msg = {"id": req["id"], "r": await serve(req["m"], req["a"])}
        except Exception as err:  # noqa: BLE001 - the suite sees the error
            msg = {"id": req["id"], "e": {"type": type(err).__name__, "message": str(err)}}
        writer.write(json.dumps(msg).encode() + b"\n")

    while line := await reader.readline():
        asyncio.ensure_future(one(json.loads(line)))


_path = os.environ.get("SLIPWAY_TEST_SAVER_RELAY")
if _path:
    # The host imports graphs inside its event loop.
    _server = asyncio.ensure_future(asyncio.start_unix_server(client, path=_path, limit=64 << 20))
