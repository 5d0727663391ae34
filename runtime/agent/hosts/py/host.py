"""Slipway's Python language host (protocol version 1, see the README,
"Language hosts").

Slipway starts one per agent, with the project's own interpreter, as
`python host.py <config.json>`, and talks to it over fd 3: newline-delimited
JSON, {"id","m","p"} requests, {"id","r"|"e"} replies, {"m","p"}
notifications, in both directions.

The host is stateless: it imports the user's graphs, runs them on asyncio
with a checkpointer whose storage is Slipway (saver.py), and streams their
events back. Slipway owns every durable byte.
"""

from __future__ import annotations

import os
import sys

# A user's print() must never reach the channel or be mistaken for
# protocol: file descriptor 1 becomes a copy of 2 (stderr, which Slipway
# logs) before anything else runs, so even child processes and C
# extensions writing to stdout cannot corrupt it.
os.dup2(2, 1)
sys.stdout = sys.stderr

import asyncio  # noqa: E402
import collections  # noqa: E402
import contextlib  # noqa: E402
import contextvars  # noqa: E402
import dataclasses  # noqa: E402
import datetime  # noqa: E402
import enum  # noqa: E402
import importlib  # noqa: E402
import importlib.metadata  # noqa: E402
import importlib.util  # noqa: E402
import inspect  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import re  # noqa: E402
import socket  # noqa: E402
import threading  # noqa: E402
import traceback  # noqa: E402
import uuid  # noqa: E402
from concurrent.futures import ThreadPoolExecutor  # noqa: E402
from collections.abc import AsyncIterator  # noqa: E402
from typing import Any  # noqa: E402

import slipway_factory  # noqa: E402

PROTOCOL = 1
MAX_FRAME = 32 << 20
# How long a cancelled run may take to unwind, its synchronous nodes
# included, before the host answers that it is stuck (Slipway then
# restarts the host: a thread running Python code cannot be stopped).
CANCEL_GRACE = float(os.environ.get("SLIPWAY_HOST_CANCEL_GRACE_SECONDS", "5"))

with open(sys.argv[1], encoding="utf-8") as f:
    CFG = json.load(f)
sys.path.append(os.path.dirname(os.path.abspath(__file__)))
# The project's own modules import as they do under the reference server.
sys.path.insert(0, CFG["project_dir"])

# ---- channel -----------------------------------------------------------------

pending: dict[int, asyncio.Future] = {}
handlers: dict[str, Any] = {}
next_id = 0
writer: asyncio.StreamWriter | None = None


# outbox holds the frames sent during one turn of the event loop: they go
# out in one write at its end, as the JavaScript host batches them, instead
# of a system call (and a wake-up of Slipway's reader) for each.
outbox: list[bytes] = []


def send(msg: dict) -> None:
    line = json.dumps(msg, separators=(",", ":"), ensure_ascii=False).encode()
    if len(line) > MAX_FRAME:
        raise ValueError(f"message of {len(line)} bytes exceeds the host protocol's {MAX_FRAME}")
    if not outbox:
        asyncio.get_running_loop().call_soon(flush)
    outbox.append(line)


def flush() -> None:
    frames = b"\n".join(outbox) + b"\n"
    outbox.clear()
    writer.write(frames)


async def call(m: str, p: Any) -> Any:
    global next_id
    next_id += 1
    fut = asyncio.get_running_loop().create_future()
    pending[next_id] = fut
    send({"id": next_id, "m": m, "p": p})
    return await fut


def notify(m: str, p: Any) -> None:
    send({"m": m, "p": p})


class RemoteError(Exception):
    def __init__(self, e: dict) -> None:
        super().__init__(e.get("message", ""))
        self.type = e.get("type") or "Error"


def error_of(err: BaseException) -> dict:
    return {"type": type(err).__name__, "message": str(err)}


async def serve_request(msg: dict) -> None:
    try:
        h = handlers.get(msg["m"])
        if h is None:
            raise ValueError(f"unknown method {msg['m']}")
        r = await h(msg.get("p") or {})
        send({"id": msg["id"], "r": ser(r)})
    except Exception as err:  # noqa: BLE001 - every failure is the caller's answer
        send({"id": msg["id"], "e": error_of(err)})


def receive(msg: dict) -> None:
    if "m" not in msg:
        fut = pending.pop(msg.get("id"), None)
        if fut is None or fut.done():
            return
        if msg.get("e"):
            fut.set_exception(RemoteError(msg["e"]))
        else:
            fut.set_result(msg.get("r"))
        return
    if msg.get("id") is None:
        h = handlers.get(msg["m"])
        if h is not None:
            asyncio.ensure_future(h(msg.get("p") or {}))
        return
    asyncio.ensure_future(serve_request(msg))


async def read_loop(reader: asyncio.StreamReader) -> None:
    while True:
        try:
            line = await reader.readline()
        except (asyncio.LimitOverrunError, ValueError):
            print("slipway host: frame too long from Slipway", file=sys.stderr)
            os._exit(70)
        except ConnectionError:
            os._exit(0)
        if not line:
            # Slipway went away: nothing is left to serve. _exit, since a
            # synchronous node stuck in a thread would hold up a clean exit.
            os._exit(0)
        if line.strip():
            receive(json.loads(line))


# ---- serialisation -----------------------------------------------------------


def ser(v: Any) -> Any:
    """The plain JSON shape of a value as the API shows it: LangChain
    messages and other pydantic models as their model_dump(), dataclasses
    (Interrupt, Send, Command) as dicts, errors as {type, message}."""
    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, float):
        return v if v == v and v not in (float("inf"), float("-inf")) else None
    if isinstance(v, dict):
        return {str(k): ser(x) for k, x in v.items()}
    if isinstance(v, (list, tuple, set, frozenset)):
        return [ser(x) for x in v]
    if isinstance(v, (datetime.datetime, datetime.date, datetime.time)):
        return v.isoformat()
    if isinstance(v, uuid.UUID):
        return str(v)
    if isinstance(v, enum.Enum):
        return ser(v.value)
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    if isinstance(v, BaseException):
        return {"error": type(v).__name__, "message": str(v)}
    dump = getattr(v, "model_dump", None)
    if callable(dump):
        try:
            return ser(dump())
        except Exception:  # noqa: BLE001
            pass
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return {f.name: ser(getattr(v, f.name)) for f in dataclasses.fields(v)}
    asdict = getattr(v, "_asdict", None)
    if callable(asdict):
        return ser(asdict())
    to_json = getattr(v, "to_json", None)
    if callable(to_json):
        try:
            return ser(to_json())
        except Exception:  # noqa: BLE001
            pass
    if isinstance(v, type):
        return v.__name__
    return str(v)


def ref(config: Any) -> dict | None:
    c = (config or {}).get("configurable") if isinstance(config, dict) else None
    if not c:
        return None
    return {"thread_id": c.get("thread_id"), "checkpoint_ns": c.get("checkpoint_ns") or "", "checkpoint_id": c.get("checkpoint_id")}


def state_out(s: Any) -> dict:
    tasks = []
    for t in s.tasks or ():
        st = t.state
        tasks.append(
            {
                "id": t.id,
                "name": t.name,
                "path": ser(t.path or []),
                "error": None if t.error is None else str(t.error),
                "interrupts": ser(list(t.interrupts or ())),
                "checkpoint": ref(st) if isinstance(st, dict) else None,
                "state": state_out(st) if st is not None and not isinstance(st, dict) else None,
                "result": ser(getattr(t, "result", None)),
            }
        )
    return {
        "values": ser(s.values if s.values is not None else {}),
        "next": list(s.next or ()),
        "tasks": tasks,
        "checkpoint": ref(s.config),
        "metadata": ser(s.metadata or {}),
        "created_at": s.created_at,
        "parent_checkpoint": ref(s.parent_config) if s.parent_config else None,
        "interrupts": [i for t in tasks for i in t["interrupts"]],
    }


# The API's shape of the checkpoints LangGraph streams (checkpoints mode,
# and debug's checkpoint chunks), as the Python reference server shows
# them: configs also as checkpoint references (checkpoint,
# parent_checkpoint) naming what the config names — checkpoint_ns and
# checkpoint_map only when the config has them (the JavaScript reference
# always shows checkpoint_map, and the JavaScript host does) — no internal
# configurable keys, and a task's subgraph config as its checkpoint.
def checkpoint_ref(config: Any) -> dict | None:
    c = (config or {}).get("configurable") if isinstance(config, dict) else None
    if not c or not isinstance(c.get("thread_id"), str) or not c["thread_id"] or not c.get("checkpoint_id"):
        return None
    out = {"checkpoint_id": c["checkpoint_id"], "thread_id": c["thread_id"]}
    if "checkpoint_ns" in c:
        out["checkpoint_ns"] = c["checkpoint_ns"] or ""
    if "checkpoint_map" in c:
        out["checkpoint_map"] = c["checkpoint_map"]
    return out


def public_config(config: Any) -> Any:
    if not isinstance(config, dict) or not isinstance(config.get("configurable"), dict):
        return config
    rest = {k: v for k, v in config.items() if k != "callbacks"}
    rest["configurable"] = {k: v for k, v in config["configurable"].items() if not k.startswith("__")}
    return rest


def shape_task(task: Any) -> Any:
    # A subgraph's task names its checkpoint by its state's configurable
    # (thread and namespace), as the reference shows it.
    if not isinstance(task, dict) or not isinstance(task.get("state"), dict):
        return task
    c = task["state"].get("configurable")
    if not c:
        return task
    out = {k: v for k, v in task.items() if k != "state"}
    out["checkpoint"] = c
    return out


def shape_checkpoint(payload: Any) -> Any:
    if not isinstance(payload, dict):
        return payload
    out = dict(payload)
    out["config"] = public_config(payload.get("config"))
    out["parent_config"] = public_config(payload.get("parent_config"))
    out["checkpoint"] = checkpoint_ref(payload.get("config"))
    out["parent_checkpoint"] = checkpoint_ref(payload.get("parent_config"))
    out["tasks"] = [shape_task(t) for t in payload.get("tasks") or []]
    return out


def shape_chunk(mode: str, data: Any) -> Any:
    if mode == "checkpoints":
        return shape_checkpoint(data)
    if mode == "tasks":
        return shape_task(data)
    if mode == "debug" and isinstance(data, dict):
        if data.get("type") == "checkpoint":
            return {**data, "payload": shape_checkpoint(data.get("payload"))}
        if data.get("type") == "task_result":
            return {**data, "payload": shape_task(data.get("payload"))}
    return data


# ---- runs and their synchronous nodes ----------------------------------------

# The run a piece of code belongs to: LangGraph runs synchronous nodes in
# the loop's default executor with the submitting task's context, so the
# executor can count each run's threads, and a cancelled run whose
# synchronous node never returns is reported stuck.
current_run: contextvars.ContextVar[str | None] = contextvars.ContextVar("slipway_run", default=None)
busy: collections.Counter = collections.Counter()
busy_lock = threading.Lock()


class RunExecutor(ThreadPoolExecutor):
    def submit(self, fn, /, *args, **kwargs):
        rid = current_run.get()
        if rid is None:
            return super().submit(fn, *args, **kwargs)
        with busy_lock:
            busy[rid] += 1

        def counted():
            try:
                return fn(*args, **kwargs)
            finally:
                with busy_lock:
                    busy[rid] -= 1
                    if busy[rid] <= 0:
                        del busy[rid]

        return super().submit(counted)


# ---- loading -----------------------------------------------------------------

lg_version = ""
graphs: dict[str, dict] = {}  # id → {"graph": compiled} | {"factory": fn}
results: dict[str, dict] = {}
http_app: Any = None
http_app_result: dict | None = None
http_mounted = False  # mount_before_api mounted http_app
saver = store = None
lg = None  # namespace of the LangGraph classes the host needs


def load_module(spec: dict) -> Any:
    if spec.get("module"):
        return importlib.import_module(spec["module"])
    path = spec["file"]
    name = os.path.splitext(os.path.basename(path))[0]
    existing = sys.modules.get(name)
    if existing is not None and os.path.abspath(getattr(existing, "__file__", "") or "") != path:
        name = f"__slipway_graph_{abs(hash(path)):x}_{name}"
    elif existing is not None:
        return existing
    mspec = importlib.util.spec_from_file_location(name, path)
    if mspec is None or mspec.loader is None:
        raise ImportError(f"cannot load {path}")
    mod = importlib.util.module_from_spec(mspec)
    sys.modules[name] = mod  # dataclasses and pydantic look their module up
    try:
        mspec.loader.exec_module(mod)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return mod


def load_error(err: BaseException) -> str:
    """The loader's message: the exception with the user's frames only
    (none of the host's or importlib's)."""
    te = traceback.TracebackException.from_exception(err)
    te.stack = traceback.StackSummary.from_list(
        [f for f in te.stack if f.filename != os.path.abspath(__file__) and not f.filename.startswith("<frozen")]
    )
    if not te.stack:
        return "".join(te.format_exception_only()).strip()
    return "".join(te.format()).strip()


def prepare(g: Any, gid: str) -> Any:
    """Compiles a StateGraph and gives a compiled graph Slipway's
    checkpointer and store, whatever the user compiled it with. A graph
    left with LangGraph's default name takes its graph id, as on the
    reference server: clients see it as the root run's name (messages and
    events metadata) and in the state schema's title."""
    if isinstance(g, lg.StateGraph):
        g = g.compile()
    if not isinstance(g, lg.Pregel):
        raise TypeError(f"the export is not a LangGraph graph (a {type(g).__name__})")
    g.checkpointer = saver
    g.store = store
    if g.name == "LangGraph":
        # A copy: the same graph object may be exported under two ids.
        g = g.copy(update={"name": gid})
    return g


@contextlib.asynccontextmanager
async def graph_for(gid: str, config: dict, access: str, context: Any = None) -> AsyncIterator[Any]:
    """The graph gid, made by its factory when it has one (see
    slipway_factory) for access, the reference's access context."""
    entry = graphs.get(gid)
    if entry is None:
        raise LookupError(f'graph "{gid}" is not loaded by this host')
    if "graph" in entry:
        yield entry["graph"]
        return
    runtime = slipway_factory.server_runtime(access, store, context)
    async with slipway_factory.produce(entry["factory"], entry["kwargs"], config, runtime) as made:
        yield prepare(made, gid)


async def load_graphs(loop: asyncio.AbstractEventLoop) -> None:
    global saver, store, lg, lg_version
    try:
        import types

        from langgraph.graph import StateGraph
        from langgraph.pregel import Pregel
        from langgraph.types import Command, Send
        from slipway_saver import SlipwaySaver
        from slipway_store import SlipwayStore

        lg = types.SimpleNamespace(StateGraph=StateGraph, Pregel=Pregel, Command=Command, Send=Send)
        saver = SlipwaySaver(call, loop)
        store = SlipwayStore(call, loop)
        lg_version = importlib.metadata.version("langgraph")
    except Exception as err:  # noqa: BLE001
        for gid in CFG["graphs"]:
            results[gid] = {"ok": False, "error": f"cannot import langgraph with {sys.executable}: {type(err).__name__}: {err}"}
        return
    for gid, spec in CFG["graphs"].items():
        try:
            mod = load_module(spec)
            if not hasattr(mod, spec["export"]):
                raise AttributeError(f'{spec["source"]} has no attribute named "{spec["export"]}"')
            g = getattr(mod, spec["export"])
            name = None
            if isinstance(g, (lg.Pregel, lg.StateGraph)):
                graphs[gid] = {"graph": prepare(g, gid)}
                # As the reference: a compiled graph's own name (compile(name=...),
                # graph.name = ...) names its system assistant, unless it is the default.
                if isinstance(g, lg.Pregel) and isinstance(g.name, str) and g.name != "LangGraph":
                    name = g.name
            elif callable(g):
                graphs[gid] = {"factory": g, "kwargs": slipway_factory.classify(g)}
            else:
                raise TypeError(f"the export is not a LangGraph graph (a {type(g).__name__})")
            results[gid] = {"ok": True, **({"name": name} if name else {})}
        except BaseException as err:  # noqa: BLE001 - SystemExit from a graph module too
            results[gid] = {"ok": False, "error": f"{spec['source']}: {load_error(err)}"}
    await load_http_app()


async def load_http_app() -> None:
    global http_app, http_app_result, http_mounted
    spec = CFG.get("http_app")
    if not spec:
        return
    try:
        mod = load_module(spec)
        if not hasattr(mod, spec["export"]):
            raise AttributeError(f'{spec["source"]} has no attribute named "{spec["export"]}"')
        app = getattr(mod, spec["export"])
        if not callable(app):
            raise TypeError(f"the export is not an ASGI application (a {type(app).__name__})")
        http_mounted = mount_before_api(app)
        http_app = app
        http_app_result = {"ok": True, **({"openapi": doc} if (doc := app_openapi(app)) else {})}
    except BaseException as err:  # noqa: BLE001
        http_app_result = {"ok": False, "error": f"{spec['source']}: {load_error(err)}"}


def app_openapi(app: Any) -> dict | None:
    """The app's routes as an OpenAPI document, for Slipway to merge into
    the deployment's /openapi.json, as the reference server does: FastAPI's
    own document, or one operation per Starlette route (a docstring's first
    line is its summary; YAML after "---" in it, with PyYAML installed, its
    OpenAPI fields, Starlette's convention)."""
    info = {"title": "Custom routes", "version": "0.0.0"}
    try:
        if callable(getattr(app, "openapi", None)) and hasattr(app, "openapi_schema"):
            return app.openapi()
        if getattr(app, "routes", None) is None:
            return None
        from starlette.schemas import BaseSchemaGenerator

        class Endpoints(BaseSchemaGenerator):
            def get_schema(self, routes):  # pragma: no cover - unused
                return {}

        paths: dict = {}
        for ep in Endpoints().get_endpoints(app.routes):
            head, sep, rest = (inspect.getdoc(ep.func) or "").partition("---")
            op: dict = {"summary": head.strip().splitlines()[0] if head.strip() else f"{ep.http_method.upper()} {ep.path}", "tags": ["Custom routes"]}
            params = re.findall(r"{([^}:]+)}", ep.path)
            if params:
                op["parameters"] = [{"name": n, "in": "path", "required": True, "schema": {"type": "string"}} for n in params]
            if sep:
                try:
                    import yaml

                    extra = yaml.safe_load(rest)
                    if isinstance(extra, dict):
                        op.update(extra)
                except Exception:  # noqa: BLE001 - no PyYAML, or not YAML: the summary stays
                    pass
            op.setdefault("responses", {"default": {"description": "The project's app answers."}})
            paths.setdefault(ep.path, {})[ep.http_method] = op
        return {"openapi": "3.1.0", "info": info, "paths": paths}
    except Exception as err:  # noqa: BLE001 - the document is an extra; the routes still serve
        print(f"slipway host: the custom routes' OpenAPI document could not be made: {err}", file=sys.stderr)
        return None


# pass_on is the record of the request in flight that no route of the app
# serves (see mount_before_api); None when the request must be answered by
# the app whatever it routes.
pass_on: contextvars.ContextVar[dict | None] = contextvars.ContextVar("slipway_pass_on", default=None)


def mount_before_api(app: Any) -> bool:
    """Mount a Starlette (or FastAPI) app before Slipway's agent API, as
    the reference server merges the app's routes before its own: a request
    none of the app's routes fully matches (a path of its own with another
    method included: the API may serve that method) reaches
    pass_on_request once the app's middleware has run, and Slipway serves
    it with the API. Another ASGI app answers for itself; its 404 passes
    the request on."""
    router = getattr(app, "router", None)
    inner = getattr(router, "app", None)
    if inner is None or getattr(router, "middleware_stack", None) != inner:
        return False  # not a Starlette router, or one with middleware of its own

    async def routed(scope, receive, send):
        if scope["type"] == "http" and pass_on.get() is not None:
            from starlette.routing import Match

            if not any(route.matches(scope)[0] is Match.FULL for route in router.routes):
                await pass_on_request(scope, receive, send)
                return
        await inner(scope, receive, send)

    router.middleware_stack = routed
    return True


async def pass_on_request(scope, receive, send) -> None:
    """Record that the request goes on to the API, with its body if the
    app's middleware put another receive in place (it may have changed the
    body), and answer 404 so that middleware sees an answer and adds its
    headers to it."""
    state = pass_on.get()
    state["fallthrough"] = True
    if receive is not state["receive"]:
        chunks = []
        while True:
            msg = await receive()
            if msg["type"] != "http.request":
                break
            chunks.append(msg.get("body") or b"")
            if not msg.get("more_body"):
                break
        state["body"] = b"".join(chunks)
    await send({"type": "http.response.start", "status": 404, "headers": []})
    await send({"type": "http.response.body", "body": b""})


# ---- runs --------------------------------------------------------------------

runs: dict[str, asyncio.Task] = {}
LIB_MODES = {"values", "updates", "custom", "debug", "tasks", "checkpoints"}


def command_of(c: dict | None) -> Any:
    if not c:
        return None
    kwargs: dict[str, Any] = {}
    if "resume" in c and c["resume"] is not None:
        kwargs["resume"] = c["resume"]
    if c.get("update") is not None:
        kwargs["update"] = c["update"]
    if c.get("goto") is not None:
        goto = c["goto"] if isinstance(c["goto"], list) else [c["goto"]]
        kwargs["goto"] = [g if isinstance(g, str) else lg.Send(g["node"], g.get("input")) for g in goto]
    return lg.Command(**kwargs)


async def h_run(p: dict) -> dict:
    rid = p["run_id"]
    runs[rid] = asyncio.current_task()
    current_run.set(rid)
    try:
        return await execute(p)
    except asyncio.CancelledError:
        return {"status": "interrupted"}
    except Exception as err:  # noqa: BLE001
        return {"status": "error", "error": error_of(err)}
    finally:
        runs.pop(rid, None)


async def h_cancel(p: dict) -> dict:
    """Cancels a run's task; answered once the run has unwound, its
    synchronous nodes included, or after the grace period with stuck:
    true (a thread cannot be stopped: Slipway restarts the host)."""
    rid = p["run_id"]
    task = runs.get(rid)
    if task is None and not busy.get(rid):
        return {"cancelled": False}
    if task is not None:
        task.cancel()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + float(p.get("grace_seconds") or CANCEL_GRACE)
    while loop.time() < deadline:
        if (task is None or task.done()) and not busy.get(rid):
            return {"cancelled": True}
        await asyncio.sleep(0.02)
    return {"cancelled": False, "stuck": True}


async def execute(p: dict) -> dict:
    api_config = dict(p.get("config") or {})
    configurable = {
        **(api_config.get("configurable") or {}),
        "thread_id": p["thread_id"],
        "run_id": p["run_id"],
        "graph_id": p["graph_id"],
        "checkpoint_ns": "",
    }
    if p.get("assistant_id"):
        configurable["assistant_id"] = p["assistant_id"]
    if p.get("checkpoint_id"):
        configurable["checkpoint_id"] = p["checkpoint_id"]
    config = {**api_config, "configurable": configurable}
    # As the reference: a run's checkpoints record the run's metadata (the
    # saver merges config metadata into theirs), so history can be
    # filtered by it, with the graph and assistant that made them.
    config["metadata"] = {
        **(api_config.get("metadata") or {}),
        **(p.get("metadata") or {}),
        "graph_id": p["graph_id"],
        **({"assistant_id": p["assistant_id"]} if p.get("assistant_id") else {}),
        "run_attempt": 1,
        "langgraph_version": lg_version,
    }
    try:
        config["run_id"] = uuid.UUID(p["run_id"])
    except (ValueError, TypeError):
        pass
    async with graph_for(p["graph_id"], config, "threads.create_run", p.get("context")) as graph:
        modes = p.get("stream_mode") or ["values"]
        lib = [m for m in modes if m in LIB_MODES]
        if "messages" in modes or "messages-tuple" in modes:
            lib.append("messages")
        if not lib:
            lib.append("values")
        lib = list(dict.fromkeys(lib))
        inp = command_of(p["command"]) if p.get("command") else p.get("input")
        subgraphs = bool(p.get("subgraphs"))
        kwargs: dict[str, Any] = {"stream_mode": lib, "subgraphs": subgraphs}
        if p.get("context") is not None:
            kwargs["context"] = p["context"]
        if p.get("interrupt_before") is not None:
            kwargs["interrupt_before"] = p["interrupt_before"]
        if p.get("interrupt_after") is not None:
            kwargs["interrupt_after"] = p["interrupt_after"]
        rid = p["run_id"]

        def emit(event: str, data: Any) -> None:
            notify("event", {"run_id": rid, "event": event, "data": ser(data)})

        partial: dict[str, Any] = {}

        def handle(chunk: Any) -> None:
            if subgraphs:
                ns, mode, data = chunk
            else:
                (mode, data), ns = chunk, ()
            suffix = "|" + "|".join(ns) if ns else ""
            if mode == "messages":
                msg, metadata = data
                if "messages-tuple" in modes:
                    emit("messages" + suffix, [msg, metadata])
                if "messages" in modes:
                    mid = getattr(msg, "id", None)
                    if mid and mid not in partial:
                        emit("messages/metadata" + suffix, {mid: {"metadata": metadata}})
                    if not type(msg).__name__.endswith("Chunk"):
                        emit("messages/complete" + suffix, [msg])
                    else:
                        acc = partial[mid] + msg if mid in partial else msg
                        if mid:
                            partial[mid] = acc
                        emit("messages/partial" + suffix, [acc])
                return
            if mode in modes:
                emit(mode + suffix, shape_chunk(mode, data))

        if "events" in modes:
            # The events mode is LangChain's astream_events (v2) on the graph,
            # as the reference server streams it: the root run's own
            # on_chain_stream events carry the other modes' chunks, every
            # other event goes out as an `events` event. Only runs that ask
            # for it pay for the callbacks.
            root = str(config.get("run_id", ""))
            async for ev in graph.astream_events(inp, config, version="v2", **kwargs):
                if "langsmith:hidden" in (ev.get("tags") or []):
                    continue
                if ev.get("event") == "on_chain_stream" and ev.get("run_id") == root:
                    handle(ev["data"]["chunk"])
                    continue
                emit("events", ev)
        else:
            async for chunk in graph.astream(inp, config, **kwargs):
                handle(chunk)
        state = await graph.aget_state({"configurable": {"thread_id": p["thread_id"], "checkpoint_ns": ""}})
        out = state_out(state)
        return {"status": "success", "values": out["values"], "next": out["next"], "tasks": out["tasks"], "interrupts": out["interrupts"]}


# ---- state -------------------------------------------------------------------


def state_config(p: dict) -> dict:
    c = {"thread_id": p["thread_id"], "checkpoint_ns": p.get("checkpoint_ns") or ""}
    if p.get("checkpoint_id"):
        c["checkpoint_id"] = p["checkpoint_id"]
    return {"configurable": c}


def factory_config(p: dict, config: dict) -> dict:
    """The config a factory builds the thread's graph with for a read or an
    update of its state: the thread's config (its assistant's and its runs',
    sent by the engine), as the reference calls get_graph with it."""
    tc = dict(p.get("config") or {})
    return {**tc, "configurable": {**(tc.get("configurable") or {}), **config["configurable"]}}


async def h_state(p: dict) -> dict:
    config = state_config(p)
    async with graph_for(p["graph_id"], factory_config(p, config), "threads.read") as graph:
        return state_out(await graph.aget_state(config, subgraphs=bool(p.get("subgraphs"))))


async def h_history(p: dict) -> list:
    config = state_config(p)
    async with graph_for(p["graph_id"], factory_config(p, config), "threads.read") as graph:
        before = {"configurable": {"checkpoint_id": p["before"]}} if p.get("before") else None
        return [
            state_out(s)
            async for s in graph.aget_state_history(config, filter=p.get("filter") or None, before=before, limit=p.get("limit") or None)
        ]


async def h_update_state(p: dict) -> dict:
    config = state_config(p)
    # The new checkpoint's metadata names its graph, as a run's do.
    config["metadata"] = {**(config.get("metadata") or {}), "graph_id": p["graph_id"]}
    async with graph_for(p["graph_id"], factory_config(p, config), "threads.update") as graph:
        nxt = await graph.aupdate_state(config, p.get("values"), as_node=p.get("as_node") or None)
        state = await graph.aget_state({"configurable": {"thread_id": p["thread_id"], "checkpoint_ns": ""}})
        return {"checkpoint": ref(nxt), "state": state_out(state)}


async def h_bulk_update_state(p: dict) -> dict:
    """Supersteps of a thread's create request: each a checkpoint with its
    updates, each applied as its node (values, or a command)."""
    from langgraph.types import StateUpdate  # the project's LangGraph: bulk updates are newer than the host

    config = state_config(p)
    steps = [
        [
            StateUpdate(command_of(u["command"]) if u.get("command") else u.get("values"), u.get("as_node") or None)
            for u in (s.get("updates") or [])
        ]
        for s in p.get("supersteps") or []
    ]
    async with graph_for(p["graph_id"], factory_config(p, config), "threads.update") as graph:
        nxt = await graph.abulk_update_state(config, steps)
        state = await graph.aget_state({"configurable": {"thread_id": p["thread_id"], "checkpoint_ns": ""}})
        return {"checkpoint": ref(nxt), "state": state_out(state)}


# ---- graph descriptions ------------------------------------------------------


async def h_graph(p: dict) -> Any:
    async with graph_for(p["graph_id"], p.get("config") or {}, "assistants.read") as graph:
        xray = p.get("xray")
        drawable = await graph.aget_graph(p.get("config") or None, xray=xray if xray is not None else False)
        out = drawable.to_json()
        # As the reference: a node's data without the runnable's class path
        # (an implementation detail of LangGraph, not of the user's graph).
        for node in out.get("nodes", []):
            if isinstance(node.get("data"), dict):
                node["data"].pop("id", None)
        return out


def state_schema(graph: Any) -> dict | None:
    # As the reference server: one property per streamed channel, typed by
    # what an update to it takes.
    from pydantic import TypeAdapter, create_model

    fields: dict[str, Any] = {}
    for k in graph.stream_channels_list:
        ch = graph.channels.get(k)
        if ch is None:
            continue
        try:
            TypeAdapter(ch.UpdateType).json_schema()
            fields[k] = (ch.UpdateType, None)
        except Exception:  # noqa: BLE001 - a type pydantic cannot describe
            fields[k] = (Any, None)
    return create_model(graph.get_name("State"), **fields).model_json_schema()


def schemas_of(graph: Any) -> dict:
    def get(fn):
        try:
            return fn()
        except Exception:  # noqa: BLE001
            return None

    def config_schema():
        s = graph.get_config_jsonschema()
        conf = (s.get("properties") or {}).get("configurable")
        if not conf:
            return {}  # as the reference: a graph with nothing configurable has an empty schema
        ref_ = conf.get("$ref") or next((x.get("$ref") for x in conf.get("allOf") or [] if "$ref" in x), None)
        if ref_:
            name = ref_.rsplit("/", 1)[-1]
            out = dict((s.get("$defs") or {}).get(name) or {})
            defs = {k: v for k, v in (s.get("$defs") or {}).items() if k != name}
            if defs:
                out["$defs"] = defs
            return out
        return conf

    def context_schema():
        if getattr(graph, "context_schema", None) is None:
            return None
        return graph.get_context_jsonschema()

    return {
        "input": get(graph.get_input_jsonschema),
        "output": get(graph.get_output_jsonschema),
        "state": get(lambda: state_schema(graph)),
        "config": get(config_schema),
        "context": get(context_schema),
    }


async def h_schemas(p: dict) -> dict:
    async with graph_for(p["graph_id"], p.get("config") or {}, "assistants.read") as graph:
        s = schemas_of(graph)
    return {"graph_id": p["graph_id"], **reference_schemas(s)}


def reference_schemas(s: dict) -> dict:
    """The Python reference server's schema record: every key present (a
    graph without a context schema has null, one without configurable
    fields an empty config schema)."""
    return {
        "input_schema": s["input"],
        "output_schema": s["output"],
        "state_schema": s["state"],
        "config_schema": s["config"] if s["config"] is not None else {},
        "context_schema": s["context"],
    }


async def h_subgraphs(p: dict) -> dict:
    async with graph_for(p["graph_id"], p.get("config") or {}, "assistants.read") as graph:
        out = {}
        async for ns, sub in graph.aget_subgraphs(namespace=p.get("namespace") or None, recurse=bool(p.get("recurse"))):
            s = schemas_of(sub)
            out[ns] = reference_schemas(s)
        return out


# ---- custom routes -----------------------------------------------------------


async def h_http(p: dict) -> dict:
    """One request to the custom route app (ASGI 3, "http" scope): a
    small body arrives whole, a large or chunked one (body_streamed) as the
    app's receive() calls ask Slipway for it; the response is collected
    whole."""
    import base64
    import urllib.parse

    if http_app is None:
        raise LookupError("this host serves no custom route app")
    body = base64.b64decode(p.get("body") or "")
    raw_path, _, query = (p.get("url") or "/").partition("?")
    path = urllib.parse.unquote(raw_path)
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": p.get("method") or "GET",
        "scheme": "http",
        "path": path,
        "raw_path": raw_path.encode("latin-1"),
        "query_string": query.encode("latin-1"),
        "root_path": "",
        "headers": [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in p.get("headers") or []],
        "client": None,
        "server": None,
        "state": {},
    }
    delivered = False
    streamed = bool(p.get("body_streamed"))

    async def receive() -> dict:
        nonlocal delivered
        if not delivered and streamed:
            chunk = await call("http.read", {"stream_id": p.get("stream_id")})
            delivered = bool(chunk.get("eof"))
            return {"type": "http.request", "body": base64.b64decode(chunk.get("body") or ""), "more_body": not delivered}
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        # The client stays connected until the response is complete.
        await asyncio.Future()

    status, headers, chunks = 500, [], []

    async def send(msg: dict) -> None:
        nonlocal status, headers
        if msg["type"] == "http.response.start":
            status = msg["status"]
            headers = [[k.decode("latin-1"), v.decode("latin-1")] for k, v in msg.get("headers") or []]
        elif msg["type"] == "http.response.body":
            chunks.append(msg.get("body") or b"")

    state = {"receive": receive} if p.get("fallthrough") else None
    token = pass_on.set(state)
    try:
        await http_app(scope, receive, send)
    finally:
        pass_on.reset(token)
    if state is not None and (state.get("fallthrough") or (status == 404 and not http_mounted)):
        out = {"fallthrough": True, "headers": headers if state.get("fallthrough") else []}
        if "body" in state:
            out.update(body_replaced=True, body=base64.b64encode(state["body"]).decode("ascii"))
        return out
    return {"status": status, "headers": headers, "body": base64.b64encode(b"".join(chunks)).decode("ascii")}


handlers.update(
    http=h_http,
    run=h_run,
    cancel=h_cancel,
    state=h_state,
    history=h_history,
    update_state=h_update_state,
    bulk_update_state=h_bulk_update_state,
    graph=h_graph,
    schemas=h_schemas,
    subgraphs=h_subgraphs,
)

# ---- main --------------------------------------------------------------------


async def main() -> None:
    global writer
    loop = asyncio.get_running_loop()
    loop.set_default_executor(RunExecutor(thread_name_prefix="slipway-sync-node"))
    sock = socket.socket(fileno=3)
    os.set_inheritable(sock.fileno(), False)
    reader, writer = await asyncio.open_unix_connection(sock=sock, limit=MAX_FRAME + 1)
    reading = asyncio.ensure_future(read_loop(reader))
    # Graphs are imported inside the loop: a module may start tasks on it.
    await load_graphs(loop)
    notify(
        "ready",
        {
            "protocol": PROTOCOL,
            "language": "python",
            "runtime": f"python {platform.python_version()} ({sys.executable})",
            "langgraph": lg_version,
            "graphs": results,
            **({"http": http_app_result} if http_app_result is not None else {}),
        },
    )
    await reading


if __name__ == "__main__":
    asyncio.run(main())
