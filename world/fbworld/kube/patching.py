"""Patch algorithms: JSON merge patch (RFC 7386), JSON patch (RFC 6902) and a
small strategic merge patch good enough for built-in kinds.

Malformed patch documents raise PatchFormatError (-> 400); patches that are
well formed but cannot apply raise PatchApplyError (-> 422), matching where
the real apiserver draws the line.
"""

from __future__ import annotations

import copy
from typing import Any

MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"


class PatchFormatError(ValueError):
    pass


class PatchApplyError(ValueError):
    pass


# ---------------------------------------------------------------- merge patch


def merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = copy.deepcopy(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


# ----------------------------------------------------------------- json patch


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchFormatError(f"invalid JSON pointer {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _index(container: list, token: str, op: str, path: str, allow_end: bool) -> int:
    if token == "-" and allow_end:
        return len(container)
    try:
        i = int(token)
    except ValueError:
        raise PatchApplyError(f"{op} operation does not apply: doc is missing path: {path!r}") from None
    limit = len(container) if allow_end else len(container) - 1
    if i < 0 or i > limit:
        raise PatchApplyError(f"{op} operation does not apply: doc is missing path: {path!r}: missing value")
    return i


def _parent(doc: Any, tokens: list[str], op: str, path: str) -> Any:
    cur = doc
    for t in tokens[:-1]:
        if isinstance(cur, dict) and t in cur:
            cur = cur[t]
        elif isinstance(cur, list):
            cur = cur[_index(cur, t, op, path, allow_end=False)]
        else:
            raise PatchApplyError(f'{op} operation does not apply: doc is missing path: "{path}": missing value')
    return cur


def _get(doc: Any, path: str, op: str) -> Any:
    tokens = _pointer(path)
    if not tokens:
        return doc
    parent = _parent(doc, tokens, op, path)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchApplyError(f'{op} operation does not apply: doc is missing path: "{path}": missing value')
        return parent[last]
    if isinstance(parent, list):
        return parent[_index(parent, last, op, path, allow_end=False)]
    raise PatchApplyError(f'{op} operation does not apply: doc is missing path: "{path}"')


def _remove(doc: Any, path: str, op: str = "remove") -> Any:
    tokens = _pointer(path)
    if not tokens:
        raise PatchApplyError(f"{op} operation does not apply: cannot remove the document root")
    parent = _parent(doc, tokens, op, path)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchApplyError(f'{op} operation does not apply: doc is missing path: "{path}": missing value')
        return parent.pop(last)
    if isinstance(parent, list):
        return parent.pop(_index(parent, last, op, path, allow_end=False))
    raise PatchApplyError(f'{op} operation does not apply: doc is missing path: "{path}"')


def _add(doc: Any, path: str, value: Any, op: str = "add", replace: bool = False) -> Any:
    tokens = _pointer(path)
    if not tokens:
        return value
    parent = _parent(doc, tokens, op, path)
    last = tokens[-1]
    if isinstance(parent, dict):
        if replace and last not in parent:
            raise PatchApplyError(f"{op} operation does not apply: doc is missing key: {path}: missing value")
        parent[last] = value
    elif isinstance(parent, list):
        if replace:
            parent[_index(parent, last, op, path, allow_end=False)] = value
        else:
            parent.insert(_index(parent, last, op, path, allow_end=True), value)
    else:
        raise PatchApplyError(f'{op} operation does not apply: doc is missing path: "{path}"')
    return doc


def json_patch(target: Any, ops: Any) -> Any:
    if not isinstance(ops, list):
        raise PatchFormatError("json: cannot unmarshal object into Go value of type jsonpatch.Patch")
    doc = copy.deepcopy(target)
    for op in ops:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise PatchFormatError(f"invalid JSON patch operation: {op!r}")
        kind, path = op["op"], op["path"]
        if kind in ("add", "replace", "test") and "value" not in op:
            raise PatchFormatError(f"{kind} operation missing value")
        if kind == "add":
            doc = _add(doc, path, copy.deepcopy(op["value"]))
        elif kind == "remove":
            _remove(doc, path)
        elif kind == "replace":
            doc = _add(doc, path, copy.deepcopy(op["value"]), "replace", replace=True)
        elif kind == "move":
            value = _remove(doc, op.get("from", ""), "move")
            doc = _add(doc, path, value, "move")
        elif kind == "copy":
            value = copy.deepcopy(_get(doc, op.get("from", ""), "copy"))
            doc = _add(doc, path, value, "copy")
        elif kind == "test":
            try:
                actual = _get(doc, path, "test")
            except PatchApplyError:
                actual = None
            if actual != op["value"]:
                raise PatchApplyError(f"testing value {path} failed: test failed")
        else:
            raise PatchFormatError(f"Unexpected kind: {kind}")
    return doc


# ------------------------------------------------------ strategic merge patch

# Lists in built-in types that merge by key (patchMergeKey in the Go types).
# Everything else is atomic (replaced wholesale), e.g. Node spec.taints.
MERGE_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "ports": "containerPort",
    "conditions": "type",
    "imagePullSecrets": "name",
    "ownerReferences": "uid",
    "addresses": "type",
}
# Primitive lists with patchStrategy=merge: set union.
UNION_LISTS = {"finalizers"}


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        raise PatchFormatError("strategic merge patch must be a JSON object")
    return _smp_map(target if isinstance(target, dict) else {}, patch)


def _smp_map(target: dict, patch: dict) -> dict:
    if patch.get("$patch") == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if patch.get("$patch") == "delete":
        return {}
    out = copy.deepcopy(target)
    for k, v in patch.items():
        if k.startswith("$setElementOrder/") or k in ("$retainKeys", "$patch"):
            continue  # ordering/retain directives: the fake keeps insertion order
        if k.startswith("$deleteFromPrimitiveList/"):
            field = k.split("/", 1)[1]
            out[field] = [x for x in out.get(field, []) if x not in v]
            continue
        if v is None:
            out.pop(k, None)
        elif isinstance(v, dict):
            cur = out.get(k)
            out[k] = _smp_map(cur if isinstance(cur, dict) else {}, v)
        elif isinstance(v, list) and k in MERGE_KEYS and isinstance(out.get(k), list):
            out[k] = _smp_list(out[k], v, MERGE_KEYS[k])
        elif isinstance(v, list) and k in UNION_LISTS and isinstance(out.get(k), list):
            out[k] = out[k] + [x for x in v if x not in out[k]]
        else:
            out[k] = copy.deepcopy(v)
    return out


def _smp_list(current: list, patch: list, key: str) -> list:
    if any(isinstance(p, dict) and p.get("$patch") == "replace" for p in patch):
        return [copy.deepcopy(p) for p in patch if not (isinstance(p, dict) and "$patch" in p)]
    out = copy.deepcopy(current)
    for item in patch:
        if not isinstance(item, dict) or key not in item:
            raise PatchApplyError(f"map: {item!r} does not contain declared merge key: {key}")
        idx = next((i for i, c in enumerate(out) if isinstance(c, dict) and c.get(key) == item[key]), None)
        if item.get("$patch") == "delete":
            if idx is not None:
                out.pop(idx)
        elif idx is None:
            out.append({k: v for k, v in item.items() if k != "$patch"})
        else:
            out[idx] = _smp_map(out[idx], item)
    return out
