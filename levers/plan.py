"""What a lever will send: exact API calls, the kubectl equivalent, and the pre-state.

A lever describes its effect as `changes` (JSON pointer -> value it sets) and
records `pre_state` (pointer -> value before, or ABSENT). From those two the
undo is derived generically, so every lever restores exactly what it found.
"""

from __future__ import annotations

import copy
import hashlib
import json
import shlex
from dataclasses import dataclass, field
from typing import Any

from levers.price import Price

MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"

# Stored in JSON, so sentinels are JSON values no object field can hold.
ABSENT: dict[str, bool] = {"$absent": True}
PRESENT: dict[str, bool] = {"$present": True}  # a container map existed (its content is not ours)

REQUEST_ANNOTATION = "firebreak.io/request"
INCIDENT_ANNOTATION = "firebreak.io/incident"
ANNOTATIONS = "/metadata/annotations"
LABELS = "/metadata/labels"


def is_absent(v: Any) -> bool:
    return bool(v == ABSENT)


def esc(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def unesc(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def ptr(*tokens: str | int) -> str:
    return "".join("/" + esc(str(t)) for t in tokens)


def split(pointer: str) -> list[str]:
    return [unesc(t) for t in pointer.split("/")[1:]] if pointer else []


def read(obj: Any, pointer: str) -> Any:
    cur = obj
    for t in split(pointer):
        if isinstance(cur, dict) and t in cur:
            cur = cur[t]
        elif isinstance(cur, list) and t.isdigit() and int(t) < len(cur):
            cur = cur[int(t)]
        else:
            return ABSENT
    return copy.deepcopy(cur)


def canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


@dataclass
class ApiCall:
    method: str
    path: str
    content_type: str
    body: Any
    kubectl: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "path": self.path,
            "content_type": self.content_type,
            "body": self.body,
            "kubectl": self.kubectl,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ApiCall:
        return cls(d["method"], d["path"], d["content_type"], d["body"], d["kubectl"])


@dataclass
class Plan:
    calls: list[ApiCall]
    changes: dict[str, Any]
    pre_state: dict[str, Any]
    effect: str  # what it does, in a few words: "stopPolicy=Hold"
    notes: list[str] = field(default_factory=list)  # check figures shown with the plan
    meta: dict[str, Any] = field(default_factory=dict)  # what `applied` bookkeeping needs (kept in the record)
    # The object `changes` live on when it is not the lever's target (a Kueue-managed JobSet is
    # stopped through its Workload): read-back, undo and reconcile read this path instead.
    path: str | None = None
    # What pulling it costs (levers/price.py, set by the pull from Lever.price); None before that.
    price: Price | None = None

    def to_record(self) -> dict[str, Any]:
        main = self.calls[-1]  # the call that does the lever's work (earlier ones annotate)
        return {
            **main.to_dict(),
            "kubectl": "\n".join(c.kubectl for c in self.calls),
            "calls": [c.to_dict() for c in self.calls],
            "changes": self.changes,
            "effect": self.effect,
            "meta": self.meta,
            "object_path": self.path,
            "price": self.price.to_record() if self.price else None,
        }

    @classmethod
    def from_record(cls, plan: dict[str, Any], pre_state: dict[str, Any]) -> Plan:
        return cls(
            [ApiCall.from_dict(c) for c in plan.get("calls") or []],
            dict(plan.get("changes") or {}),
            dict(pre_state),
            plan.get("effect", ""),
            meta=dict(plan.get("meta") or {}),
            path=plan.get("object_path"),
            price=Price.from_record(plan.get("price")),
        )

    def digest(self) -> str:
        """Stable across resourceVersion bumps that don't touch what the lever changes."""
        calls = [_mask_rv(c.to_dict()) for c in self.calls]
        doc: dict[str, Any] = {"calls": calls, "pre_state": self.pre_state}
        if self.path:
            doc["path"] = self.path
        if self.price is not None:  # the price approvers saw is part of what they approved
            doc["price"] = self.price.to_record()
        return hashlib.sha256(canonical(doc).encode()).hexdigest()


def _mask_rv(call: dict[str, Any]) -> dict[str, Any]:
    body = copy.deepcopy(call["body"])
    if isinstance(body, dict) and isinstance(body.get("metadata"), dict) and "resourceVersion" in body["metadata"]:
        body["metadata"]["resourceVersion"] = "*"
    if isinstance(body, list):
        body = [dict(op, value="*") if op.get("path") == "/metadata/resourceVersion" else op for op in body]
    return {k: v for k, v in call.items() if k != "kubectl"} | {"body": body}


def provenance(req_id: str, incident: str) -> dict[str, str]:
    return {REQUEST_ANNOTATION: req_id, INCIDENT_ANNOTATION: incident}


def provenance_ops(pre: dict[str, Any], req_id: str, incident: str) -> list[dict[str, Any]]:
    """The JSON-patch ops that add the provenance annotations (the map itself when it was absent)."""
    marks = provenance(req_id, incident)
    if is_absent(pre[ANNOTATIONS]):
        return [{"op": "add", "path": ANNOTATIONS, "value": marks}]
    return [{"op": "add", "path": ptr("metadata", "annotations", k), "value": v} for k, v in marks.items()]


def with_provenance(
    obj: dict[str, Any], changes: dict[str, Any], pre: dict[str, Any], req_id: str, incident: str
) -> None:
    """Add the provenance annotations to a lever's changes and record what they replace."""
    container_pre(obj, pre, ANNOTATIONS)
    for key, value in provenance(req_id, incident).items():
        p = ptr("metadata", "annotations", key)
        changes[p] = value
        pre[p] = read(obj, p)


def container_pre(obj: dict[str, Any], pre: dict[str, Any], container: str) -> None:
    pre.setdefault(container, ABSENT if is_absent(read(obj, container)) else PRESENT)


def merge_body(changes: dict[str, Any], resource_version: str | None) -> dict[str, Any]:
    """A JSON merge patch setting every change (status excluded: that goes to /status)."""
    body: dict[str, Any] = {}
    if resource_version:
        body["metadata"] = {"resourceVersion": resource_version}
    for pointer, value in changes.items():
        tokens = split(pointer)
        if tokens[0] == "status":
            continue
        cur = body
        for t in tokens[:-1]:
            cur = cur.setdefault(t, {})
        cur[tokens[-1]] = value
    return body


def restore_ops(changes: dict[str, Any], pre: dict[str, Any], current: dict[str, Any]) -> list[dict[str, Any]]:
    """Guarded JSON patch putting back the pre-state of every non-status change.

    Each field is first tested to still hold what the lever set, so an edit
    made since then makes the undo fail instead of being overwritten.
    """
    ops: list[dict[str, Any]] = []
    removed: dict[str, set[str]] = {}
    for pointer, applied in changes.items():
        if pointer.startswith("/status/"):
            continue
        ops.append({"op": "test", "path": pointer, "value": applied})
        before = pre.get(pointer, ABSENT)
        if is_absent(before):
            parent, _, key = pointer.rpartition("/")
            removed.setdefault(parent, set()).add(unesc(key))
        else:
            ops.append({"op": "replace", "path": pointer, "value": before})
    for parent, keys in removed.items():
        left = read(current, parent)
        if is_absent(pre.get(parent, PRESENT)) and not is_absent(left) and not set(left) - keys:
            ops.append({"op": "remove", "path": parent})  # the map did not exist before: remove it whole
        else:
            ops += [{"op": "remove", "path": parent + "/" + esc(k)} for k in sorted(keys)]
    return ops


def kubectl_patch(
    context: str, resource: str, name: str, namespace: str | None, kind: str, body: Any, subresource: str | None = None
) -> str:
    parts = ["kubectl", "--context", context, "patch", resource, name]
    if namespace:
        parts += ["-n", namespace]
    if subresource:
        parts.append(f"--subresource={subresource}")
    parts += [f"--type={kind}", "-p", canonical(body)]
    return " ".join(shlex.quote(p) for p in parts)
