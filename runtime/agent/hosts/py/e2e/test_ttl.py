"""Thread TTLs through the official Python SDK: threads.create(ttl=...)
(a bare number becomes {"ttl": n, "strategy": "delete"} in the SDK),
threads.update(ttl=...), threads.get(include=["ttl"]), and
threads.prune(..., strategy="keep_latest") on a LangGraph graph's thread.
The sweeper itself runs on the engine's clock in Go
(runtime/agent/ttl_test.go, ttl_pyhost_test.go)."""

from datetime import datetime, timedelta, timezone

import pytest
from langgraph_sdk.errors import APIStatusError


def when(s: str) -> datetime:
    return datetime.fromisoformat(s.replace("Z", "+00:00"))


async def test_ttl_create_get_update(client):
    t = await client.threads.create(ttl=30)
    assert "ttl" not in t
    got = await client.threads.get(t["thread_id"], include=["ttl"])
    ttl = got["ttl"]
    assert ttl["strategy"] == "delete" and ttl["ttl_minutes"] == 30
    assert when(ttl["expires_at"]) - when(got["updated_at"]) == timedelta(minutes=30)
    assert "ttl" not in await client.threads.get(t["thread_id"])

    k = await client.threads.create(ttl={"ttl": 90, "strategy": "keep_latest"})
    assert (await client.threads.get(k["thread_id"], include=["ttl"]))["ttl"]["strategy"] == "keep_latest"

    await client.threads.update(t["thread_id"], metadata={"a": 1}, ttl={"ttl": 5, "strategy": "keep_latest"})
    got = await client.threads.get(t["thread_id"], include=["ttl"])
    assert got["metadata"]["a"] == 1 and got["ttl"]["ttl_minutes"] == 5 and got["ttl"]["strategy"] == "keep_latest"
    assert when(got["ttl"]["expires_at"]) > datetime.now(timezone.utc)

    plain = await client.threads.create()
    assert "ttl" not in await client.threads.get(plain["thread_id"], include=["ttl"])

    with pytest.raises(APIStatusError) as bad:
        await client.threads.create(ttl={"ttl": 5, "strategy": "archive"})
    assert bad.value.response.status_code == 422


async def test_prune_keep_latest_on_a_graph_thread(client):
    t = await client.threads.create()
    tid = t["thread_id"]
    for _ in range(2):
        await client.runs.wait(tid, "steps", input={})
    before = await client.threads.get_state(tid)
    assert before["values"]["steps"] == ["one", "two", "three"] * 2
    assert len(await client.threads.get_history(tid, limit=100)) > 2

    assert await client.threads.prune([tid], strategy="keep_latest") == {"pruned_count": 1}
    after = await client.threads.get_state(tid)
    assert after["values"] == before["values"]
    assert after["checkpoint"]["checkpoint_id"] == before["checkpoint"]["checkpoint_id"]
    hist = await client.threads.get_history(tid, limit=100)
    assert [h["checkpoint"]["checkpoint_id"] for h in hist] == [before["checkpoint"]["checkpoint_id"]]

    out = await client.runs.wait(tid, "steps", input={})
    assert out["steps"] == ["one", "two", "three"] * 3

    assert await client.threads.prune([tid]) == {"pruned_count": 1}
    with pytest.raises(APIStatusError) as gone:
        await client.threads.get(tid)
    assert gone.value.response.status_code == 404
