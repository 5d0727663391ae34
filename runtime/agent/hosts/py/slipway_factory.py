"""Graph factories, called as the reference server calls them.

A graph in langgraph.json may name a function instead of a graph. The
reference classifies it by its signature: no parameter; one parameter that
is the run's config, or a ServerRuntime (by annotation); or both, in either
order. It may return a graph, an awaitable of one, or a (sync or async)
context manager that yields one and is exited when the graph is no longer
used (a run's end, or the read that asked for it).
"""

from __future__ import annotations

import contextlib
import copy
import inspect
import typing
from collections.abc import AsyncIterator, Callable
from typing import Any, get_args, get_origin

try:  # langgraph-sdk >= 0.2.x; older projects get a look-alike below
    from langgraph_sdk.runtime import ServerRuntime, _ExecutionRuntime, _ReadRuntime

    RUNTIME_CLASSES: tuple[type, ...] = (_ExecutionRuntime, _ReadRuntime)
except ImportError:  # pragma: no cover - depends on the project's packages
    ServerRuntime = None
    _ExecutionRuntime = _ReadRuntime = None
    RUNTIME_CLASSES = ()

EXECUTION = "threads.create_run"


class _Runtime:
    """What a factory gets for ServerRuntime when the project's SDK has none."""

    def __init__(self, access_context: str, store: Any, context: Any = None) -> None:
        self.access_context = access_context
        self.user = None
        self.store = store
        self.context = context

    @property
    def execution_runtime(self) -> _Runtime | None:
        return self if self.access_context == EXECUTION else None

    def ensure_user(self) -> Any:
        raise PermissionError(f"No authenticated user available in access_context='{self.access_context}'.")


def is_runtime_annotation(annotation: Any) -> bool:
    if annotation is inspect.Parameter.empty or annotation is None:
        return False
    if isinstance(annotation, str):  # unresolved: compare by name
        return annotation.split("[", 1)[0].rsplit(".", 1)[-1] == "ServerRuntime"
    if ServerRuntime is not None and annotation is ServerRuntime:
        return True
    if isinstance(annotation, type):
        return bool(RUNTIME_CLASSES) and issubclass(annotation, RUNTIME_CLASSES)
    origin = get_origin(annotation)
    if origin is not None:
        if ServerRuntime is not None and origin is ServerRuntime:
            return True
        args = get_args(annotation)
        return bool(args) and is_runtime_annotation(args[0])
    return False


def classify(fn: Callable) -> Callable[[dict, Any], dict]:
    """The keyword arguments a factory is called with, from its signature."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return lambda config, runtime: {"config": config}
    try:
        localns = {"RunnableConfig": dict, "Config": dict}
        if ServerRuntime is not None:
            localns["ServerRuntime"] = ServerRuntime
        hints = typing.get_type_hints(fn, localns=localns)
    except Exception:  # noqa: BLE001 - annotations that do not resolve
        hints = {}

    def runtime_param(p: inspect.Parameter) -> bool:
        return is_runtime_annotation(hints.get(p.name, p.annotation))

    if not params:
        return lambda config, runtime: {}
    if len(params) == 1:
        name = params[0].name
        if runtime_param(params[0]):
            return lambda config, runtime: {name: runtime}
        return lambda config, runtime: {name: config}
    if len(params) == 2:
        rt = [i for i, p in enumerate(params) if runtime_param(p)]
        if len(rt) != 1:
            raise TypeError(f"graph factory {getattr(fn, '__name__', fn)} takes two parameters: one must be annotated ServerRuntime, the other is the config")
        rt_name, cfg_name = params[rt[0]].name, params[1 - rt[0]].name
        return lambda config, runtime: {rt_name: runtime, cfg_name: config}
    raise TypeError(f"graph factory {getattr(fn, '__name__', fn)} must take 0, 1 or 2 parameters, not {len(params)}")


def server_runtime(access_context: str, store: Any, context: Any = None) -> Any:
    if _ExecutionRuntime is None:
        return _Runtime(access_context, store, context if access_context == EXECUTION else None)
    if access_context == EXECUTION:
        return _ExecutionRuntime(access_context=access_context, store=store, context=copy.copy(context))
    return _ReadRuntime(access_context=access_context, store=store)


@contextlib.asynccontextmanager
async def produce(fn: Callable, kwargs_of: Callable[[dict, Any], dict], config: dict, runtime: Any) -> AsyncIterator[Any]:
    """Calls the factory and yields what it makes, inside its context
    manager when it returns one."""
    value = fn(**kwargs_of(config, runtime))
    if hasattr(value, "__aenter__") and hasattr(value, "__aexit__"):
        async with value as graph:
            yield graph
    elif hasattr(value, "__enter__") and hasattr(value, "__exit__"):
        with value as graph:
            yield graph
    else:
        if inspect.isawaitable(value):
            value = await value
        yield value
