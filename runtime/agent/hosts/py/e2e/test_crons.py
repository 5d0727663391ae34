"""Crons through the official Python SDK: create (on a thread and
stateless), search, count, update, delete, with the reference's shapes.
Firing is tested in Go on the engine's clock (runtime/agent/crons_test.go)
and across a kill -9 (runtime/agent/agentapi/crons_http_test.go): a
schedule's dates are at least a minute apart."""

from datetime import datetime, timedelta, timezone

import pytest
from langgraph_sdk.errors import APIStatusError


async def test_crons_create_search_count_update_delete(client):
    thread = await client.threads.create()
    on_thread = await client.crons.create_for_thread(
        thread["thread_id"], "steps", schedule="*/10 * * * *", input={}, metadata={"owner": "py"}
    )
    assert on_thread["thread_id"] == thread["thread_id"]
    assert on_thread["on_run_completed"] is None and on_thread["enabled"] is True
    assert on_thread["payload"]["config"]["configurable"]["cron_id"] == on_thread["cron_id"]
    nxt = datetime.fromisoformat(on_thread["next_run_date"].replace("Z", "+00:00"))
    assert nxt > datetime.now(timezone.utc) and nxt.minute % 10 == 0 and nxt.second == 0

    end = datetime.now(timezone.utc) + timedelta(days=30)
    stateless = await client.crons.create(
        "steps", schedule="0 9 * * *", input={}, timezone="America/New_York", end_time=end, enabled=False
    )
    assert stateless["thread_id"] is None and stateless["on_run_completed"] == "delete"
    assert stateless["timezone"] == "America/New_York" and stateless["enabled"] is False
    at = datetime.fromisoformat(stateless["next_run_date"].replace("Z", "+00:00"))
    # 9:00 in New York is 13:00 or 14:00 UTC.
    assert at.hour in (13, 14) and at.minute == 0

    mine = await client.crons.search(thread_id=thread["thread_id"])
    assert [c["cron_id"] for c in mine] == [on_thread["cron_id"]]
    disabled = await client.crons.search(enabled=False, select=["cron_id", "enabled"])
    assert stateless["cron_id"] in [c["cron_id"] for c in disabled]
    assert all(set(c) == {"cron_id", "enabled"} for c in disabled)
    by_next = await client.crons.search(sort_by="next_run_date", sort_order="asc", limit=100)
    dates = [c["next_run_date"] for c in by_next]
    assert dates == sorted(dates)
    assert await client.crons.count(thread_id=thread["thread_id"]) == 1

    updated = await client.crons.update(stateless["cron_id"], enabled=True, end_time=None, timezone="UTC", schedule="15 6 * * *")
    assert updated["enabled"] is True and updated["end_time"] is None and updated["timezone"] == "UTC"
    at = datetime.fromisoformat(updated["next_run_date"].replace("Z", "+00:00"))
    assert (at.hour, at.minute) == (6, 15)

    with pytest.raises(APIStatusError) as bad:
        await client.crons.create("steps", schedule="61 * * * *")
    assert bad.value.response.status_code == 422

    await client.crons.delete(on_thread["cron_id"])
    await client.crons.delete(stateless["cron_id"])
    assert await client.crons.count(thread_id=thread["thread_id"]) == 0
    with pytest.raises(APIStatusError) as gone:
        await client.crons.delete(on_thread["cron_id"])
    assert gone.value.response.status_code == 404
