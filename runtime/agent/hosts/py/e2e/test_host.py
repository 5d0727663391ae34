"""Drives LangGraph Python graphs (testdata/graphs/py-agent) served by a real
`slipway agent` through the official langgraph-sdk: the scenarios of the
JavaScript host's suites, on the Python host."""

import asyncio
import hashlib
import os
import signal
import time

import httpx
import pytest
from langgraph_sdk import get_client
from langgraph_sdk.errors import APIStatusError


def human(content: str) -> dict:
    return {"messages": [{"role": "user", "content": content}]}


async def collect(stream) -> list:
    return [chunk async for chunk in stream]


async def wait_status(client, thread_id: str, run_id: str, want: tuple, seconds: float = 15) -> dict:
    end = time.monotonic() + seconds
    while True:
        run = await client.runs.get(thread_id, run_id)
        if run["status"] in want or time.monotonic() > end:
            return run
        await asyncio.sleep(0.05)


async def cancel_a_spin(client, thread_id: str, run_id: str, pid: int, failure: str) -> None:
    """Cancels a run of `spin` (a synchronous node that never returns): it
    ends interrupted, and past the cancel grace period the host process
    that runs it (pid) is restarted, so that process ends."""
    await client.runs.cancel(thread_id, run_id, wait=True)
    assert (await client.runs.get(thread_id, run_id))["status"] == "interrupted"
    for _ in range(200):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        await asyncio.sleep(0.05)
    pytest.fail(failure)


def slow(ms: int) -> dict:
    return {"input": {}, "config": {"configurable": {"delay_ms": ms}}}


async def test_react_agent_streams_updates_and_message_tuples(client):
    thread = await client.threads.create()
    chunks = await collect(
        client.runs.stream(thread["thread_id"], "react", input=human("weather in Paris"), stream_mode=["updates", "messages-tuple"])
    )
    assert chunks[0].event == "metadata"
    updates = [next(iter(c.data)) for c in chunks if c.event == "updates"]
    assert updates == ["agent", "tools", "agent"]
    tuples = [c for c in chunks if c.event == "messages"]
    assert len(tuples) > 3, "model tokens arrive as message tuples"
    msg, meta = tuples[-1].data
    assert msg["type"] in ("ai", "AIMessageChunk")
    assert meta["langgraph_node"] == "agent"

    state = await client.threads.get_state(thread["thread_id"])
    assert [(m["type"], m["content"]) for m in state["values"]["messages"]] == [
        ("human", "weather in Paris"),
        ("ai", ""),
        ("tool", "It is sunny in Paris."),
        ("ai", "The tool says: It is sunny in Paris."),
    ]
    assert state["values"]["messages"][1]["tool_calls"][0]["name"] == "get_weather"
    assert state["next"] == []
    history = await client.threads.get_history(thread["thread_id"])
    assert [h["metadata"]["step"] for h in history] == [3, 2, 1, 0, -1]
    assert history[1]["checkpoint"]["checkpoint_id"] == state["parent_checkpoint"]["checkpoint_id"]
    t = await client.threads.get(thread["thread_id"])
    assert t["status"] == "idle"
    assert len(t["values"]["messages"]) == 4

    # A second turn continues the conversation from the checkpoints.
    await client.runs.wait(thread["thread_id"], "react", input=human("and in Rome"))
    after = await client.threads.get_state(thread["thread_id"])
    assert len(after["values"]["messages"]) == 8
    assert after["values"]["messages"][-1]["content"] == "The tool says: It is sunny in Rome."


async def test_messages_mode_builds_partial_messages(client):
    thread = await client.threads.create()
    chunks = await collect(client.runs.stream(thread["thread_id"], "react", input=human("weather in Oslo"), stream_mode="messages"))
    names = {c.event for c in chunks}
    assert {"messages/metadata", "messages/partial"} <= names, names
    partials = [c.data[0] for c in chunks if c.event == "messages/partial"]
    assert partials[-1]["content"] == "The tool says: It is sunny in Oslo."
    assert len(partials) > 3


async def test_interrupt_and_command_resume(client):
    thread = await client.threads.create()
    chunks = await collect(client.runs.stream(thread["thread_id"], "approval", input={"request": "deploy"}, stream_mode=["updates"]))
    intr = next(c for c in chunks if c.event == "updates" and "__interrupt__" in c.data)
    assert intr.data["__interrupt__"][0]["value"] == {"question": "approve deploy?"}
    t = await client.threads.get(thread["thread_id"])
    assert t["status"] == "interrupted"
    task_id, interrupts = next(iter(t["interrupts"].items()))
    assert interrupts[0]["value"] == {"question": "approve deploy?"}
    state = await client.threads.get_state(thread["thread_id"])
    assert state["next"] == ["review"]
    assert state["tasks"][0]["id"] == task_id
    assert state["tasks"][0]["interrupts"][0]["value"] == {"question": "approve deploy?"}

    values = await client.runs.wait(thread["thread_id"], "approval", command={"resume": "yes"})
    assert values["log"] == ["prepared deploy", "reviewed: yes", "did deploy"]
    done = await client.threads.get(thread["thread_id"])
    assert done["status"] == "idle"
    assert done["interrupts"] == {}


async def test_state_update_keeps_an_interrupted_thread_interrupted(client):
    thread = await client.threads.create()
    await client.runs.wait(thread["thread_id"], "approval", input={"request": "ship"})
    assert (await client.threads.get(thread["thread_id"]))["status"] == "interrupted"
    # An update beside the interrupt leaves "review" to run: still interrupted, as on the reference.
    await client.threads.update_state(thread["thread_id"], {"log": ["noted by hand"]})
    assert (await client.threads.get_state(thread["thread_id"]))["next"] == ["review"]
    assert (await client.threads.get(thread["thread_id"]))["status"] == "interrupted"


async def test_subgraph_interrupt_from_a_module_spec(client):
    thread = await client.threads.create()
    chunks = await collect(
        client.runs.stream(thread["thread_id"], "parent", input={"topic": "tides"}, stream_mode=["updates"], stream_subgraphs=True)
    )
    sub = [c for c in chunks if c.event.startswith("updates|editor:")]
    assert sub and sub[0].data == {"draft": {"log": ["draft about tides"]}}
    state = await client.threads.get_state(thread["thread_id"], subgraphs=True)
    assert state["next"] == ["editor"]
    inner = state["tasks"][0]["state"]
    assert inner["next"] == ["check"]
    assert inner["values"]["log"] == ["draft about tides"]
    # The subgraph's own state by its namespace.
    ns = inner["checkpoint"]["checkpoint_ns"]
    own = await client.threads.get_state(thread["thread_id"], checkpoint={"checkpoint_ns": ns})
    assert own["next"] == ["check"]
    values = await client.runs.wait(thread["thread_id"], "parent", command={"resume": "fine"})
    assert values["log"] == ["draft about tides", "checked: fine", "published"]


async def test_store_from_inside_a_node_and_context(client):
    await client.store.put_item(["users", "ada"], "profile", {"name": "Ada Lovelace"})
    chunks = await collect(client.runs.stream(None, "memory", input={}, context={"user": "ada"}, stream_mode=["custom", "values"]))
    assert [c.data for c in chunks if c.event == "custom"] == [{"user": "ada", "visits": 1}]
    assert [c.data for c in chunks if c.event == "values"][-1] == {"greeting": "Hello, Ada Lovelace!", "visits": 1}
    # What the node put is the API's item at once.
    item = await client.store.get_item(["users", "ada"], "visits")
    assert item["value"] == {"n": 1}
    out = await client.runs.wait(None, "memory", input={}, context={"user": "ada"})
    assert out["visits"] == 2
    found = await client.store.search_items(["users"])
    assert {i["key"] for i in found["items"]} >= {"profile", "visits"}
    # A synchronous node reads and writes the same items.
    out = await client.runs.wait(None, "memory_sync", input={}, context={"user": "ada"})
    assert out == {"greeting": "Hello, Ada Lovelace!", "visits": 3}
    assert (await client.store.get_item(["users", "ada"], "visits"))["value"] == {"n": 3}


async def test_assistants_of_python_graphs(client):
    # Every graph has its system assistant; search by name is a case-insensitive substring.
    found = await client.assistants.search(name="MEM")
    assert {a["graph_id"] for a in found} == {"memory", "memory_sync"}
    quiet = await client.assistants.create("factory", config={"configurable": {"style": "plain"}}, name="quiet")
    assert await client.runs.wait(None, quiet["assistant_id"], input={"text": "x"}) == {"text": "x"}
    await client.assistants.update(quiet["assistant_id"], config={"configurable": {"style": "loud"}})
    assert await client.runs.wait(None, quiet["assistant_id"], input={"text": "x"}) == {"text": "X"}
    assert len(await client.assistants.get_versions(quiet["assistant_id"])) == 2


async def test_assistant_search_sorted(client):
    for name in ("sort-b", "Sort-A", "sort-c"):
        await client.assistants.create("steps", name=name, metadata={"sorted": "yes"})
    by_name = await client.assistants.search(metadata={"sorted": "yes"}, sort_by="name", sort_order="asc")
    assert [a["name"] for a in by_name] == ["Sort-A", "sort-b", "sort-c"]
    newest = await client.assistants.search(metadata={"sorted": "yes"}, sort_by="created_at", sort_order="desc")
    assert [a["name"] for a in newest] == ["sort-c", "Sort-A", "sort-b"]


async def test_graph_factory_takes_the_run_config_and_the_config_env(client):
    assert await client.runs.wait(None, "factory", input={"text": "hi"}, config={"configurable": {"style": "plain"}}) == {"text": "hi"}
    # Without a style in the config, PY_AGENT_STYLE from langgraph.json's "env" decides.
    assert await client.runs.wait(None, "factory", input={"text": "hi"}) == {"text": "HI"}


async def test_custom_events_and_several_modes_at_once(client):
    chunks = await collect(client.runs.stream(None, "steps", input={}, stream_mode=["custom", "values", "updates"]))
    assert [c.data["node"] for c in chunks if c.event == "custom"] == ["one", "two", "three"]
    assert [next(iter(c.data)) for c in chunks if c.event == "updates"] == ["one", "two", "three"]
    assert [c.data for c in chunks if c.event == "values"][-1]["steps"] == ["one", "two", "three"]


async def test_events_debug_tasks_and_checkpoints_modes(client):
    modes = ["events", "debug", "tasks", "checkpoints"]
    chunks = await collect(client.runs.stream(None, "steps", input={}, stream_mode=modes))
    names = {c.event for c in chunks}
    assert set(modes) <= names, names
    starts = [c.data["name"] for c in chunks if c.event == "events" and c.data["event"] == "on_chain_start"]
    assert {"one", "two", "three"} <= set(starts)
    cps = [c.data for c in chunks if c.event == "checkpoints"]
    assert [c["metadata"]["step"] for c in cps] == [-1, 0, 1, 2, 3]
    assert all(c["checkpoint"]["checkpoint_id"] for c in cps)
    assert not any(k.startswith("__") for c in cps for k in c["config"]["configurable"])


async def test_debug_events_have_the_python_reference_shape(client):
    # As `langgraph dev` streams them: a checkpoint reference names
    # checkpoint_map only where the config has one (in a subgraph), a
    # pending subgraph task names its checkpoint by its state's
    # configurable (thread and namespace), and a task event's metadata is
    # the run's (assistant's and run's metadata, attempt, LangGraph version).
    thread = await client.threads.create()
    chunks = await collect(
        client.runs.stream(
            thread["thread_id"], "parent", input={"topic": "shape"}, stream_mode=["debug"],
            stream_subgraphs=True, metadata={"origin": "debug-shape"},
        )
    )
    root = [c.data for c in chunks if c.event == "debug"]
    inner = [c.data for c in chunks if c.event.startswith("debug|editor:")]
    assert root and inner, [c.event for c in chunks]
    for d in root:
        if d["type"] == "checkpoint":
            assert set(d["payload"]["checkpoint"]) == {"checkpoint_id", "thread_id", "checkpoint_ns"}, d["payload"]["checkpoint"]
            parent = d["payload"]["parent_checkpoint"]
            assert parent is None or set(parent) == {"checkpoint_id", "thread_id", "checkpoint_ns"}, parent
    for d in inner:
        if d["type"] == "checkpoint":
            cp = d["payload"]["checkpoint"]
            assert cp["checkpoint_ns"].startswith("editor:") and cp["checkpoint_map"][cp["checkpoint_ns"]] == cp["checkpoint_id"], cp
    pending = [t for d in root if d["type"] == "checkpoint" for t in d["payload"]["tasks"] if t["name"] == "editor"]
    assert pending and "state" not in pending[0], pending
    assert pending[0]["checkpoint"]["thread_id"] == thread["thread_id"]
    assert pending[0]["checkpoint"]["checkpoint_ns"].startswith("editor:"), pending[0]
    tasks = [d["payload"] for d in root + inner if d["type"] == "task"]
    assert {t["name"] for t in tasks} == {"editor", "draft", "check"}, tasks
    for t in tasks:
        m = t["metadata"]
        assert m["run_attempt"] == 1 and m["langgraph_version"] and m["created_by"] == "system", m
        assert m["origin"] == "debug-shape" and m["graph_id"] == "parent", m
    # The same metadata is kept in the checkpoints (history filters on it).
    history = await client.threads.get_history(thread["thread_id"], metadata={"origin": "debug-shape", "run_attempt": 1})
    assert history and all(h["metadata"]["created_by"] == "system" for h in history), history


async def test_error_event_carries_the_error_class_and_message(client):
    thread = await client.threads.create()
    run = {"input": {}, "config": {"configurable": {"fail": "two"}}}
    chunks = await collect(client.runs.stream(thread["thread_id"], "steps", **run, stream_mode=["updates"]))
    err = [c.data for c in chunks if c.event == "error"]
    assert err == [{"error": "ValueError", "message": "step two failed"}]
    state = await client.threads.get_state(thread["thread_id"])
    assert state["values"]["steps"] == ["one"]


async def test_multitask_strategies_reject_interrupt_rollback(client):
    t1 = await client.threads.create()
    first = await client.runs.create(t1["thread_id"], "steps", **slow(400))
    with pytest.raises(APIStatusError) as e:
        await client.runs.create(t1["thread_id"], "steps", input={}, multitask_strategy="reject")
    assert e.value.response.status_code == 409
    assert e.value.response.json() == {
        "detail": "Thread is already running a task. Wait for it to finish or choose a different multitask strategy."
    }
    await client.runs.join(t1["thread_id"], first["run_id"])
    assert (await client.runs.get(t1["thread_id"], first["run_id"]))["status"] == "success"

    t2 = await client.threads.create()
    # Long enough to be running still when the next run comes, however
    # busy the machine: the interrupt ends it at once anyway.
    victim = await client.runs.create(t2["thread_id"], "steps", **slow(5000))
    await wait_status(client, t2["thread_id"], victim["run_id"], ("running",))
    nxt = await client.runs.create(t2["thread_id"], "steps", input={}, multitask_strategy="interrupt")
    await client.runs.join(t2["thread_id"], nxt["run_id"])
    ended = await client.runs.get(t2["thread_id"], victim["run_id"])
    assert ended["status"] == "interrupted", (ended, nxt["created_at"])
    assert (await client.runs.get(t2["thread_id"], nxt["run_id"]))["status"] == "success"

    t3 = await client.threads.create()
    doomed = await client.runs.create(t3["thread_id"], "steps", **slow(600))
    await asyncio.sleep(0.9)  # let it persist a superstep, which the rollback must delete
    kept = await client.runs.create(t3["thread_id"], "steps", input={}, multitask_strategy="rollback")
    await client.runs.join(t3["thread_id"], kept["run_id"])
    with pytest.raises(APIStatusError) as e:
        await client.runs.get(t3["thread_id"], doomed["run_id"])
    assert e.value.response.status_code == 404
    state = await client.threads.get_state(t3["thread_id"])
    assert state["values"]["steps"] == ["one", "two", "three"]
    assert len(await client.threads.get_history(t3["thread_id"])) == 5, "only the kept run's checkpoints remain"


async def test_cancel_ends_the_run_interrupted_keeping_its_progress(client):
    thread = await client.threads.create()
    run = await client.runs.create(thread["thread_id"], "steps", **slow(1000))
    for _ in range(250):  # cancel once a superstep is durable
        st = await client.threads.get_state(thread["thread_id"])
        if st["values"].get("steps"):
            break
        await asyncio.sleep(0.02)
    await client.runs.cancel(thread["thread_id"], run["run_id"], wait=True)
    assert (await client.runs.get(thread["thread_id"], run["run_id"]))["status"] == "interrupted"
    state = await client.threads.get_state(thread["thread_id"])
    assert 1 <= len(state["values"]["steps"]) < 3, state["values"]


async def test_runs_spread_over_the_host_processes_and_cancel_reaches_theirs():
    """SLIPWAY_AGENT_HOST_PROCESSES=2: runs at once go to both processes
    (a node reports its process's pid), and a run's cancel reaches the
    process that runs it. The runs are of `spin`, a synchronous node that
    never returns: only that process can find the run stuck past its grace
    period, which restarts it, so each pid must end."""
    from conftest import PROJECT, Agent

    a = Agent(PROJECT / "langgraph.json", SLIPWAY_AGENT_HOST_PROCESSES="2", SLIPWAY_HOST_CANCEL_GRACE_SECONDS="1")
    a.start()
    try:
        client = get_client(url=a.url, timeout=30)

        async def pid_of(graph: str, **kw) -> tuple[int, str, str]:
            thread = await client.threads.create()
            run_id = None
            async for chunk in client.runs.stream(thread["thread_id"], graph, stream_mode=["custom"], **kw):
                if chunk.event == "metadata":
                    run_id = chunk.data["run_id"]
                if chunk.event == "custom":
                    return chunk.data["pid"], thread["thread_id"], run_id
            raise AssertionError(f"a run of {graph} streamed no progress")

        # The second process joins after the agent serves; until it has,
        # runs go to the first. Two slow runs at once show when it has.
        end = time.monotonic() + 60
        while time.monotonic() < end:
            pair = await asyncio.gather(pid_of("steps", **slow(500)), pid_of("steps", **slow(500)))
            for _, thread_id, run_id in pair:  # nothing in flight when the spins start
                await client.runs.join(thread_id, run_id)
            if pair[0][0] != pair[1][0]:
                break
            await asyncio.sleep(0.2)
        else:
            pytest.fail("the second host process never took a run")
        held: dict[int, tuple[str, str]] = {}
        for _ in range(2):
            pid, thread_id, run_id = await pid_of("spin", input={})
            held[pid] = (thread_id, run_id)
        assert len(held) == 2, f"runs held at once all ran in {list(held)}"
        for pid, (thread_id, run_id) in held.items():
            await cancel_a_spin(client, thread_id, run_id, pid, f"the cancel of a run in process {pid} did not reach it")
        out = await client.runs.wait(None, "steps", input={})
        assert out["steps"] == ["one", "two", "three"]
    finally:
        a.close()


async def test_update_state_as_a_node_and_time_travel(client):
    thread = await client.threads.create()
    await client.runs.wait(thread["thread_id"], "steps", input={})
    await client.threads.update_state(thread["thread_id"], {"steps": ["manual"]}, as_node="three")
    state = await client.threads.get_state(thread["thread_id"])
    assert state["values"]["steps"] == ["one", "two", "three", "manual"]
    assert state["metadata"]["source"] == "update"
    t = await client.threads.get(thread["thread_id"])
    assert t["values"]["steps"] == ["one", "two", "three", "manual"]

    # Replay from the checkpoint after "one": the branch runs two and three again.
    history = await client.threads.get_history(thread["thread_id"])
    after_one = next(h for h in history if h["values"].get("steps") == ["one"])
    out = await client.runs.wait(thread["thread_id"], "steps", input=None, checkpoint_id=after_one["checkpoint"]["checkpoint_id"])
    assert out["steps"] == ["one", "two", "three"]


async def test_graph_schemas_and_subgraphs_endpoints(client):
    parent = (await client.assistants.search(graph_id="parent"))[0]
    drawn = await client.assistants.get_graph(parent["assistant_id"], xray=True)
    ids = {n["id"] for n in drawn["nodes"]}
    assert {"publish", "editor:draft", "editor:check"} <= ids, ids
    schemas = await client.assistants.get_schemas(parent["assistant_id"])
    assert schemas["input_schema"]["properties"]["topic"]["type"] == "string"
    assert set(schemas["state_schema"]["properties"]) == {"topic", "log"}
    subs = await client.assistants.get_subgraphs(parent["assistant_id"])
    assert list(subs) == ["editor"]
    memory = (await client.assistants.search(graph_id="memory"))[0]
    assert (await client.assistants.get_schemas(memory["assistant_id"]))["context_schema"]["properties"]["user"]["type"] == "string"


async def test_kill_9_of_the_host_mid_run(client):
    thread = await client.threads.create()
    pid = run_id = None
    async for chunk in client.runs.stream(thread["thread_id"], "steps", **slow(1500), stream_mode=["custom"]):
        if chunk.event == "metadata":
            run_id = chunk.data["run_id"]
        if chunk.event == "custom":
            pid = chunk.data["pid"]
            break  # the run goes on: on_disconnect defaults to continue
    assert pid and pid != os.getpid(), "the graph reports the host's pid"
    for _ in range(250):  # kill once the first superstep is durable, while "two" runs
        st = await client.threads.get_state(thread["thread_id"])
        if st["values"].get("steps") == ["one"]:
            break
        await asyncio.sleep(0.02)
    os.kill(pid, signal.SIGKILL)
    ended = await wait_status(client, thread["thread_id"], run_id, ("error", "success"))
    assert ended["status"] == "error"
    before = await client.threads.get_state(thread["thread_id"])
    assert before["values"]["steps"] == ["one"]
    assert before["next"] == ["two"]
    # A null input resumes the pending task from the checkpoint, in the restarted host.
    values = await client.runs.wait(thread["thread_id"], "steps", input=None)
    assert values["steps"] == ["one", "two", "three"]


async def test_a_sync_node_that_never_returns_is_ended_by_a_host_restart(client):
    thread = await client.threads.create()
    pid = run_id = None
    async for chunk in client.runs.stream(thread["thread_id"], "spin", input={}, stream_mode=["custom"]):
        if chunk.event == "metadata":
            run_id = chunk.data["run_id"]
        if chunk.event == "custom":
            pid = chunk.data["pid"]
            break
    # Past the grace period the host was restarted: the old process is gone...
    await cancel_a_spin(client, thread["thread_id"], run_id, pid, f"host {pid} still running a node that never returns")
    # ...and a new one serves.
    out = await client.runs.wait(None, "steps", input={})
    assert out["steps"] == ["one", "two", "three"]


async def test_restart_of_slipway_agent_keeps_state_history_and_interrupts(own_agent):
    client = get_client(url=own_agent.url, timeout=30)
    thread = await client.threads.create()
    await client.runs.wait(thread["thread_id"], "approval", input={"request": "ship"})
    before = await client.threads.get_history(thread["thread_id"])
    own_agent.restart()
    client = get_client(url=own_agent.url, timeout=30)
    t = await client.threads.get(thread["thread_id"])
    assert t["status"] == "interrupted"
    assert next(iter(t["interrupts"].values()))[0]["value"] == {"question": "approve ship?"}
    state = await client.threads.get_state(thread["thread_id"])
    assert state["next"] == ["review"]
    assert state["tasks"][0]["interrupts"][0]["value"] == {"question": "approve ship?"}
    after = await client.threads.get_history(thread["thread_id"])
    assert [h["checkpoint"]["checkpoint_id"] for h in after] == [h["checkpoint"]["checkpoint_id"] for h in before]
    values = await client.runs.wait(thread["thread_id"], "approval", command={"resume": "ok"})
    assert values["log"] == ["prepared ship", "reviewed: ok", "did ship"]


async def test_custom_routes_are_served_by_the_app(agent, client):
    # Through the SDK's own HTTP client, as a user calls custom routes.
    assert await client.http.get("/custom/hello", params={"name": "Ada"}) == {"hello": "Ada"}
    async with httpx.AsyncClient(base_url=agent.url) as h:
        r = await h.post("/custom/echo", json={"a": 1}, headers={"x-demo": "yes"})
        assert r.status_code == 201
        assert r.json() == {"got": {"a": 1}, "header": "yes"}
        assert r.headers["x-app"] == "py-agent"
        # A method Slipway does not serve on its own path goes to the app...
        r = await h.delete("/threads")
        assert (r.status_code, r.text) == (200, "custom DELETE /threads")
        # ...what Slipway serves stays Slipway's.
        assert (await h.get("/ok")).json() == {"ok": True}
        assert (await h.post("/threads", json={})).json()["thread_id"]


async def test_custom_routes_are_mounted_before_the_api(agent):
    # As the reference mounts the app: what no route of the app serves is
    # the API's, down to its own 404 (not the app's plain-text one).
    async with httpx.AsyncClient(base_url=agent.url) as h:
        missing = await h.get("/custom/nothing")
        assert (missing.status_code, missing.json()) == (404, {"detail": "Not Found"})
        # The app's route shadows the API's path...
        assert (await h.get("/assistants/app-owned")).json() == {"owner": "app"}
        # ...and its middleware sees the API's requests: it may answer them,
        # it adds its headers to the API's answers.
        assert (await h.get("/info", params={"intercept": "1"})).json() == {"intercepted": "/info"}
        info = await h.get("/info")
        assert info.status_code == 200
        assert info.headers["x-app-middleware"] == "true"
    # A body the middleware changes is the body the API reads: through the
    # SDK, the x-stamp header becomes the new thread's metadata.
    stamped = get_client(url=agent.url, headers={"x-stamp": "by-middleware"})
    thread = await stamped.threads.create(metadata={"mine": 1})
    assert thread["metadata"] == {"mine": 1, "stamped": "by-middleware"}
    assert (await stamped.threads.get(thread["thread_id"]))["metadata"]["stamped"] == "by-middleware"
    # A body over 64 KiB streams to the host: left alone by the app (at
    # once, or after a middleware's wait), or changed by its middleware,
    # the API reads it whole.
    slow = get_client(url=agent.url, headers={"x-slow-middleware": "1"})
    for c in (get_client(url=agent.url), slow, stamped):
        big = await c.threads.create(metadata={"big": "x" * 100_000})
        assert len((await c.threads.get(big["thread_id"]))["metadata"]["big"]) == 100_000
    assert big["metadata"]["stamped"] == "by-middleware"


async def test_generative_ui(agent, client):
    # push_ui_message's messages pass through the stream as custom events
    # and reach the state, as on the reference.
    thread = await client.threads.create()
    chunks = await collect(client.runs.stream(thread["thread_id"], "ui_card", input={"text": "hi"}, stream_mode=["custom", "values"]))
    ui = [c.data for c in chunks if c.event == "custom"]
    assert [(m["type"], m["name"], m["props"]) for m in ui] == [("ui", "card", {"text": "hi"})]
    state = await client.threads.get_state(thread["thread_id"])
    assert [m["name"] for m in state["values"]["ui"]] == ["card"]
    # The HTML LoadExternalComponent puts in its shadow root, and the bundle.
    async with httpx.AsyncClient(base_url=agent.url) as h:
        r = await h.post("/ui/ui_card", json={"name": "card"})
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
        src = r.text.split('<script src="', 1)[1].split('"', 1)[0]
        assert "__LGUI_ui_card.render(&#34;card&#34;" in r.text
        js = await h.get(src)
        assert js.status_code == 200 and "var __LGUI_ui_card" in js.text
        missing = await h.post("/ui/steps", json={"name": "card"})
        assert (missing.status_code, missing.json()) == (404, {"detail": "UI not found for graph 'steps'"})


async def test_custom_routes_are_in_the_openapi_document(agent):
    # As the reference merges the app's document into its own.
    async with httpx.AsyncClient(base_url=agent.url) as h:
        doc = (await h.get("/openapi.json")).json()
        page = (await h.get("/docs")).text
    assert doc["paths"]["/custom/hello"]["get"]["summary"] == "Greets the caller."
    assert set(doc["paths"]["/custom/upload/{id}"]) == {"get", "post"}
    assert doc["paths"]["/custom/upload/{id}"]["post"]["parameters"][0]["name"] == "id"
    # A route on an API path joins the API's operations on it.
    assert "delete" in doc["paths"]["/threads"] and "post" in doc["paths"]["/threads"]
    assert "/custom/hello" in page and "Greets the caller." in page


async def test_custom_route_uploads_stream_to_the_app(agent):
    part = bytes([7]) * (100 * 1024)

    async with httpx.AsyncClient(base_url=agent.url, timeout=30) as h:

        async def chunked():
            # The second part leaves only once the app has read the first,
            # which a buffered body would never let it do.
            yield part
            for _ in range(400):
                if (await h.get("/custom/upload/chunked")).json()["bytes"] >= len(part):
                    break
                await asyncio.sleep(0.025)
            else:
                raise AssertionError("the app read none of the upload within 10 s")
            yield part

        r = await h.post("/custom/upload/chunked", content=chunked())
        assert r.status_code == 200
        assert r.json() == {"bytes": 2 * len(part), "sha256": hashlib.sha256(part + part).hexdigest()}
        # A known length above the inline limit (64 KiB) streams too; a
        # small body still arrives whole.
        for size in (300 * 1024, 10):
            data = bytes([size % 251]) * size
            r = await h.post(f"/custom/upload/sized-{size}", content=data)
            assert r.json() == {"bytes": size, "sha256": hashlib.sha256(data).hexdigest()}


async def test_command_update_and_goto_interrupt_before_after_filters_and_copy(client):
    thread = await client.threads.create()
    await client.runs.wait(thread["thread_id"], "approval", input={"request": "deploy"})
    out = await client.runs.wait(thread["thread_id"], "approval", command={"update": {"log": ["skipped review"]}, "goto": "act"})
    # As on the reference server: the interrupted node runs again beside
    # the goto node and interrupts again, so /wait answers the interrupt
    # with the checkpointed values (LangGraph streams the goto node's
    # uncheckpointed write after it; the diff test compares this).
    assert out["log"] == ["prepared deploy", "skipped review"]
    assert out["__interrupt__"][0]["value"] == {"question": "approve deploy?"}
    assert (await client.threads.get(thread["thread_id"]))["status"] == "interrupted"

    t = await client.threads.create()
    assert await client.runs.wait(t["thread_id"], "steps", input={}, interrupt_before=["three"]) == {"steps": ["one", "two"]}
    assert (await client.threads.get(t["thread_id"]))["status"] == "interrupted"
    assert (await client.threads.get_state(t["thread_id"]))["next"] == ["three"]
    assert await client.runs.wait(t["thread_id"], "steps", input=None) == {"steps": ["one", "two", "three"]}
    assert (await client.threads.get(t["thread_id"]))["status"] == "idle"

    t = await client.threads.create()
    assert await client.runs.wait(t["thread_id"], "steps", input={}, interrupt_after=["one"]) == {"steps": ["one"]}
    assert (await client.threads.get(t["thread_id"]))["status"] == "interrupted"
    hist = await client.threads.get_history(t["thread_id"], metadata={"step": 1})
    assert [h["values"] for h in hist] == [{"steps": ["one"]}]
    copy = await client.threads.copy(t["thread_id"])
    assert (await client.threads.get_state(copy["thread_id"]))["values"] == {"steps": ["one"]}
    assert await client.runs.wait(copy["thread_id"], "steps", input=None) == {"steps": ["one", "two", "three"]}
    assert (await client.threads.get_state(t["thread_id"]))["values"] == {"steps": ["one"]}, "the original is untouched"


async def test_on_disconnect_cancel_and_resumable_streams(client):
    # A client that goes away with on_disconnect=cancel cancels the run in the host.
    thread = await client.threads.create()
    run_id = None
    async for chunk in client.runs.stream(thread["thread_id"], "steps", **slow(1000), stream_mode=["custom"], on_disconnect="cancel"):
        if chunk.event == "metadata":
            run_id = chunk.data["run_id"]
        if chunk.event == "custom":
            break
    ended = await wait_status(client, thread["thread_id"], run_id, ("interrupted", "success", "error"))
    assert ended["status"] == "interrupted"

    # A resumable stream replays from the beginning for a late joiner, and
    # from after a given event for one that reconnects.
    thread = await client.threads.create()
    run = await client.runs.create(thread["thread_id"], "steps", **slow(150), stream_mode=["custom", "updates"], stream_resumable=True)
    everything = await collect(client.runs.join_stream(thread["thread_id"], run["run_id"], last_event_id="-1"))
    assert everything[0].event == "metadata"
    assert [next(iter(c.data)) for c in everything if c.event == "updates"] == ["one", "two", "three"]
    rest = await collect(client.runs.join_stream(thread["thread_id"], run["run_id"], last_event_id=everything[1].id))
    assert [(c.id, c.event) for c in rest] == [(c.id, c.event) for c in everything[2:]]
