"""Differential test: the same calls through the official Python SDK
(langgraph_sdk) against the reference Python server (REFERENCE_URL:
langgraph-api run by `langgraph dev`) and against `slipway agent`
(AGENT_URL), both serving testdata/graphs/py-agent/diff.json. Each scenario
records what a client sees (SSE events in order, run results, state,
history, objects, error statuses and bodies); ids and times are replaced by
stable placeholders and the two records must be equal but for the
differences allowed in allowlist.py, each of which the README lists with its
reason. Scenarios run in file order against both servers, so the servers'
contents (assistants, threads, store items) grow alike."""

import json
import os
import time

import httpx
import pytest
from langgraph_sdk import get_sync_client

from allowlist import allowed
from normalise import diff, normalise

SERVERS = {
    "reference": get_sync_client(url=os.environ["REFERENCE_URL"], api_key=None),
    "slipway": get_sync_client(url=os.environ["AGENT_URL"], api_key=None),
}
RAW = {name: httpx.Client(base_url=c.http.client.base_url, timeout=60) for name, c in SERVERS.items()}


def human(content):
    return {"messages": [{"role": "user", "content": content}]}


def collect(stream):
    return [{"event": p.event, "data": p.data} for p in stream]


def error(call):
    """What a client sees of a failed call: its status and body."""
    try:
        call()
    except httpx.HTTPStatusError as e:
        try:
            body = e.response.json()
        except ValueError:
            body = e.response.text
        return {"status": e.response.status_code, "body": body}
    return {"status": "no error"}


def wait_done(c, thread_id, run_id):
    for _ in range(300):
        run = c.runs.get(thread_id, run_id)
        if run["status"] not in ("pending", "running"):
            return run
        time.sleep(0.05)
    raise AssertionError(f"run {run_id} did not end")


def system(c, graph):
    """A graph's system assistant: the reference's assistant routes other
    than search take only its id (a graph name is a 422 there)."""
    return c.assistants.search(graph_id=graph, metadata={"created_by": "system"})[0]["assistant_id"]


def raw(server, method, path, **kw):
    """A plain HTTP request, for what the SDK does not expose (status codes
    of bad input, custom routes)."""
    r = RAW[server].request(method, path, **kw)
    ctype = r.headers.get("content-type", "")
    body = r.json() if ctype.startswith("application/json") and r.content else r.text
    return {"status": r.status_code, "body": body}


SCENARIOS = {}


def scenario(name):
    def register(fn):
        SCENARIOS[name] = fn
        return fn

    return register


@scenario("assistants: system assistants, graph, subgraphs, schemas")
def _(c, server):
    found = c.assistants.search(graph_id="react", metadata={"created_by": "system"})
    react = found[0]["assistant_id"]
    return {
        "search": found,
        "get": c.assistants.get(react),
        "graph": c.assistants.get_graph(react),
        "xray": c.assistants.get_graph(react, xray=True),
        "schemas": {g: c.assistants.get_schemas(system(c, g)) for g in ("react", "approval", "steps", "memory", "parent", "factory")},
        "subgraphs": c.assistants.get_subgraphs(system(c, "parent")),
        "subgraphs_recurse": c.assistants.get_subgraphs(system(c, "parent"), recurse=True),
        "parent_graph_xray": c.assistants.get_graph(system(c, "parent"), xray=1),
        "by_graph_name": error(lambda: c.assistants.get("react")),
    }


@scenario("assistants: create, update, versions, latest, search, count, delete")
def _(c, server):
    created = c.assistants.create(
        "steps", config={"configurable": {"delay_ms": 0}}, metadata={"team": "diff"}, name="steps-a", description="first"
    )
    aid = created["assistant_id"]
    updated = c.assistants.update(aid, metadata={"team": "diff", "v": 2}, name="steps-b", context={"x": 1})
    versions = c.assistants.get_versions(aid)
    latest = c.assistants.set_latest(aid, 1)
    other = c.assistants.create("react", metadata={"team": "diff"}, name="react-a")
    by_meta = c.assistants.search(metadata={"team": "diff"}, sort_by="name", sort_order="asc")
    by_name = c.assistants.search(name="steps", graph_id="steps")
    count = c.assistants.count(metadata={"team": "diff"})
    count_graph = c.assistants.count(graph_id="react")
    paged = c.assistants.search(metadata={"team": "diff"}, limit=1, offset=1, sort_by="created_at", sort_order="desc")
    # A run on a created assistant carries its config.
    ran = c.runs.wait(None, aid, input={})
    c.assistants.delete(other["assistant_id"])
    after = c.assistants.count(metadata={"team": "diff"})
    return {
        "created": created,
        "updated": updated,
        "versions": versions,
        "latest": latest,
        "by_meta": by_meta,
        "by_name": by_name,
        "count": count,
        "count_graph": count_graph,
        "paged": paged,
        "ran": ran,
        "after_delete": after,
        "deleted_get": error(lambda: c.assistants.get(other["assistant_id"])),
    }


@scenario("threads: create, get, update, search, count, copy, delete")
def _(c, server):
    t = c.threads.create(metadata={"owner": "diff-threads"})
    tid = t["thread_id"]
    got = c.threads.get(tid)
    updated = c.threads.update(tid, metadata={"owner": "diff-threads", "n": 1})
    c.runs.wait(tid, "steps", input={})
    search = c.threads.search(metadata={"owner": "diff-threads"})
    by_status = c.threads.search(metadata={"owner": "diff-threads"}, status="idle", values={"steps": ["one", "two", "three"]})
    count = c.threads.count(metadata={"owner": "diff-threads"})
    copied = c.threads.copy(tid)
    copy_state = c.threads.get_state(copied["thread_id"])
    c.threads.delete(tid)
    return {
        "created": t,
        "got": got,
        "updated": updated,
        "search": search,
        "by_status": by_status,
        "count": count,
        "copied": copied,
        "copy_state": copy_state,
        "deleted_get": error(lambda: c.threads.get(tid)),
        "deleted_state": error(lambda: c.threads.get_state(tid)),
        "if_exists_raise": error(lambda: c.threads.create(thread_id=copied["thread_id"], if_exists="raise")),
        "if_exists_do_nothing": c.threads.create(thread_id=copied["thread_id"], if_exists="do_nothing"),
    }


@scenario("react: stream values, updates, messages-tuple, custom; state and history")
def _(c, server):
    tid = c.threads.create()["thread_id"]
    events = collect(
        c.runs.stream(tid, "react", input=human("weather in Paris"), stream_mode=["values", "updates", "messages-tuple", "custom"])
    )
    return {"events": events, "state": c.threads.get_state(tid), "history": c.threads.get_history(tid)}


@scenario("react: stream messages (partial and complete)")
def _(c, server):
    tid = c.threads.create()["thread_id"]
    return {"events": collect(c.runs.stream(tid, "react", input=human("weather in Lima"), stream_mode="messages"))}


@scenario("react: stream debug")
def _(c, server):
    tid = c.threads.create()["thread_id"]
    return {"events": collect(c.runs.stream(tid, "react", input=human("weather in Bern"), stream_mode="debug"))}


@scenario("steps and approval: stream debug, through an interrupt and its resume")
def _(c, server):
    tid = c.threads.create()["thread_id"]
    steps = collect(c.runs.stream(tid, "steps", input={}, stream_mode="debug"))
    tid = c.threads.create()["thread_id"]
    interrupted = collect(c.runs.stream(tid, "approval", input={"request": "ship"}, stream_mode="debug"))
    resumed = collect(c.runs.stream(tid, "approval", command={"resume": "ok"}, stream_mode="debug"))
    return {"steps": steps, "interrupted": interrupted, "resumed": resumed}


@scenario("react: stream events")
def _(c, server):
    tid = c.threads.create()["thread_id"]
    events = collect(c.runs.stream(tid, "react", input=human("weather in Kyiv"), stream_mode="events"))
    # The event names and the runs they belong to, in order.
    return {"events": [(e["event"], e["data"].get("event"), e["data"].get("name")) if isinstance(e["data"], dict) else e for e in events]}


@scenario("react: wait, then a second turn on the same thread")
def _(c, server):
    tid = c.threads.create()["thread_id"]
    first = c.runs.wait(tid, "react", input=human("weather in Rome"))
    second = c.runs.wait(tid, "react", input=human("and in Oslo"))
    thread = c.threads.get(tid)
    return {"first": first, "second": second, "thread": thread, "history": c.threads.get_history(tid, limit=3)}


@scenario("steps: updates, custom, values, tasks and checkpoints")
def _(c, server):
    tid = c.threads.create()["thread_id"]
    events = collect(c.runs.stream(tid, "steps", input={}, stream_mode=["updates", "custom", "values", "tasks", "checkpoints"]))
    return {"events": events, "state": c.threads.get_state(tid)}


@scenario("steps: a failing node, the run's error and status")
def _(c, server):
    tid = c.threads.create()["thread_id"]
    events = collect(c.runs.stream(tid, "steps", input={}, config={"configurable": {"fail": "two"}}, stream_mode=["values"]))
    runs = c.runs.list(tid)
    return {"events": events, "runs": runs, "thread": c.threads.get(tid), "state": c.threads.get_state(tid)}


@scenario("runs: create, join, join_stream, list, get, delete")
def _(c, server):
    tid = c.threads.create()["thread_id"]
    run = c.runs.create(tid, "steps", input={}, metadata={"origin": "diff"}, config={"configurable": {"delay_ms": 200}}, stream_resumable=True)
    joined_events = collect(c.runs.join_stream(tid, run["run_id"], stream_mode=["values"]))
    # The replay's metadata event is recorded apart (see the allowlist).
    streamed = [e for e in joined_events if e["event"] != "metadata"]
    streamed_metadata_events = len(joined_events) - len(streamed)
    joined = c.runs.join(tid, run["run_id"])
    got = c.runs.get(tid, run["run_id"])
    second = c.runs.create(tid, "steps", input={})
    joined2 = c.runs.join(tid, second["run_id"])
    listed = c.runs.list(tid)
    listed_status = c.runs.list(tid, status="success", limit=1)
    c.runs.delete(tid, second["run_id"])
    return {
        "run": run,
        "streamed": streamed,
        "streamed_metadata_events": streamed_metadata_events,
        "joined": joined,
        "got": got,
        "joined2": joined2,
        "listed": listed,
        "listed_status": listed_status,
        "after_delete": c.runs.list(tid),
        "deleted_get": error(lambda: c.runs.get(tid, second["run_id"])),
    }


@scenario("runs: join a failed run, an interrupted one, and while each runs")
def _(c, server):
    out = {}
    for name, graph, kw in (
        ("failed", "steps", {"input": {}, "config": {"configurable": {"fail": "two", "delay_ms": 100}}}),
        ("interrupted", "approval", {"input": {"request": "join"}}),
    ):
        tid = c.threads.create()["thread_id"]
        run = c.runs.create(tid, graph, **kw)
        out[name + "_while_running"] = c.runs.join(tid, run["run_id"])
        wait_done(c, tid, run["run_id"])
        out[name + "_after"] = c.runs.join(tid, run["run_id"])
    return out


@scenario("runs: join ended runs after the thread ran again")
def _(c, server):
    """A join of a run that has ended answers from the thread as it is now:
    the error of its latest run, or its values once a later run succeeded.
    The thread shows its latest run's error, none after a success."""
    tid = c.threads.create()["thread_id"]
    first = c.runs.create(tid, "steps", input={}, config={"configurable": {"fail": "two"}})
    wait_done(c, tid, first["run_id"])
    second = c.runs.create(tid, "steps", input={}, config={"configurable": {"fail": "three"}})
    wait_done(c, tid, second["run_id"])
    out = {"first_after_second_failed": c.runs.join(tid, first["run_id"])}
    out["thread_error_after_second"] = c.threads.get(tid)["error"]
    third = c.runs.create(tid, "steps", input={})
    out["third"] = wait_done(c, tid, third["run_id"])["status"]
    out["thread_status"] = c.threads.get(tid)["status"]
    out["thread_error_after_third"] = c.threads.get(tid)["error"]
    out["first_after_third_succeeded"] = c.runs.join(tid, first["run_id"])
    return out


@scenario("runs: cancel a running run")
def _(c, server):
    tid = c.threads.create()["thread_id"]
    run = c.runs.create(tid, "steps", input={}, config={"configurable": {"delay_ms": 3000}})
    time.sleep(0.5)
    c.runs.cancel(tid, run["run_id"], wait=True)
    done = wait_done(c, tid, run["run_id"])
    return {"run": done, "thread": c.threads.get(tid)}


@scenario("runs: cancel a run after its first step, interrupted and rolled back")
def _(c, server):
    """The thread after a cancel shows the state the run reached (interrupt)
    or the one it had before (rollback)."""
    out = {}
    for action in ("interrupt", "rollback"):
        tid = c.threads.create()["thread_id"]
        run = c.runs.create(tid, "steps", input={}, config={"configurable": {"delay_ms": 1200}})
        for _ in range(400):
            if c.threads.get_state(tid)["values"].get("steps"):
                break
            time.sleep(0.02)
        c.runs.cancel(tid, run["run_id"], wait=True, action=action)
        state = c.threads.get_state(tid)
        if action == "rollback":
            out["rollback_run"] = error(lambda: c.runs.get(tid, run["run_id"]))
        else:
            out["interrupt_run"] = wait_done(c, tid, run["run_id"])
        out[action + "_thread"] = c.threads.get(tid)
        out[action + "_state"] = state
        out[action + "_history"] = len(c.threads.get_history(tid))
    return out


@scenario("runs: stateless wait and stream")
def _(c, server):
    waited = c.runs.wait(None, "steps", input={})
    streamed = collect(c.runs.stream(None, "steps", input={}, stream_mode=["values", "updates"]))
    factory = c.runs.wait(None, "factory", input={"text": "hi"})
    styled = c.runs.wait(None, "factory", input={"text": "Hi"}, config={"configurable": {"style": "plain"}})
    return {"waited": waited, "streamed": streamed, "factory": factory, "styled": styled}


@scenario("approval: interrupt, state and thread, Command resume, history")
def _(c, server):
    tid = c.threads.create()["thread_id"]
    interrupted = collect(c.runs.stream(tid, "approval", input={"request": "deploy"}, stream_mode=["values", "updates"]))
    at_interrupt = c.threads.get_state(tid)
    thread = c.threads.get(tid)
    resumed = collect(c.runs.stream(tid, "approval", command={"resume": "yes"}, stream_mode=["values", "updates"]))
    return {
        "interrupted": interrupted,
        "at_interrupt": at_interrupt,
        "thread": thread,
        "resumed": resumed,
        "state": c.threads.get_state(tid),
        "history": c.threads.get_history(tid),
    }


@scenario("approval: wait at the interrupt, then Command update and goto")
def _(c, server):
    tid = c.threads.create()["thread_id"]
    at_interrupt = c.runs.wait(tid, "approval", input={"request": "scale"})
    jumped = c.runs.wait(tid, "approval", command={"update": {"log": ["skipped review"]}, "goto": "act"})
    return {"at_interrupt": at_interrupt, "jumped": jumped, "history": c.threads.get_history(tid)}


@scenario("approval: update_state as a node at the interrupt, then continue")
def _(c, server):
    tid = c.threads.create()["thread_id"]
    c.runs.wait(tid, "approval", input={"request": "purge"})
    updated = c.threads.update_state(tid, {"log": ["approved by hand"]}, as_node="review")
    after = c.threads.get_state(tid)
    thread = c.threads.get(tid)
    finished = c.runs.wait(tid, "approval", input=None)
    return {"updated": updated, "after": after, "thread": thread, "finished": finished}


@scenario("steps: interrupt_before, metadata filter, time travel")
def _(c, server):
    tid = c.threads.create()["thread_id"]
    paused = c.runs.wait(tid, "steps", input={}, interrupt_before=["two"], metadata={"origin": "diff"})
    at_pause = c.threads.get_state(tid)
    resumed = c.runs.wait(tid, "steps", input=None)
    filtered = c.threads.get_history(tid, metadata={"origin": "diff"})
    history = c.threads.get_history(tid)
    fork = next(h for h in history if "two" in h["next"])
    at_fork = c.threads.get_state(tid, checkpoint_id=fork["checkpoint"]["checkpoint_id"])
    replayed = c.runs.wait(tid, "steps", input=None, checkpoint_id=fork["checkpoint"]["checkpoint_id"])
    forked = c.threads.update_state(tid, {"steps": ["edited"]}, checkpoint_id=fork["checkpoint"]["checkpoint_id"])
    return {
        "paused": paused,
        "at_pause": at_pause,
        "resumed": resumed,
        "filtered": filtered,
        "at_fork": at_fork,
        "replayed": replayed,
        "forked": forked,
        "after": c.threads.get_history(tid),
    }


@scenario("parent: a subgraph's interrupt, state with subgraphs, resume")
def _(c, server):
    tid = c.threads.create()["thread_id"]
    events = collect(c.runs.stream(tid, "parent", input={"topic": "tides"}, stream_mode=["values", "updates"], stream_subgraphs=True))
    state = c.threads.get_state(tid, subgraphs=True)
    resumed = c.runs.wait(tid, "parent", command={"resume": "ok"})
    return {"events": events, "state": state, "resumed": resumed, "history": c.threads.get_history(tid)}


@scenario("store: put, get, search, list_namespaces, delete; a graph using it with a context")
def _(c, server):
    c.store.put_item(["users", "ada"], "profile", {"name": "Ada Lovelace", "lang": "en"})
    c.store.put_item(["users", "ada", "notes"], "n1", {"text": "engines"})
    c.store.put_item(["users", "bob"], "profile", {"name": "Bob"})
    got = c.store.get_item(["users", "ada"], "profile")
    search = c.store.search_items(["users"], limit=10)
    filtered = c.store.search_items(["users"], filter={"name": "Bob"})
    namespaces = c.store.list_namespaces(prefix=["users"])
    depth = c.store.list_namespaces(prefix=["users"], max_depth=2)
    tid = c.threads.create()["thread_id"]
    events = collect(c.runs.stream(tid, "memory", input={}, context={"user": "ada"}, stream_mode=["values", "custom"]))
    again = c.runs.wait(tid, "memory", input={}, context={"user": "ada"})
    visits = c.store.get_item(["users", "ada"], "visits")
    c.store.delete_item(["users", "bob"], "profile")
    return {
        "got": got,
        "search": search,
        "filtered": filtered,
        "namespaces": namespaces,
        "depth": depth,
        "events": events,
        "again": again,
        "visits": visits,
        "deleted": error(lambda: c.store.get_item(["users", "bob"], "profile")),
    }


@scenario("crons: create (stateless and on a thread), search, count, update, delete")
def _(c, server):
    tid = c.threads.create()["thread_id"]
    steps = system(c, "steps")
    on_thread = c.crons.create_for_thread(tid, steps, schedule="0 0 1 1 *", input={}, metadata={"k": "diff"})
    stateless = c.crons.create(steps, schedule="30 4 * * 1", input={}, metadata={"k": "diff"})
    search = c.crons.search(assistant_id=steps, sort_by="created_at", sort_order="asc")
    by_thread = c.crons.search(thread_id=tid)
    count = c.crons.count(assistant_id=steps)
    updated = c.crons.update(stateless["cron_id"], schedule="0 5 * * *", enabled=False)
    c.crons.delete(on_thread["cron_id"])
    return {
        "on_thread": on_thread,
        "stateless": stateless,
        "search": search,
        "by_thread": by_thread,
        "count": count,
        "updated": updated,
        "after_delete": c.crons.count(assistant_id=steps),
        "delete_again": error(lambda: c.crons.delete(on_thread["cron_id"])),
    }


@scenario("custom routes: the http app's routes beside the API")
def _(c, server):
    return {
        "hello": c.http.get("/custom/hello", params={"name": "diff"}),
        "echo": raw(server, "POST", "/custom/echo", json={"a": 1}, headers={"x-demo": "yes"}),
        "ok": raw(server, "GET", "/ok"),
    }


@scenario("errors: 404, 409 and 422 statuses and bodies")
def _(c, server):
    missing = "00000000-0000-4000-8000-000000000000"
    tid = c.threads.create()["thread_id"]
    run = c.runs.create(tid, "steps", input={}, config={"configurable": {"delay_ms": 1500}})
    busy = error(lambda: c.runs.create(tid, "steps", input={}, multitask_strategy="reject"))
    c.runs.join(tid, run["run_id"])
    return {
        "assistant": error(lambda: c.assistants.get(missing)),
        "graph_unknown": error(lambda: c.runs.wait(None, "no-such-graph", input={})),
        "thread": error(lambda: c.threads.get(missing)),
        "thread_state": error(lambda: c.threads.get_state(missing)),
        "run": error(lambda: c.runs.get(tid, missing)),
        "run_on_missing_thread": error(lambda: c.runs.wait(missing, "steps", input={})),
        "busy": busy,
        "update_state_never_ran": error(lambda: c.threads.update_state(c.threads.create()["thread_id"], {"steps": ["x"]})),
        "bad_body": raw(server, "POST", "/threads/search", json={"limit": "many"}),
        "bad_json": raw(server, "POST", "/threads", content=b"{", headers={"content-type": "application/json"}),
        "bad_stream_mode": raw(server, "POST", "/runs/wait", json={"assistant_id": "steps", "input": {}, "stream_mode": "nope"}),
        "bad_uuid": raw(server, "GET", "/threads/not-a-uuid"),
    }


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_matches_reference(name):
    seen = {}
    for server, client in SERVERS.items():
        record = json.loads(json.dumps(SCENARIOS[name](client, server), default=str))
        seen[server] = normalise(record, lambda path: allowed(name, path))
    differences = diff(seen["reference"], seen["slipway"])
    if os.environ.get("DIFF_DUMP"):
        for server, record in seen.items():
            print(f"RECORD {server} {name}\n{json.dumps(record, indent=1, sort_keys=True)}")
    if os.environ.get("DIFF_VERBOSE"):
        for d in differences:
            print(f"DIFF {name.split(':')[0]} {d['path']}\n  ref: {d['reference']}\n  got: {d['slipway']}")
    assert differences == [], f'unexpected differences from the reference in "{name}"'
