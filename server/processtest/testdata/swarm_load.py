"""Steady official-SDK load for the multi-node swarm test: N clients each
stream runs of the echo graph (which sleeps SLEEP seconds inside the run)
through a deployment URL, one after another, until stdin closes; then every
stream is reported as JSON on stdout. Each run's "thread_id run_id" is
appended to STARTED as soon as its stream announces it, for the test to
find the runs in flight.

A stream that breaks (its API replica was on a node that went away) is
rejoined, as a client is told to: runs.join_stream on the same run, through
the same URL, which the proxy sends to a replica that still answers; the
run's events come from Redis and PostgreSQL, wherever it executes. Each
stream reports its run id, whether it was rejoined, its outcome
("completed": the last values event holds the echoed word) and any error.

usage: swarm_load.py URL API_KEY CLIENTS SLEEP STARTED  (stop: close stdin)
"""

import asyncio
import json
import sys
import time
import uuid

import httpx
from langgraph_sdk import get_client


async def one_stream(client, sleep, out, started):
    word = uuid.uuid4().hex
    rec = {"start": time.time(), "run_id": None, "thread_id": None, "rejoins": 0, "errors": []}
    out.append(rec)
    last = None
    try:
        thread = await client.threads.create()
        rec["thread_id"] = thread["thread_id"]
    except Exception as err:
        rec["outcome"] = "create_failed"
        rec["errors"].append(repr(err)[:300])
        return
    stream = client.runs.stream(rec["thread_id"], "agent",
                                input={"messages": [{"type": "human", "content": word}], "sleep": sleep},
                                stream_mode="values")
    deadline = time.time() + 180
    while True:
        try:
            async for part in stream:
                if part.event == "metadata" and rec["run_id"] is None:
                    rec["run_id"] = part.data.get("run_id")
                    started.write("%s %s\n" % (rec["thread_id"], rec["run_id"]))
                    started.flush()
                elif part.event == "values":
                    last = part.data
                elif part.event == "error":
                    rec["errors"].append("error event: " + json.dumps(part.data)[:300])
            break
        except Exception as err:
            rec["errors"].append("%s at %.1f" % (repr(err)[:200], time.time()))
            if rec["run_id"] is None or time.time() > deadline:
                rec["outcome"] = "failed"
                return
            # The documented retry: join the run again.
            rec["rejoins"] += 1
            await asyncio.sleep(1)
            stream = client.runs.join_stream(rec["thread_id"], rec["run_id"], stream_mode="values")
    msgs = (last or {}).get("messages") or []
    rec["outcome"] = "completed" if msgs and msgs[-1].get("content") == word else "truncated"
    rec["end"] = time.time()


async def client_loop(url, key, sleep, stop, out, started):
    client = get_client(url=url, api_key=key, timeout=httpx.Timeout(120.0))
    while not stop.is_set():
        await one_stream(client, sleep, out, started)


async def main(url, key, clients, sleep, started_path):
    out = []
    started = open(started_path, "a")
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    loop.run_in_executor(None, lambda: (sys.stdin.read(), loop.call_soon_threadsafe(stop.set)))
    await asyncio.gather(*(client_loop(url, key, float(sleep), stop, out, started) for _ in range(int(clients))))
    print(json.dumps(out))


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:]))
