"""The long-term memory store of Slipway's Python language host.

A BaseStore whose items live in Slipway's store (the one the /store API
serves), reached over the host channel with the same store.* methods as the
JavaScript host. A graph's store (a node's `store` argument, `get_store()`)
is this store, so an item a node puts is visible through the API at once,
and an item put through the API is read by the node.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)


def _time(s: str | None) -> datetime:
    if not s:
        return datetime.now().astimezone()
    # Go writes RFC 3339 with up to nanoseconds; fromisoformat takes micro.
    head, _, tail = s.partition(".")
    if tail:
        digits = "".join(ch for ch in tail if ch.isdigit())
        zone = tail[len(digits):]
        s = f"{head}.{digits[:6].ljust(6, '0')}{zone}"
    return datetime.fromisoformat(s.replace("Z", "+00:00"))


def _item(it: dict | None, search: bool = False) -> Item | None:
    if not it:
        return None
    cls = SearchItem if search else Item
    return cls(
        namespace=tuple(it["namespace"]),
        key=it["key"],
        value=it["value"],
        created_at=_time(it.get("created_at")),
        updated_at=_time(it.get("updated_at")),
    )


def _running_loop():
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class SlipwayStore(BaseStore):
    def __init__(self, call, loop: asyncio.AbstractEventLoop) -> None:
        self._call = call
        self._loop = loop

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        # Operations run in order, each a request to Slipway.
        return [await self._one(op) for op in ops]

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        if _running_loop() is self._loop:
            raise asyncio.InvalidStateError(
                "Slipway's store: synchronous calls from the host's event loop would block it; "
                "use the async methods (aget, aput, asearch) in async nodes"
            )
        return asyncio.run_coroutine_threadsafe(self.abatch(list(ops)), self._loop).result()

    async def _one(self, op: Op) -> Any:
        if isinstance(op, GetOp):
            return _item(await self._call("store.get", {"namespace": list(op.namespace), "key": op.key}))
        if isinstance(op, SearchOp):
            items = await self._call(
                "store.search",
                {
                    "namespace_prefix": list(op.namespace_prefix),
                    "filter": op.filter or None,
                    "query": op.query or "",
                    "limit": op.limit,
                    "offset": op.offset,
                },
            )
            return [_item(it, search=True) for it in items or []]
        if isinstance(op, PutOp):
            if op.value is None:
                await self._call("store.delete", {"namespace": list(op.namespace), "key": op.key})
            else:
                await self._call("store.put", {"namespace": list(op.namespace), "key": op.key, "value": op.value})
            return None
        if isinstance(op, ListNamespacesOp):
            prefix: tuple[str, ...] = ()
            suffix = None
            for cond in op.match_conditions or ():
                if cond.match_type == "prefix":
                    prefix = tuple(cond.path)
                elif cond.match_type == "suffix":
                    suffix = tuple(cond.path)
            # Slipway filters by prefix (without wildcards); a wildcard
            # prefix or a suffix (rare) is filtered here, before paging.
            local = suffix is not None or "*" in prefix
            spaces = await self._call(
                "store.listNamespaces",
                {
                    "prefix": [] if "*" in prefix else list(prefix),
                    "max_depth": op.max_depth or 0,
                    "limit": 1 << 20 if local else op.limit,
                    "offset": 0 if local else op.offset,
                },
            )
            out = [tuple(ns) for ns in spaces or []]
            if local:
                out = [ns for ns in out if _matches(ns, prefix, suffix)][op.offset : op.offset + op.limit]
            return out
        raise ValueError(f"unknown store operation {type(op).__name__}")


def _matches(ns: tuple[str, ...], prefix: tuple[str, ...], suffix: tuple[str, ...] | None) -> bool:
    if len(ns) < len(prefix) or any(p != "*" and p != n for p, n in zip(prefix, ns)):
        return False
    if suffix is not None:
        if len(ns) < len(suffix):
            return False
        tail = ns[len(ns) - len(suffix) :]
        if any(s != "*" and s != n for s, n in zip(suffix, tail)):
            return False
    return True
