"""Soak clients: N official-SDK clients stream runs through a deployment URL
for a given time and report what became of every stream, as JSON on stdout.

Each stream is a new thread, then runs.stream of the echo graph (which
sleeps a little, so that switches and kills land inside streams). A stream
is "completed" when it ends with the echoed message in its last values
event, "error_event" when the SDK yielded an `error` event; anything else
that ended without an exception is "truncated" (silently cut). HTTP errors
are counted by status, other exceptions by type. Every run that announced
its id is then looked up: one the agent no longer knows is "lost". No
request is retried here: the SDK's own behaviour is what a user gets.

usage: soak_clients.py URL API_KEY CLIENTS  (stop: close stdin)
"""

import asyncio
import collections
import json
import sys
import time
import uuid

import httpx
from langgraph_sdk import get_client


async def one_stream(client, counts, samples, failures):
    word = uuid.uuid4().hex
    run_id = thread_id = None
    outcome = None
    try:
        thread = await client.threads.create()
        thread_id = thread["thread_id"]
        last = None
        async for part in client.runs.stream(
            thread_id,
            "agent",
            input={"messages": [{"type": "human", "content": word}], "sleep": 0.2},
            stream_mode="values",
        ):
            if part.event == "metadata":
                run_id = part.data.get("run_id")
            elif part.event == "values":
                last = part.data
            elif part.event == "error":
                outcome = "error_event"
                samples.setdefault("error_event", json.dumps(part.data)[:300])
        if outcome is None:
            msgs = (last or {}).get("messages") or []
            if msgs and msgs[-1].get("content") == word:
                outcome = "completed"
            else:
                outcome = "truncated"
                samples.setdefault("truncated", json.dumps(last)[:300])
    except httpx.HTTPStatusError as err:
        outcome = "http_%d" % err.response.status_code
        samples.setdefault(outcome, err.response.text[:300])
        failures.append({"at": time.time(), "outcome": outcome, "detail": err.response.text[:300]})
    except Exception as err:  # a broken stream or connection
        outcome = "exception_" + type(err).__name__
        samples.setdefault(outcome, repr(err)[:300])
    counts[outcome] += 1
    if run_id and thread_id:
        try:
            await client.runs.get(thread_id, run_id)
        except httpx.HTTPStatusError as err:
            key = "lost" if err.response.status_code == 404 else "lookup_http_%d" % err.response.status_code
            counts[key] += 1
            failures.append({"at": time.time(), "outcome": key, "detail": err.response.text[:300]})
            samples.setdefault(key, "%s: %s" % (run_id, err.response.text[:200]))
        except Exception as err:
            counts["lookup_exception"] += 1
            samples.setdefault("lookup_exception", repr(err)[:300])


async def client_loop(url, key, stop, counts, samples, failures):
    client = get_client(url=url, api_key=key, timeout=httpx.Timeout(120.0))
    while not stop.is_set():
        await one_stream(client, counts, samples, failures)
        counts["streams"] += 1


async def main(url, key, clients):
    counts = collections.Counter()
    samples = {}
    failures = []  # HTTP errors with their time, for the test to place
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    # The test closes stdin once its switches and kills are done.
    loop.run_in_executor(None, lambda: (sys.stdin.read(), loop.call_soon_threadsafe(stop.set)))
    start = time.monotonic()
    await asyncio.gather(*(client_loop(url, key, stop, counts, samples, failures) for _ in range(int(clients))))
    print(json.dumps({"counts": counts, "samples": samples, "failures": failures, "seconds": time.monotonic() - start}))


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:]))
