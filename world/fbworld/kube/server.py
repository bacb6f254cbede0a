"""FakeKubeCluster: an aiohttp server speaking enough of the Kubernetes REST
API for kubernetes_asyncio and kubectl. One instance = one cluster (cell).
"""

from __future__ import annotations

import asyncio
import builtins
import copy
import json
import os
import re
import socket
import ssl
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from aiohttp import web

from . import auth, discovery, errors, managed, tls
from .auth import Rule
from .controllers import CONTROLLERS, Controller
from .errors import ApiError
from .kubeconfig import FAKE_TOKEN, FAKE_USER
from .objects import ListOpts, Objects, WriteOpts, parse_body
from .resources import Registry, ResourceType
from .storage import Store

# Where a path that no handler serves ends up (genericapiserver's NotFound delegate: net/http's
# NotFound). CRD groups, unserved CRD versions and unknown groups all answer this.
_PLAIN_404 = "404 page not found\n"
_OPTIONS_KIND = {"POST": "CreateOptions", "PUT": "UpdateOptions", "PATCH": "PatchOptions", "DELETE": "DeleteOptions"}


class _PathNotFound(Exception):
    pass


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
    retry_after: int | None = None

    def matches(self, method: str, path: str) -> bool:
        return self.times > 0 and self.method in ("*", method) and bool(self.path_re.search(path))


def _json(body: Any, status: int = 200, warnings: list[str] | None = None) -> web.Response:
    resp = web.Response(text=json.dumps(body), status=status, content_type="application/json")
    retry = (body.get("details") or {}).get("retryAfterSeconds") if isinstance(body, dict) else None
    if retry:
        # responsewriters.ErrorNegotiated: a Status with retryAfterSeconds also sets Retry-After.
        resp.headers["Retry-After"] = str(retry)
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
    def __init__(
        self,
        name: str,
        crd_dir: Path | None = None,
        *,
        served: Mapping[str, Sequence[str]] | None = None,
        tls: bool = True,
    ):
        """served: {"plural.group": versions} -- this cluster serves only those versions of that CRD
        (discovery omits the others and their paths answer the real 404); an empty list leaves the
        CRD out. Other CRDs serve every version their file declares.
        tls: serve https with the process's test CA (write_kubeconfig embeds it). kubectl sends a
        kubeconfig's token only to https servers, so tls=False leaves kubectl unauthenticated."""
        self.name = name
        self.tls = tls
        self.crd_dir = Path(crd_dir) if crd_dir is not None else default_crd_dir()
        if not self.crd_dir.is_dir():
            raise FileNotFoundError(f"CRD dir {self.crd_dir} not found (set FIREBREAK_CRD_DIR)")
        self.registry = Registry(self.crd_dir, served)
        # Bearer tokens the server accepts; anything else is 401 (every path, /version included).
        self.tokens: set[str] = {FAKE_TOKEN}
        self.user = FAKE_USER  # the user every accepted token authenticates as (403 messages name it)
        # RBAC: None allows everything; otherwise a request must match one rule (see allow_only).
        self.rbac: list[Rule] | None = None
        self.controllers: dict[str, Controller] = {}
        self.store = Store()
        self.objects = Objects(self.registry, self.store)
        self.requests: list[Recorded] = []
        # The tests read the request log; a long-running demo turns it off so it doesn't grow.
        self.record_requests = True
        self.warnings: list[str] = []  # Warning headers sent (e.g. pruned unknown fields)
        self._fails: builtins.list[_Fault] = []
        self._delays: builtins.list[_Fault] = []
        self._runner: web.AppRunner | None = None
        self.url: str | None = None
        # The namespaces kube-apiserver itself makes: `default`, and `kube-system`, whose uid names the
        # cluster (Firebreak tells clusters apart by it, levers/kube.py).
        for ns in ("default", "kube-system"):
            self.objects.seed(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}, "status": {"phase": "Active"}}
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
        ssl_context = (await asyncio.to_thread(tls.pki)).server_context() if self.tls else None
        await web.SockSite(self._runner, sock, ssl_context=ssl_context).start()
        scheme = "https" if self.tls else "http"
        self.url = f"{scheme}://127.0.0.1:{sock.getsockname()[1]}"
        return self.url

    def ssl_context(self) -> ssl.SSLContext | None:
        """For raw HTTP clients (aiohttp `ssl=`): trusts this server's CA. None when tls=False."""
        pki = tls.made()
        if not self.tls:
            return None
        if pki is None:
            raise RuntimeError(f"{self.name} is not started")
        return pki.client_context()

    async def stop(self) -> None:
        """Stop the controllers, then the server. A controller that crashed re-raises its error here,
        so a bug in one fails the test instead of passing silently."""
        controllers, self.controllers = list(self.controllers.values()), {}
        failures = [e for e in [await c.stop() for c in controllers] if e is not None]
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if failures:
            raise failures[0]

    async def __aenter__(self) -> FakeKubeCluster:
        await self.start()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.stop()

    # ----------------------------------------------------------- auth, controllers

    def set_tokens(self, *tokens: str) -> None:
        """Accept exactly these bearer tokens from now on (rotate or expire credentials mid-test)."""
        self.tokens = set(tokens)

    def allow_only(self, *rules: Rule) -> None:
        """RBAC from now on: a request is allowed when one of `rules` matches it, else the real 403.
        No rules at all denies every resource request; `cluster.rbac = None` allows all again."""
        self.rbac = list(rules)

    def start_controller(self, name: str, interval: float = 0.1) -> Controller:
        """Start an opt-in controller ("kueue" or "argo") as a background task on the running loop;
        it reconciles every `interval` seconds until the cluster stops."""
        if name in self.controllers:
            raise ValueError(f"controller {name!r} already running on {self.name}")
        try:
            factory = CONTROLLERS[name]
        except KeyError:
            raise ValueError(f"unknown controller {name!r}; known: {sorted(CONTROLLERS)}") from None
        ctl = factory(self.registry, self.objects, self.store)
        ctl.start(interval)
        self.controllers[name] = ctl
        return ctl

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

    def find_requests(self, method: str | None = None, path_regex: str | None = None) -> builtins.list[Recorded]:
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
        retry_after: int | None = None,
    ) -> None:
        """Answer the next `times` matching requests with a Status error.
        method "*" matches any; `reason` overrides the Status reason. `retry_after` sets
        details.retryAfterSeconds and the Retry-After header; a 429 gets 1 s unless told otherwise,
        as the apiserver's throttling (max-in-flight / priority and fairness) answers."""
        if retry_after is None and status == 429:
            retry_after = 1
        self._fails.append(
            _Fault(
                method.upper(),
                re.compile(path_regex),
                times,
                status=status,
                reason=reason,
                message=message,
                retry_after=retry_after,
            )
        )

    def delay_next(self, method: str, path_regex: str, seconds: float, times: int = 1) -> None:
        """Sleep before handling the next `times` matching requests (client timeouts)."""
        self._delays.append(_Fault(method.upper(), re.compile(path_regex), times, seconds=seconds))

    def clear_faults(self) -> None:
        self._fails.clear()
        self._delays.clear()

    # ----------------------------------------------------------- HTTP

    @staticmethod
    def _take(faults: builtins.list[_Fault], method: str, path: str) -> _Fault | None:
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
        if self.record_requests:
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
                {"retryAfterSeconds": fail.retry_after} if fail.retry_after else {},
            )
            resp = _json(err.status(), err.code)
        else:
            try:
                auth.authenticate(request.headers.get("Authorization"), self.tokens)
                info = auth.request_info(request.method, request.path, dict(request.query))
                auth.authorize(self.rbac, self.user, info)
                resp = self._dispatch(request, raw)
            except _PathNotFound:
                resp = web.Response(text=_PLAIN_404, status=404, content_type="text/plain")
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
                    raise _PathNotFound
                return _json(doc)
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            # e.g. /openapi/v2, /openapi/v3: kubectl copes with a 404 here.
            raise _PathNotFound
        if not rest:
            doc = discovery.api_resource_list(self.registry, group, version)
            if doc is None:
                raise _PathNotFound
            return _json(doc)
        return self._resource(request, method, group, version, rest, raw)

    def _no_such_path(self, group: str, version: str) -> Exception:
        """A group version the apiserver itself serves (core, apps) answers an unknown resource with
        go-restful's 404 Status; anything else (CRD groups, unserved versions) reaches the NotFound
        delegate's plain-text 404."""
        if any(rt.builtin and rt.group == group and version in rt.versions for rt in self.registry.types):
            err = errors.resource_not_found()
            err.details = {"causes": [{"reason": "UnexpectedServerResponse", "message": "404: Page Not Found"}]}
            return err
        return _PathNotFound()

    def _resource(self, request, method, group, version, rest, raw) -> web.Response:
        ns = None
        # Same split as the apiserver's RequestInfoFactory.
        if rest[0] == "namespaces" and len(rest) >= 3 and rest[2] not in ("status", "finalize"):
            ns, rest = rest[1], rest[2:]
        if len(rest) > 3:
            raise self._no_such_path(group, version)
        plural, name = rest[0], (rest[1] if len(rest) > 1 else None)
        sub = rest[2] if len(rest) > 2 else None
        rt = self.registry.lookup(group, version, plural)
        if rt is None or (ns is not None and not rt.namespaced) or (rt.namespaced and ns is None and name is not None):
            raise self._no_such_path(group, version)
        if sub is not None and not ((sub == "status" and rt.has_status) or (sub == "scale" and rt.scale is not None)):
            raise self._no_such_path(group, version)
        q = request.query
        opts = self._write_opts(request)
        ctype = request.headers.get("Content-Type", "application/json")
        objs = self.objects

        def body() -> Any:
            try:
                return parse_body(raw, ctype)
            except Exception as e:  # noqa: BLE001 - any decode failure is the client's 400
                raise ApiError(400, f"the body of the request could not be decoded: {e}") from None

        if method == "GET":
            if name is None:
                return _json(objs.list(rt, version, ns, _list_opts(q)))
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

    @staticmethod
    def _write_opts(request: web.Request) -> WriteOpts:
        """dryRun, fieldValidation and fieldManager of a write, validated like the apiserver's
        Create/Update/Patch/DeleteOptions."""
        q = request.query
        kind = _OPTIONS_KIND.get(request.method, "")
        dry_run = q.getall("dryRun", [])
        bad = [v for v in dry_run if v != "All"]
        if bad and kind:
            shown = "[]string{" + ", ".join(json.dumps(v) for v in dry_run) + "}"
            cause = {
                "reason": "FieldValueNotSupported",
                "field": "dryRun",
                "message": f'Unsupported value: {shown}: supported values: "All"',
            }
            raise errors.invalid_kind("meta.k8s.io", kind, "", [cause])
        manager = q.get("fieldManager", "")
        if manager and kind and kind != "DeleteOptions":
            managed.validate_field_manager(manager, kind)
        if not manager:
            manager = managed.prefix_from_user_agent(request.headers.get("User-Agent", ""))
        return WriteOpts(dry_run="All" in dry_run, strict=q.get("fieldValidation") == "Strict", manager=manager)


def _list_opts(q: Mapping[str, str]) -> ListOpts:
    limit = q.get("limit") or "0"
    try:
        n = int(limit)
    except ValueError:
        raise ApiError(400, f'invalid value "{limit}" for "limit": must be an integer') from None
    return ListOpts(q.get("labelSelector"), q.get("fieldSelector"), max(n, 0), q.get("continue") or None)
