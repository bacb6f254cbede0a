"""A real Prometheus with deterministic, backfilled history.

Usage::

    from tests.support.prometheus import PrometheusServer, ttft_scenario, BURN_RATE_QUERY

    sc = ttft_scenario({"a": 0.001, "b": 0.2}, start_ts=1_700_000_000)
    async with PrometheusServer(tmp_path, sc) as prom:          # or sc.series
        rows = await prom.query(BURN_RATE_QUERY, at=sc.end_ts)

IMPORTANT: the data is history, not live scrapes.  Every query must pass an
explicit evaluation time inside the backfilled window (``time=`` for
``/api/v1/query``; ``sc.end_ts`` is where windowed ``rate(...[1h])``
expressions see a full hour).  A query at "now" sees nothing unless the
window was built to end at now, and gauges vanish 5 minutes (lookback delta)
after their last sample.

The series are the real exporters' (vLLM, dcgm-exporter, Kueue,
kube-state-metrics): names, label names and bucket boundaries as upstream
publishes them; see the comment above ``TTFT_METRIC`` for what was checked.

How it works: series -> OpenMetrics text (``write_openmetrics``) ->
``promtool tsdb create-blocks-from openmetrics data.om <datadir>`` ->
``prometheus --storage.tsdb.path=<datadir> --storage.tsdb.retention.time=100y``
on ``127.0.0.1:<free port>``, with no scrape targets.  ``tls=make_tls(dir)``
serves it over HTTPS (``--web.config.file``) with a certificate from a
throwaway CA (``tls.ca_file``).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import ssl
import subprocess
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
from aiohttp import web
from prometheus_client.utils import floatToGoString

from fbworld.dcgm import DRIVER_VERSION as DCGM_DRIVER_VERSION
from fbworld.dcgm import HOSTNAME_LABELS, RELEASED_HOSTNAME, XID_FIELDS, XID_TEXT, Exporter, Gpu
from fbworld.dcgm import MODEL_NAME as DCGM_MODEL_NAME
from fbworld.dcgm import series as dcgm_series
from fbworld.tls import TLSFiles, make_tls  # re-exported for callers

from .services import (  # re-exported for callers
    DEFAULT_SERVICES_DIR,
    ManagedProcess,
    ManagedServer,
    ServiceBinaryNotFound,
    ServiceStartError,
    ensure_services_installed,
    find_binary,
    services_dir,
)

__all__ = [
    "BURN_RATE_QUERY",
    "DCGM_DRIVER_VERSION",
    "DCGM_MODEL_NAME",
    "DEFAULT_SERVICES_DIR",
    "DEFAULT_THRESHOLD",
    "HOSTNAME_LABELS",
    "TTFT_METRIC",
    "VLLM_TTFT_BUCKETS",
    "XID_TEXT",
    "CellTriage",
    "Exporter",
    "Gpu",
    "PrometheusServer",
    "Scenario",
    "Series",
    "ServiceBinaryNotFound",
    "ServiceStartError",
    "TLSFiles",
    "burn_rate_query",
    "dcgm_backfill",
    "ensure_services_installed",
    "find_binary",
    "format_le",
    "make_tls",
    "render_openmetrics",
    "services_dir",
    "triage_series",
    "ttft_scenario",
    "write_openmetrics",
]

# --------------------------------------------------------------------------- OpenMetrics

METRIC_TYPES = ("gauge", "counter", "histogram", "untyped")
_HIST_SUFFIXES = ("_bucket", "_count", "_sum")
_MAX_SECONDS_TS = 100_000_000_000  # year 5138; anything larger is surely milliseconds


@dataclass
class Series:
    """One time series.

    name:    sample name.  Counters may be given as ``x`` or ``x_total`` (written
             as family ``x`` with samples ``x_total``).  Histogram series are
             given by their sample names ``x_bucket`` (with an ``le`` label),
             ``x_count`` and ``x_sum``; they are grouped into family ``x``.
    type:    "gauge" | "counter" | "histogram" | "untyped"
    labels:  label set; ``le`` may be a float (formatted as prometheus_client,
             which vLLM uses, formats it: 2.5 -> "2.5", 1.0 -> "1.0", inf -> "+Inf")
             or a string (kept verbatim: PromQL matches ``le`` as a string).
    samples: (timestamp in SECONDS, value); sorted on output, duplicates rejected.
    """

    name: str
    type: str
    labels: Mapping[str, object]
    samples: Sequence[tuple[float, float]]


def format_le(le: object) -> str:
    """``le`` as the exporter writes it: prometheus_client's own formatting (vLLM's client)."""
    if isinstance(le, str):
        return le
    return floatToGoString(float(le))  # type: ignore[arg-type]


def _fmt_num(v: float) -> str:
    v = float(v)
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    if v.is_integer() and abs(v) < 1e15:
        return str(int(v))
    return repr(v)


def _escape(v: str) -> str:
    return v.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels_text(labels: Mapping[str, str]) -> str:
    if not labels:
        return ""
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items()) + "}"


def _family_and_sample(s: Series) -> tuple[str, str]:
    if s.type not in METRIC_TYPES:
        raise ValueError(f"{s.name}: unknown type {s.type!r}")
    if s.type == "counter":
        fam = s.name[: -len("_total")] if s.name.endswith("_total") else s.name
        return fam, fam + "_total"
    if s.type == "histogram":
        for suf in _HIST_SUFFIXES:
            if s.name.endswith(suf):
                if suf == "_bucket" and "le" not in s.labels:
                    raise ValueError(f"{s.name}: histogram bucket without an le label")
                return s.name[: -len(suf)], s.name
        raise ValueError(f"{s.name}: histogram series must end in _bucket, _count or _sum")
    return s.name, s.name


def _norm_labels(labels: Mapping[str, object]) -> OrderedDict[str, str]:
    out: OrderedDict[str, str] = OrderedDict()
    for k in sorted(k for k in labels if k != "le"):
        out[k] = str(labels[k])
    if "le" in labels:
        out["le"] = format_le(labels["le"])
    return out


def _le_key(le: str) -> float:
    try:
        return float(le)
    except ValueError:
        return math.inf


def render_openmetrics(series: Iterable[Series]) -> str:
    """OpenMetrics text for ``series`` (see ``Series``), ending in ``# EOF``.

    Families are contiguous and keep first-appearance order.  Histogram
    metrics are written point by point (buckets in ``le`` order, then
    ``_count``, then ``_sum`` for each timestamp), as the spec orders them.
    """
    families: OrderedDict[str, tuple[str, OrderedDict]] = OrderedDict()
    for s in series:
        fam, sample_name = _family_and_sample(s)
        ftype, metrics = families.setdefault(fam, (s.type, OrderedDict()))
        if ftype != s.type:
            raise ValueError(f"family {fam} declared both {ftype} and {s.type}")
        labels = _norm_labels(s.labels)
        ident = tuple((k, v) for k, v in labels.items() if k != "le")
        points: dict[float, float] = {}
        for ts, val in s.samples:
            ts = float(ts)
            if ts > _MAX_SECONDS_TS:
                raise ValueError(f"{s.name}: timestamp {ts} looks like milliseconds; use seconds")
            if ts in points:
                raise ValueError(f"{s.name}{dict(labels)}: duplicate timestamp {ts}")
            points[ts] = float(val)
        key = (sample_name, tuple(labels.items()))
        bucket = metrics.setdefault(ident, OrderedDict())
        if key in bucket:
            raise ValueError(f"duplicate series {sample_name}{dict(labels)}")
        bucket[key] = (sample_name, labels, points)

    lines: list[str] = []
    for fam, (ftype, metrics) in families.items():
        lines.append(f"# TYPE {fam} {ftype}")
        for ident, members in metrics.items():
            if ftype == "histogram":
                buckets = [m for m in members.values() if m[0] == fam + "_bucket"]
                if buckets and not any(_le_key(m[1]["le"]) == math.inf for m in buckets):
                    raise ValueError(f'{fam}{dict(ident)}: histogram has no le="+Inf" bucket')
                order = {fam + "_bucket": 0, fam + "_count": 1, fam + "_sum": 2}
                ordered = sorted(
                    members.values(),
                    key=lambda m: (order[m[0]], _le_key(m[1].get("le", "+Inf"))),
                )
                all_ts = sorted({ts for m in ordered for ts in m[2]})
                for ts in all_ts:
                    for name, labels, points in ordered:
                        if ts in points:
                            lines.append(f"{name}{_labels_text(labels)} {_fmt_num(points[ts])} {_fmt_num(ts)}")
            else:
                for name, labels, points in members.values():
                    lt = _labels_text(labels)
                    for ts in sorted(points):
                        lines.append(f"{name}{lt} {_fmt_num(points[ts])} {_fmt_num(ts)}")
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


def write_openmetrics(series: Iterable[Series], path: str | Path) -> Path:
    path = Path(path)
    path.write_text(render_openmetrics(series))
    return path


class OpenMetricsWriter:
    """Accumulating wrapper: ``w.add(Series(...)); w.write(path)``."""

    def __init__(self, series: Iterable[Series] = ()):
        self.series: list[Series] = list(series)

    def add(self, *series: Series) -> OpenMetricsWriter:
        self.series.extend(series)
        return self

    def gauge(self, name, labels, samples) -> OpenMetricsWriter:
        return self.add(Series(name, "gauge", labels, samples))

    def counter(self, name, labels, samples) -> OpenMetricsWriter:
        return self.add(Series(name, "counter", labels, samples))

    def render(self) -> str:
        return render_openmetrics(self.series)

    def write(self, path: str | Path) -> Path:
        return write_openmetrics(self.series, path)


# --------------------------------------------------------------------------- scenarios
#
# Every series below is one a real exporter publishes, with its names, label names and (for
# histograms) bucket boundaries as upstream defines them. Checked against:
#   vLLM v1 engine, vllm/v1/metrics/loggers.py (PrometheusStatLogger; commits a6f0308c and
#     005a810b, same TTFT buckets in both): vllm:time_to_first_token_seconds (histogram),
#     vllm:kv_cache_usage_perc (gauge, 0..1; vllm:gpu_cache_usage_perc before 0.9),
#     vllm:num_preemptions (counter, exposed as vllm:num_preemptions_total); labels model_name
#     and engine. prometheus_client renders le with floatToGoString ("2.5", "1.0", "+Inf").
#   dcgm-exporter: world/fbworld/dcgm.py models its GPU series from what happens to each GPU (the
#     XID gauge held until the driver reloads, the windowed XID count, ECC and row-remap fields),
#     with the sources it follows; its Exporter picks the host label (`Hostname` through release
#     4.5.3-4.8.2, `hostname` on main from d5e5f51) and the fields the counters CSV enables.
#   Kueue v0.19.2, pkg/metrics/metrics.go: kueue_pending_workloads{cluster_queue, status,
#     replica_role}, reported for status "active" and "inadmissible" by the leader replica.
#   kube-state-metrics v2.20.0, internal/store/node.go: kube_node_spec_taint{node, key, value,
#     effect}; kube_node_labels{node, label_<sanitized key>} carries a label only when
#     --metric-labels-allowlist names it (nodes=[nvidia.com/gpu.present,topology.corp/cell]).
# Not the exporters' own: `cell` and `pod` are target labels the scrape config adds (a
# per-cell relabel and Kubernetes service discovery), so every series here carries `cell`.

TTFT_METRIC = "vllm:time_to_first_token_seconds"
# vLLM's TTFT histogram boundaries in seconds (vllm/v1/metrics/loggers.py), plus +Inf.
VLLM_TTFT_BUCKETS: tuple[float, ...] = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0,
    2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0, math.inf,
)  # fmt: skip
# The shipped TTFT SLO is 2 s (docs/levers.md, Route weight); vLLM has no 2 s boundary, so "fast" is
# le="2.5", the nearest published boundary at or above it (policies/levers.yaml `headroom.query` uses the same).
DEFAULT_THRESHOLD = 2.5
DEFAULT_MODEL = "llm-70b"  # the served model name (vLLM's model_name label)
DEFAULT_PODS = ("vllm-0", "vllm-1")

# XID_TEXT (dcgm-exporter's err_msg per XID), DCGM_DRIVER_VERSION and DCGM_MODEL_NAME come from
# fbworld/dcgm.py, re-exported for the tests that build DCGM series by hand.


def _check_threshold(threshold: float) -> None:
    if threshold not in VLLM_TTFT_BUCKETS or math.isinf(threshold):
        above = [b for b in VLLM_TTFT_BUCKETS if b >= threshold and not math.isinf(b)]
        hint = f"; the nearest at or above is {format_le(above[0])}" if above else ""
        raise ValueError(
            f"threshold {threshold} s is not a bucket boundary vLLM publishes for {TTFT_METRIC} "
            f"({', '.join(format_le(b) for b in VLLM_TTFT_BUCKETS)}){hint}"
        )


def burn_rate_query(
    threshold: float = DEFAULT_THRESHOLD, slo: float = 0.99, window: str = "1h", by: str = "cell"
) -> str:
    _check_threshold(threshold)
    le = format_le(threshold)
    return (
        f'(1 - sum by ({by}) (rate({TTFT_METRIC}_bucket{{le="{le}"}}[{window}]))'
        f" / sum by ({by}) (rate({TTFT_METRIC}_count[{window}]))) / (1 - {slo})"
    )


BURN_RATE_QUERY = burn_rate_query()


@dataclass
class CellTriage:
    """Optional triage signals for one cell (every series carries the `cell` target label)."""

    pods: Sequence[str] = DEFAULT_PODS
    kv_cache_usage: float = 0.35  # vllm:kv_cache_usage_perc (0..1) per pod
    preemptions_per_min: float = 0.0  # vllm:num_preemptions_total slope per pod
    hosts: Sequence[str] | None = None  # dcgm-exporter's host label values (default: gpu-<cell>-0, gpu-<cell>-1)
    xid: int = 0  # an XID the driver reports on each of xid_hosts (0 = none); its err_msg must be in XID_TEXT
    xid_hosts: Sequence[str] | None = None  # hosts showing the XID (default: first host)
    xid_from_minute: float = 0.0  # the XID happens at this minute of the window (the gauge holds it after)
    # Per host, what its GPU 0's driver reported over time: [(minute, XID), ...], each an XID then
    # (the gauge holds it until a reload; repeating the held code shows nothing on the gauge), 0 a
    # driver reload (the gauge reads 0 again). A host named here ignores xid/xid_hosts.
    xid_history: Mapping[str, Sequence[tuple[float, int]]] = field(default_factory=dict)
    # How dcgm-exporter runs: the host label's spelling, the fields its CSV enables (fbworld/dcgm.py).
    exporter: Exporter = field(default_factory=Exporter)
    cluster_queue: str = "research-h100"  # kueue_pending_workloads{cluster_queue}
    pending_workloads: float = 0.0  # kueue_pending_workloads{status="active"}
    inadmissible_workloads: float = 0.0  # kueue_pending_workloads{status="inadmissible"}
    quarantined_nodes: Sequence[str] = ()  # kube_node_spec_taint{key="gpu.corp/quarantine"} = 1
    quarantine_reason: str = "xid-79"  # the taint's value (node-quarantine sets the reason)
    gpu_nodes: Sequence[str] | None = None  # kube_node_labels{label_nvidia_com_gpu_present="true"} (default: hosts)


@dataclass
class Scenario:
    series: list[Series]
    start_ts: float
    end_ts: float
    step: float
    expected_burn: dict[str, float] = field(default_factory=dict)
    slo: float = 0.99
    threshold: float = DEFAULT_THRESHOLD

    def __iter__(self):
        return iter(self.series)

    @property
    def query(self) -> str:
        return burn_rate_query(self.threshold, self.slo)


def _timestamps(start_ts: float, minutes: float, step: float) -> list[float]:
    n = round(minutes * 60 / step)
    return [start_ts + i * step for i in range(n + 1)]


def _lognormal_cdf(x: float, median: float, sigma: float) -> float:
    return 0.5 * (1 + math.erf((math.log(x) - math.log(median)) / (sigma * math.sqrt(2))))


def _bucket_shares(threshold: float) -> dict[float, float]:
    """Cumulative share per finite bucket: of the fast requests (TTFT <= threshold) below it,
    of the slow ones (> threshold) above it. Fast: lognormal, median 0.3 s; slow: median
    2x threshold. Only the split at the threshold decides the burn; this shapes the rest."""
    fast_top = _lognormal_cdf(threshold, 0.3, 0.8)
    slow_base = _lognormal_cdf(threshold, 2 * threshold, 0.5)
    shares = {}
    for b in VLLM_TTFT_BUCKETS:
        if math.isinf(b) or b == threshold:
            continue
        if b < threshold:
            shares[b] = _lognormal_cdf(b, 0.3, 0.8) / fast_top
        else:
            shares[b] = (_lognormal_cdf(b, 2 * threshold, 0.5) - slow_base) / (1 - slow_base)
    return shares


def ttft_scenario(
    cells: Mapping[str, float],
    start_ts: float,
    minutes: float = 120,
    *,
    step: float = 15,
    requests_per_step: int = 1000,
    threshold: float = DEFAULT_THRESHOLD,
    slo: float = 0.99,
    model_name: str = DEFAULT_MODEL,
    pods: Sequence[str] = DEFAULT_PODS,
    extra_labels: Mapping[str, str] | None = None,
    triage: Mapping[str, CellTriage] | bool | None = None,
) -> Scenario:
    """vLLM TTFT histograms where ``cells[c]`` of requests are slower than ``threshold``.

    Each cell has ``pods`` vLLM replicas (labels model_name, engine="0", plus the target labels
    cell and pod), sharing ``requests_per_step``. Buckets are vLLM's own (VLLM_TTFT_BUCKETS);
    ``threshold`` must be one of them (default 2.5: vLLM has no 2 s boundary). Counters start at
    0 at ``start_ts`` and grow linearly every ``step`` seconds until ``end_ts = start_ts +
    minutes*60``, so ``burn_rate_query(threshold, slo)`` evaluated at ``end_ts`` gives
    ``cells[c] / (1 - slo)`` per cell (0.001 -> 0.1x, 0.2 -> 20x at a 99% SLO); integer
    rounding error is below 1/(requests in the window). ``triage=True`` adds default
    ``CellTriage()`` signals for every cell; a mapping adds them for the given cells only.
    """
    _check_threshold(threshold)
    if not pods:
        raise ValueError("a cell needs at least one vLLM pod")
    shares = _bucket_shares(threshold)
    ts_list = _timestamps(start_ts, minutes, step)
    series: list[Series] = []
    for cell, frac_slow in cells.items():
        if not 0.0 <= frac_slow <= 1.0:
            raise ValueError(f"{cell}: fraction {frac_slow} not in [0, 1]")
        for p, pod in enumerate(pods):
            # The first pod takes the remainder, so the cell's total is requests_per_step.
            per_step = requests_per_step // len(pods) + (requests_per_step % len(pods) if p == 0 else 0)
            base = {"cell": cell, "pod": pod, "model_name": model_name, "engine": "0", **(extra_labels or {})}
            bucket_pts: dict[float, list] = {b: [] for b in VLLM_TTFT_BUCKETS}
            count_pts, sum_pts = [], []
            for i, ts in enumerate(ts_list):
                total = i * per_step
                slow = math.floor(frac_slow * total + 0.5)
                fast = total - slow
                for b in VLLM_TTFT_BUCKETS:
                    if b == threshold:
                        v = fast
                    elif math.isinf(b):
                        v = total
                    elif b < threshold:
                        v = math.floor(fast * shares[b])
                    else:
                        v = fast + math.floor(slow * shares[b])
                    bucket_pts[b].append((ts, v))
                count_pts.append((ts, total))
                sum_pts.append((ts, round(fast * 0.35 + slow * 2 * threshold, 3)))
            for b in VLLM_TTFT_BUCKETS:
                series.append(Series(f"{TTFT_METRIC}_bucket", "histogram", {**base, "le": b}, bucket_pts[b]))
            series.append(Series(f"{TTFT_METRIC}_count", "histogram", base, count_pts))
            series.append(Series(f"{TTFT_METRIC}_sum", "histogram", base, sum_pts))

    if triage is True:
        triage = {c: CellTriage() for c in cells}
    for cell, t in (triage or {}).items():
        series.extend(triage_series(cell, t, start_ts, minutes, step=step, model_name=model_name))

    return Scenario(
        series=series,
        start_ts=ts_list[0],
        end_ts=ts_list[-1],
        step=step,
        expected_burn={c: f / (1 - slo) for c, f in cells.items()},
        slo=slo,
        threshold=threshold,
    )


def triage_series(
    cell: str,
    t: CellTriage,
    start_ts: float,
    minutes: float,
    *,
    step: float = 15,
    model_name: str = DEFAULT_MODEL,
) -> list[Series]:
    ts_list = _timestamps(start_ts, minutes, step)
    const = lambda v: [(ts, v) for ts in ts_list]  # noqa: E731
    out: list[Series] = []
    for pod in t.pods:
        vllm = {"cell": cell, "pod": pod, "model_name": model_name, "engine": "0"}
        out.append(Series("vllm:kv_cache_usage_perc", "gauge", vllm, const(t.kv_cache_usage)))
        out.append(
            Series(
                "vllm:num_preemptions_total",
                "counter",
                vllm,
                [(ts, round(t.preemptions_per_min * (ts - start_ts) / 60, 6)) for ts in ts_list],
            )
        )
    hosts = list(t.hosts) if t.hosts is not None else [f"gpu-{cell}-0", f"gpu-{cell}-1"]
    xid_hosts = set(t.xid_hosts if t.xid_hosts is not None else hosts[:1])
    if t.xid not in XID_TEXT:
        raise ValueError(f"XID {t.xid}: add its err_msg from dcgm-exporter's xid_errors.go to XID_TEXT")
    for host in hosts:
        gpu = Gpu(host, 0, target={"cell": cell})
        xid = t.xid if host in xid_hosts else 0
        for minute, code in t.xid_history.get(host, [(t.xid_from_minute, xid)] if xid else []):
            if code == 0:
                gpu.reload(start_ts + minute * 60)
            else:
                gpu.xid(start_ts + minute * 60, code)
        out += dcgm_backfill(t.exporter, [gpu], ts_list, XID_FIELDS)
    kueue = {"cell": cell, "cluster_queue": t.cluster_queue, "replica_role": "leader"}
    out.append(Series("kueue_pending_workloads", "gauge", {**kueue, "status": "active"}, const(t.pending_workloads)))
    out.append(
        Series("kueue_pending_workloads", "gauge", {**kueue, "status": "inadmissible"}, const(t.inadmissible_workloads))
    )
    for node in t.quarantined_nodes:
        taint = {"key": "gpu.corp/quarantine", "value": t.quarantine_reason, "effect": "NoSchedule"}
        out.append(Series("kube_node_spec_taint", "gauge", {"cell": cell, "node": node, **taint}, const(1)))
    for node in t.gpu_nodes if t.gpu_nodes is not None else hosts:
        labels = {
            "cell": cell,
            "node": node,
            "label_nvidia_com_gpu_present": "true",
            "label_topology_corp_cell": cell,
        }
        out.append(Series("kube_node_labels", "gauge", labels, const(1)))
    return out


# --------------------------------------------------------------------------- TLS


# make_tls / TLSFiles live in fbworld/tls.py (shared with the fake API server).


# --------------------------------------------------------------------------- server


class PrometheusServer(ManagedServer):
    """Backfilled Prometheus on 127.0.0.1:<free port>.

    ``PrometheusServer(tmpdir, data_series, start_ts=None)``; ``data_series`` is
    a list of ``Series`` or a ``Scenario``.  ``start_ts``/``end_ts`` describe
    the data window (default: first/last sample) and are only informational:
    evaluate queries at ``end_ts`` (or another time in the window).

    Optional: ``rule_files`` (paths) with ``alertmanager_url`` (e.g.
    ``am.url``) to fire alerts end to end; rules are evaluated at wall-clock
    time, so build the data window to end at ``time.time()``.
    ``evaluation_interval`` defaults to 1s and ``--rules.alert.resend-delay=1s``.

    ``tls`` (``make_tls(dir)``): serve HTTPS with that certificate
    (``--web.config.file`` with ``tls_server_config``); ``url`` is then https.
    ``basic_auth`` (user, password, bcrypt hash of the password): every endpoint asks for it
    (``basic_auth_users`` in the same file); readiness is polled with it.

    Attributes after start: ``url``, ``port``, ``pid``, ``data_dir``,
    ``backfill_seconds``, ``startup_seconds``.
    """

    log_name = "prometheus.log"

    def __init__(
        self,
        tmpdir: str | Path,
        data_series: Iterable[Series] | Scenario = (),
        start_ts: float | None = None,
        *,
        rule_files: Sequence[str | Path] = (),
        alertmanager_url: str | None = None,
        evaluation_interval: str = "1s",
        extra_args: Sequence[str] = (),
        startup_timeout: float = 30.0,
        tls: TLSFiles | None = None,
        basic_auth: tuple[str, str, str] | None = None,
    ):
        super().__init__(tmpdir, startup_timeout)
        self.tls = tls
        self.basic_auth = basic_auth
        if isinstance(data_series, Scenario):
            self.series = list(data_series.series)
            start_ts = data_series.start_ts if start_ts is None else start_ts
        else:
            self.series = list(data_series)
        all_ts = [float(ts) for s in self.series for ts, _ in s.samples]
        self.start_ts = start_ts if start_ts is not None else (min(all_ts) if all_ts else None)
        self.end_ts = max(all_ts) if all_ts else None
        self.rule_files = [str(p) for p in rule_files]
        self.alertmanager_url = alertmanager_url
        self.evaluation_interval = evaluation_interval
        self.extra_args = list(extra_args)
        self.data_dir = self.dir / "prom-data"
        self.backfill_seconds = 0.0

    def _config(self) -> str:
        lines = [
            "global:",
            f"  evaluation_interval: {self.evaluation_interval}",
            "  scrape_interval: 15s",
            "scrape_configs: []",
        ]
        if self.rule_files:
            lines.append("rule_files:")
            lines += [f"  - '{p}'" for p in self.rule_files]
        if self.alertmanager_url:
            from urllib.parse import urlparse

            u = urlparse(self.alertmanager_url)
            lines += [
                "alerting:",
                "  alertmanagers:",
                f"    - scheme: {u.scheme or 'http'}",
                "      static_configs:",
                f"        - targets: ['{u.netloc}']",
            ]
            if u.path and u.path != "/":
                lines.insert(len(lines) - 2, f"      path_prefix: '{u.path}'")
        return "\n".join(lines) + "\n"

    def backfill(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if not self.series:
            return
        om = write_openmetrics(self.series, self.dir / "data.om")
        t0 = time.monotonic()
        res = subprocess.run(
            [
                find_binary("promtool"),
                "tsdb",
                "create-blocks-from",
                "openmetrics",
                "--quiet",
                str(om),
                str(self.data_dir),
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
        self.backfill_seconds = time.monotonic() - t0
        if res.returncode != 0:
            raise ServiceStartError(
                f"promtool backfill failed ({res.returncode}):\n{res.stdout[-2000:]}\n{res.stderr[-4000:]}"
            )

    async def _prepare(self) -> None:
        await asyncio.to_thread(self.backfill)
        (self.dir / "prometheus.yml").write_text(self._config())
        web = ""
        if self.tls is not None:
            web += f"tls_server_config:\n  cert_file: '{self.tls.cert_file}'\n  key_file: '{self.tls.key_file}'\n"
        if self.basic_auth is not None:
            user, _, hashed = self.basic_auth
            web += f"basic_auth_users:\n  '{user}': '{hashed}'\n"
        if web:
            (self.dir / "web.yml").write_text(web)

    def _argv(self) -> list[str]:
        return [
            find_binary("prometheus"),
            f"--config.file={self.dir / 'prometheus.yml'}",
            f"--storage.tsdb.path={self.data_dir}",
            "--storage.tsdb.retention.time=100y",
            f"--web.listen-address=127.0.0.1:{self.port}",
            "--rules.alert.resend-delay=1s",
            *([f"--web.config.file={self.dir / 'web.yml'}"] if self.tls or self.basic_auth else []),
            *self.extra_args,
        ]

    async def start(self) -> PrometheusServer:
        if self.tls is None and self.basic_auth is None:
            return await super().start()
        # ManagedServer polls http:// with default trust and no credentials; this one needs our CA
        # or the basic auth.
        from .ports import free_port

        await self._prepare()
        self.port = free_port()
        self.url = f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"
        self._proc = ManagedProcess(self._argv(), self.dir / self.log_name, cwd=self.dir)
        t0 = time.monotonic()
        self._proc.start()
        try:
            await self._wait_ready_tls(self._proc)
        except BaseException:
            self._proc.stop()
            raise
        self.startup_seconds = time.monotonic() - t0
        return self

    async def _wait_ready_tls(self, proc: ManagedProcess) -> None:
        ctx = ssl.create_default_context(cafile=str(self.tls.ca_file)) if self.tls else None
        auth = {"Authorization": aiohttp.encode_basic_auth(*self.basic_auth[:2])} if self.basic_auth else {}
        deadline = time.monotonic() + self.startup_timeout
        url = f"{self.url}/-/ready"
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2), headers=auth) as session:
            while True:
                if proc.proc is not None and proc.proc.poll() is not None:
                    raise ServiceStartError(f"prometheus exited with {proc.proc.returncode}:\n{proc.log_tail()}")
                try:
                    async with session.get(url, ssl=ctx or True) as resp:
                        if resp.status == 200:
                            return
                except (TimeoutError, aiohttp.ClientError, OSError):
                    pass  # not listening yet
                if time.monotonic() > deadline:
                    raise ServiceStartError(f"{url} not ready after {self.startup_timeout}s:\n{proc.log_tail()}")
                await asyncio.sleep(0.05)

    async def query(self, promql: str, at: float | None = None) -> list[dict]:
        """Instant query via prometheus_api_client at ``at`` (default ``end_ts``), trusting ``tls``'s CA."""
        import requests
        from prometheus_api_client import PrometheusConnect

        at = self.end_ts if at is None else at
        if at is None:
            raise ValueError("no evaluation time: pass at=")
        session = requests.Session()
        session.verify = str(self.tls.ca_file) if self.tls else True
        pc = PrometheusConnect(self.url, session=session)
        try:
            return await asyncio.to_thread(pc.custom_query, promql, params={"time": at})
        finally:
            pc.close()


# --------------------------------------------------------------------------- triage and demand (issue 11)
#
# More series of the same exporters, for `/incident triage` (policies/queries.yaml) and the demand
# stream of `/incident changed`. Checked against the same sources as above:
#   vLLM v1 (vllm/v1/metrics/loggers.py): vllm:num_requests_running and vllm:num_requests_waiting
#     (gauges; labels model_name, engine); vllm:request_success (counter, exposed as
#     vllm:request_success_total) with finished_reason "stop", "length" or "abort" besides
#     model_name and engine.
#   dcgm-exporter (world/fbworld/dcgm.py): ECC double-bit counters (commented out in
#     etc/default-counters.csv), the row-remap counters and failure gauge (in it) and
#     DCGM_FI_DEV_ROW_REMAP_PENDING (DCGM field 396, in no shipped CSV), as the Exporter's CSV
#     enables them. Same GPU labels as the XID gauge.
# As above, `cell` and `pod` are target labels the scrape config adds.

VLLM_FINISHED_REASONS = ("stop", "length", "abort")


def dcgm_gpu_labels(cell: str, host: str, gpu: int = 0, hostname_label: str = RELEASED_HOSTNAME) -> dict[str, str]:
    """The labels dcgm-exporter puts on a GPU's series (plus the `cell` target label)."""
    return Exporter(hostname_label=hostname_label).labels(Gpu(host, gpu, target={"cell": cell}))


def dcgm_backfill(
    exporter: Exporter, gpus: Iterable[Gpu], times: Sequence[float], names: Iterable[str] | None = None
) -> list[Series]:
    """The exporter's series for ``gpus`` as scrapes at ``times`` stored them (fbworld/dcgm.py),
    of ``names`` (default: every field its CSV enables)."""
    # OpenMetrics (promtool's input) names a counter's samples <family>_total, which dcgm-exporter's
    # counters (..._TOTAL, ..._ROWS, ..._COUNT) are not; a block stores no type, so they go in as
    # gauges: the stored series (name, labels, values) is the exporter's. Unlike live scrapes,
    # a backfill has no staleness markers: a series that ends (an XID's err_code series when the
    # code changes, a code leaving the count's window) lingers 5 minutes (the lookback) after it.
    # To see what a live Prometheus sees, start the server with
    # extra_args=["--query.lookback-delta=14s"] (under a 15 s scrape) and ask at scrape times.
    return [Series(s.name, "gauge", s.labels, s.points) for s in dcgm_series(exporter, gpus, times, names)]


@dataclass
class CellHealth:
    """More triage signals for one cell: vLLM queueing and DCGM memory errors."""

    pods: Sequence[str] = DEFAULT_PODS
    running_per_pod: float = 8  # vllm:num_requests_running
    waiting_per_pod: float = 0  # vllm:num_requests_waiting
    hosts: Sequence[str] | None = None  # dcgm-exporter's host label values (default: gpu-<cell>-0, gpu-<cell>-1)
    ecc_dbe: Mapping[str, int] = field(default_factory=dict)  # host -> double-bit errors, at ecc_dbe_minute
    ecc_dbe_minute: float = 0.0  # the errors land at this minute of the window (the counter steps up)
    row_remap_pending: Sequence[str] = ()  # hosts whose GPU 0 remapped a row before the window, pending a reset
    exporter: Exporter = field(default_factory=Exporter)  # as CellTriage's: the same exporter, its other fields


def health_series(
    cell: str,
    h: CellHealth,
    start_ts: float,
    minutes: float,
    *,
    step: float = 15,
    model_name: str = DEFAULT_MODEL,
) -> list[Series]:
    ts_list = _timestamps(start_ts, minutes, step)
    const = lambda v: [(ts, v) for ts in ts_list]  # noqa: E731
    out: list[Series] = []
    for pod in h.pods:
        vllm = {"cell": cell, "pod": pod, "model_name": model_name, "engine": "0"}
        out.append(Series("vllm:num_requests_running", "gauge", vllm, const(h.running_per_pod)))
        out.append(Series("vllm:num_requests_waiting", "gauge", vllm, const(h.waiting_per_pod)))
    hosts = list(h.hosts) if h.hosts is not None else [f"gpu-{cell}-0", f"gpu-{cell}-1"]
    unknown = (set(h.ecc_dbe) | set(h.row_remap_pending)) - set(hosts)
    if unknown:
        raise ValueError(f"{cell}: hosts {sorted(unknown)} are not among {hosts}")
    at = start_ts + h.ecc_dbe_minute * 60
    for host in hosts:
        gpu = Gpu(host, 0, target={"cell": cell})
        if h.ecc_dbe.get(host):
            gpu.dbe(at, h.ecc_dbe[host])
        if host in h.row_remap_pending:
            gpu.row_remap(start_ts - 60)
        out += dcgm_backfill(h.exporter, [gpu], ts_list, set(h.exporter.counters) - XID_FIELDS)
    return out


def demand_series(
    cells: Mapping[str, tuple[float, float]],
    change_ts: float,
    start_ts: float,
    minutes: float,
    *,
    step: float = 15,
    model_name: str = DEFAULT_MODEL,
    pods: Sequence[str] = DEFAULT_PODS,
) -> list[Series]:
    """vllm:request_success_total per pod, where ``cells[c] = (before, after)`` is the cell's rate in
    requests per second before ``change_ts`` and from it on (a drained cell: (x, 0); the cell that
    took its traffic: (y, y + x)). The rate is shared by the pods; finished_reason splits it 90% stop,
    10% length, and every reason's series exists from the start (a never-seen abort stays at 0).
    Counters are whole requests."""
    ts_list = _timestamps(start_ts, minutes, step)
    shares = {"stop": 0.9, "length": 0.1, "abort": 0.0}
    out: list[Series] = []
    for cell, (before, after) in cells.items():
        if before < 0 or after < 0:
            raise ValueError(f"{cell}: a request rate can't be negative")
        for pod in pods:
            for reason in VLLM_FINISHED_REASONS:
                labels = {"cell": cell, "pod": pod, "model_name": model_name, "engine": "0", "finished_reason": reason}
                total, points, prev = 0.0, [], ts_list[0]
                for ts in ts_list:
                    rate = before if ts <= change_ts else after
                    total += rate * shares[reason] / len(pods) * (ts - prev)
                    prev = ts
                    points.append((ts, math.floor(total + 1e-9)))
                out.append(Series("vllm:request_success_total", "counter", labels, points))
    return out


@contextlib.asynccontextmanager
async def answering(body: str, status: int = 200, content_type: str = "application/json") -> AsyncIterator[str]:
    """Something on a Prometheus URL that answers every /api/v1/query with ``body``: a proxy's error
    page, a login page, a wrong-shaped 200. Yields its URL."""

    async def answer(request: web.Request) -> web.Response:
        return web.Response(status=status, text=body, content_type=content_type)

    app = web.Application()
    app.router.add_get("/api/v1/query", answer)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()
