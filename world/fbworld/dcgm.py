"""dcgm-exporter's GPU series, from what happened to each GPU (XIDs, ECC double-bit errors, row
remaps, driver reloads), as the exporter renders them at a scrape.

One model for both worlds: the real-Prometheus fixtures backfill its samples
(tests/support/prometheus.py), and the simulated Prometheus answers triage's DCGM rows from it
(fbworld/fleet.py), so neither can say what the exporter would not. Every behaviour was read in
the upstream source, named beside it: NVIDIA/dcgm-exporter main at d5e5f51 (the commit after
release 4.5.3-4.8.2, 691c927) and NVIDIA/DCGM 4.6.0 (72fa3fe).

Labels (internal/pkg/rendermetrics/render_metrics.go, gpuMetricsFormat): gpu, UUID (``uuid``
under --use-old-namespace), pci_bus_id, device (``nvidia<gpu>``), modelName, the host label
when the exporter has a host name (internal/pkg/hostname GetHostname: NODE_NAME, else the host's
own; none under --no-hostname), then the CSV's label fields (DCGM_FI_DRIVER_VERSION in
etc/default-counters.csv) and the attributes: err_code and err_msg on the XID gauge, and under
--kubernetes pod, namespace and container on the series of a GPU a pod holds
(internal/pkg/transformation/kubernetes.go, PodMapper.Process; pod_uid only with
--kubernetes-enable-pod-uid). The host label is ``Hostname`` in every release through
4.5.3-4.8.2 and ``hostname`` on main from d5e5f51 ("Rename Hostname label to hostname", #655):
``Exporter.hostname_label`` picks the spelling.

The series (types as the CSV declares them; the CSV is the operator's):

- DCGM_FI_DEV_XID_ERRORS, gauge, in etc/default-counters.csv ("Value of the last XID error
  encountered"). The exporter reads DCGM's latest value (internal/pkg/collector/gpu_collector.go,
  toMetric, via EntityGetLatestValues); DCGM stores one on each XID event (dcgmlib/src/
  DcgmCacheManager.cpp, RecordXidForGpu) and nothing clears it, so the gauge HOLDS the last XID
  until DCGM's cache starts over: the driver reloads (GPU reset, node reboot) and the host engine
  with it, or an exporter that embeds the engine restarts (NVIDIA/DCGM#277, dcgm-exporter#500).
  An XID repeating the held code changes nothing a scrape can see. err_code and err_msg follow
  the value (toMetric; err_msg from xid_errors.go), so each new code is a new series. A GPU with
  no XID since the engine started reads 0, err_msg "No Error".
- DCGM_EXP_XID_ERRORS_COUNT, declared counter, commented out in etc/default-counters.csv ("reported
  XIDs during last window"): per GPU, how many XIDs DCGM recorded in the last
  --xid-count-window-size ms (default 300000, pkg/cmd/app.go), one series per code with labels
  ``xid`` and ``window_size_in_ms``; with none in the window one series of 0 with
  ``window_size_in_ms`` and no ``xid`` (internal/pkg/collector/expcollector.go,
  expCollector.getMetrics over GetValuesSince; xid_collector.go, NewXIDCollector's labelFiller).
  Declared a counter, it is a sliding-window count: it falls as XIDs leave the window and a code's
  series ends with them (Prometheus's increase() reads a fall as a reset, and a series that starts
  at 1 and stays there as no increase). DCGM keeps XIDs 600 s (internal/pkg/devicewatcher
  const.go, maxKeepAge), so windows over that are not modelled.
- DCGM_FI_DEV_ECC_DBE_VOL_TOTAL and DCGM_FI_DEV_ECC_DBE_AGG_TOTAL, counters, commented out in
  etc/default-counters.csv. Volatile counts reset each time the driver loads (NVML's
  nvmlEccCounterType_t in DCGM's sdk/nvidia/nvml/dcgm_nvml.h; DCGM reads NVML_VOLATILE_ECC);
  aggregate ones persist for the device's life ("monotonically increasing", dcgmlib/dcgm_fields.h).
- Row remapping (DCGM fields 393-396, dcgmlib/dcgm_fields.h; NVML nvmlDeviceGetRemappedRows):
  DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS and DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS, counters in
  etc/default-counters.csv, count rows remapped; DCGM_FI_DEV_ROW_REMAP_FAILURE, gauge in the same
  CSV, is 1 once a remapping ever failed; DCGM_FI_DEV_ROW_REMAP_PENDING (field 396, in no shipped
  CSV; a gauge when added) is 1 while a remapping waits for a GPU reset, which the reload is.

Pure: no I/O. ``DcgmFleet`` takes a lock, so a drill and the event loop can share it.
"""

from __future__ import annotations

import bisect
import dataclasses
import math
import threading
import uuid
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

RELEASED_HOSTNAME = "Hostname"  # every release through 4.5.3-4.8.2 (691c927)
MAIN_HOSTNAME = "hostname"  # main from d5e5f51 (#655)
HOSTNAME_LABELS = (RELEASED_HOSTNAME, MAIN_HOSTNAME)

XID_ERRORS = "DCGM_FI_DEV_XID_ERRORS"
XID_COUNT = "DCGM_EXP_XID_ERRORS_COUNT"
ECC_DBE_VOL = "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"
ECC_DBE_AGG = "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL"
ROWS_UNCORRECTABLE = "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS"
ROWS_CORRECTABLE = "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS"
ROW_REMAP_FAILURE = "DCGM_FI_DEV_ROW_REMAP_FAILURE"
ROW_REMAP_PENDING = "DCGM_FI_DEV_ROW_REMAP_PENDING"

# The Prometheus type each is declared with (etc/default-counters.csv; PENDING as one would add it).
TYPES: dict[str, str] = {
    XID_ERRORS: "gauge",
    XID_COUNT: "counter",
    ECC_DBE_VOL: "counter",
    ECC_DBE_AGG: "counter",
    ROWS_UNCORRECTABLE: "counter",
    ROWS_CORRECTABLE: "counter",
    ROW_REMAP_FAILURE: "gauge",
    ROW_REMAP_PENDING: "gauge",
}
XID_FIELDS = frozenset({XID_ERRORS, XID_COUNT})
# The fields of etc/default-counters.csv among these (the others are commented out or absent there).
DEFAULT_COUNTERS = frozenset({XID_ERRORS, ROWS_UNCORRECTABLE, ROWS_CORRECTABLE, ROW_REMAP_FAILURE})
# What policies/queries.yaml asks a deployment to add for triage's ECC and row-remap rows.
TRIAGE_COUNTERS = DEFAULT_COUNTERS | {ECC_DBE_VOL, ROW_REMAP_PENDING}

XID_WINDOW_MS = 300_000  # --xid-count-window-size's default (pkg/cmd/app.go)
DCGM_KEEP_S = 600.0  # how long DCGM keeps a watched field's values (devicewatcher maxKeepAge)

DRIVER_VERSION = "550.127.05"
MODEL_NAME = "NVIDIA H100 80GB HBM3"

# dcgm-exporter's err_msg for the XIDs used here (internal/pkg/collector/xid_errors.go, xidErrCodeToText).
XID_TEXT = {
    0: "No Error",
    13: "Graphics Engine Exception",
    31: "GPU memory page fault",
    43: "GPU stopped processing",
    45: "Preemptive cleanup, due to previous errors -- Most likely to see when running multiple cuda",
    48: "Double Bit ECC Error",
    61: "Internal micro-controller breakpoint/warning",
    62: "Internal micro-controller halt",
    63: "ECC page retirement or row remapping recording event",
    64: "ECC page retirement or row remapper recording failure",
    74: "NVLINK Error",
    79: "GPU has fallen off the bus",
    92: "High single-bit ECC error rate",
    94: "Contained ECC error",
    95: "Uncontained ECC error",
    109: "Context Switch Timeout Error",
    119: "GSP RPC Timeout",
    120: "GSP Error",
    140: "Unrecovered ECC Error",
    154: "GPU Recovery Action Changed",
}

# The simulated Prometheus's figures (fbworld/metrics.py) that come from these series.
FIGURES = ("xid_gpus", "xid_app", "ecc_dbe", "row_remap_pending")

Kind = Literal["xid", "dbe", "remap", "reload"]
Remap = Literal["uncorrectable", "correctable", "failed"]


@dataclass(frozen=True)
class Event:
    at: float  # unix seconds
    kind: Kind
    xid: int = 0
    errors: int = 0  # dbe: how many double-bit errors
    remap: Remap = "uncorrectable"


@dataclass
class State:
    """What DCGM holds for a GPU at one time."""

    xid: int = 0  # the last XID since the engine started (0: none)
    xids: list[tuple[float, int]] = field(default_factory=list)  # every XID since then, with its time
    dbe_volatile: int = 0
    dbe_aggregate: int = 0
    rows_uncorrectable: int = 0
    rows_correctable: int = 0
    pending: int = 0
    failed: int = 0


def gpu_uuid(host: str, index: int) -> str:
    """A stable, made-up UUID per GPU, in NVML's ``GPU-<uuid>`` form."""
    return f"GPU-{uuid.uuid5(uuid.NAMESPACE_DNS, f'{host}/{index}')}"


@dataclass(eq=False)
class Gpu:
    """One GPU of ``host`` and what happened to it. ``target`` holds labels the scrape adds (the
    `cell` relabel); ``pod`` is (namespace, pod, container) when a pod holds the GPU and the
    exporter maps pods (--kubernetes)."""

    host: str
    index: int = 0
    target: Mapping[str, str] = field(default_factory=dict)
    pod: tuple[str, str, str] | None = None
    events: list[Event] = field(default_factory=list)

    @property
    def uuid(self) -> str:
        return gpu_uuid(self.host, self.index)

    def _add(self, event: Event) -> Gpu:
        bisect.insort(self.events, event, key=lambda e: e.at)  # after any event of the same time
        return self

    def xid(self, at: float, code: int) -> Gpu:
        """The driver reports XID ``code`` at ``at``."""
        if code <= 0 or code not in XID_TEXT:
            raise ValueError(f"XID {code}: add its err_msg from dcgm-exporter's xid_errors.go to XID_TEXT")
        return self._add(Event(at, "xid", xid=code))

    def dbe(self, at: float, errors: int = 1) -> Gpu:
        """``errors`` double-bit ECC errors at ``at``."""
        if errors < 1:
            raise ValueError("a double-bit error event has at least one error")
        return self._add(Event(at, "dbe", errors=errors))

    def row_remap(self, at: float, remap: Remap = "uncorrectable") -> Gpu:
        """The row remapper acts at ``at``: a row remapped for an (un)correctable error, pending a
        reset, or a remapping that failed (no spare row)."""
        return self._add(Event(at, "remap", remap=remap))

    def reload(self, at: float) -> Gpu:
        """The driver reloads at ``at`` (a GPU reset or a node reboot; DCGM's host engine starts over)."""
        return self._add(Event(at, "reload"))

    def state(self, at: float) -> State:
        st = State()
        for e in self.events:
            if e.at > at:
                break
            if e.kind == "xid":
                st.xid = e.xid
                st.xids.append((e.at, e.xid))
            elif e.kind == "dbe":
                st.dbe_volatile += e.errors
                st.dbe_aggregate += e.errors
            elif e.kind == "remap":
                if e.remap == "failed":
                    st.failed = 1
                else:
                    st.pending = 1
                    if e.remap == "uncorrectable":
                        st.rows_uncorrectable += 1
                    else:
                        st.rows_correctable += 1
            else:  # reload: the held XID, DCGM's XID history, the volatile counts and pending remaps go
                st.xid, st.xids, st.dbe_volatile, st.pending = 0, [], 0, 0
        return st


@dataclass(frozen=True)
class Exporter:
    """How dcgm-exporter runs: the host label's spelling, the fields its counters CSV enables
    (``counters``; DEFAULT_COUNTERS is upstream's default CSV), the XID count's window."""

    hostname_label: str = RELEASED_HOSTNAME
    counters: frozenset[str] = TRIAGE_COUNTERS
    xid_window_ms: int = XID_WINDOW_MS
    driver_version: str = DRIVER_VERSION
    model_name: str = MODEL_NAME

    def __post_init__(self) -> None:
        if self.hostname_label not in HOSTNAME_LABELS:
            raise ValueError(f"hostname_label {self.hostname_label!r}: one of {', '.join(HOSTNAME_LABELS)}")
        unknown = set(self.counters) - set(TYPES)
        if unknown:
            raise ValueError(f"fields not modelled: {', '.join(sorted(unknown))}")
        if not 0 < self.xid_window_ms <= DCGM_KEEP_S * 1000:
            raise ValueError(f"xid_window_ms must be in (0, {DCGM_KEEP_S * 1000:.0f}]: DCGM keeps XIDs 600 s")

    def with_counters(self, *added: str) -> Exporter:
        return dataclasses.replace(self, counters=self.counters | set(added))

    def labels(self, gpu: Gpu) -> dict[str, str]:
        """The labels on every series of ``gpu`` (the scrape's target labels first)."""
        out = dict(gpu.target)
        out.update(
            {
                "gpu": str(gpu.index),
                "UUID": gpu.uuid,
                "pci_bus_id": f"00000000:{0x18 + gpu.index:02X}:00.0",
                "device": f"nvidia{gpu.index}",
                "modelName": self.model_name,
                self.hostname_label: gpu.host,
                "DCGM_FI_DRIVER_VERSION": self.driver_version,
            }
        )
        if gpu.pod is not None:
            out["namespace"], out["pod"], out["container"] = gpu.pod
        return out

    def samples(self, gpu: Gpu, at: float, names: Iterable[str] | None = None) -> list[tuple[str, dict[str, str], int]]:
        """What a scrape at ``at`` reads for ``gpu``: (metric, labels, value), of ``names`` (default
        every field the CSV enables)."""
        want = self.counters if names is None else self.counters & set(names)
        st = gpu.state(at)
        base = self.labels(gpu)
        out: list[tuple[str, dict[str, str], int]] = []
        if XID_ERRORS in want:
            out.append((XID_ERRORS, {**base, "err_code": str(st.xid), "err_msg": XID_TEXT[st.xid]}, st.xid))
        if XID_COUNT in want:
            window = {**base, "window_size_in_ms": str(self.xid_window_ms)}
            since = at - self.xid_window_ms / 1000
            counts = Counter(code for t, code in st.xids if t >= since)
            if counts:
                out += [(XID_COUNT, {**window, "xid": str(code)}, n) for code, n in sorted(counts.items())]
            else:
                out.append((XID_COUNT, window, 0))
        for name, value in (
            (ECC_DBE_VOL, st.dbe_volatile),
            (ECC_DBE_AGG, st.dbe_aggregate),
            (ROWS_UNCORRECTABLE, st.rows_uncorrectable),
            (ROWS_CORRECTABLE, st.rows_correctable),
            (ROW_REMAP_FAILURE, st.failed),
            (ROW_REMAP_PENDING, st.pending),
        ):
            if name in want:
                out.append((name, base, value))
        return out


@dataclass
class DcgmSeries:
    name: str
    type: str  # as the CSV declares it
    labels: dict[str, str]
    points: list[tuple[float, float]]


def series(
    exporter: Exporter, gpus: Iterable[Gpu], times: Sequence[float], names: Iterable[str] | None = None
) -> list[DcgmSeries]:
    """Every series scrapes at ``times`` would store for ``gpus``: a label set present at a scrape
    has a point there (an XID's series starts with the XID; a window's count ends with it)."""
    names = None if names is None else list(names)
    out: dict[tuple[str, tuple[tuple[str, str], ...]], DcgmSeries] = {}
    for gpu in gpus:
        for t in times:
            for name, labels, value in exporter.samples(gpu, t, names):
                key = (name, tuple(sorted(labels.items())))
                got = out.get(key)
                if got is None:
                    got = out[key] = DcgmSeries(name, TYPES[name], labels, [])
                got.points.append((t, float(value)))
    return list(out.values())


# ------------------------------------------------------------------------------- triage's figures
#
# What the shipped triage queries (policies/queries.yaml) answer over these series, for the
# simulated Prometheus: the XID rows by the XID count when the exporter publishes it, else by the
# gauge's changes. Time is continuous here (a scrape at every instant, a subquery at every
# instant), so a drill's alert sees the XID it follows at once: a real Prometheus sees a change at
# the next scrape and, in the gauge's XID rows, at the next whole minute (`[1h:1m]`), so there a
# code replaced within a scrape or that minute (48 then 45) is never counted, here it is.
# world/tests/prometheus/test_dcgm.py checks both agree away from those edges.


def xid_changed(gpus: Iterable[Gpu], at: float, codes: frozenset[int], window_s: float = 3600.0) -> int:
    """The `xid_gpus` / `xid_app` rows: GPUs whose XID gauge changed in (at - window, at] to a value
    of ``codes``, each counted once. A repeat of the held code is no change (the gauge can't show it)."""
    n = 0
    for gpu in gpus:
        held = 0
        for e in gpu.events:
            if e.at > at:
                break
            new = e.xid if e.kind == "xid" else 0 if e.kind == "reload" else held
            if new != held and e.at > at - window_s and new in codes:
                n += 1
                break
            held = new
    return n


def xid_counted(gpus: Iterable[Gpu], at: float, codes: frozenset[int], window_ms: int, range_s: float = 3300.0) -> int:
    """The same rows where the exporter publishes DCGM_EXP_XID_ERRORS_COUNT: GPUs with a series of a
    code of ``codes`` in the count at some scrape of (at - range, at] (`max_over_time(...[55m])`);
    an XID shows in the count from its time until it leaves the window or the driver reloads. A
    repeat and a code replaced within a scrape count."""
    n = 0
    for gpu in gpus:
        reloads = [e.at for e in gpu.events if e.kind == "reload"]
        for e in gpu.events:
            if e.kind != "xid" or e.xid not in codes or e.at > at:
                continue
            gone = min([e.at + window_ms / 1000, *(r for r in reloads if r > e.at)])
            if gone > at - range_s:
                n += 1
                break
    return n


def dbe_errors(gpus: Iterable[Gpu], at: float, window_s: float = 3600.0) -> int:
    """The `ecc_dbe` row: what increase() of the volatile counter gives over the window, summed
    (a reset by a reload is no error; Prometheus's extrapolation to the window's edges aside)."""
    return sum(e.errors for gpu in gpus for e in gpu.events if e.kind == "dbe" and at - window_s < e.at <= at)


def remap_pending(gpus: Iterable[Gpu], at: float) -> int:
    """The `row_remap_pending` row: GPUs with a remapping waiting for a reset."""
    return sum(1 for gpu in gpus if gpu.state(at).pending)


# The series each figure's query reads.
_READS = {"xid_gpus": XID_ERRORS, "xid_app": XID_ERRORS, "ecc_dbe": ECC_DBE_VOL, "row_remap_pending": ROW_REMAP_PENDING}


class DcgmFleet:
    """dcgm-exporter on every GPU node of a fleet: ``nodes`` per cell, ``gpus_per_node`` each. A
    GPU is tracked once something happens to it; the others are healthy."""

    def __init__(self, exporter: Exporter, nodes: Mapping[str, Sequence[str]], gpus_per_node: int = 8) -> None:
        self.exporter = exporter
        self._nodes = {cell: frozenset(names) for cell, names in nodes.items()}
        self._gpus_per_node = gpus_per_node
        self._gpus: dict[tuple[str, str, int], Gpu] = {}
        self._lock = threading.Lock()

    def gpu(self, cell: str, node: str, index: int) -> Gpu:
        """The GPU (created on first use); ValueError naming what is valid otherwise."""
        if cell not in self._nodes:
            raise ValueError(f"unknown cell {cell!r}; the fleet's cells: {', '.join(self._nodes)}")
        if node not in self._nodes[cell]:
            raise ValueError(f"{cell} has no GPU node {node!r}")
        if not 0 <= index < self._gpus_per_node:
            raise ValueError(f"GPU {index}: {node} has GPUs 0 to {self._gpus_per_node - 1}")
        with self._lock:
            key = (cell, node, index)
            if key not in self._gpus:
                self._gpus[key] = Gpu(node, index, target={"cell": cell})
            return self._gpus[key]

    def record(
        self,
        cell: str,
        node: str,
        index: int,
        at: float,
        *,
        xid: int | None = None,
        dbe: int | None = None,
        row_remap: Remap | None = None,
        reload: bool = False,
    ) -> None:
        """One event on a GPU at ``at``: an XID, double-bit errors, the row remapper, or a reload."""
        given = [k for k, v in (("xid", xid), ("dbe", dbe), ("row_remap", row_remap), ("reload", reload or None)) if v]
        if len(given) != 1:
            raise ValueError(f"one event at a time (got {', '.join(given) or 'none'})")
        gpu = self.gpu(cell, node, index)
        with self._lock:
            if xid is not None:
                gpu.xid(at, xid)
            elif dbe is not None:
                gpu.dbe(at, dbe)
            elif row_remap is not None:
                gpu.row_remap(at, row_remap)
            else:
                gpu.reload(at)

    def gpus(self, cell: str) -> list[Gpu]:
        """Copies of the cell's GPUs something happened to (the others are healthy)."""
        with self._lock:
            return [
                Gpu(g.host, g.index, g.target, g.pod, list(g.events))
                for (c, _, _), g in self._gpus.items()
                if c == cell
            ]

    def figure(self, cell: str, name: str, at: float, codes: frozenset[int] = frozenset()) -> float | None:
        """Triage's figure ``name`` for ``cell`` at ``at``; None when the exporter's CSV leaves out
        the series it reads (Prometheus then has no series: "no data")."""
        if name not in _READS:
            raise ValueError(f"{name} is not a DCGM figure; those are {', '.join(FIGURES)}")
        if _READS[name] not in self.exporter.counters:
            return None
        gpus = self.gpus(cell)
        if name in ("xid_gpus", "xid_app"):
            if XID_COUNT in self.exporter.counters:  # the rows read the count where it is published
                return float(xid_counted(gpus, at, codes, self.exporter.xid_window_ms))
            return float(xid_changed(gpus, at, codes))
        if name == "ecc_dbe":
            return float(dbe_errors(gpus, at))
        return float(remap_pending(gpus, at))


def scrape_times(start: float, end: float, interval: float) -> list[float]:
    """Scrape times from ``start`` to ``end`` every ``interval`` seconds."""
    n = math.floor((end - start) / interval + 1e-9)
    return [start + i * interval for i in range(n + 1)]
