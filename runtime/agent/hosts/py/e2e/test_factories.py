"""Graph factories of the reference server's newer signatures (see
testdata/graphs/py-agent/factories.py), through the official SDK."""

import pytest
from langgraph_sdk import get_client

from conftest import PROJECT, Agent


@pytest.fixture(scope="module")
def factories_agent():
    a = Agent(PROJECT / "factories.json")
    a.start()
    yield a
    a.close()


@pytest.fixture
def fclient(factories_agent):
    return get_client(url=factories_agent.url, timeout=30)


async def test_factory_of_a_server_runtime_gets_the_run_context(fclient):
    out = await fclient.runs.wait(None, "with_runtime", input={}, context={"user": "ada"})
    assert out["built_for"] == "threads.create_run"
    assert out["context"] == {"user": "ada"}
    # Reads build the graph too, for their own access context.
    graph = await fclient.assistants.get_graph("with_runtime")
    assert {n["id"] for n in graph["nodes"]} >= {"report"}


async def test_factory_of_runtime_and_config_in_either_order(fclient):
    out = await fclient.runs.wait(None, "runtime_then_config", input={}, config={"configurable": {"style": "loud"}})
    assert out["built_for"] == "threads.create_run"
    assert out["style"] == "loud"


async def test_context_manager_factory_is_exited_after_each_use(fclient):
    first = await fclient.runs.wait(None, "managed", input={})
    assert first["entered"] == first["exited"] + 1  # inside the manager while it runs
    second = await fclient.runs.wait(None, "managed", input={})
    assert second["exited"] >= first["exited"] + 1  # the first run's manager was exited
    assert second["entered"] == second["exited"] + 1
