"""Kubernetes access: one ApiClient per kube context, created lazily. The one implementation of the
port in bot/clusters.py; the runtime builds one ``Kube`` (bot/runtime.py) and the capabilities, the
levers among them, reach it as ``Services.clusters`` and never import this module (an import contract
in pyproject.toml).

A lever only ever gets the client of its own cell's context, so it cannot
touch another cell. Every call carries the plan's exact content type; every
write names the field manager `firebreak`.

KUBECONFIG is read as kubectl reads it: several files joined by `:` are merged
(the first file to name a cluster, user or context wins; current-context comes
from the first file that sets it), and a relative file or exec-plugin path
means one beside the kubeconfig file that names it. Every request carries
`User-Agent: firebreak/<version>`.

Credentials work as kubectl's do: exec plugins (client.authentication.k8s.io
ExecCredential), token and tokenFile users. kubernetes_asyncio loads them once
and never again for an existing client, so this module re-loads the context
from the kubeconfig when an exec credential passes its expirationTimestamp, and
once on a 401, then retries the call.
"""

from __future__ import annotations

import asyncio
import copy
import email.utils
import json
import os
import random
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import yaml
from kubernetes_asyncio.client import ApiClient, Configuration
from kubernetes_asyncio.config.config_exception import ConfigException
from kubernetes_asyncio.config.dateutil import parse_rfc3339
from kubernetes_asyncio.config.exec_provider import ExecProvider
from kubernetes_asyncio.config.kube_config import (
    ENV_KUBECONFIG_PATH_SEPARATOR,
    FileOrData,
    KubeConfigLoader,
    KubeConfigMerger,
)

from bot import logs, metrics
from bot.clusters import Call, KubeError, UnknownCell
from bot.redact import scrub_text
from bot.version import user_agent

log = logs.get(__name__)

FIELD_MANAGER = "firebreak"  # what GitOps controllers and managedFields show as the writer
ATTEMPTS = 3  # per call, the first included
BACKOFF = 0.25  # seconds before the 2nd attempt, doubled for the 3rd; jittered so clients don't retry in step
RETRY_AFTER_CAP = 5.0  # a longer Retry-After is not waited out: the call fails now instead of retrying early
_READ_RETRY = frozenset({429, 500, 502, 503, 504})
_MANAGED_WRITES = frozenset({"PATCH", "POST", "PUT"})  # DeleteOptions has no fieldManager
CREDENTIAL_TIMEOUT = 30.0  # an exec plugin (aws eks get-token, gke-gcloud-auth-plugin) may fetch from a cloud API
# Refresh an exec credential this long before it lapses, so a call does not leave with a token about to die.
EXPIRY_MARGIN = timedelta(seconds=10)
DISCOVERY_TTL = 300.0  # seconds; a CRD installed or upgraded later is seen after this
PAGE = 500  # items per list page (kubectl's chunk size)
# What a cluster is, whatever URL reaches it: the uid of its kube-system namespace, made when the cluster
# was and never changed. Read once per context; an unreadable one is asked again after IDENTITY_RETRY.
IDENTITY_PATH = "/api/v1/namespaces/kube-system"
IDENTITY_RETRY = 60.0  # seconds

Loaded = tuple[Configuration, datetime | None]  # a context's client settings, the exec credential's expiry


def kubeconfig_paths(kubeconfig: Path | None) -> list[Path]:
    """KUBECONFIG's files in order: one path, or several joined by `:` as kubectl takes them."""
    if kubeconfig is None:
        return []
    return [Path(p).expanduser() for p in str(kubeconfig).split(ENV_KUBECONFIG_PATH_SEPARATOR) if p]


# The paths kubectl resolves against the directory of the file that names them (client-go's
# ResolveLocalPaths); an exec command only when it has a directory part (`./bin/x`, not `aws`).
_LOCAL_PATHS = {
    "clusters": ("cluster", ("certificate-authority",)),
    "users": ("user", ("client-certificate", "client-key", "tokenFile")),
}


def _localised(item: str, entry: Any, base: Path) -> Any:
    """A named entry of one file with its relative paths made absolute against ``base``."""
    if item not in _LOCAL_PATHS or not isinstance(entry, dict):
        return entry
    key, fields = _LOCAL_PATHS[item]
    out = copy.deepcopy(entry)
    body = out.get(key)
    if not isinstance(body, dict):
        return out
    for f in fields:
        v = body.get(f)
        if isinstance(v, str) and v and not os.path.isabs(v):
            body[f] = str(base / v)
    exe = body.get("exec")
    if isinstance(exe, dict):
        cmd = exe.get("command")
        if isinstance(cmd, str) and os.sep in cmd and not os.path.isabs(cmd):
            exe["command"] = str(base / cmd)
    return out


def read_kubeconfig(kubeconfig: Path | None) -> dict[str, Any]:
    """The kubeconfig as kubectl reads KUBECONFIG ({} when none of its files exists): the files
    that exist, merged by kubernetes_asyncio's KubeConfigMerger (the first to name a cluster, user
    or context wins), current-context from the first file that sets it, and each entry's relative
    paths made absolute against its own file's directory. Blocking: call it through asyncio.to_thread."""
    files = []
    for path in kubeconfig_paths(kubeconfig):
        if not path.is_file():
            continue  # kubectl skips a file of the list that does not exist
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        if doc is None:
            continue  # an empty file adds nothing
        if not isinstance(doc, dict):
            raise ConfigException(f"the kubeconfig {path} is not a YAML mapping")
        files.append(path)
    if not files:
        return {}
    merger = KubeConfigMerger(ENV_KUBECONFIG_PATH_SEPARATOR.join(str(p) for p in files))
    assert merger.config is not None  # at least one file was loaded
    merged: dict[str, Any] = {k: v for k, v in merger.config.value.items() if k not in _NAMED}
    for item in _NAMED:
        merged[item] = [_localised(item, node.value, Path(node.path).parent) for node in merger.config.value[item]]
    # The merger lets the last file's current-context win; kubectl takes the first that sets one.
    merged["current-context"] = next(
        (str(c["current-context"]) for c in merger.config_files.values() if c.get("current-context")), ""
    )
    return merged


_NAMED = ("clusters", "contexts", "users")


def contexts_of(doc: dict[str, Any]) -> list[str]:
    return [str(c["name"]) for c in doc.get("contexts") or [] if isinstance(c, dict) and c.get("name")]


_DEFAULT_PORTS = {"https": 443, "http": 80}


def normalise_server(url: str) -> str:
    """An API server URL as one cluster is known by, whatever way a kubeconfig spells it: scheme and
    host lowercased, the default port made explicit, no trailing slash (https://K8S.example:443/ and
    https://k8s.example are one server)."""
    parts = urlsplit(url.strip())
    scheme = (parts.scheme or "https").lower()
    host = (parts.hostname or "").lower()
    if ":" in host:  # IPv6: urlsplit drops the brackets
        host = f"[{host}]"
    try:
        port = parts.port or _DEFAULT_PORTS.get(scheme, 0)
    except ValueError:  # a port that is no number: compare the text as written
        return url.strip().lower().rstrip("/")
    return f"{scheme}://{host}:{port}{parts.path.rstrip('/')}"


def servers_of(doc: dict[str, Any]) -> dict[str, str]:
    """Each context's API server, normalised (contexts whose cluster names no server are left out)."""
    clusters = {
        str(c["name"]): str((c.get("cluster") or {}).get("server") or "")
        for c in doc.get("clusters") or []
        if isinstance(c, dict) and c.get("name") and isinstance(c.get("cluster") or {}, dict)
    }
    out: dict[str, str] = {}
    for c in doc.get("contexts") or []:
        if not isinstance(c, dict) or not c.get("name") or not isinstance(c.get("context") or {}, dict):
            continue
        server = clusters.get(str((c.get("context") or {}).get("cluster") or ""), "")
        if server:
            out[str(c["name"])] = normalise_server(server)
    return out


# ----------------------------------------------------------------- credentials

# What loading a context can raise: the library's own ConfigException, and what its file and
# subprocess handling lets through (a missing plugin binary is an OSError, a malformed stanza a
# KeyError/TypeError, a context naming no cluster an AssertionError).
_LOAD_ERRORS = (
    ConfigException,
    OSError,
    ValueError,
    KeyError,
    TypeError,
    AssertionError,
    RuntimeError,
    yaml.YAMLError,
    TimeoutError,
)


def credentials_error(context: str, exc: BaseException) -> KubeError:
    """One line, no traceback, secrets scrubbed (a plugin's stderr is quoted in its ConfigException)."""
    if isinstance(exc, TimeoutError):
        why = f"no credentials within {CREDENTIAL_TIMEOUT:g}s (exec plugin or token issuer not answering)"
    else:
        first = (str(exc).strip().splitlines() or [""])[0]
        why = scrub_text(first)[:200] or type(exc).__name__
    log.warning("kube_credentials_failed", context=context, error=why)
    metrics.KUBE_API_ERRORS.labels(context, "credentials").inc()
    return KubeError(None, "Credentials", f"kube credentials for context `{context}` failed: {why}")


def _take_exec_status(loader: KubeConfigLoader, status: dict[str, Any]) -> datetime | None:
    """What KubeConfigLoader.load_from_exec_plugin does with the plugin's answer, minus running it.
    Blocking (client certificate data goes to temp files): run in a thread."""
    if "token" in status:
        loader.token = f"Bearer {status['token']}"
    elif "clientCertificateData" in status and "clientKeyData" in status:
        base = loader._get_base_path(None)
        for attr, key in (("cert_file", "clientCertificateData"), ("key_file", "clientKeyData")):
            setattr(
                loader,
                attr,
                FileOrData(
                    status,
                    None,
                    data_key_name=key,
                    file_base_path=base,
                    base64_file_content=False,
                    temp_file_path=loader._temp_file_path,
                ).as_file(),
            )
    else:
        raise ConfigException("exec: the plugin returned neither a token nor a client certificate and key")
    stamp = status.get("expirationTimestamp")
    return parse_rfc3339(stamp) if stamp else None


def _finish(loader: KubeConfigLoader, cfg: Configuration, status: dict[str, Any] | None) -> datetime | None:
    """The blocking part of loading a context (token files, certificate files, temp files for *-data):
    run in a thread. `status` is the exec plugin's answer, when the user has one."""
    expiry = None
    if status is not None:
        expiry = _take_exec_status(loader, status)
    elif loader.provider:
        # Legacy gcp/oidc auth-providers: the library's own code, on this thread's event loop.
        asyncio.run(loader._load_authentication())
    elif loader._user is not None and not loader._load_user_token():  # token, else tokenFile (read now)
        loader._load_user_pass_token()
    loader._load_cluster_info()
    loader._set_config(cfg)
    return expiry


async def _configure(kubeconfig: Path, doc: dict[str, Any], context: str) -> Loaded:
    # read_kubeconfig made every path absolute; the base is only where *-data temp files are named from.
    base = next(iter(kubeconfig_paths(kubeconfig)), kubeconfig).parent
    loader = KubeConfigLoader(config_dict=doc, active_context=context, config_base_path=str(base))
    user = loader._user
    status = None
    if not loader.provider and user is not None and "exec" in user:
        # kubernetes_asyncio runs the plugin as an asyncio subprocess: on the loop, and cancellable.
        status = await ExecProvider(user["exec"]).run()
    cfg = type.__call__(Configuration)  # a fresh one, not a copy of the process-wide default
    expiry = await asyncio.to_thread(_finish, loader, cfg, status)
    return cfg, expiry


async def load_context(kubeconfig: Path, context: str, doc: dict[str, Any] | None = None) -> Loaded:
    """The context's client settings, freshly loaded as kubectl would (exec plugin run, token files read).
    Any failure is KubeError(None, "Credentials", ...)."""
    try:
        if doc is None:
            doc = await asyncio.to_thread(read_kubeconfig, kubeconfig)
            if context not in contexts_of(doc):
                raise ConfigException(f"context `{context}` is no longer in {kubeconfig}")
        return await asyncio.wait_for(_configure(kubeconfig, doc, context), CREDENTIAL_TIMEOUT)
    except _LOAD_ERRORS as e:
        raise credentials_error(context, e) from None


def api_client(cfg: Configuration) -> ApiClient:
    """A session for one context's settings; its requests name Firebreak (`firebreak/<version>`)
    in the API server's audit log, as kubectl's name kubectl."""
    api = ApiClient(configuration=cfg)
    api.user_agent = user_agent()
    return api


def _transport(cfg: Configuration) -> tuple[Any, ...]:
    """What the ApiClient's session is built from (TLS files, server): a change needs a new client."""
    return (cfg.host, cfg.ssl_ca_cert, cfg.cert_file, cfg.key_file, cfg.verify_ssl, cfg.tls_server_name, cfg.proxy)


# ----------------------------------------------------------------- calls


def _error(code: int, reason: str | None, raw: bytes) -> KubeError:
    """The apiserver's Status (reason, message) when it sent one."""
    status = _status(raw)
    message = status.get("message") or raw.decode("utf-8", "replace").strip()
    details = status.get("details")
    if not isinstance(details, dict):
        details = {}
    causes = [str(c.get("message", ""))[:300] for c in details.get("causes") or [] if isinstance(c, dict)]
    return KubeError(code, status.get("reason") or reason or "Error", str(message)[:400], causes)


def _status(raw: bytes) -> dict[str, Any]:
    try:
        status = json.loads(raw or b"{}")
    except ValueError:
        return {}
    return status if isinstance(status, dict) else {}


def retry_after(headers: Mapping[str, str], raw: bytes) -> float | None:
    """Seconds the server asked us to wait: the Retry-After header (seconds or an HTTP date), else the
    Status's details.retryAfterSeconds (the apiserver sets both on 429s and some 5xx)."""
    value = headers.get("Retry-After")
    if value:
        value = value.strip()
        if value.isdigit():
            return float(value)
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        return max(0.0, (when - datetime.now(UTC)).total_seconds())
    details = _status(raw).get("details")
    seconds = details.get("retryAfterSeconds") if isinstance(details, dict) else None
    return float(seconds) if isinstance(seconds, int) and seconds >= 0 else None


def _backoff(attempt: int) -> float:
    """Exponential, half of it jittered: many clients failing together do not come back together."""
    full = BACKOFF * 2.0 ** (attempt - 1)
    return full / 2 + random.uniform(0, full / 2)


@dataclass
class _Answer:
    status: int
    reason: str | None
    raw: bytes
    headers: Mapping[str, str]


@dataclass
class CellClient:
    context: str
    api: ApiClient
    timeout: float
    # Loads this context's credentials afresh (Kube gives it; a client without one never refreshes).
    reload: Callable[[], Awaitable[Loaded]] | None = None
    expiry: datetime | None = None  # the exec credential's expirationTimestamp, if it gave one
    _generation: int = field(default=0, init=False, repr=False)  # bumped per credential reload
    _reloading: asyncio.Task[None] | None = field(default=None, init=False, repr=False)
    _retired: list[ApiClient] = field(default_factory=list, init=False, repr=False)
    _discovery: dict[str, tuple[float, dict[str, Any] | None]] = field(default_factory=dict, init=False, repr=False)
    _identity: str | None = field(default=None, init=False, repr=False)
    _identity_failed: float | None = field(default=None, init=False, repr=False)  # monotonic time of the last miss

    async def identity(self) -> str | None:
        """The cluster's identity (its kube-system namespace's uid), read once and kept: None when it can't
        be read (no such namespace, no RBAC grant, the server down), asked again after IDENTITY_RETRY."""
        if self._identity is not None:
            return self._identity
        if self._identity_failed is not None and time.monotonic() - self._identity_failed < IDENTITY_RETRY:
            return None
        try:
            uid = ((await self.get(IDENTITY_PATH)).get("metadata") or {}).get("uid")
        except KubeError as e:
            log.warning("kube_identity_unread", context=self.context, error=str(e))
            uid = None
        if not isinstance(uid, str) or not uid:
            self._identity_failed = time.monotonic()
            return None
        self._identity = uid
        return uid

    async def call(
        self,
        method: str,
        path: str,
        content_type: str | None = None,
        body: Any = None,
        query: dict[str, str] | None = None,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        """One API call, retried where that is safe: reads on 429/5xx/timeout/no connection, writes on 429
        only (the server did not run them). A 401 reloads the credentials once and tries again."""
        method = method.upper()
        read = method in ("GET", "HEAD")
        q = dict(query or {})
        if method in _MANAGED_WRITES:
            q["fieldManager"] = FIELD_MANAGER
        if dry_run and not read:
            q["dryRun"] = "All"
        retry_on = _READ_RETRY if read else frozenset({429})
        refreshed = False
        attempt = 1
        while True:
            await self._fresh()
            generation = self._generation
            try:
                ans = await self._roundtrip(method, path, content_type, body, q)
            except KubeError as e:
                metrics.KUBE_API_ERRORS.labels(self.context, e.reason.lower()).inc()  # timeout, unreachable
                if not read or attempt >= ATTEMPTS:
                    raise
                await self._pause(method, path, attempt, _backoff(attempt), e.reason)
                attempt += 1
                continue
            if 200 <= ans.status < 300:
                return json.loads(ans.raw) if ans.raw else {}
            metrics.KUBE_API_ERRORS.labels(self.context, str(ans.status)).inc()
            if ans.status == 401 and self.reload is not None:
                if refreshed:
                    raise KubeError(
                        401,
                        "Unauthorized",
                        f"credentials for context `{self.context}` were refused even after refreshing them: "
                        "check the kubeconfig user (exec plugin, token or tokenFile)",
                    )
                refreshed = True
                log.info("kube_unauthorized_refreshing", context=self.context, method=method, path=path)
                await self._refresh(generation)
                continue  # not counted as an attempt: the server did not run it
            if ans.status in retry_on and attempt < ATTEMPTS:
                asked = retry_after(ans.headers, ans.raw)
                if asked is None or asked <= RETRY_AFTER_CAP:
                    delay = asked if asked is not None else _backoff(attempt)
                    await self._pause(method, path, attempt, delay, str(ans.status))
                    attempt += 1
                    continue
            raise _error(ans.status, ans.reason, ans.raw)

    async def _pause(self, method: str, path: str, attempt: int, delay: float, why: str) -> None:
        log.warning(
            "kube_retry",
            context=self.context,
            method=method,
            path=path,
            attempt=attempt,
            of=ATTEMPTS,
            error=why,
            wait=round(delay, 2),
        )
        await asyncio.sleep(delay)

    async def _roundtrip(
        self, method: str, path: str, content_type: str | None, body: Any, query: dict[str, str]
    ) -> _Answer:
        headers = {"Accept": "application/json"}
        if content_type:
            headers["Content-Type"] = content_type

        async def once() -> _Answer:
            resp = await self.api.call_api(
                path,
                method,
                query_params=list(query.items()),
                header_params=headers,
                body=body,
                auth_settings=["BearerToken"],
                _preload_content=False,
                _request_timeout=self.timeout,
            )
            try:
                return _Answer(resp.status, resp.reason, await resp.read(), resp.headers)
            finally:
                resp.release()

        try:
            # aiohttp's own timeout covers the request; wait_for is the backstop for a stuck read.
            return await asyncio.wait_for(once(), self.timeout + 1)
        except (TimeoutError, aiohttp.ServerTimeoutError):
            raise KubeError(None, "Timeout", f"no answer within {self.timeout:g}s") from None
        except aiohttp.ClientError as exc:
            raise KubeError(None, "Unreachable", f"{type(exc).__name__}: {exc}"[:300]) from None

    # ------------------------------------------------------------- credentials

    async def _fresh(self) -> None:
        """An exec credential past its expirationTimestamp is refreshed before the call, not after a 401."""
        if self.expiry is not None and datetime.now(UTC) >= self.expiry - EXPIRY_MARGIN:
            await self._refresh(self._generation)

    async def _refresh(self, seen: int) -> None:
        """Reload the credentials, unless that happened since `seen`. One reload at a time: concurrent
        callers share it (and its failure), so a burst of 401s runs the plugin once."""
        if self.reload is None or self._generation != seen:
            return
        task = self._reloading
        if task is None or task.done():
            task = self._reloading = asyncio.create_task(self._reload_once())
            # Retrieved here too, so a reload whose callers were all cancelled logs nothing spurious.
            task.add_done_callback(lambda t: t.cancelled() or t.exception())
        await asyncio.shield(task)  # one caller cancelled does not cancel the others' reload

    async def _reload_once(self) -> None:
        assert self.reload is not None
        cfg, expiry = await self.reload()
        current = self.api.configuration
        if _transport(cfg) == _transport(current):
            # Only the credential changed: swap it in; requests read api_key as they are sent.
            current.api_key = cfg.api_key
            current.api_key_prefix = cfg.api_key_prefix
        else:
            # New server or TLS files: a new session. The old one may still carry calls in flight, so it
            # is closed at the next swap (or at shutdown), not now.
            for old in self._retired:
                await old.close()
            self._retired = [self.api]
            self.api = api_client(cfg)
        self.expiry = expiry
        self._generation += 1
        log.info("kube_credentials_refreshed", context=self.context, expires=expiry.isoformat() if expiry else None)

    async def close(self) -> None:
        for api in [self.api, *self._retired]:
            await api.close()
        self._retired.clear()

    # ------------------------------------------------------------- helpers

    async def get(self, path: str, query: dict[str, str] | None = None) -> dict[str, Any]:
        return await self.call("GET", path, query=query)

    async def send(self, call: Call, dry_run: bool = False) -> dict[str, Any]:
        return await self.call(call.method, call.path, call.content_type, call.body, dry_run=dry_run)

    async def list_all(self, path: str, query: dict[str, str] | None = None) -> list[dict[str, Any]]:
        """Every item of a list, PAGE at a time (limit/continue), as kubectl pages."""
        items: list[dict[str, Any]] = []
        q = {**(query or {}), "limit": str(PAGE)}
        while True:
            try:
                page = await self.get(path, q)
            except KubeError as e:
                if e.code != 410 or "continue" not in q:
                    raise
                # The continue token expired (etcd compacted): one whole list, as client-go's pager does.
                log.info("kube_list_continue_expired", context=self.context, path=path)
                return list((await self.get(path, query)).get("items") or [])
            items.extend(page.get("items") or [])
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                return items
            q["continue"] = token

    async def _discover(self, path: str) -> dict[str, Any] | None:
        """A discovery document (None: not served), cached for DISCOVERY_TTL."""
        hit = self._discovery.get(path)
        if hit is not None and time.monotonic() - hit[0] < DISCOVERY_TTL:
            return hit[1]
        try:
            doc: dict[str, Any] | None = await self.get(path)
        except KubeError as e:
            if e.code != 404:
                raise
            doc = None
        self._discovery[path] = (time.monotonic(), doc)
        return doc

    async def served_version(self, group: str, candidates: Sequence[str], plural: str | None = None) -> str | None:
        """The first of `candidates` (newest first) the cluster serves for `group` ("" is the core group).
        With `plural`, the first that serves that resource: a group's versions are the union over its
        resources, and a CRD may not serve every one of them."""
        doc = await self._discover(f"/apis/{group}" if group else "/api")
        if doc is None:
            return None
        if group:
            served = {v.get("version") for v in doc.get("versions") or [] if isinstance(v, dict)}
        else:
            served = set(doc.get("versions") or [])  # APIVersions lists bare versions
        for version in candidates:
            if version not in served:
                continue
            if plural is None or plural in await self._plurals(f"{group}/{version}" if group else version):
                return version
        return None

    async def _plurals(self, api_version: str) -> dict[str, str]:
        """{plural: kind} served under `api_version` (subresources left out)."""
        doc = await self._discover(f"/apis/{api_version}" if "/" in api_version else f"/api/{api_version}")
        return {
            str(r["name"]): str(r.get("kind"))
            for r in (doc or {}).get("resources") or []
            if isinstance(r, dict) and r.get("name") and "/" not in str(r["name"])
        }

    async def scales(self, api_version: str, plural: str) -> bool:
        """Whether `plural` in `api_version` has a /scale subresource (what an HPA and KEDA can scale)."""
        doc = await self._discover(f"/apis/{api_version}" if "/" in api_version else f"/api/{api_version}")
        return any(
            isinstance(r, dict) and r.get("name") == f"{plural}/scale" for r in (doc or {}).get("resources") or []
        )

    async def plural_for(self, api_version: str, kind: str) -> str | None:
        """The resource name (plural) the cluster serves `kind` under in `api_version` ("apps/v1", "v1")."""
        return next((p for p, k in (await self._plurals(api_version)).items() if k == kind), None)


class Kube:
    """Clients by context, from one kubeconfig."""

    def __init__(self, kubeconfig: Path | None, timeout: float) -> None:
        self.kubeconfig = kubeconfig
        self.timeout = timeout
        self._clients: dict[str, CellClient] = {}
        self._locks: dict[str, asyncio.Lock] = {}  # per context: one slow exec plugin holds up only its own

    async def client(self, context: str) -> CellClient:
        """The context's client. UnknownCell if there is no such context; KubeError(None, "Credentials")
        if its credentials cannot be loaded."""
        if context in self._clients:
            return self._clients[context]
        async with self._locks.setdefault(context, asyncio.Lock()):
            if context in self._clients:
                return self._clients[context]
            kubeconfig = self.kubeconfig
            if kubeconfig is None:
                raise UnknownCell(context, None)
            # The file is read off the event loop; only a context without a client yet needs it.
            try:
                doc = await asyncio.to_thread(read_kubeconfig, kubeconfig)
            except _LOAD_ERRORS as e:
                raise credentials_error(context, e) from None
            known = contexts_of(doc)
            if context not in known:
                raise UnknownCell(context, known)
            cfg, expiry = await load_context(kubeconfig, context, doc)
            self._clients[context] = CellClient(
                context,
                api_client(cfg),
                self.timeout,
                reload=lambda: load_context(kubeconfig, context),
                expiry=expiry,
            )
            return self._clients[context]

    async def _doc(self) -> dict[str, Any] | None:
        """The kubeconfig as it is now (None: KUBECONFIG unset), read off the event loop."""
        if self.kubeconfig is None:
            return None
        try:
            return await asyncio.to_thread(read_kubeconfig, self.kubeconfig)
        except _LOAD_ERRORS as e:
            raise credentials_error("(kubeconfig)", e) from None

    async def contexts(self) -> list[str] | None:
        """The kubeconfig's context names (None: KUBECONFIG unset)."""
        doc = await self._doc()
        return None if doc is None else contexts_of(doc)

    async def same_server(self, context: str, other: str, identify: bool = True) -> bool:
        """Do the two contexts reach one cluster? Decided by what the cluster is, not by how it is
        spelled: the uid of each one's kube-system namespace (CellClient.identity: kubernetes.default.svc,
        its .svc.cluster.local name, the service IP and a trailing dot are all one cluster). When either
        identity can't be read, or ``identify`` is False (nothing may be read from ``context``: a cell the
        incident does not reach), the URLs are compared (normalised), as before identities were read."""
        if context == other:
            return True
        doc = await self._doc()
        servers = servers_of(doc) if doc is not None else {}
        if context not in servers:
            return False
        if not identify:
            return servers.get(context) == servers.get(other)
        mine, theirs = await asyncio.gather(self._identity_of(context), self._identity_of(other))
        if mine is not None and theirs is not None:
            return mine == theirs
        return servers.get(context) == servers.get(other)

    async def _identity_of(self, context: str) -> str | None:
        try:
            return await (await self.client(context)).identity()
        except (UnknownCell, KubeError) as e:
            log.warning("kube_identity_unread", context=context, error=str(e))
            return None

    async def close(self) -> None:
        for c in self._clients.values():
            await c.close()
        self._clients.clear()
