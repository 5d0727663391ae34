"""The checkpointer of Slipway's Python language host.

A BaseCheckpointSaver whose storage is Slipway's database, reached over the
host channel with the same cp.* methods as the JavaScript host. Values
travel as the serializer's opaque typed bytes ({"t": type, "b": base64});
Slipway never interprets them. A checkpoint travels without its channel
values; each channel value travels once per version, as a blob keyed by
(channel, version).

`call(method, params)` is a coroutine sending a request to Slipway; `loop`
is the host's event loop, which the synchronous methods (used by graphs
run with .invoke in a worker thread) hand their calls to.
"""

from __future__ import annotations

import asyncio
import base64
import json
import random
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
    get_checkpoint_metadata,
)


def _enc(typed: tuple[str, bytes]) -> dict[str, str]:
    t, b = typed
    return {"t": t, "b": base64.b64encode(b).decode("ascii")}


def _plain(v: Any) -> Any:
    """The metadata as JSON, for Slipway's list filters."""
    try:
        return json.loads(json.dumps(v or {}, default=str))
    except (TypeError, ValueError):
        return {}


def _running_loop():
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _write_key(w: dict) -> tuple[str, str, int]:
    # LangGraph applies a super-step's writes by task path, task id, index.
    return (w.get("task_path") or "", w.get("task_id") or "", w.get("idx") or 0)


class SlipwaySaver(BaseCheckpointSaver):
    def __init__(self, call, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__()
        self._call = call
        self._loop = loop

    # ---- values ------------------------------------------------------------

    def _dump(self, v: Any) -> dict[str, str]:
        return _enc(self.serde.dumps_typed(v))

    def _load(self, x: dict) -> Any:
        return self.serde.loads_typed((x["t"], base64.b64decode(x["b"])))

    def _tuple(self, row: dict) -> CheckpointTuple:
        checkpoint = self._load(row["checkpoint"])
        checkpoint["channel_values"] = {
            b["channel"]: self._load(b) for b in row.get("blobs") or [] if b["t"] != "empty"
        }
        writes = sorted(row.get("writes") or [], key=_write_key)
        ns = row.get("checkpoint_ns") or ""
        parent = row.get("parent_checkpoint_id")
        return CheckpointTuple(
            config={"configurable": {"thread_id": row["thread_id"], "checkpoint_ns": ns, "checkpoint_id": row["checkpoint_id"]}},
            checkpoint=checkpoint,
            metadata=self._load(row["metadata"]),
            parent_config=(
                {"configurable": {"thread_id": row["thread_id"], "checkpoint_ns": ns, "checkpoint_id": parent}} if parent else None
            ),
            pending_writes=[(w["task_id"], w["channel"], self._load(w)) for w in writes],
        )

    # ---- async interface ---------------------------------------------------

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        c = config.get("configurable") or {}
        row = await self._call(
            "cp.getTuple",
            {"thread_id": str(c.get("thread_id")), "checkpoint_ns": c.get("checkpoint_ns") or "", "checkpoint_id": get_checkpoint_id(config) or ""},
        )
        return self._tuple(row) if row else None

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        c = (config or {}).get("configurable") or {}
        rows = await self._call(
            "cp.list",
            {
                "thread_id": None if c.get("thread_id") is None else str(c["thread_id"]),
                "checkpoint_ns": c.get("checkpoint_ns"),
                "checkpoint_id": (get_checkpoint_id(config) if config else None) or "",
                "before": (get_checkpoint_id(before) if before else None) or "",
                "filter": filter or None,
                "limit": limit or 0,
            },
        )
        if limit is not None and limit <= 0:
            return
        for row in rows:
            yield self._tuple(row)

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        c = config.get("configurable") or {}
        if c.get("thread_id") is None:
            raise ValueError('Failed to put checkpoint: the config has no "thread_id" in "configurable".')
        skeleton = dict(checkpoint)
        values = skeleton.pop("channel_values", None) or {}
        skeleton["channel_values"] = {}
        blobs = []
        for channel, version in (new_versions or {}).items():
            blob = self._dump(values[channel]) if channel in values else {"t": "empty", "b": ""}
            blobs.append({"channel": channel, "version": str(version), **blob})
        meta = get_checkpoint_metadata(config, metadata)
        ns = c.get("checkpoint_ns") or ""
        await self._call(
            "cp.put",
            {
                "run_id": str(c.get("run_id") or ""),
                "thread_id": str(c["thread_id"]),
                "checkpoint_ns": ns,
                "checkpoint_id": checkpoint["id"],
                "parent_checkpoint_id": c.get("checkpoint_id") or "",
                "checkpoint": self._dump(skeleton),
                "metadata": self._dump(meta),
                "metadata_json": _plain(meta),
                "channel_versions": {k: str(v) for k, v in (checkpoint.get("channel_versions") or {}).items()},
                "blobs": blobs,
            },
        )
        return {"configurable": {"thread_id": c["thread_id"], "checkpoint_ns": ns, "checkpoint_id": checkpoint["id"]}}

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        c = config.get("configurable") or {}
        if c.get("thread_id") is None:
            raise ValueError('Failed to put writes: the config has no "thread_id" in "configurable".')
        if c.get("checkpoint_id") is None:
            raise ValueError('Failed to put writes: the config has no "checkpoint_id" in "configurable".')
        rows = [{"channel": ch, "idx": WRITES_IDX_MAP.get(ch, idx), **self._dump(v)} for idx, (ch, v) in enumerate(writes)]
        await self._call(
            "cp.putWrites",
            {
                "run_id": str(c.get("run_id") or ""),
                "thread_id": str(c["thread_id"]),
                "checkpoint_ns": c.get("checkpoint_ns") or "",
                "checkpoint_id": c["checkpoint_id"],
                "task_id": task_id,
                "task_path": task_path or "",
                "writes": rows,
            },
        )

    async def adelete_thread(self, thread_id: str) -> None:
        await self._call("cp.deleteThread", {"thread_id": str(thread_id)})

    # String versions, as InMemorySaver's: a counter and a random tail, so
    # two forks of one checkpoint never name different values alike.
    def get_next_version(self, current: str | None, channel: None) -> str:
        if current is None:
            current_v = 0
        elif isinstance(current, int):
            current_v = current
        else:
            current_v = int(current.split(".")[0])
        return f"{current_v + 1:032}.{random.random():016}"

    # ---- sync wrappers -----------------------------------------------------

    def _sync(self, coro):
        if _running_loop() is self._loop:
            coro.close()
            raise asyncio.InvalidStateError(
                "Slipway's checkpointer: synchronous calls from the host's event loop would block it; "
                "use the async methods (ainvoke, astream, aget_state) there"
            )
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return self._sync(self.aget_tuple(config))

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        async def collect():
            return [t async for t in self.alist(config, filter=filter, before=before, limit=limit)]

        yield from self._sync(collect())

    def put(self, config, checkpoint, metadata, new_versions) -> RunnableConfig:
        return self._sync(self.aput(config, checkpoint, metadata, new_versions))

    def put_writes(self, config, writes, task_id, task_path: str = "") -> None:
        return self._sync(self.aput_writes(config, writes, task_id, task_path))

    def delete_thread(self, thread_id: str) -> None:
        return self._sync(self.adelete_thread(thread_id))
