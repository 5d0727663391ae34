"""State operations and cancellation through the official SDK, as the
reference servers answer them (testdata/graphs/py-agent/stateops.json):
cancel is recorded before it answers, supersteps on thread create, and
update_state as a node of a graph a factory builds from the config."""

import asyncio
import time

import pytest
from langgraph_sdk import get_client
from langgraph_sdk.errors import APIStatusError

from conftest import PROJECT, Agent


@pytest.fixture(scope="module")
def stateops_agent():
    a = Agent(PROJECT / "stateops.json")
    a.start()
    yield a
    a.close()


@pytest.fixture
def sclient(stateops_agent):
    return get_client(url=stateops_agent.url, timeout=30)


async def started_run(client, **kwargs) -> tuple[str, str]:
    """A lingering run, once its node is running."""
    thread = await client.threads.create()
    run_id = None
    async for chunk in client.runs.stream(thread["thread_id"], "lingering", input={}, stream_mode=["custom"], **kwargs):
        if chunk.event == "metadata":
            run_id = chunk.data["run_id"]
        if chunk.event == "custom":
            break
    return thread["thread_id"], run_id


async def test_a_cancelled_run_reads_interrupted_as_soon_as_cancel_answers(sclient):
    thread_id, run_id = await started_run(sclient)
    t0 = time.monotonic()
    await sclient.runs.cancel(thread_id, run_id)  # no wait: 202
    run = await sclient.runs.get(thread_id, run_id)
    assert run["status"] == "interrupted", run
    # The node was still cleaning up (800 ms): the answer did not wait for it.
    assert time.monotonic() - t0 < 0.7
    await sclient.runs.join(thread_id, run_id)
    assert (await sclient.runs.get(thread_id, run_id))["status"] == "interrupted"
    assert (await sclient.threads.get(thread_id))["status"] != "busy"


async def test_rollback_cancel_ends_the_run_at_once_then_it_is_gone(sclient):
    thread_id, run_id = await started_run(sclient)
    await sclient.runs.cancel(thread_id, run_id, action="rollback")
    # Ended right away: interrupted while it unwinds (the reference, with
    # nobody streaming it, deletes it at once).
    try:
        assert (await sclient.runs.get(thread_id, run_id))["status"] == "interrupted"
    except APIStatusError as e:
        assert e.response.status_code == 404
    # Once it has unwound, the rollback deletes it.
    end = time.monotonic() + 15
    while (await sclient.threads.get(thread_id))["status"] == "busy" and time.monotonic() < end:
        await asyncio.sleep(0.02)
    with pytest.raises(APIStatusError) as e:
        await sclient.runs.get(thread_id, run_id)
    assert e.value.response.status_code == 404


async def test_cancel_many_by_ids_and_by_status(sclient):
    thread_id, run_id = await started_run(sclient)
    await sclient.runs.cancel_many(thread_id=thread_id, run_ids=[run_id])
    assert (await sclient.runs.get(thread_id, run_id))["status"] == "interrupted"

    other_thread, other_run = await started_run(sclient)
    await sclient.runs.cancel_many(status="running")
    assert (await sclient.runs.get(other_thread, other_run))["status"] == "interrupted"
    await sclient.runs.join(other_thread, other_run)

    # Nothing left to cancel once the first run has unwound (its node
    # cleans up for 800 ms): 404, as on the reference servers. Until then
    # its thread is busy with it and a second cancel is taken (it may turn
    # the interrupt into a rollback); with several workers, the join above
    # can return before the first run's worker is done.
    end = time.monotonic() + 15
    while (await sclient.threads.get(thread_id))["status"] == "busy" and time.monotonic() < end:
        await asyncio.sleep(0.02)
    with pytest.raises(APIStatusError) as e:
        await sclient.runs.cancel_many(thread_id=thread_id, run_ids=[run_id])
    assert e.value.response.status_code == 404


async def test_supersteps_on_create_apply_each_superstep_as_a_checkpoint(sclient):
    thread = await sclient.threads.create(
        graph_id="steps",
        supersteps=[
            {"updates": [{"values": {"steps": ["a"]}, "as_node": "one"}]},
            {"updates": [{"values": {"steps": ["b"]}, "as_node": "two"}]},
        ],
    )
    assert thread["values"] == {"steps": ["a", "b"]}
    state = await sclient.threads.get_state(thread["thread_id"])
    assert state["values"] == {"steps": ["a", "b"]}
    assert state["next"] == ["three"]
    history = await sclient.threads.get_history(thread["thread_id"])
    updates = [h["values"] for h in history if h["metadata"].get("source") == "update"]
    assert updates == [{"steps": ["a", "b"]}, {"steps": ["a"]}]
    # The thread continues from where the supersteps left it.
    out = await sclient.runs.wait(thread["thread_id"], "steps", input=None)
    assert out["steps"] == ["a", "b", "three"]


async def test_supersteps_that_fail_leave_no_thread(sclient):
    tid = "2b8e1c9e-7d0e-4d7e-9a55-0f3c2a1b9e01"
    with pytest.raises(APIStatusError) as e:
        await sclient.threads.create(
            thread_id=tid,
            graph_id="steps",
            supersteps=[
                {"updates": [{"values": {"steps": ["a"]}, "as_node": "one"}]},
                {"updates": [{"values": {"steps": ["b"]}, "as_node": "no_such_node"}]},
            ],
        )
    # The graph's refusal, in the reference's status and words.
    assert e.value.response.status_code == 400
    assert "no_such_node" in e.value.response.json()["detail"]
    with pytest.raises(APIStatusError) as e:
        await sclient.threads.get(tid)
    assert e.value.response.status_code == 404
    # Without a graph there is no node to apply the updates as.
    with pytest.raises(APIStatusError) as e:
        await sclient.threads.create(supersteps=[{"updates": [{"values": {"steps": ["a"]}, "as_node": "one"}]}])
    assert e.value.response.status_code == 400


async def test_update_state_as_a_node_of_a_graph_built_from_the_assistants_config(sclient):
    assistant = await sclient.assistants.create("configured", config={"configurable": {"nodes": ["draft", "review"]}})
    thread = await sclient.threads.create()
    out = await sclient.runs.wait(thread["thread_id"], assistant["assistant_id"], input={})
    assert out == {"trail": ["draft", "review"]}
    # "draft" exists only in the graph made from the assistant's config.
    await sclient.threads.update_state(thread["thread_id"], {"trail": ["edited"]}, as_node="draft")
    state = await sclient.threads.get_state(thread["thread_id"])
    assert state["values"]["trail"] == ["draft", "review", "edited"]
    assert state["next"] == ["review"]


async def test_update_state_as_a_node_of_a_graph_built_from_the_runs_config(sclient):
    thread = await sclient.threads.create()
    await sclient.runs.wait(thread["thread_id"], "configured", input={}, config={"configurable": {"nodes": ["plan", "act"]}})
    await sclient.threads.update_state(thread["thread_id"], {"trail": ["fixed"]}, as_node="act")
    state = await sclient.threads.get_state(thread["thread_id"])
    assert state["values"]["trail"] == ["plan", "act", "fixed"]
    assert state["next"] == []
