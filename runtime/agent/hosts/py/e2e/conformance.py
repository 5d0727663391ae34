"""Runs langgraph-checkpoint-conformance against the Python host's
checkpointer, talking to a real `slipway agent`.

The saver under test lives in the host process `slipway agent` started (its
storage is the agent's database, reached over the host channel); the agent
serves testdata/graphs/py-agent/conformance.json, whose one graph relays
the host saver's methods on the Unix socket SAVER_RELAY. The checkpointer
handed to the suite forwards each call there. Exits non-zero unless every
capability the saver has passes; writes the report as JSON to argv[1].
"""

import asyncio
import base64
import itertools
import json
import os
import pickle
import sys

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.report import ProgressCallbacks


class Relay:
    def __init__(self, reader, writer):
        self.reader, self.writer = reader, writer
        self.ids = itertools.count(1)
        self.pending: dict[int, asyncio.Future] = {}
        self.task = asyncio.ensure_future(self._read())

    async def _read(self):
        while line := await self.reader.readline():
            msg = json.loads(line)
            fut = self.pending.pop(msg["id"])
            if "e" in msg:
                fut.set_exception(RuntimeError(f"{msg['e']['type']}: {msg['e']['message']}"))
            else:
                fut.set_result(pickle.loads(base64.b64decode(msg["r"])))

    async def call(self, m, *args, **kwargs):
        i = next(self.ids)
        fut = asyncio.get_running_loop().create_future()
        self.pending[i] = fut
        a = base64.b64encode(pickle.dumps((args, kwargs))).decode()
        self.writer.write(json.dumps({"id": i, "m": m, "a": a}).encode() + b"\n")
        return await fut


class RelayedSaver(BaseCheckpointSaver):
    """The host's saver, seen from this process: its async methods, or
    (sync=True) its synchronous wrappers, which the host calls from a
    worker thread."""

    def __init__(self, relay: Relay, sync: bool = False):
        super().__init__()
        self.relay = relay
        self.prefix = "" if sync else "a"

    async def aget_tuple(self, config):
        return await self.relay.call(self.prefix + "get_tuple", config)

    async def alist(self, config, *, filter=None, before=None, limit=None):
        for t in await self.relay.call(self.prefix + "list", config, filter=filter, before=before, limit=limit):
            yield t

    async def aput(self, config, checkpoint, metadata, new_versions):
        return await self.relay.call(self.prefix + "put", config, checkpoint, metadata, new_versions)

    async def aput_writes(self, config, writes, task_id, task_path=""):
        return await self.relay.call(self.prefix + "put_writes", config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id):
        return await self.relay.call(self.prefix + "delete_thread", thread_id)


relay: Relay | None = None


async def lifespan():
    global relay
    reader, writer = await asyncio.open_unix_connection(os.environ["SAVER_RELAY"], limit=64 << 20)
    relay = Relay(reader, writer)
    yield
    writer.close()


async def fresh(sync: bool) -> RelayedSaver:
    # The agent's database is shared by every checkpointer the suite
    # creates, so each starts from an empty one: list tests read across
    # threads.
    saver = RelayedSaver(relay, sync)
    threads = {t.config["configurable"]["thread_id"] async for t in saver.alist(None)}
    for thread in threads:
        await saver.adelete_thread(thread)
    return saver


@checkpointer_test(name="slipway-python-host", lifespan=lifespan)
async def async_saver():
    yield await fresh(False)


@checkpointer_test(name="slipway-python-host-sync", lifespan=lifespan)
async def sync_saver():
    yield await fresh(True)


async def main() -> int:
    out, ok, passed, failed = {}, True, 0, 0
    for registered in (async_saver, sync_saver):
        report = await validate(registered, progress=ProgressCallbacks.verbose())
        caps = out[report.checkpointer_name] = {}
        for cap, r in report.results.items():
            caps[cap] = {
                "detected": r.detected,
                "passed": r.passed,
                "tests_passed": r.tests_passed,
                "tests_failed": r.tests_failed,
                "failures": [str(f) for f in (r.failures or [])],
            }
            ok = ok and (r.passed or not r.detected)
            passed, failed = passed + r.tests_passed, failed + r.tests_failed
    with open(sys.argv[1], "w") as f:
        json.dump(out, f, indent=2)
    print(f"conformance: {passed} passed, {failed} failed")
    return 0 if ok and passed > 0 else 1


sys.exit(asyncio.run(main()))
