"""The demo fleet's figures over time: what the simulated Prometheus (world/fbworld/prometheus.py) answers.

One number per (cell, figure). The figures are the default policy's triage queries
(policies/queries.yaml, by name) plus ``demand``, the requests a cell finishes per second
(queries.yaml `changed.demand`, route-weight's price), and ``waiting``, the 70B model's queue (its
ScaledObject's trigger, keda-pause's price). Every figure starts at ``HEALTHY`` and holds it until a game-day
drill (or a test) moves it with ``set``; each change is a step at a given time and the history is
kept, so a question about a past time ("demand 3 hours ago", an alert's expression over the last
24 h) gets what was true then.

A figure may instead be *modelled*: computed for any time from a model with its own history (the
console models triage's DCGM rows, ``xid_gpus``, ``xid_app``, ``ecc_dbe`` and
``row_remap_pending``, from what happened to each GPU, fbworld/dcgm.py, so they follow
dcgm-exporter's series: an XID held until the driver reloads, a counter's window). ``set``
refuses it too: the model is what moves it.

A figure may also be *derived*: computed live from elsewhere (the console derives
``quarantined`` from the Kubernetes emulators' node taints, so the figure follows what the
node-quarantine lever actually did). A derived figure has no history: whatever time is asked
about, it answers what its source says now, and a source that answers None means the cell has no
such series (the query then answers "no data", as Prometheus does). ``set`` refuses a derived
figure, since the value would never be read.

Pure: no I/O. Updates and reads take a lock, so a drill thread and the event loop can share it.
"""

from __future__ import annotations

import bisect
import threading
import time
from collections.abc import Callable, Iterable, Sequence

# A healthy ML serving cell, consistent with the default policy: TTFT p99 well under the 2 s SLO,
# SLO burn far below headroom's max_burn (1.0x) and the 14.4x fast-burn page, a KV cache half full,
# a short queue, no GPU errors, nothing quarantined or pending, steady demand.
HEALTHY: dict[str, float] = {
    "ttft_p99": 0.85,  # seconds
    "burn_fast": 0.12,  # x of the error budget (0.12% of requests slower than 2.5 s, 1h)
    "burn_slow": 0.10,  # x, over 6h
    "kv_cache": 0.55,  # 0..1 fraction, fullest engine
    "preemptions": 0.0,  # per second
    "waiting_running": 0.1,  # requests queued per request running
    "xid_gpus": 0.0,  # count: GPUs with a fatal XID in the last hour
    "xid_app": 0.0,  # count: GPUs with an application XID in the last hour
    "ecc_dbe": 0.0,  # count over 1h
    "row_remap_pending": 0.0,  # count
    "quarantined": 0.0,  # fraction of GPU nodes
    "kueue_pending": 0.0,  # count
    "demand": 40.0,  # requests finished per second
    "waiting": 6.0,  # requests queued for the 70B model (the ScaledObject's trigger; its threshold is 20)
}
FIGURES: tuple[str, ...] = tuple(HEALTHY)

Derivation = Callable[[str], float | None]
Model = Callable[[str, float], float | None]  # (cell, unix time) -> the figure then, None: no series


def _one_of(kind: str, given: str, valid: Iterable[str]) -> ValueError:
    return ValueError(f"unknown {kind} {given!r}; the demo fleet's {kind}s: {', '.join(valid)}")


class FleetMetrics:
    """The figures of ``cells`` over time; ``clock`` gives "now" (unix seconds)."""

    def __init__(self, cells: Sequence[str], clock: Callable[[], float] = time.time) -> None:
        if not cells or len(set(cells)) != len(cells):
            raise ValueError(f"cells must be distinct and at least one: {list(cells)}")
        self._cells = tuple(cells)
        self._clock = clock
        self._lock = threading.Lock()
        # (cell, name) -> change times (ascending) and the value from each; before the first: HEALTHY.
        self._times: dict[tuple[str, str], list[float]] = {}
        self._values: dict[tuple[str, str], list[float]] = {}
        self._derived: dict[str, Derivation] = {}
        self._models: dict[str, Model] = {}

    @property
    def cells(self) -> tuple[str, ...]:
        return self._cells

    def now(self) -> float:
        return self._clock()

    def check(self, cell: str, name: str) -> None:
        """ValueError naming the valid cells or figures unless both are the fleet's."""
        if cell not in self._cells:
            raise _one_of("cell", cell, self._cells)
        if name not in HEALTHY:
            raise _one_of("figure", name, FIGURES)

    def set(self, cell: str, name: str, value: float, at: float | None = None) -> None:
        """From ``at`` (default now) on, ``name`` of ``cell`` is ``value``, until a later change.
        A change at a time that already has one replaces it."""
        self.check(cell, name)
        if name in self._derived:
            raise ValueError(f"{name} is derived from elsewhere; set() would never be read")
        if name in self._models:
            raise ValueError(f"{name} comes from a model of what happened (fbworld/dcgm.py); set() would never be read")
        t = self._clock() if at is None else at
        with self._lock:
            times = self._times.setdefault((cell, name), [])
            values = self._values.setdefault((cell, name), [])
            i = bisect.bisect_left(times, t)
            if i < len(times) and times[i] == t:
                values[i] = float(value)
            else:
                times.insert(i, t)
                values.insert(i, float(value))

    def value(self, cell: str, name: str, at: float | None = None) -> float | None:
        """The figure at ``at`` (default now). None only for a derived or modelled figure whose
        source has no figure for the cell (no series)."""
        self.check(cell, name)
        derive = self._derived.get(name)
        if derive is not None:
            got = derive(cell)  # outside the lock: the source is someone else's code
            return None if got is None else float(got)
        t = self._clock() if at is None else at
        model = self._models.get(name)
        if model is not None:
            got = model(cell, t)
            return None if got is None else float(got)
        with self._lock:
            times = self._times.get((cell, name), [])
            i = bisect.bisect_right(times, t)
            return self._values[(cell, name)][i - 1] if i else HEALTHY[name]

    def is_derived(self, name: str) -> bool:
        return name in self._derived

    def model(self, name: str, fn: Model) -> None:
        """Compute ``name`` as ``fn(cell, at)`` from now on, for any time asked about (see the module
        docstring). Changes ``set`` before are dropped."""
        if name not in HEALTHY:
            raise _one_of("figure", name, FIGURES)
        with self._lock:
            self._models[name] = fn
            for cell in self._cells:
                self._times.pop((cell, name), None)
                self._values.pop((cell, name), None)

    def derive(self, name: str, fn: Derivation) -> None:
        """Compute ``name`` live with ``fn(cell)`` from now on (see the module docstring: no
        history; None means no series). Changes ``set`` before are dropped."""
        if name not in HEALTHY:
            raise _one_of("figure", name, FIGURES)
        with self._lock:
            self._derived[name] = fn
            for cell in self._cells:
                self._times.pop((cell, name), None)
                self._values.pop((cell, name), None)
