"""The plumbing of a stand-in controller against a real kube-apiserver, over its REST API: a small
client (RealKube), a reconciler's pass (Reconciler, Conflict) and a loop running passes
(run_controllers). NodeHealthCheck's stand-in (nhc.py) runs on it; the other controllers the levers
depend on run for real in the tests (tests/support/*_controller.py).

Writes go with PUT and the object's resourceVersion, or a merge patch (optimistic concurrency, as
upstream controllers' Update calls): a 409 (someone wrote in between, e.g. a lever) skips that object
until the next pass, as a controller's requeue does. Writes carry the upstream controller's field
manager, so managedFields read as in a real cluster.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import aiohttp

Obj = dict[str, Any]


class Conflict(Exception):
    """The next pass retries: 409 or 404 on a write (the object moved on since this pass read it), or
    429 (the server asks to come back: e.g. "storage is (re)initializing" just after a CRD is
    established), as controller-runtime requeues."""


class RealKube:
    """A small REST client for one API server: bearer token, the server's CA."""

    def __init__(self, url: str, token: str, ca_file: Path) -> None:
        self.url = url.rstrip("/")
        self._headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
        self._ssl = ssl.create_default_context(cafile=str(ca_file))
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> RealKube:
        self._session = aiohttp.ClientSession(headers=self._headers, timeout=aiohttp.ClientTimeout(total=10))
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._session is not None:
            await self._session.close()

    async def _call(self, method: str, path: str, body: Obj | None = None, manager: str | None = None) -> Obj:
        assert self._session is not None, "use RealKube as an async context manager"
        params = {"fieldManager": manager} if manager else None
        async with self._session.request(method, self.url + path, json=body, params=params, ssl=self._ssl) as r:
            data = await r.json(content_type=None)
            if r.status == 429 or (r.status in (404, 409) and method != "GET"):
                raise Conflict(f"{method} {path}: {r.status} {data.get('message')}")
            if r.status >= 400:
                raise RuntimeError(f"{method} {path}: {r.status} {data.get('message')}")
            return dict(data)

    async def get(self, path: str) -> Obj | None:
        try:
            return await self._call("GET", path)
        except RuntimeError as e:
            if ": 404 " in str(e):
                return None
            raise

    async def list(self, path: str) -> list[Obj]:
        return list((await self._call("GET", path)).get("items") or [])

    async def create(self, path: str, body: Obj, manager: str) -> Obj:
        return await self._call("POST", path, body, manager)

    async def put(self, path: str, body: Obj, manager: str) -> Obj:
        return await self._call("PUT", path, body, manager)

    async def delete(self, path: str) -> None:
        with contextlib.suppress(Conflict):  # already gone
            await self._call("DELETE", path)


class Reconciler:
    name = "controller"

    def __init__(self, kube: RealKube) -> None:
        self.kube = kube
        self.passes = 0

    async def reconcile(self) -> None:
        raise NotImplementedError

    async def pass_(self) -> None:
        with contextlib.suppress(Conflict):  # requeued: the next pass
            await self.reconcile()


async def run_controllers(kube: RealKube, reconcilers: Sequence[Reconciler], interval: float = 0.1) -> None:
    """Run every reconciler's pass, then sleep ``interval``, until cancelled. A pass that fails with
    anything but a conflict ends the task with that error (the caller checks the task)."""
    while True:
        for r in reconcilers:
            await r.pass_()
            r.passes += 1
        await asyncio.sleep(interval)
