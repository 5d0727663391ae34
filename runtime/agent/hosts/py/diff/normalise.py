"""Normalising what a client saw so two servers' records compare (as the
JS differential test's normalise.mjs does): every UUID (and 32-hex
interrupt id) becomes <id:N>, numbered by first appearance in a walk that
visits object keys in sorted order, so the servers' key order does not
matter while the relations between ids (a parent checkpoint, a run's
thread) still must match; times become <time>; a host's process id <pid>."""

import json
import re
from typing import Any, Callable

UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.I)
HEX32 = re.compile(r"\b[0-9a-f]{32}\b")
ISO_TIME = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:?\d{2})?")
TIME_KEYS = {"created_at", "updated_at", "timestamp", "next_run_date", "end_time"}


def normalise(value: Any, drop: Callable[[str], bool] = lambda _p: False) -> Any:
    """drop(path) says whether a path's value leaves the comparison (an
    allowed difference): it is removed before ids are numbered, so a field
    one server has and the other lacks does not renumber every id after it."""
    ids: dict[str, str] = {}

    def number(m: re.Match) -> str:
        k = m.group(0).lower()
        if k not in ids:
            ids[k] = f"<id:{len(ids) + 1}>"
        return ids[k]

    def walk(v: Any, key: str | None, path: str) -> Any:
        if isinstance(v, str):
            if key in TIME_KEYS:
                return "<time>"
            return ISO_TIME.sub("<time>", HEX32.sub(number, UUID.sub(number, v)))
        if isinstance(v, (int, float)) and not isinstance(v, bool) and key in ("pid", *TIME_KEYS):
            return "<pid>" if key == "pid" else "<time>"
        at = (lambda k: f"{path}.{k}") if path else (lambda k: str(k))
        if isinstance(v, (list, tuple)):
            return [walk(x, None, at(i)) for i, x in enumerate(v)]
        if isinstance(v, dict):
            out = {}
            for k in sorted(v, key=str):
                if not drop(at(k)):
                    out[walk(str(k), None, "")] = walk(v[k], str(k), at(k))
            return out
        return v

    return walk(value, None, "")


def show(v: Any) -> str:
    s = "(absent)" if v is _ABSENT else json.dumps(v, sort_keys=True, default=str)
    return s if len(s) <= 300 else s[:300] + "…"


_ABSENT = object()


def diff(ref: Any, got: Any, path: str = "") -> list[dict]:
    """Where two normalised values differ, as {path, reference, slipway};
    a path is dot-separated keys and list indexes."""
    if type(ref) is type(got) and ref == got:
        return []
    if isinstance(ref, dict) and isinstance(got, dict):
        keys = sorted(set(ref) | set(got))
        sub = lambda k: f"{path}.{k}" if path else str(k)  # noqa: E731
        return [d for k in keys for d in diff(ref.get(k, _ABSENT), got.get(k, _ABSENT), sub(k))]
    if isinstance(ref, list) and isinstance(got, list):
        sub = lambda k: f"{path}.{k}" if path else str(k)  # noqa: E731
        return [
            d
            for i in range(max(len(ref), len(got)))
            for d in diff(ref[i] if i < len(ref) else _ABSENT, got[i] if i < len(got) else _ABSENT, sub(i))
        ]
    return [{"path": path, "reference": show(ref), "slipway": show(got)}]
