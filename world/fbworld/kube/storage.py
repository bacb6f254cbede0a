"""In-memory object storage for one fake cluster.

Objects are kept in their kind's storage version, keyed by (group, plural)
and then (namespace, name); cluster-scoped objects use namespace "".
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from .resources import ResourceType


class Store:
    def __init__(self) -> None:
        self._data: dict[tuple[str, str], dict[tuple[str, str], dict]] = {}
        self._rv = 0

    # resourceVersion is one counter per cluster, like etcd's revision.
    def next_rv(self) -> str:
        self._rv += 1
        return str(self._rv)

    @property
    def current_rv(self) -> str:
        return str(self._rv)

    def _bucket(self, rt: ResourceType) -> dict[tuple[str, str], dict]:
        return self._data.setdefault((rt.group, rt.plural), {})

    def get(self, rt: ResourceType, ns: str | None, name: str) -> dict | None:
        return self._bucket(rt).get((ns or "", name))

    def set(self, rt: ResourceType, ns: str | None, name: str, obj: dict) -> None:
        self._bucket(rt)[(ns or "", name)] = obj

    def delete(self, rt: ResourceType, ns: str | None, name: str) -> dict | None:
        return self._bucket(rt).pop((ns or "", name), None)

    def items(self, rt: ResourceType, ns: str | None = None) -> list[dict]:
        bucket = self._bucket(rt)
        return [bucket[k] for k in sorted(bucket) if ns is None or k[0] == ns]

    def delete_namespace_contents(self, ns: str) -> None:
        for (_, _), bucket in self._data.items():
            for key in [k for k in bucket if k[0] == ns]:
                del bucket[key]


# ------------------------------------------------------------------ selectors


def _split_selector(sel: str) -> Iterator[str]:
    """Split on commas that are not inside `in (a,b)` parentheses."""
    depth, cur = 0, ""
    for ch in sel:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            if cur.strip():
                yield cur.strip()
            cur = ""
        else:
            cur += ch
    if cur.strip():
        yield cur.strip()


_SET_RE = re.compile(r"^([^\s!=]+)\s+(in|notin)\s+\((.*)\)$")


def match_labels(labels: dict[str, str], selector: str | None) -> bool:
    if not selector:
        return True
    for req in _split_selector(selector):
        m = _SET_RE.match(req)
        if m:
            key, op, vals = m.group(1), m.group(2), {v.strip() for v in m.group(3).split(",")}
            present = key in labels and labels[key] in vals
            if (op == "in") != present:
                return False
        elif "!=" in req:
            k, v = (s.strip() for s in req.split("!=", 1))
            if labels.get(k) == v:
                return False
        elif "=" in req:
            k, v = (s.strip() for s in req.replace("==", "=").split("=", 1))
            if labels.get(k) != v:
                return False
        elif req.startswith("!"):
            if req[1:].strip() in labels:
                return False
        elif req not in labels:
            return False
    return True


def _field_value(obj: dict, path: str) -> str:
    cur: Any = obj
    for part in path.split("."):
        cur = cur.get(part) if isinstance(cur, dict) else None
    if isinstance(cur, bool):
        return "true" if cur else "false"
    return "" if cur is None else str(cur)


def match_fields(obj: dict, selector: str | None) -> bool:
    if not selector:
        return True
    for req in _split_selector(selector):
        if "!=" in req:
            k, v = req.split("!=", 1)
            if _field_value(obj, k.strip()) == v.strip():
                return False
        else:
            k, v = req.replace("==", "=").split("=", 1)
            if _field_value(obj, k.strip()) != v.strip():
                return False
    return True
