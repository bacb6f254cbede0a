"""FakeKubeCluster: an aiohttp server speaking enough of the Kubernetes REST
API for kubernetes_asyncio and kubectl. One instance = one cluster (cell).
"""

from __future__ import annotations

import asyncio
import copy
import json
import os
import re
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from aiohttp import web

from . import discovery, errors
from .errors import ApiError
from .objects import Objects, WriteOpts, parse_body
from .resources import Registry, ResourceType
from .storage import Store


def default_crd_dir() -> Path:
    """$FIREBREAK_CRD_DIR, else the upstream CRDs vendored beside this file (crds/README.md)."""
    env = os.environ.get("FIREBREAK_CRD_DIR")
    return Path(env) if env else Path(__file__).resolve().parent / "crds"


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, str]
    content_type: str | None
    body: Any  # parsed JSON/YAML when possible, else raw text, None if empty
    headers: dict[str, str] = field(default_factory=dict)
    status: int | None = None  # response code, filled in after handling


@dataclass
class _Fault:
    method: str
    path_re: re.Pattern
    times: int
    status: int = 0
    reason: str | None = None
    message: str | None = None
    seconds: float = 0.0

    def matches(self, method: str, path: str) -> bool:
        return self.times > 0 and self.method in ("*", method) and bool(self.path_re.search(path))


def _json(body: Any, status: int = 200, warnings: list[str] | None = None) -> web.Response:
    resp = web.Response(text=json.dumps(body), status=status, content_type="application/json")
    for w in warnings or []:
        resp.headers.add("Warning", "299 - " + json.dumps(w))  # RFC 7234 warn-code 299
    return resp


def _parse_recorded_body(raw: bytes, ctype: str | None) -> Any:
    if not raw:
        return None
    text = raw.decode("utf-8", "replace")
    try:
        return yaml.safe_load(text) if ctype and "yaml" in ctype else json.loads(text)
    except (yaml.YAMLError, ValueError):
        return text


class FakeKubeCluster:
    def __init__(self, name: str, crd_dir: Path | None = None):
        self.name = name
        self.crd_dir = Path(crd_dir) if crd_dir is not None else default_crd_dir()
        if not self.crd_dir.is_dir():
            raise FileNotFoundError(f"CRD dir {self.crd_dir} not found (set FIREBREAK_CRD_DIR)")
        self.registry = Registry(self.crd_dir)
        self.store = Store()
        self.objects = Objects(self.registry, self.store)
        self.requests: list[Recorded] = []
        self.warnings: list[str] = []  # Warning headers sent (e.g. pruned unknown fields)
        self._fails: list[_Fault] = []
        self._delays: list[_Fault] = []
        self._runner: web.AppRunner | None = None
        self.url: str | None = None
        self.objects.seed(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}, "status": {"phase": "Active"}}
        )

    # ----------------------------------------------------------- lifecycle

    async def start(self) -> str:
        app = web.Application(client_max_size=16 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
        await self._runner.setup()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))  # the OS picks a free port; no bind race
        await web.SockSite(self._runner, sock).start()
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        return self.url

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> FakeKubeCluster:
        await self.start()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.stop()

    # ----------------------------------------------------------- test helpers

    def put(self, obj: dict, validate: bool = True) -> dict:
        """Seed/overwrite an object (status kept as given). Creates its namespace.
        Raises ValueError if the object fails schema validation (unless validate=False)."""
        return self.objects.seed(obj, validate=validate)

    def _rt(self, kind_or_plural: str) -> ResourceType:
        return self.registry.by_name(kind_or_plural)

    def get(self, kind_or_plural: str, name: str, namespace: str | None = None) -> dict | None:
        """Deep copy of the stored object (storage version), or None.
        Accepts kind, plural, singular or short name; namespace defaults to "default"."""
        rt = self._rt(kind_or_plural)
        obj = self.store.get(rt, (namespace or "default") if rt.namespaced else None, name)
        return copy.deepcopy(obj)

    def list(self, kind_or_plural: str, namespace: str | None = None) -> list[dict]:
        rt = self._rt(kind_or_plural)
        return copy.deepcopy(self.store.items(rt, namespace if rt.namespaced else None))

    def delete(self, kind_or_plural: str, name: str, namespace: str | None = None) -> None:
        rt = self._rt(kind_or_plural)
        self.store.delete(rt, (namespace or "default") if rt.namespaced else None, name)

    def find_requests(self, method: str | None = None, path_regex: str | None = None) -> list[Recorded]:
        return [
            r
            for r in self.requests
            if (method is None or r.method == method.upper()) and (path_regex is None or re.search(path_regex, r.path))
        ]

    def fail_next(
        self,
        method: str,
        path_regex: str,
        status: int,
        times: int = 1,
        reason: str | None = None,
        message: str | None = None,
    ) -> None:
        """Answer the next `times` matching requests with a Status error.
        method "*" matches any; `reason` overrides the Status reason."""
        self._fails.append(
            _Fault(method.upper(), re.compile(path_regex), times, status=status, reason=reason, message=message)
        )

    def delay_next(self, method: str, path_regex: str, seconds: float, times: int = 1) -> None:
        """Sleep before handling the next `times` matching requests (client timeouts)."""
        self._delays.append(_Fault(method.upper(), re.compile(path_regex), times, seconds=seconds))

    def clear_faults(self) -> None:
        self._fails.clear()
        self._delays.clear()

    # ----------------------------------------------------------- HTTP

    @staticmethod
    def _take(faults: list[_Fault], method: str, path: str) -> _Fault | None:
        for f in faults:
            if f.matches(method, path):
                f.times -= 1
                return f
        return None

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        ctype = request.headers.get("Content-Type")
        rec = Recorded(
            request.method,
            request.path,
            dict(request.query),
            ctype,
            _parse_recorded_body(raw, ctype),
            dict(request.headers),
        )
        self.requests.append(rec)
        delay = self._take(self._delays, request.method, request.path)
        if delay:
            await asyncio.sleep(delay.seconds)
        fail = self._take(self._fails, request.method, request.path)
        if fail:
            err = ApiError(
                fail.status,
                fail.message or f"fake-kube injected {fail.status} for {request.method} {request.path}",
                fail.reason,
                {},
            )
            resp = _json(err.status(), err.code)
        else:
            try:
                resp = self._dispatch(request, raw)
            except ApiError as e:
                resp = _json(e.status(), e.code)
            except Exception as e:  # noqa: BLE001 - a bug in the fake should look like a 500, not a hang
                resp = _json(ApiError(500, f"fake-kube internal error: {e!r}").status(), 500)
        rec.status = resp.status
        return resp

    def _dispatch(self, request: web.Request, raw: bytes) -> web.Response:
        method, path = request.method, request.path
        parts = [p for p in path.split("/") if p]
        if path == "/version":
            return _json(discovery.version_info())
        if parts[:1] == ["api"]:
            if len(parts) == 1:
                return _json(discovery.api_versions(request.host))
            group, version, rest = "", parts[1], parts[2:]
        elif parts[:1] == ["apis"]:
            if len(parts) == 1:
                return _json(discovery.api_group_list(self.registry))
            if len(parts) == 2:
                doc = discovery.api_group(self.registry, parts[1])
                if doc is None:
                    raise errors.resource_not_found()
                return _json(doc)
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            # e.g. /openapi/v2, /openapi/v3: kubectl copes with a 404 here.
            return web.Response(text="404 page not found\n", status=404, content_type="text/plain")
        if not rest:
            doc = discovery.api_resource_list(self.registry, group, version)
            if doc is None:
                raise errors.resource_not_found()
            return _json(doc)
        return self._resource(request, method, group, version, rest, raw)

    def _resource(self, request, method, group, version, rest, raw) -> web.Response:
        ns = None
        # Same split as the apiserver's RequestInfoFactory.
        if rest[0] == "namespaces" and len(rest) >= 3 and rest[2] not in ("status", "finalize"):
            ns, rest = rest[1], rest[2:]
        if len(rest) > 3:
            raise errors.resource_not_found()
        plural, name = rest[0], (rest[1] if len(rest) > 1 else None)
        sub = rest[2] if len(rest) > 2 else None
        rt = self.registry.lookup(group, version, plural)
        if rt is None or (ns is not None and not rt.namespaced) or (rt.namespaced and ns is None and name is not None):
            raise errors.resource_not_found()
        if sub is not None and not ((sub == "status" and rt.has_status) or (sub == "scale" and rt.scale is not None)):
            raise errors.resource_not_found()
        q = request.query
        opts = WriteOpts(dry_run=q.get("dryRun") == "All", strict=q.get("fieldValidation") == "Strict")
        ctype = request.headers.get("Content-Type", "application/json")
        objs = self.objects

        def body() -> Any:
            try:
                return parse_body(raw, ctype)
            except Exception as e:  # noqa: BLE001 - any decode failure is the client's 400
                raise ApiError(400, f"the body of the request could not be decoded: {e}") from None

        if method == "GET":
            if name is None:
                return _json(objs.list(rt, version, ns, q.get("labelSelector"), q.get("fieldSelector")))
            if sub == "scale":
                return _json(objs.read_scale(rt, ns, name))
            return _json(objs.read(rt, version, ns, name))
        if method == "POST" and name is None:
            out, code = objs.create(rt, version, ns, body(), opts), 201
        elif method == "PUT" and name is not None:
            out, code = objs.replace(rt, version, ns, name, body(), sub, opts), 200
        elif method == "PATCH" and name is not None:
            out, code = objs.patch(rt, version, ns, name, ctype, raw, sub, opts), 200
        elif method == "DELETE" and name is not None and sub is None:
            out, code = objs.delete(rt, version, ns, name, opts), 200
        else:
            raise ApiError(405, "the server does not allow this method on the requested resource", "MethodNotAllowed")
        self.warnings += opts.warnings
        return _json(out, code, opts.warnings)
