"""Kubernetes access: one ApiClient per kube context, created lazily, one pool per app (svc.part).

A lever only ever gets the client of its own cell's context, so it cannot
touch another cell. Every call carries the plan's exact content type.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import yaml
from kubernetes_asyncio.client import ApiClient, Configuration
from kubernetes_asyncio.config.kube_config import KubeConfigLoader

from bot import logs
from bot.core.services import Services
from levers.plan import ApiCall

log = logs.get(__name__)


class KubeError(Exception):
    """An API call failed. `code` is the HTTP status (None for a timeout or no connection)."""

    def __init__(self, code: int | None, reason: str, message: str, causes: list[str] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.causes = causes or []  # the Status's details.causes[].message

    @property
    def test_failed(self) -> bool:
        """A JSON-patch `test` op did not hold (the object moved), as opposed to a schema rejection.

        The apiserver says so in the message or, behind a generic "the server rejected our request",
        in details.causes: "testing value /spec/... failed: test failed".
        """
        return self.code == 422 and any(
            "test failed" in m or m.startswith("testing value") for m in [self.message, *self.causes]
        )

    @property
    def timeout(self) -> bool:
        return self.reason == "Timeout" and self.code is None

    def __str__(self) -> str:
        head = f"{self.code} {self.reason}" if self.code else self.reason
        return f"{head}: {self.message}" if self.message else head


class UnknownCell(Exception):
    """No kube context for a cell. `known` is None when there is no kubeconfig at all."""

    def __init__(self, context: str, known: list[str] | None) -> None:
        super().__init__(context)
        self.context = context
        self.known = known

    def __str__(self) -> str:
        if self.known is None:
            return f"Firebreak has no kube config for context `{self.context}` (KUBECONFIG unset)"
        return f"no kube context `{self.context}` in KUBECONFIG (contexts: {', '.join(self.known) or 'none'})"


def read_kubeconfig(kubeconfig: Path | None) -> dict[str, Any]:
    """The parsed file ({} when absent). Blocking: call it through asyncio.to_thread."""
    if kubeconfig is None or not Path(kubeconfig).is_file():
        return {}
    return yaml.safe_load(Path(kubeconfig).read_text(encoding="utf-8")) or {}


def contexts_of(doc: dict[str, Any]) -> list[str]:
    return [c.get("name") for c in doc.get("contexts") or [] if c.get("name")]


def _error(code: int, reason: str | None, raw: bytes) -> KubeError:
    """The apiserver's Status (reason, message) when it sent one."""
    try:
        status = json.loads(raw or b"{}")
    except ValueError:
        status = {}
    if not isinstance(status, dict):
        status = {}
    message = status.get("message") or raw.decode("utf-8", "replace").strip()
    details = status.get("details")
    if not isinstance(details, dict):
        details = {}
    causes = [str(c.get("message", ""))[:300] for c in details.get("causes") or [] if isinstance(c, dict)]
    return KubeError(code, status.get("reason") or reason or "Error", str(message)[:400], causes)


@dataclass
class CellClient:
    context: str
    api: ApiClient
    timeout: float

    async def call(
        self,
        method: str,
        path: str,
        content_type: str | None = None,
        body: Any = None,
        query: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        headers = {"Accept": "application/json"}
        if content_type:
            headers["Content-Type"] = content_type

        async def roundtrip() -> tuple[int, str | None, bytes]:
            resp = await self.api.call_api(
                path,
                method,
                query_params=list((query or {}).items()),
                header_params=headers,
                body=body,
                auth_settings=["BearerToken"],
                _preload_content=False,
                _request_timeout=self.timeout,
            )
            try:
                return resp.status, resp.reason, await resp.read()
            finally:
                resp.release()

        try:
            # aiohttp's own timeout covers the request; wait_for is the backstop for a stuck read.
            status, reason, raw = await asyncio.wait_for(roundtrip(), self.timeout + 1)
        except (TimeoutError, aiohttp.ServerTimeoutError):
            raise KubeError(None, "Timeout", f"no answer within {self.timeout:g}s") from None
        except aiohttp.ClientError as exc:
            raise KubeError(None, "Unreachable", f"{type(exc).__name__}: {exc}"[:300]) from None
        if not 200 <= status < 300:
            raise _error(status, reason, raw)
        return json.loads(raw) if raw else {}

    async def get(self, path: str, query: dict[str, str] | None = None) -> dict[str, Any]:
        return await self.call("GET", path, query=query)

    async def send(self, call: ApiCall) -> dict[str, Any]:
        return await self.call(call.method, call.path, call.content_type, call.body)


class Kube:
    """Clients by context, from one kubeconfig."""

    def __init__(self, kubeconfig: Path | None, timeout: float) -> None:
        self.kubeconfig = kubeconfig
        self.timeout = timeout
        self._clients: dict[str, CellClient] = {}
        self._lock = asyncio.Lock()

    async def client(self, context: str) -> CellClient:
        async with self._lock:
            if context in self._clients:
                return self._clients[context]
            if self.kubeconfig is None:
                raise UnknownCell(context, None)
            # The file is read off the event loop; only a context without a client yet needs it.
            doc = await asyncio.to_thread(read_kubeconfig, self.kubeconfig)
            known = contexts_of(doc)
            if context not in known:
                raise UnknownCell(context, known)
            cfg = type.__call__(Configuration)  # a fresh one, not a copy of the process-wide default
            loader = KubeConfigLoader(
                config_dict=doc, active_context=context, config_base_path=str(Path(self.kubeconfig).parent)
            )
            await loader.load_and_set(cfg)
            self._clients[context] = CellClient(context, ApiClient(configuration=cfg), self.timeout)
            return self._clients[context]

    async def close(self) -> None:
        for c in self._clients.values():
            await c.api.close()
        self._clients.clear()


def _make(svc: Services) -> Kube:
    kube = Kube(svc.settings.kubeconfig, svc.policy.levers.api_timeout_seconds)
    svc.closers.append(kube.close)  # the runtime closes the clients' sessions at app cleanup
    return kube


def kube_for(svc: Services) -> Kube:
    """The app's kube clients (made on first use)."""
    return svc.part(_make)
