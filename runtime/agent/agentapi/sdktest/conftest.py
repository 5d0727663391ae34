"""The client of test_agent.py: the official Python SDK (langgraph-sdk)
pointed at AGENT_URL, with LANGGRAPH_API_KEY as its key when set, and none
of the SDK's own retries, so that no failure hides behind a second try."""

import os

import httpx
import pytest
from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient


class StreamReconnected(AssertionError):
    pass


async def _refuse_reconnects(request: httpx.Request) -> None:
    # The SDK reopens a dropped stream with a GET on the stream's Location
    # (and a Last-Event-ID): the suite itself never does either.
    if request.headers.get("last-event-id") or (request.method == "GET" and request.url.path.endswith("/stream")):
        raise StreamReconnected(f"the SDK reconnected a stream: {request.method} {request.url.path}")


@pytest.fixture
async def client():
    # get_client builds the headers users get (x-api-key, the SDK's
    # User-Agent); its transport retries a failed connection 5 times, so
    # the suite's client is the same but with a transport that does not.
    # api_key is passed explicitly so that LANGSMITH_API_KEY and the like
    # in the environment are never read.
    sdk = get_client(url=os.environ["AGENT_URL"], api_key=os.environ.get("LANGGRAPH_API_KEY") or None)
    base = sdk.http.client
    http = httpx.AsyncClient(
        base_url=base.base_url,
        headers=base.headers,
        timeout=base.timeout,
        transport=httpx.AsyncHTTPTransport(retries=0),
        event_hooks={"request": [_refuse_reconnects]},
    )
    await sdk.aclose()
    c = LangGraphClient(http)
    # runs.wait and cancel(wait=True) re-request their Location up to 5
    # times when a body is cut off; the sub-clients share this one
    # HttpClient, so a limit of 0 here turns that off everywhere.
    reconnecting = c.http.request_reconnect

    async def request_once(*args, **kwargs):
        kwargs["reconnect_limit"] = 0
        return await reconnecting(*args, **kwargs)

    c.http.request_reconnect = request_once
    yield c
    await c.aclose()
