"""Object semantics: create / replace / patch / delete / scale, with the
apiserver's rules for resourceVersion, generation, status and validation.

All methods take and return objects in the *request* version; storage
holds the kind's storage version.
"""

from __future__ import annotations

import base64
import binascii
import copy
import json
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import yaml

from . import errors, managed, patching, schema
from .errors import ApiError
from .resources import Registry, ResourceType
from .storage import Store, match_fields, match_labels

CR_PATCH_TYPES = [patching.JSON_PATCH, patching.MERGE_PATCH, patching.APPLY_PATCH]


@dataclass
class WriteOpts:
    dry_run: bool = False
    strict: bool = False  # fieldValidation=Strict
    warnings: list[str] = field(default_factory=list)
    # Recorded in metadata.managedFields: ?fieldManager=, else the User-Agent's product token.
    manager: str = "fake-kube"


@dataclass
class ListOpts:
    label_selector: str | None = None
    field_selector: str | None = None
    limit: int = 0  # 0: everything
    continue_token: str | None = None


def _encode_continue(rv: str, ns: str, name: str) -> str:
    """The etcd3 store's token: base64url(JSON{v, rv, start}), start being the last key plus a NUL."""
    key = f"{ns}/{name}" if ns else name
    doc = {"v": "meta.k8s.io/v1", "rv": int(rv), "start": key + "\x00"}
    return base64.urlsafe_b64encode(json.dumps(doc).encode()).decode().rstrip("=")


def _decode_continue(token: str, namespaced: bool) -> tuple[str, tuple[str, str]]:
    """(resourceVersion, last key returned) from a continue token, or the real 400."""

    def bad(why: str) -> ApiError:
        return ApiError(400, f"invalid continue token: continue key is not valid: {why}")

    try:
        doc = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    except (binascii.Error, ValueError) as e:
        raise bad(str(e)) from None
    if not isinstance(doc, dict) or doc.get("v") != "meta.k8s.io/v1":
        raise bad("unrecognized encoded version")
    if not isinstance(doc.get("rv"), int) or doc["rv"] <= 0:
        raise bad("incorrect encoded start resourceVersion (version meta.k8s.io/v1)")
    start = doc.get("start")
    if not isinstance(start, str) or not start.rstrip("\x00"):
        raise bad("encoded start key empty (version meta.k8s.io/v1)")
    key = start.rstrip("\x00")
    ns, _, name = key.partition("/") if namespaced else ("", "", key)
    return str(doc["rv"]), (ns, name)


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _path(p: str) -> list[str]:
    return [s for s in p.strip(".").split(".") if s]


def _dig(obj: dict, path: str) -> Any:
    cur: Any = obj
    for part in _path(path):
        cur = cur.get(part) if isinstance(cur, dict) else None
    return cur


def _set(obj: dict, path: str, value: Any) -> None:
    parts = _path(path)
    cur = obj
    for part in parts[:-1]:
        cur = cur.setdefault(part, {})
    cur[parts[-1]] = value


def _without(obj: dict, *keys: str) -> dict:
    return {k: v for k, v in obj.items() if k not in keys}


class Objects:
    def __init__(self, registry: Registry, store: Store):
        self.registry = registry
        self.store = store

    # ------------------------------------------------------------- reading

    def _stored(self, rt: ResourceType, ns: str | None, name: str) -> dict:
        obj = self.store.get(rt, ns if rt.namespaced else None, name)
        if obj is None:
            raise errors.not_found(rt, name)
        return obj

    def read(self, rt: ResourceType, version: str, ns: str | None, name: str) -> dict:
        return self.registry.convert(rt, self._stored(rt, ns, name), version)

    def list(self, rt: ResourceType, version: str, ns: str | None, opts: ListOpts | None = None) -> dict:
        """A list, one page of it when opts.limit is set: metadata.continue while more remain and,
        without selectors, metadata.remainingItemCount (as the etcd3 store does)."""
        opts = opts or ListOpts()
        rv = self.store.current_rv
        after: tuple[str, str] | None = None
        if opts.continue_token:
            rv, after = _decode_continue(opts.continue_token, rt.namespaced)
        matched = []
        for obj in self.store.items(rt, ns if rt.namespaced else None):
            meta = obj.get("metadata", {})
            key = (meta.get("namespace") or "", meta["name"])
            if after is not None and key <= after:
                continue
            if match_labels(meta.get("labels") or {}, opts.label_selector) and match_fields(obj, opts.field_selector):
                matched.append((key, obj))
        list_meta: dict[str, Any] = {"resourceVersion": rv}
        if opts.limit > 0 and len(matched) > opts.limit:
            last_key = matched[opts.limit - 1][0]
            list_meta["continue"] = _encode_continue(rv, *last_key)
            if not opts.label_selector and not opts.field_selector:
                list_meta["remainingItemCount"] = len(matched) - opts.limit
            matched = matched[: opts.limit]
        return {
            "apiVersion": rt.api_version(version),
            "kind": rt.list_kind,
            "metadata": list_meta,
            "items": [self.registry.convert(rt, obj, version) for _, obj in matched],
        }

    # ------------------------------------------------------------- writing

    def _check_ns(self, rt: ResourceType, ns: str | None) -> None:
        ns_rt = self.registry.by_name("namespaces")
        if rt.namespaced and self.store.get(ns_rt, None, ns or "") is None:
            raise errors.namespace_not_found(ns or "")

    def create(self, rt: ResourceType, version: str, ns: str | None, body: Any, opts: WriteOpts) -> dict:
        new = self._coerce_body(rt, version, body)
        meta = new["metadata"]
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
        name = meta.get("name")
        if not name:
            raise errors.invalid(
                rt,
                "",
                [
                    {
                        "reason": "FieldValueRequired",
                        "field": "metadata.name",
                        "message": "Required value: name or generateName is required",
                    }
                ],
            )
        self._bind_namespace(rt, new, ns)
        self._check_ns(rt, ns)
        if self.store.get(rt, ns if rt.namespaced else None, name) is not None:
            raise errors.already_exists(rt, name)
        meta.pop("resourceVersion", None)
        meta.update(uid=str(uuid.uuid4()), creationTimestamp=_now(), generation=1)
        if rt.has_status and rt.kind not in ("Node",):
            # Create cannot set status when a status subresource exists.
            new.pop("status", None)
            if rt.kind == "Pod":
                new["status"] = {"phase": "Pending"}
            elif rt.kind == "Namespace":
                new["status"] = {"phase": "Active"}
        self._admit(rt, version, new, opts)
        new["metadata"]["managedFields"] = managed.record_update(None, new, opts.manager, rt.api_version(version), None)
        return self._store(rt, version, new, opts)

    def replace(
        self, rt: ResourceType, version: str, ns: str | None, name: str, body: Any, sub: str | None, opts: WriteOpts
    ) -> dict:
        if sub == "scale":
            return self._write_scale(rt, version, ns, name, lambda _cur: body, opts)
        old = self.read(rt, version, ns, name)
        new = self._coerce_body(rt, version, body)
        rv = new["metadata"].get("resourceVersion")
        if not rv and not rt.builtin:
            # CRDs disallow unconditional update (AllowUnconditionalUpdate=false).
            raise errors.invalid(
                rt,
                name,
                [
                    {
                        "reason": "FieldValueInvalid",
                        "field": "metadata.resourceVersion",
                        "message": "Invalid value: 0x0: must be specified for an update",
                    }
                ],
            )
        return self._update(rt, version, ns, name, old, new, sub, opts)

    def patch(
        self,
        rt: ResourceType,
        version: str,
        ns: str | None,
        name: str,
        content_type: str,
        raw: bytes,
        sub: str | None,
        opts: WriteOpts,
    ) -> dict:
        ctype = content_type.split(";")[0].strip().lower()
        builtin_target = rt.builtin or sub == "scale"  # Scale is a built-in type
        if ctype == patching.STRATEGIC_PATCH and not builtin_target:
            raise errors.unsupported_patch(CR_PATCH_TYPES)
        if ctype not in (patching.MERGE_PATCH, patching.JSON_PATCH, patching.STRATEGIC_PATCH):
            raise errors.unsupported_patch(([patching.STRATEGIC_PATCH] if builtin_target else []) + CR_PATCH_TYPES)
        try:
            doc = json.loads(raw or b"null")
        except ValueError as e:
            raise ApiError(400, f"error decoding patch: {e}") from None

        def apply(current: dict) -> dict:
            try:
                if ctype == patching.JSON_PATCH:
                    return patching.json_patch(current, doc)
                if not isinstance(doc, dict):
                    raise patching.PatchFormatError(
                        "json: cannot unmarshal array into Go value of type map[string]interface {}"
                    )
                if ctype == patching.MERGE_PATCH:
                    return patching.merge_patch(current, doc)
                return patching.strategic_merge_patch(current, doc)
            except patching.PatchFormatError as e:
                raise ApiError(400, str(e)) from None
            except patching.PatchApplyError as e:
                raise errors.unprocessable(str(e)) from None

        if sub == "scale":
            return self._write_scale(rt, version, ns, name, apply, opts)
        old = self.read(rt, version, ns, name)
        new = apply(old)
        if not isinstance(new, dict):
            raise ApiError(400, "patched object is not a JSON object")
        decode_error = schema.meta_type_error(new, rt.builtin)
        if decode_error:
            # The patched JSON no longer decodes: jsonPatcher/smpPatcher answer NewInvalid(GroupKind{}, "",
            # field.Invalid("patch", <patched JSON>, <decode error>)).
            patched = json.dumps(new, separators=(",", ":"))
            cause = {
                "reason": "FieldValueInvalid",
                "field": "patch",
                "message": f"Invalid value: {json.dumps(patched)}: {decode_error}",
            }
            raise errors.invalid_kind("", "", "", [cause])
        return self._update(rt, version, ns, name, old, new, sub, opts)

    def delete(self, rt: ResourceType, version: str, ns: str | None, name: str, opts: WriteOpts) -> dict:
        obj = self.read(rt, version, ns, name)
        if not opts.dry_run:
            self.store.delete(rt, ns if rt.namespaced else None, name)
            if rt.kind == "Namespace" and not rt.group:
                self.store.delete_namespace_contents(name)
        return obj

    # ------------------------------------------------------------- scale

    def read_scale(self, rt: ResourceType, ns: str | None, name: str) -> dict:
        if rt.scale is None:
            raise errors.resource_not_found()
        obj = self._stored(rt, ns, name)
        meta = obj["metadata"]
        if rt.scale.label_selector_path:
            selector = _dig(obj, rt.scale.label_selector_path)
        else:  # Deployments: render spec.selector.matchLabels like the apiserver does
            ml = _dig(obj, ".spec.selector.matchLabels") or {}
            selector = ",".join(f"{k}={v}" for k, v in ml.items())
        status: dict[str, Any] = {"replicas": _dig(obj, rt.scale.status_replicas_path) or 0}
        if selector:
            status["selector"] = selector
        return {
            "apiVersion": "autoscaling/v1",
            "kind": "Scale",
            "metadata": {
                k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp") if k in meta
            },
            "spec": {"replicas": _dig(obj, rt.scale.spec_replicas_path) or 0},
            "status": status,
        }

    def _write_scale(self, rt, version, ns, name, make_new, opts: WriteOpts) -> dict:
        current = self.read_scale(rt, ns, name)
        new = make_new(copy.deepcopy(current))
        if not isinstance(new, dict):
            raise ApiError(400, "Scale body must be a JSON object")
        rv = (new.get("metadata") or {}).get("resourceVersion")
        if rv and rv != current["metadata"]["resourceVersion"]:
            raise errors.conflict(rt, name)
        replicas = (new.get("spec") or {}).get("replicas")
        if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
            raise ApiError(
                422,
                f'Scale.autoscaling "{name}" is invalid: spec.replicas: '
                f"Invalid value: {json.dumps(replicas)}: must be greater than or "
                "equal to 0",
                "Invalid",
                {"name": name, "group": "autoscaling", "kind": "Scale"},
            )
        old = self.read(rt, rt.storage_version, ns, name)
        obj = copy.deepcopy(old)
        _set(obj, rt.scale.spec_replicas_path, replicas)
        self._update(rt, rt.storage_version, ns, name, old, obj, "scale", opts)
        if opts.dry_run:
            current["spec"]["replicas"] = replicas
            return current
        return self.read_scale(rt, ns, name)

    # ------------------------------------------------------------- helpers

    def _coerce_body(self, rt: ResourceType, version: str, body: Any) -> dict:
        if not isinstance(body, dict):
            raise ApiError(400, f"the body of the request could not be decoded as a {rt.kind}")
        new = copy.deepcopy(body)
        if new.get("kind") not in (None, rt.kind) or new.get("apiVersion") not in (None, rt.api_version(version)):
            raise ApiError(
                400,
                f"the API version in the data ({new.get('apiVersion')}) does not "
                f"match the expected API version ({rt.api_version(version)})"
                if new.get("kind") in (None, rt.kind)
                else f"kind {new.get('kind')!r} does not match {rt.kind!r}",
            )
        new["apiVersion"], new["kind"] = rt.api_version(version), rt.kind
        if not isinstance(new.get("metadata"), dict):
            new["metadata"] = {}
        decode_error = schema.meta_type_error(new, rt.builtin)
        if decode_error:
            # The request body does not decode: create/update handlers answer BadRequest
            # (transformDecodeError).
            raise ApiError(400, f'{rt.kind} in version "{version}" cannot be handled as a {rt.kind}: {decode_error}')
        return new

    @staticmethod
    def _bind_namespace(rt: ResourceType, obj: dict, ns: str | None) -> None:
        meta = obj["metadata"]
        if rt.namespaced:
            if meta.get("namespace") not in (None, "", ns):
                raise ApiError(
                    400, "the namespace of the provided object does not match the namespace sent on the request"
                )
            meta["namespace"] = ns
        else:
            meta.pop("namespace", None)

    def _update(self, rt, version, ns, name, old: dict, new: dict, sub: str | None, opts: WriteOpts) -> dict:
        meta = new.setdefault("metadata", {})
        if meta.get("name", name) != name:
            raise ApiError(
                400, f"the name of the object ({meta.get('name')}) does not match the name on the URL ({name})"
            )
        meta["name"] = name
        self._bind_namespace(rt, new, ns)
        rv = meta.get("resourceVersion")
        if rv and rv != old["metadata"]["resourceVersion"]:
            raise errors.conflict(rt, name)
        # Server-managed metadata always comes from the stored object. managedFields too: the fake does
        # not let a client rewrite them (a real server would take a non-empty list as the new one).
        for k in ("uid", "creationTimestamp", "generation", "resourceVersion", "managedFields"):
            if k in old["metadata"]:
                meta[k] = old["metadata"][k]
            else:
                meta.pop(k, None)
        if sub == "status":
            # /status may change only .status
            status = new.get("status")
            new = copy.deepcopy(old)
            if status is None:
                new.pop("status", None)
            else:
                new["status"] = status
        elif rt.has_status:
            # main resource (and /scale) writes ignore .status
            new.pop("status", None)
            if "status" in old:
                new["status"] = copy.deepcopy(old["status"])
        self._admit(rt, version, new, opts)
        if new == old:
            return old  # no-op: real apiserver does not bump resourceVersion
        if _without(new, "metadata", "status") != _without(old, "metadata", "status"):
            meta["generation"] = int(old["metadata"].get("generation") or 1) + 1
        new["metadata"]["managedFields"] = managed.record_update(old, new, opts.manager, rt.api_version(version), sub)
        return self._store(rt, version, new, opts)

    def _admit(self, rt: ResourceType, version: str, obj: dict, opts: WriteOpts) -> None:
        """Prune, default and validate (schema.py), raising 400/422."""
        name = obj["metadata"].get("name", "")
        meta_causes = schema.validate_object_meta(obj)
        if rt.builtin:
            causes = meta_causes + schema.validate_builtin(rt.kind, obj)
        else:
            sch = rt.schemas.get(version)
            pruned = schema.prune(obj, sch)
            if pruned and opts.strict:
                raise ApiError(
                    400,
                    f'{rt.kind} in version "{version}" cannot be handled as a '
                    f"{rt.kind}: strict decoding error: " + ", ".join(f'unknown field "{p}"' for p in pruned),
                )
            opts.warnings += [f'unknown field "{p}"' for p in pruned]
            schema.apply_defaults(obj, sch)
            causes = meta_causes + schema.validate_custom(obj, sch)
        if causes:
            raise errors.invalid(rt, name, causes)

    def _store(self, rt: ResourceType, version: str, obj: dict, opts: WriteOpts) -> dict:
        if opts.dry_run:
            return obj
        obj["metadata"]["resourceVersion"] = self.store.next_rv()
        meta = obj["metadata"]
        self.store.set(rt, meta.get("namespace"), meta["name"], self.registry.convert(rt, obj, rt.storage_version))
        return copy.deepcopy(obj)

    # ------------------------------------------------------------- seeding

    def seed(self, obj: dict, validate: bool = True) -> dict:
        """Upsert an object directly (test setup); keeps .status as given."""
        group, _, version = obj.get("apiVersion", "").rpartition("/")
        rt = self.registry.by_name(obj["kind"])
        if rt.group != group or version not in rt.versions:
            raise ValueError(f"{obj.get('apiVersion')} {obj['kind']} is not served by the fake")
        new = copy.deepcopy(obj)
        meta = new.setdefault("metadata", {})
        decode_error = schema.meta_type_error(new, rt.builtin)
        if decode_error:
            raise ValueError(decode_error)
        ns = (meta.get("namespace") or "default") if rt.namespaced else None
        self._bind_namespace(rt, new, ns)
        if ns is not None and self.store.get(self.registry.by_name("namespaces"), None, ns) is None:
            self.seed(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}, "status": {"phase": "Active"}}
            )
        old = self.store.get(rt, ns, meta["name"])
        meta.setdefault("uid", old["metadata"]["uid"] if old else str(uuid.uuid4()))
        meta.setdefault("creationTimestamp", old["metadata"]["creationTimestamp"] if old else _now())
        meta.setdefault("generation", (old["metadata"].get("generation", 1) + 1) if old else 1)
        meta.pop("resourceVersion", None)
        opts = WriteOpts()
        try:
            self._admit(rt, version, new, opts)
        except ApiError as e:
            if validate:
                raise ValueError(e.message) from None
        return self._store(rt, version, new, opts)


def parse_body(raw: bytes, content_type: str) -> Any:
    """Decode a create/update body (JSON or YAML); ValueError on garbage."""
    ctype = content_type.split(";")[0].strip().lower()
    if not raw:
        raise ValueError("empty body")
    if "yaml" in ctype:
        return yaml.safe_load(raw)
    return json.loads(raw)
