"""The port every capability reaches Kubernetes through: ``Clusters`` (the fleet's clusters, one per
kube context) and ``Cluster`` (one context's API), with their two errors.

The app builds one implementation at start (bot/runtime.py, from KUBECONFIG and the policy's API
timeout) and hands it to the capabilities as ``Services.clusters``. That implementation is
levers/kube.py, on kubernetes_asyncio; nothing else imports kubernetes_asyncio, and nothing but the
runtime (and the console's flag check) imports levers/kube.py (import contracts in pyproject.toml).
A lever only ever gets the client of its own cell's context, so it cannot touch another cell
(docs/levers.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol


class KubeError(Exception):
    """An API call failed. `code` is the HTTP status (None for a timeout, no connection or bad credentials)."""

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
        if self.reason == "Credentials":
            return self.message  # it names itself: "kube credentials for context `X` failed: ..."
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


class Call(Protocol):
    """One planned write, as a lever's plan holds it (levers/plan.py ApiCall)."""

    @property
    def method(self) -> str: ...

    @property
    def path(self) -> str: ...

    @property
    def content_type(self) -> str: ...

    @property
    def body(self) -> Any: ...


class Cluster(Protocol):
    """One kube context's API. Every method raises KubeError when the call fails."""

    async def call(
        self,
        method: str,
        path: str,
        content_type: str | None = None,
        body: Any = None,
        query: dict[str, str] | None = None,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        """One API call (reads retried where safe); ``dry_run``: validated by the server, nothing stored."""
        ...

    async def get(self, path: str, query: dict[str, str] | None = None) -> dict[str, Any]: ...

    async def list_all(self, path: str, query: dict[str, str] | None = None) -> list[dict[str, Any]]:
        """Every item of a list, paged as kubectl pages."""
        ...

    async def send(self, call: Call, dry_run: bool = False) -> dict[str, Any]:
        """A planned write (``dry_run``: validated by the server, nothing stored)."""
        ...

    async def identity(self) -> str | None:
        """What the cluster is, whatever URL reaches it (its kube-system namespace's uid); None: unreadable."""
        ...

    async def served_version(self, group: str, candidates: Sequence[str], plural: str | None = None) -> str | None:
        """The first of ``candidates`` the cluster serves for ``group`` (and ``plural``, when given)."""
        ...

    async def scales(self, api_version: str, plural: str) -> bool:
        """Whether ``plural`` has a /scale subresource."""
        ...

    async def plural_for(self, api_version: str, kind: str) -> str | None:
        """The resource name the cluster serves ``kind`` under in ``api_version``."""
        ...


class Clusters(Protocol):
    """The fleet's clusters, by kube context."""

    async def client(self, context: str) -> Cluster:
        """The context's client. UnknownCell if there is no such context; KubeError(None, "Credentials")
        if its credentials cannot be loaded."""
        ...

    async def contexts(self) -> list[str] | None:
        """The kube contexts Firebreak knows (None: KUBECONFIG unset)."""
        ...

    async def same_server(self, context: str, other: str, identify: bool = True) -> bool:
        """Do the two contexts reach one cluster? (``identify`` False: compare URLs only.)"""
        ...

    async def close(self) -> None: ...
