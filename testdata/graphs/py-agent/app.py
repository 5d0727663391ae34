"""Custom routes: a Starlette app the Python host serves for the paths
Slipway's API does not own ("http": {"app": "./app.py:app"})."""

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


app = Starlette(
    routes=[
        Route("/custom/hello", hello),
        Route("/custom/echo", echo, methods=["POST"]),
        Route("/threads", threads, methods=["DELETE"]),
    ]
)
