"""agent.test.mjs through the official Python SDK (langgraph-sdk): the same
scenarios and assertions, one test for each of its tests, against a real
`slipway agent` or a deployment URL (AGENT_URL, LANGGRAPH_API_KEY). The
client (conftest.py) has the SDK's retries turned off.

Both suites may run against the same agent one after the other, so what
one leaves behind must not count in the other: the store's namespace and
the sorted assistants' metadata carry this run's SUITE tag (the JS suite
uses fixed ones)."""

import asyncio
import time
import uuid
from datetime import datetime, timezone

import pytest
from langgraph_sdk.errors import APIStatusError, ConflictError, NotFoundError

SUITE = f"py-{uuid.uuid4().hex[:8]}"


def human(content):
    return {"messages": [{"role": "user", "content": content}]}


def contents(state):
    return [m["content"] for m in state["values"]["messages"]]


def utc(date: str) -> datetime:
    return datetime.fromisoformat(date.replace("Z", "+00:00")).astimezone(timezone.utc)


async def test_reject_while_the_first_run_finishes_state_holds_only_its_messages(client):
    thread = await client.threads.create()
    first = await client.runs.create(thread["thread_id"], "echo", input={**human("hello"), "sleep": 1})
    with pytest.raises(ConflictError) as rejected:
        await client.runs.create(thread["thread_id"], "echo", input=human("second"), multitask_strategy="reject")
    assert rejected.value.status_code == 409
    assert "Thread is already running a task" in rejected.value.message
    await client.runs.join(thread["thread_id"], first["run_id"])
    state = await client.threads.get_state(thread["thread_id"])
    msgs = state["values"]["messages"]
    assert len(msgs) == 2
    assert [[m["type"], m["content"]] for m in msgs] == [["human", "hello"], ["ai", "hello"]]
    run = await client.runs.get(thread["thread_id"], first["run_id"])
    assert run["status"] == "success"


async def test_interrupt_rollback_and_enqueue(client):
    t1 = await client.threads.create()
    slow = await client.runs.create(t1["thread_id"], "echo", input={**human("one"), "sleep": 5})
    await asyncio.sleep(0.2)
    fast = await client.runs.create(t1["thread_id"], "echo", input=human("two"), multitask_strategy="interrupt")
    await client.runs.join(t1["thread_id"], fast["run_id"])
    assert (await client.runs.get(t1["thread_id"], slow["run_id"]))["status"] == "interrupted"

    t2 = await client.threads.create()
    doomed = await client.runs.create(t2["thread_id"], "echo", input={**human("one"), "sleep": 5})
    await asyncio.sleep(0.2)
    kept = await client.runs.create(t2["thread_id"], "echo", input=human("two"), multitask_strategy="rollback")
    await client.runs.join(t2["thread_id"], kept["run_id"])
    with pytest.raises(NotFoundError):
        await client.runs.get(t2["thread_id"], doomed["run_id"])
    assert contents(await client.threads.get_state(t2["thread_id"])) == ["two", "two"]

    t3 = await client.threads.create()
    a = await client.runs.create(t3["thread_id"], "echo", input={**human("a"), "sleep": 0.3})
    b = await client.runs.create(t3["thread_id"], "echo", input=human("b"), multitask_strategy="enqueue")
    assert b["status"] == "pending"
    await client.runs.join(t3["thread_id"], b["run_id"])
    assert (await client.runs.get(t3["thread_id"], a["run_id"]))["status"] == "success"
    assert contents(await client.threads.get_state(t3["thread_id"])) == ["a", "a", "b", "b"]


async def test_runs_stream_yields_metadata_values_and_updates(client):
    thread = await client.threads.create()
    created = []
    events = [
        part
        async for part in client.runs.stream(
            thread["thread_id"],
            "echo",
            input=human("stream me"),
            stream_mode=["values", "updates"],
            on_run_created=created.append,
        )
    ]
    assert events[0].event == "metadata"
    assert created and created[0]["run_id"], "on_run_created saw the run id from Content-Location"
    updates = [e for e in events if e.event == "updates"]
    assert len(updates) == 1
    assert updates[0].data["echo"]["messages"][0]["content"] == "stream me"
    last = [e for e in events if e.event == "values"][-1]
    assert [m["type"] for m in last.data["messages"]] == ["human", "ai"]


async def test_runs_wait_returns_the_final_values_a_failed_run_raises(client):
    thread = await client.threads.create()
    values = await client.runs.wait(thread["thread_id"], "echo", input=human("wait for me"))
    assert values["messages"][-1]["content"] == "wait for me"
    # The SDK raises a plain Exception("<error>: <message>") for a run that
    # ended in an error (raise_error, its default).
    with pytest.raises(Exception, match="GraphError"):
        await client.runs.wait(thread["thread_id"], "echo", input={"sleep": "forever"})
    # The thread shows its last run's error (the reference's thread error).
    failed = await client.threads.get(thread["thread_id"])
    assert failed["status"] == "error"
    assert failed["error"]["error"] == "GraphError"
    await client.runs.wait(thread["thread_id"], "echo", input=human("again"))
    assert (await client.threads.get(thread["thread_id"]))["error"] is None
    stateless = await client.runs.wait(None, "echo", input=human("no thread"))
    assert stateless["messages"][-1]["content"] == "no thread"


async def test_runs_cancel_interrupts_a_running_run(client):
    thread = await client.threads.create()
    run = await client.runs.create(thread["thread_id"], "echo", input={**human("long"), "sleep": 10})
    await asyncio.sleep(0.2)
    await client.runs.cancel(thread["thread_id"], run["run_id"], wait=True)
    assert (await client.runs.get(thread["thread_id"], run["run_id"]))["status"] == "interrupted"
    thread_after = await client.threads.get(thread["thread_id"])
    # The thread's error says so, in the reference's words.
    assert thread_after["error"] == {
        "error": "UserInterrupt",
        "message": "interrupt requested via POST /threads/{thread_id}/runs/{run_id}/cancel",
    }
    runs = await client.runs.list(thread["thread_id"])
    assert len(runs) == 1


async def test_threads_search_and_history(client):
    tag = f"t-{time.time_ns()}"
    thread = await client.threads.create(metadata={"tag": tag})
    await client.runs.wait(thread["thread_id"], "echo", input=human("one"))
    await client.runs.wait(thread["thread_id"], "echo", input=human("two"))
    found = await client.threads.search(metadata={"tag": tag})
    assert len(found) == 1
    assert found[0]["thread_id"] == thread["thread_id"]
    assert found[0]["status"] == "idle"
    history = await client.threads.get_history(thread["thread_id"], limit=10)
    assert len(history) >= 4, f"history has {len(history)} states"
    assert len(history[0]["values"]["messages"]) == 4, "newest first"
    copy = await client.threads.copy(thread["thread_id"])
    assert len((await client.threads.get_state(copy["thread_id"]))["values"]["messages"]) == 4
    await client.threads.update(thread["thread_id"], metadata={"more": 1})
    assert (await client.threads.get(thread["thread_id"]))["metadata"]["more"] == 1
    await client.threads.delete(copy["thread_id"])
    with pytest.raises(NotFoundError):
        await client.threads.get(copy["thread_id"])


async def test_store_put_get_search(client):
    users = f"users-{SUITE}"
    await client.store.put_item([users, "u1"], "prefs", {"theme": "dark"})
    await client.store.put_item([users, "u2"], "prefs", {"theme": "light"})
    item = await client.store.get_item([users, "u1"], "prefs")
    assert item["value"] == {"theme": "dark"}
    everyone = await client.store.search_items([users])
    assert len(everyone["items"]) == 2
    dark = await client.store.search_items([users], filter={"theme": "dark"})
    assert [i["namespace"] for i in dark["items"]] == [[users, "u1"]]
    await client.store.delete_item([users, "u2"], "prefs")
    assert len((await client.store.search_items([users]))["items"]) == 1


async def test_assistants_the_graphs_default_assistant_and_a_new_one(client):
    found = await client.assistants.search(graph_id="echo")
    assert len(found) >= 1
    created = await client.assistants.create("echo", name="polite echo", metadata={"team": "a"})
    thread = await client.threads.create()
    values = await client.runs.wait(thread["thread_id"], created["assistant_id"], input=human("via assistant"))
    assert values["messages"][-1]["content"] == "via assistant"


async def test_assistants_search_sorted_by_name_and_by_creation(client):
    for name in ["sort-b", "Sort-A", "sort-c"]:
        await client.assistants.create("echo", name=name, metadata={"sorted": SUITE})
    by_name = await client.assistants.search(metadata={"sorted": SUITE}, sort_by="name", sort_order="asc")
    assert [a["name"] for a in by_name] == ["Sort-A", "sort-b", "sort-c"]
    oldest = await client.assistants.search(metadata={"sorted": SUITE}, sort_by="created_at", sort_order="asc")
    assert [a["name"] for a in oldest] == ["sort-b", "Sort-A", "sort-c"]


async def test_assistants_versions_and_going_back_to_one(client):
    a = await client.assistants.create("echo", name="v1")
    await client.assistants.update(a["assistant_id"], name="v2")
    versions = await client.assistants.get_versions(a["assistant_id"])
    assert [[v["version"], v["name"]] for v in versions] == [[2, "v2"], [1, "v1"]]
    back = await client.assistants.set_latest(a["assistant_id"], 1)
    assert back["name"] == "v1"
    assert (await client.assistants.get(a["assistant_id"]))["version"] == 1
    with pytest.raises(NotFoundError):
        await client.assistants.set_latest(a["assistant_id"], 7)


async def test_runs_create_batch_and_the_state_at_an_earlier_checkpoint(client):
    runs = await client.runs.create_batch(
        [{"assistant_id": "echo", "input": human("b1")}, {"assistant_id": "echo", "input": human("b2")}]
    )
    assert len(runs) == 2
    assert runs[0]["run_id"] != runs[1]["run_id"]
    assert runs[0]["thread_id"] != runs[1]["thread_id"], "each stateless run has its own thread"

    thread = await client.threads.create()
    await client.runs.wait(thread["thread_id"], "echo", input=human("first"))
    await client.runs.wait(thread["thread_id"], "echo", input=human("second"))
    history = await client.threads.get_history(thread["thread_id"], limit=10)
    after_first = next((s for s in history if len(s["values"].get("messages") or []) == 2), None)
    assert after_first, "history holds the state after the first run"
    # The JS SDK's getState takes a checkpoint or its id in one argument;
    # the Python SDK has a parameter for each (POST .../state/checkpoint and
    # GET .../state/{checkpoint_id}, as the JS SDK sends them).
    for at in [{"checkpoint": after_first["checkpoint"]}, {"checkpoint_id": after_first["checkpoint"]["checkpoint_id"]}]:
        then = await client.threads.get_state(thread["thread_id"], **at)
        assert contents(then) == ["first", "first"]
    assert len((await client.threads.get_state(thread["thread_id"]))["values"]["messages"]) == 4


async def test_human_in_the_loop_a_command_graph_interrupts_command_resume_answers(client):
    thread = await client.threads.create()
    run = await client.runs.create(thread["thread_id"], "counter", input={"interrupt": "approve the refund?"})
    await client.runs.join(thread["thread_id"], run["run_id"])
    asking = await client.threads.get(thread["thread_id"])
    assert asking["status"] == "interrupted"
    state = await client.threads.get_state(thread["thread_id"])
    assert [i["value"] for i in state["interrupts"]] == ["approve the refund?"]
    values = await client.runs.wait(thread["thread_id"], "counter", command={"resume": "yes"})
    assert values["messages"][-1]["content"] == "resumed with yes"
    answered = await client.threads.get(thread["thread_id"])
    assert answered["status"] == "idle"
    assert answered["interrupts"] == {}


async def test_crons_create_on_a_thread_and_stateless_search_count_update_delete(client):
    thread = await client.threads.create()
    tick = {"messages": [{"role": "user", "content": "tick"}]}
    on_thread = await client.crons.create_for_thread(
        thread["thread_id"], "echo", schedule="*/5 * * * *", input=tick, metadata={"owner": "py"}
    )
    assert on_thread["thread_id"] == thread["thread_id"]
    assert on_thread["schedule"] == "*/5 * * * *"
    assert on_thread["enabled"] is True
    assert on_thread["on_run_completed"] is None
    assert on_thread["payload"]["config"]["configurable"]["cron_id"] == on_thread["cron_id"]
    nxt = utc(on_thread["next_run_date"])
    assert nxt > datetime.now(timezone.utc) and nxt.minute % 5 == 0 and nxt.second == 0, on_thread["next_run_date"]

    stateless = await client.crons.create("echo", schedule="0 9 * * 1", input=tick, on_run_completed="keep", enabled=False)
    assert stateless["thread_id"] is None
    assert stateless["on_run_completed"] == "keep"
    assert stateless["enabled"] is False

    every = await client.crons.search(assistant_id=on_thread["assistant_id"], limit=10)
    ids = [c["cron_id"] for c in every]
    assert on_thread["cron_id"] in ids and stateless["cron_id"] in ids
    mine = await client.crons.search(thread_id=thread["thread_id"])
    assert [c["cron_id"] for c in mine] == [on_thread["cron_id"]]
    disabled = await client.crons.search(enabled=False, select=["cron_id", "enabled"])
    assert all(len(c) == 2 and c["enabled"] is False for c in disabled)
    assert stateless["cron_id"] in [c["cron_id"] for c in disabled]
    by_next = await client.crons.search(sort_by="next_run_date", sort_order="asc", limit=100)
    for earlier, later in zip(by_next, by_next[1:]):
        assert earlier["next_run_date"] <= later["next_run_date"]
    assert await client.crons.count(thread_id=thread["thread_id"]) == 1

    updated = await client.crons.update(stateless["cron_id"], schedule="30 8 * * *", enabled=True, metadata={"v": 2})
    assert updated["schedule"] == "30 8 * * *"
    assert updated["enabled"] is True
    assert updated["metadata"]["v"] == 2
    assert utc(updated["next_run_date"]).hour == 8

    with pytest.raises(APIStatusError) as bad:
        await client.crons.create("echo", schedule="every minute")
    assert bad.value.status_code == 422 or "Invalid cron schedule" in bad.value.message
    await client.crons.delete(on_thread["cron_id"])
    await client.crons.delete(stateless["cron_id"])
    assert await client.crons.count(thread_id=thread["thread_id"]) == 0
    with pytest.raises(APIStatusError) as gone:
        await client.crons.delete(on_thread["cron_id"])
    assert gone.value.status_code == 404 or "not found" in gone.value.message
