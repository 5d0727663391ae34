"""Custom routes: a Starlette app the Python host serves for the paths
Slipway's API does not own ("http": {"app": "./app.py:app"})."""

import hashlib

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route


async def hello(request: Request) -> JSONResponse:
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


app = Starlette(
    routes=[
        Route("/custom/upload/{id}", upload, methods=["POST"]),
        Route("/custom/upload/{id}", upload_progress, methods=["GET"]),
        Route("/custom/hello", hello),
        Route("/custom/echo", echo, methods=["POST"]),
        Route("/threads", threads, methods=["DELETE"]),
    ]
)
