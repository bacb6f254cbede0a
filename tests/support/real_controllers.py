"""The real controllers of one test session (one kube-apiserver): Argo Rollouts, KEDA, Kueue and
JobSet (tests/support/{argo,keda,kueue,jobset}_controller.py), one of each at a time, started when
first asked for and shared by everyone after: two of one controller on one server would fight over
the same objects. tests/realkube/conftest.py holds the session's instance and its fixtures."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import tests.support.argo_controller as argo
import tests.support.jobset_controller as jobset
import tests.support.keda_controller as keda
import tests.support.kueue_controller as kueue
from fbworld.realkube import NodeHealthChecks
from tests.support.kube_apiserver import KubeAPIServer

# name -> start(server, directory): each blocks until its controller is ready.
STARTERS: dict[str, Callable[[KubeAPIServer, Path], Any]] = {
    "argo": argo.start,
    "keda": keda.start,
    "kueue": kueue.start,
    "jobset": jobset.start,
}


@dataclass
class SessionControllers:
    """The session's real controllers, each started at most once at a time (a lock per name, so
    different ones start side by side)."""

    server: KubeAPIServer
    tmp: pytest.TempPathFactory
    running: dict[str, Any] = field(default_factory=dict)
    died: list[str] = field(default_factory=list)
    _locks: dict[str, threading.Lock] = field(default_factory=lambda: {n: threading.Lock() for n in STARTERS})

    def get(self, name: str, directory: Path | None = None) -> Any:
        with self._locks[name]:
            if name not in self.running:
                self.running[name] = STARTERS[name](self.server, directory or self.tmp.mktemp(name))
            return self.running[name]

    def all(self) -> dict[str, Any]:
        """Every controller running; those not yet started start in parallel threads (the slow part of
        each is waiting: CRDs established, caches synced, webhooks called)."""
        todo = [n for n in STARTERS if n not in self.running]
        dirs = {n: self.tmp.mktemp(n) for n in todo}  # mktemp numbers directories: not from threads
        with ThreadPoolExecutor(len(todo) or 1) as pool:
            for f in [pool.submit(self.get, n, dirs[n]) for n in todo]:
                f.result()  # the first failure fails the fixture (the others still finish starting)
        return {n: self.get(n) for n in STARTERS}

    def stop_all(self) -> None:
        """Webhooks first (JobSet's and Kueue's stop() remove theirs), so nothing calls a stopped
        server; each one's death during the session is remembered for the teardown's check."""
        for name in ("jobset", "kueue", "keda", "argo"):
            with self._locks[name]:
                ctl = self.running.pop(name, None)
                if ctl is None:
                    continue
                if not ctl.alive():
                    self.died.append(f"{name}:\n{ctl.log_tail()}")
                ctl.stop()


@dataclass
class Controllers:
    argo: argo.ArgoController
    keda: keda.KedaOperator
    kueue: kueue.KueueController
    jobset: jobset.JobSetController
    nhc: NodeHealthChecks
