"""Runs one corpus project's graph through the official Python SDK.

python sdk.py PROJECT URL API_KEY prints one JSON line: {"answer": ...}
when the run completed, {"error": ...} when it failed (on the docker
runtime the fake model may be out of the agent's reach).
"""

import asyncio
import json
import sys

from langgraph_sdk import get_client

FAKE = {"model": "openai/gpt-4o-mini"}


async def scenario(project: str, client) -> str:
    hi = {"messages": [{"role": "user", "content": "hi"}]}
    if project == "new-langgraph-project":
        out = await client.runs.wait(None, "agent", input={"changeme": "x"}, context={"my_configurable_param": "the SDK"})
        return out["changeme"]
    if project == "agent-inbox-langgraph-example":
        thread = await client.threads.create()
        await client.runs.wait(thread["thread_id"], "agent", input={})
        state = await client.threads.get_state(thread["thread_id"])
        asked = state["interrupts"][0]["value"][0]["action_request"]["action"]
        out = await client.runs.wait(thread["thread_id"], "agent", command={"resume": [{"type": "accept", "args": None}]})
        return f'{asked}: {out["interrupt_response"]}'
    if project == "react-agent":
        out = await client.runs.wait(None, "agent", input=hi, context=FAKE)
        return out["messages"][-1]["content"]
    if project == "memory-agent":
        thread = await client.threads.create()
        out = await client.runs.wait(thread["thread_id"], "agent", input=hi, context={**FAKE, "user_id": "corpus"})
        return out["messages"][-1]["content"]
    raise SystemExit(f"no scenario for {project}")


async def main(project: str, url: str, key: str) -> None:
    client = get_client(url=url, api_key=key)
    try:
        print(json.dumps({"answer": await scenario(project, client)}))
    except Exception as err:  # noqa: BLE001 - reported to the Go test
        print(json.dumps({"error": f"{type(err).__name__}: {err}"}))


asyncio.run(main(*sys.argv[1:]))
