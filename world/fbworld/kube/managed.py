"""metadata.managedFields for non-apply writes, the way the apiserver's field manager records an
Update (k8s.io/apiserver/pkg/endpoints/handlers: managerOrUserAgent + FieldManager.UpdateNoErrors).

Each Update entry is keyed by (manager, operation, subresource). The manager takes ownership of
every field it added or changed; other managers lose those fields, and fields the write removed
leave every set. Entries left with no fields are dropped.

Simplification: lists are owned whole (the fake has no per-type list-map keys), and a map gets a
"." entry only for labels/annotations maps the write created.
"""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from typing import Any

from .errors import invalid_kind

FIELD_MANAGER_MAX_LENGTH = 128  # validation.FieldManagerMaxLength

# Never tracked: identity and server-managed metadata.
_UNTRACKED_META = {
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "managedFields",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "selfLink",
}
_OWN_MAPS = {("metadata", "labels"), ("metadata", "annotations")}

Path = tuple[str, ...]


def prefix_from_user_agent(user_agent: str) -> str:
    """handlers.prefixFromUserAgent: the text before the first '/', printable runes only, at most
    128 bytes. kubernetes_asyncio sends "OpenAPI-Generator/<ver>/python" -> "OpenAPI-Generator"."""
    out = ""
    for ch in user_agent.split("/")[0]:
        if not ch.isprintable():  # Go's unicode.IsPrint: like Python's, space is the one printable space
            continue
        if len((out + ch).encode()) > FIELD_MANAGER_MAX_LENGTH:
            break
        out += ch
    return out


def validate_field_manager(manager: str, options_kind: str) -> None:
    """metav1validation.ValidateFieldManager, reported as NewInvalid(<Options>.meta.k8s.io)."""
    causes = []
    if len(manager.encode()) > FIELD_MANAGER_MAX_LENGTH:
        causes.append(
            {
                "reason": "FieldValueTooLong",
                "field": "fieldManager",
                "message": f"Too long: may not be more than {FIELD_MANAGER_MAX_LENGTH} bytes",
            }
        )
    for i, ch in enumerate(manager):
        if not ch.isprintable():
            pos = len(manager[:i].encode())  # Go reports byte offsets
            causes.append(
                {
                    "reason": "FieldValueInvalid",
                    "field": "fieldManager",
                    "message": f"Invalid value: {json.dumps(manager)}: invalid character U+{ord(ch):04X} "
                    f"(at position {pos})",
                }
            )
    if causes:
        raise invalid_kind("meta.k8s.io", options_kind, "", causes)


def leaf_paths(obj: Any, prefix: Path = ()) -> dict[Path, Any]:
    """Every owned leaf of an object: maps are walked, lists and scalars are leaves."""
    out: dict[Path, Any] = {}
    if isinstance(obj, dict) and (obj or not prefix):
        for k, v in obj.items():
            if not prefix and k in ("apiVersion", "kind"):
                continue
            if prefix == ("metadata",) and k in _UNTRACKED_META:
                continue
            out.update(leaf_paths(v, (*prefix, k)))
    elif prefix:
        out[prefix] = obj
    return out


def _dig(obj: Any, path: Path) -> Any:
    for p in path:
        if not isinstance(obj, dict) or p not in obj:
            return None
        obj = obj[p]
    return obj


def changed_paths(old: dict | None, new: dict) -> tuple[set[Path], set[Path]]:
    """(paths whose value the write set or changed, paths the write removed)."""
    before = leaf_paths(old or {})
    after = leaf_paths(new)
    changed = {p for p, v in after.items() if p not in before or before[p] != v}
    removed = set(before) - set(after)
    # A labels/annotations map the write created is owned as a whole too (".").
    for m in _OWN_MAPS:
        if isinstance(_dig(new, m), dict) and not isinstance(_dig(old or {}, m), dict):
            changed.add((*m, "."))
    return changed, removed


def _to_fields_v1(paths: set[Path]) -> dict:
    root: dict = {}
    for path in sorted(paths):
        cur = root
        for p in path:
            key = "." if p == "." else f"f:{p}"
            cur = cur.setdefault(key, {})
    return root


def _from_fields_v1(fields: dict, prefix: Path = ()) -> set[Path]:
    out: set[Path] = set()
    for k, v in (fields or {}).items():
        name = "." if k == "." else k[2:] if k.startswith("f:") else k
        path = (*prefix, name)
        if isinstance(v, dict) and v:
            out |= _from_fields_v1(v, path)
        else:
            out.add(path)
    return out


def _covered(path: Path, paths: set[Path]) -> bool:
    """True when `path` or one of its ancestors is in `paths` (a write to a parent owns the children)."""
    return any(path[:i] in paths for i in range(1, len(path) + 1))


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def record_update(old: dict | None, new: dict, manager: str, api_version: str, subresource: str | None) -> list[dict]:
    """The managedFields `new` gets when `manager` turns `old` into `new` with a non-apply write."""
    changed, removed = changed_paths(old, new)
    entries = copy.deepcopy((old or {}).get("metadata", {}).get("managedFields") or [])
    key = (manager, "Update", subresource or "")
    kept: list[dict] = []
    mine: set[Path] = set()
    for e in entries:
        owned = _from_fields_v1(e.get("fieldsV1") or {})
        # Fields this write set or removed leave every other owner; a "." goes with its map.
        owned = {
            p
            for p in owned
            if not _covered(p, changed | removed) and (p[-1] != "." or isinstance(_dig(new, p[:-1]), dict))
        }
        if (e.get("manager"), e.get("operation"), e.get("subresource", "")) == key:
            mine = owned
            continue
        if owned:
            e["fieldsV1"] = _to_fields_v1(owned)
            kept.append(e)
    mine |= changed
    if mine:
        entry: dict[str, Any] = {
            "manager": manager,
            "operation": "Update",
            "apiVersion": api_version,
            "time": _now(),
            "fieldsType": "FieldsV1",
            "fieldsV1": _to_fields_v1(mine),
        }
        if subresource:
            entry["subresource"] = subresource
        kept.append(entry)
    return kept


__all__ = [
    "changed_paths",
    "prefix_from_user_agent",
    "record_update",
    "validate_field_manager",
]
