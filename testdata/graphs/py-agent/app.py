"""Custom routes: a Starlette app mounted before Slipway's agent API
("http": {"app": "./app.py:app"}). Its middleware sees every request, the
API's too; what none of its routes serves is the API's."""

import asyncio
import hashlib
import json

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route


async def hello(request: Request) -> JSONResponse:
    """Greets the caller."""
    return JSONResponse({"hello": request.query_params.get("name", "world")})


async def echo(request: Request) -> JSONResponse:
    body = await request.json()
    return JSONResponse({"got": body, "header": request.headers.get("x-demo")}, status_code=201, headers={"x-app": "py-agent"})


async def threads(request: Request) -> PlainTextResponse:
    # A method Slipway's API does not serve on one of its own paths.
    return PlainTextResponse("custom DELETE /threads")


# How many bytes of each upload the app has read so far: a client can see
# the app reading before its upload ends (a buffered body would show 0).
uploaded: dict[str, int] = {}


async def upload(request: Request) -> JSONResponse:
    upload_id = request.path_params["id"]
    digest, size = hashlib.sha256(), 0
    async for chunk in request.stream():
        digest.update(chunk)
        size += len(chunk)
        uploaded[upload_id] = size
    return JSONResponse({"bytes": size, "sha256": digest.hexdigest()})


async def upload_progress(request: Request) -> JSONResponse:
    return JSONResponse({"bytes": uploaded.get(request.path_params["id"], 0)})


async def app_owned(request: Request) -> JSONResponse:
    # A route on a path of the API's: the app's route wins.
    return JSONResponse({"owner": "app"})


class Stamp:
    """Middleware on every request: ?intercept answers here, before the
    API; an x-stamp header on the API's POST /threads becomes the new
    thread's metadata.stamped (the body changed on its way to the API);
    an x-slow-middleware header makes it wait before it passes the request
    on, leaving the body alone; every other answer, the API's included,
    gets x-app-middleware."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        if b"intercept" in scope["query_string"]:
            return await JSONResponse({"intercepted": scope["path"]})(scope, receive, send)
        headers = dict(scope["headers"])
        if b"x-slow-middleware" in headers:
            await asyncio.sleep(0.05)
        if scope["method"] == "POST" and scope["path"] == "/threads" and b"x-stamp" in headers:
            raw = b""
            while True:
                msg = await receive()
                raw += msg.get("body", b"")
                if not msg.get("more_body"):
                    break
            body = json.loads(raw or b"{}")
            body["metadata"] = {**(body.get("metadata") or {}), "stamped": headers[b"x-stamp"].decode()}
            changed = json.dumps(body).encode()

            async def receive():
                return {"type": "http.request", "body": changed, "more_body": False}

        async def marked(msg):
            if msg["type"] == "http.response.start":
                msg = {**msg, "headers": [*msg.get("headers", []), (b"x-app-middleware", b"true")]}
            await send(msg)

        await self.app(scope, receive, marked)


app = Starlette(
    middleware=[Middleware(Stamp)],
    routes=[
        Route("/assistants/app-owned", app_owned),
        Route("/custom/upload/{id}", upload, methods=["POST"]),
        Route("/custom/upload/{id}", upload_progress, methods=["GET"]),
        Route("/custom/hello", hello),
        Route("/custom/echo", echo, methods=["POST"]),
        Route("/threads", threads, methods=["DELETE"]),
    ]
)
