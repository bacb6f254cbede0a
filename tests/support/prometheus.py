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

How it works: series -> OpenMetrics text (``write_openmetrics``) ->
``promtool tsdb create-blocks-from openmetrics data.om <datadir>`` ->
``prometheus --storage.tsdb.path=<datadir> --storage.tsdb.retention.time=100y``
on ``127.0.0.1:<free port>``, with no scrape targets.
"""

from __future__ import annotations

import asyncio
import math
import subprocess
import time
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .services import (  # re-exported for callers
    DEFAULT_SERVICES_DIR,
    ManagedServer,
    ServiceBinaryNotFound,
    ServiceStartError,
    ensure_services_installed,
    find_binary,
    services_dir,
)

__all__ = [
    "BURN_RATE_QUERY",
    "DEFAULT_SERVICES_DIR",
    "TTFT_METRIC",
    "CellTriage",
    "PrometheusServer",
    "Scenario",
    "Series",
    "ServiceBinaryNotFound",
    "ServiceStartError",
    "burn_rate_query",
    "ensure_services_installed",
    "find_binary",
    "format_le",
    "render_openmetrics",
    "services_dir",
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
    labels:  label set; ``le`` may be a float (formatted like Python's
             prometheus_client: 2.0 -> "2.0", inf -> "+Inf") or a string (kept
             verbatim: PromQL matches ``le`` as a string).
    samples: (timestamp in SECONDS, value); sorted on output, duplicates rejected.
    """

    name: str
    type: str
    labels: Mapping[str, object]
    samples: Sequence[tuple[float, float]]


def format_le(le: object) -> str:
    if isinstance(le, str):
        return le
    f = float(le)  # type: ignore[arg-type]
    if math.isinf(f):
        return "+Inf" if f > 0 else "-Inf"
    return repr(f)


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

TTFT_METRIC = "vllm:time_to_first_token_seconds"
DEFAULT_TTFT_BUCKETS = (0.25, 0.5, 1.0, 2.0, 5.0, 10.0, math.inf)
# cumulative share of fast (<= threshold) and slow requests by bucket upper bound
_FAST_SHARE = {0.25: 0.5, 0.5: 0.8, 1.0: 0.95}
_SLOW_SHARE = {5.0: 0.6, 10.0: 0.9}


def burn_rate_query(threshold: float = 2.0, slo: float = 0.99, window: str = "1h", by: str = "cell") -> str:
    le = format_le(threshold)
    return (
        f'(1 - sum by ({by}) (rate({TTFT_METRIC}_bucket{{le="{le}"}}[{window}]))'
        f" / sum by ({by}) (rate({TTFT_METRIC}_count[{window}]))) / (1 - {slo})"
    )


BURN_RATE_QUERY = burn_rate_query()


@dataclass
class CellTriage:
    """Optional triage signals for one cell (all series labelled ``cell``)."""

    pods: Sequence[str] = ("vllm-0", "vllm-1")
    kv_cache_usage: float = 0.35  # vllm:kv_cache_usage_perc (0..1) per pod
    preemptions_per_min: float = 0.0  # vllm:num_preemptions_total slope per pod
    hosts: Sequence[str] | None = None  # DCGM Hostname values (default: gpu-<cell>-0, gpu-<cell>-1)
    xid: int = 0  # DCGM_FI_DEV_XID_ERRORS value (0 = none)
    xid_hosts: Sequence[str] | None = None  # hosts showing the XID (default: first host)
    xid_from_minute: float = 0.0  # XID shows from this minute of the window on
    pending_workloads: float = 0.0  # kueue_pending_workloads{cluster_queue=<cell>,status="active"}
    quarantined_nodes: Sequence[str] = ()  # kube_node_spec_taint{key="gpu.corp/quarantine"} = 1
    gpu_nodes: Sequence[str] | None = None  # kube_node_labels{label_nvidia_com_gpu_present="true"} (default: hosts)


@dataclass
class Scenario:
    series: list[Series]
    start_ts: float
    end_ts: float
    step: float
    expected_burn: dict[str, float] = field(default_factory=dict)
    slo: float = 0.99
    threshold: float = 2.0

    def __iter__(self):
        return iter(self.series)

    @property
    def query(self) -> str:
        return burn_rate_query(self.threshold, self.slo)


def _timestamps(start_ts: float, minutes: float, step: float) -> list[float]:
    n = round(minutes * 60 / step)
    return [start_ts + i * step for i in range(n + 1)]


def ttft_scenario(
    cells: Mapping[str, float],
    start_ts: float,
    minutes: float = 120,
    *,
    step: float = 15,
    requests_per_step: int = 1000,
    threshold: float = 2.0,
    slo: float = 0.99,
    buckets: Sequence[float] = DEFAULT_TTFT_BUCKETS,
    extra_labels: Mapping[str, str] | None = None,
    triage: Mapping[str, CellTriage] | bool | None = None,
) -> Scenario:
    """vLLM TTFT histograms where ``cells[c]`` of requests are slower than ``threshold``.

    Counters start at 0 at ``start_ts`` and grow linearly by ``requests_per_step``
    every ``step`` seconds until ``end_ts = start_ts + minutes*60``, so
    ``BURN_RATE_QUERY`` evaluated at ``end_ts`` gives ``cells[c] / (1 - slo)``
    for every cell (0.001 -> 0.1x, 0.2 -> 20x at a 99% SLO); integer rounding
    error is below 1/(requests in the window).  ``threshold`` must be one of
    ``buckets``.  ``triage=True`` adds default ``CellTriage()`` signals for every
    cell; a mapping adds them for the given cells only.
    """
    if threshold not in buckets:
        raise ValueError(f"threshold {threshold} must be a bucket bound")
    if not any(math.isinf(b) for b in buckets):
        buckets = (*tuple(buckets), math.inf)
    buckets = sorted(buckets)
    ts_list = _timestamps(start_ts, minutes, step)
    series: list[Series] = []
    for cell, frac_slow in cells.items():
        if not 0.0 <= frac_slow <= 1.0:
            raise ValueError(f"{cell}: fraction {frac_slow} not in [0, 1]")
        base = {"cell": cell, **(extra_labels or {})}
        bucket_pts: dict[float, list] = {b: [] for b in buckets}
        count_pts, sum_pts = [], []
        for i, ts in enumerate(ts_list):
            total = i * requests_per_step
            slow = math.floor(frac_slow * total + 0.5)
            fast = total - slow
            for b in buckets:
                if b < threshold:
                    v = math.floor(fast * _FAST_SHARE.get(b, 0.95 if b >= 1.0 else 0.5))
                elif b == threshold:
                    v = fast
                elif math.isinf(b):
                    v = total
                else:
                    v = fast + math.floor(slow * _SLOW_SHARE.get(b, 0.9))
                bucket_pts[b].append((ts, v))
            count_pts.append((ts, total))
            sum_pts.append((ts, round(fast * 0.4 * threshold + slow * 2.5 * threshold, 3)))
        for b in buckets:
            series.append(Series(f"{TTFT_METRIC}_bucket", "histogram", {**base, "le": format_le(b)}, bucket_pts[b]))
        series.append(Series(f"{TTFT_METRIC}_count", "histogram", base, count_pts))
        series.append(Series(f"{TTFT_METRIC}_sum", "histogram", base, sum_pts))

    if triage is True:
        triage = {c: CellTriage() for c in cells}
    for cell, t in (triage or {}).items():
        series.extend(triage_series(cell, t, start_ts, minutes, step=step))

    return Scenario(
        series=series,
        start_ts=ts_list[0],
        end_ts=ts_list[-1],
        step=step,
        expected_burn={c: f / (1 - slo) for c, f in cells.items()},
        slo=slo,
        threshold=threshold,
    )


def triage_series(cell: str, t: CellTriage, start_ts: float, minutes: float, *, step: float = 15) -> list[Series]:
    ts_list = _timestamps(start_ts, minutes, step)
    const = lambda v: [(ts, v) for ts in ts_list]  # noqa: E731
    out: list[Series] = []
    for pod in t.pods:
        out.append(Series("vllm:kv_cache_usage_perc", "gauge", {"cell": cell, "pod": pod}, const(t.kv_cache_usage)))
        out.append(
            Series(
                "vllm:num_preemptions_total",
                "counter",
                {"cell": cell, "pod": pod},
                [(ts, round(t.preemptions_per_min * (ts - start_ts) / 60, 6)) for ts in ts_list],
            )
        )
    hosts = list(t.hosts) if t.hosts is not None else [f"gpu-{cell}-0", f"gpu-{cell}-1"]
    xid_hosts = set(t.xid_hosts if t.xid_hosts is not None else hosts[:1])
    xid_from = start_ts + t.xid_from_minute * 60
    for host in hosts:
        val = t.xid if host in xid_hosts else 0
        out.append(
            Series(
                "DCGM_FI_DEV_XID_ERRORS",
                "gauge",
                {"cell": cell, "Hostname": host, "gpu": "0"},
                [(ts, val if ts >= xid_from else 0) for ts in ts_list],
            )
        )
    out.append(
        Series(
            "kueue_pending_workloads", "gauge", {"cluster_queue": cell, "status": "active"}, const(t.pending_workloads)
        )
    )
    for node in t.quarantined_nodes:
        out.append(
            Series(
                "kube_node_spec_taint",
                "gauge",
                {"node": node, "key": "gpu.corp/quarantine", "value": "true", "effect": "NoSchedule"},
                const(1),
            )
        )
    for node in t.gpu_nodes if t.gpu_nodes is not None else hosts:
        out.append(
            Series(
                "kube_node_labels",
                "gauge",
                {"node": node, "label_nvidia_com_gpu_present": "true", "label_gpu_corp_cell": cell},
                const(1),
            )
        )
    return out


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
    ):
        super().__init__(tmpdir, startup_timeout)
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

    def _argv(self) -> list[str]:
        return [
            find_binary("prometheus"),
            f"--config.file={self.dir / 'prometheus.yml'}",
            f"--storage.tsdb.path={self.data_dir}",
            "--storage.tsdb.retention.time=100y",
            f"--web.listen-address=127.0.0.1:{self.port}",
            "--rules.alert.resend-delay=1s",
            *self.extra_args,
        ]

    async def query(self, promql: str, at: float | None = None) -> list[dict]:
        """Instant query via prometheus_api_client at ``at`` (default ``end_ts``)."""
        from prometheus_api_client import PrometheusConnect

        at = self.end_ts if at is None else at
        if at is None:
            raise ValueError("no evaluation time: pass at=")
        pc = PrometheusConnect(self.url, disable_ssl=True)
        return await asyncio.to_thread(pc.custom_query, promql, params={"time": at})
