"""The simulated Prometheus `firebreak console` starts when PROMETHEUS_URL is not set.

An aiohttp server speaking Prometheus's HTTP query API (``/api/v1/query``, ``/api/v1/query_range``,
GET or form-encoded POST, plus ``/-/ready``, ``/-/healthy`` and ``/api/v1/status/buildinfo``) with
the figures of a ``FleetMetrics``. It evaluates no PromQL: it knows a fixed set of expressions,
by their text (whitespace runs collapsed), and what each one answers:

- every triage query of the policy (queries.yaml) for every cell, with ``$cell`` and ``$taint_key``
  substituted as `/incident triage` does: one sample ``{cell}`` with the figure of the query's name
  (the DCGM rows' figures come from the fleet's dcgm-exporter model, fbworld/dcgm.py, so they
  follow its series: an XID held until a reload, a repeat unseen);
- levers.yaml's headroom query for every cell (``$cell`` only, as route-weight substitutes it):
  the cell's ``burn_fast``;
- queries.yaml's ``changed.demand`` query: one sample per cell with its ``demand``;
- levers.yaml's ``price.route-weight.rate_query`` for every cell (``$cell`` substituted): the
  cell's ``demand``, as one sample with no labels (``sum(…)`` keeps none);
- expressions ``register``-ed for game-day alerts: ``{cell}`` with a figure only while
  ``figure op threshold`` holds (a PromQL filter: no series otherwise); and, with no ``op``, the
  fleet's ScaledObject triggers, unlabelled, always;

Each of those answers ``{cell}`` and nothing else because that is the label set Prometheus gives
those expressions (every one aggregates ``by (cell)``), or no label where the expression is a bare
``sum(…)`` (world/tests/prometheus cross-checks both against a real Prometheus). Any other
expression is refused with 422 ``execution`` and a sentence saying the demo does not simulate it,
so the app shows `failed` with that reason, never a made-up number.

Parameters, errors and JSON follow Prometheus 2.42's API byte for byte where it matters to a
client (checked against the binary the test suite runs): times as float seconds or RFC 3339,
durations as float seconds or ``1h30m``-style, the same ``bad_data`` messages, the 11,000 points
per series limit, timestamps as seconds with millisecond decimals, values as Go formats them.
"""

from __future__ import annotations

import json
import math
import operator
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from typing import Self

from aiohttp import web

from bot import logs
from bot.policy.sections import Policy
from fbworld.metrics import FIGURES, FleetMetrics

log = logs.get(__name__)

NOT_SIMULATED = (
    "demo Prometheus: this expression is not one the demo fleet simulates "
    "(it answers the policy's queries and the drills' alert expressions)"
)
# Prometheus's own limit on a range query (web/api/v1/api.go): "sufficient for 60s resolution for
# a week or 1h resolution for a year".
MAX_POINTS = 11_000
TOO_MANY_POINTS = (
    "exceeded maximum resolution of 11,000 points per timeseries. Try decreasing the query resolution (?step=XX)"
)
# The API answered here was checked against this release (the one the test suite runs); the
# revision says what is really answering.
BUILD_INFO = {
    "version": "2.42.0",
    "revision": "firebreak-demo",
    "branch": "demo",
    "buildUser": "firebreak",
    "buildDate": "",
    "goVersion": "none (Firebreak's simulated Prometheus)",
}

OPS: dict[str, Callable[[float, float], bool]] = {
    ">": operator.gt,
    ">=": operator.ge,
    "<": operator.lt,
    "<=": operator.le,
}

_NS_PER_S = 1_000_000_000
_INT64_MAX = 2**63 - 1
# Go's strconv.ParseFloat accepts plain decimals and exponents (and inf/nan, refused here: no
# finite time or step).
_FLOAT = re.compile(r"[+-]?(\d[\d_]*\.?[\d_]*|\.\d[\d_]*)([eE][+-]?\d+)?")
_RFC3339 = re.compile(r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(?:(Z)|([+-])(\d{2}):(\d{2}))")
# prometheus/common model.ParseDuration: units largest first, each at most once.
_DURATION = re.compile(r"(?:(\d+)y)?(?:(\d+)w)?(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?(?:(\d+)ms)?")
_S_PER_UNIT = (365 * 86400, 7 * 86400, 86400, 3600, 60, 1)  # y w d h m s
_UNIT_NS = (*(n * _NS_PER_S for n in _S_PER_UNIT), 1_000_000)  # …then ms


class ApiError(Exception):
    """An error answer: HTTP status, Prometheus's errorType and its text."""

    def __init__(self, status: int, error_type: str, error: str) -> None:
        super().__init__(error)
        self.status, self.error_type, self.error = status, error_type, error


def _bad(error: str, param: str | None = None) -> ApiError:
    return ApiError(400, "bad_data", f"invalid parameter {_q(param)}: {error}" if param else error)


def _q(s: str) -> str:
    """Go's %q for the strings these messages quote."""
    return json.dumps(s, ensure_ascii=False)


# ------------------------------------------------------------------------------- parameters


def _float(s: str) -> float | None:
    """``s`` as a finite float, or None (Prometheus then tries the other forms)."""
    if not _FLOAT.fullmatch(s):
        return None
    try:
        f = float(s)
    except ValueError:  # misplaced underscores
        return None
    return f if math.isfinite(f) else None  # Go's ParseFloat fails out of range


def parse_time(s: str) -> int:
    """A time parameter as Prometheus reads it (float seconds or RFC 3339): unix milliseconds.
    ValueError with Prometheus's words otherwise."""
    f = _float(s)
    if f is not None:
        frac, whole = math.modf(f)  # as Prometheus: the fraction rounded to whole milliseconds,
        ms = math.floor(abs(frac) * 1000 + 0.5)  # half away from zero (Go's math.Round)
        return int(whole) * 1000 + int(math.copysign(ms, frac))
    m = _RFC3339.fullmatch(s)
    if m:
        try:
            return _rfc3339_ms(m)
        except ValueError:  # a field out of range (month 13, hour 25…)
            pass
    raise ValueError(f"cannot parse {_q(s)} to a valid timestamp")


def _rfc3339_ms(m: re.Match[str]) -> int:
    y, mo, d, h, mi, sec, frac, z, sign, oh, om = m.groups()
    tz = UTC if z else timezone((1 if sign == "+" else -1) * timedelta(hours=int(oh), minutes=int(om)))
    at = datetime(int(y), int(mo), int(d), int(h), int(mi), int(sec), tzinfo=tz)
    whole = int(at.timestamp()) * 1000
    return whole + int((frac or "0").ljust(3, "0")[:3])  # sub-millisecond digits are dropped


def parse_duration(s: str) -> int:
    """A duration parameter as Prometheus reads it (float seconds or ``1h30m``): nanoseconds."""
    f = _float(s)
    if f is not None:
        ns = f * _NS_PER_S
        if abs(ns) > _INT64_MAX:
            raise ValueError(f"cannot parse {_q(s)} to a valid duration. It overflows int64")
        return int(ns)
    m = _DURATION.fullmatch(s)
    if s and m:
        return sum(int(n) * unit for n, unit in zip(m.groups(), _UNIT_NS, strict=True) if n)
    raise ValueError(f"cannot parse {_q(s)} to a valid duration")


def _time_param(params: Mapping[str, str], name: str, default: int) -> int:
    raw = params.get(name, "")
    if not raw:
        return default
    try:
        return parse_time(raw)
    except ValueError as exc:
        raise _bad(f"Invalid time value for '{name}': {exc}", name) from None


def _required_time(params: Mapping[str, str], name: str) -> int:
    try:
        return parse_time(params.get(name, ""))
    except ValueError as exc:
        raise _bad(str(exc), name) from None


def _duration_param(params: Mapping[str, str], name: str) -> int:
    try:
        return parse_duration(params.get(name, ""))
    except ValueError as exc:
        raise _bad(str(exc), name) from None


def _check_timeout(params: Mapping[str, str]) -> None:
    """The evaluation timeout: validated as Prometheus does; answers here are instant, so only a
    timeout of zero or less runs out (as it does in Prometheus)."""
    if params.get("timeout") and _duration_param(params, "timeout") <= 0:
        raise ApiError(503, "timeout", "query timed out in query execution")


def _range_params(params: Mapping[str, str]) -> tuple[int, int, int]:
    """(start, end, step) in milliseconds, checked in Prometheus's order, with its messages."""
    start = _required_time(params, "start")
    end = _required_time(params, "end")
    if end < start:
        raise _bad("end timestamp must not be before start time", "end")
    step_ns = _duration_param(params, "step")
    if step_ns <= 0:
        raise _bad("zero or negative query resolution step widths are not accepted. Try a positive integer", "step")
    if (end - start) * 1_000_000 // step_ns > MAX_POINTS:
        raise _bad(TOO_MANY_POINTS)
    return start, end, max(1, step_ns // 1_000_000)


def _no_expression(instant: bool) -> ApiError:
    # Prometheus's parser on an empty query; the instant endpoint names the parameter, the range
    # one does not.
    return _bad("1:1: parse error: no expression found in input", "query" if instant else None)


# ------------------------------------------------------------------------------- answers


def format_value(v: float) -> str:
    """A sample value as Prometheus writes it (Go's strconv, 'e' only for tiny or huge values)."""
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    if v != 0 and (abs(v) < 1e-6 or abs(v) >= 1e21):
        return repr(v)  # Python's shortest repr uses Go's exponent form here (1e-07, 1.5e+21)
    # The shortest digits that read back as ``v`` (repr's), written out without an exponent
    # (repr uses one from 1e16 up and below 1e-4; Go does not).
    text = format(Decimal(repr(v)), "f")
    return text[:-2] if text.endswith(".0") else text


def format_timestamp(ms: int) -> str:
    """Seconds with millisecond decimals, trailing zeros kept, none for a whole second (Prometheus's
    marshalTimestamp)."""
    sign, ms = ("-", -ms) if ms < 0 else ("", ms)
    whole, frac = divmod(ms, 1000)
    return f"{sign}{whole}" + (f".{frac:03d}" if frac else "")


def _point(ms: int, v: float) -> str:
    return f"[{format_timestamp(ms)},{_q(format_value(v))}]"


def _success(result_type: str, items: list[str]) -> str:
    return f'{{"status":"success","data":{{"resultType":"{result_type}","result":[{",".join(items)}]}}}}'


def _json(body: str, status: int = 200) -> web.Response:
    return web.Response(body=body.encode(), status=status, content_type="application/json")


def _error(err: ApiError) -> web.Response:
    body = {"status": "error", "errorType": err.error_type, "error": err.error}
    return _json(json.dumps(body, ensure_ascii=False, separators=(",", ":")), err.status)


# ------------------------------------------------------------------------------- expressions


def normalize(expr: str) -> str:
    """The text an expression is known by: whitespace runs collapsed to one space, ends stripped."""
    return " ".join(expr.split())


@dataclass(frozen=True)
class Source:
    """One series an expression answers: ``cell``'s figure ``name``, when ``op threshold`` holds
    (no ``op``: always)."""

    cell: str
    name: str
    op: str | None = None
    threshold: float = 0.0
    # The answer's label set: {cell} for a `by (cell)` aggregation, none for a bare sum(...).
    by_cell: bool = True

    def holds(self, v: float) -> bool:
        return self.op is None or OPS[self.op](v, self.threshold)  # NaN holds nothing, as in PromQL


def policy_expressions(policy: Policy, cells: tuple[str, ...]) -> dict[str, list[Source]]:
    """What the policy asks, by normalized text: triage queries and headroom per cell, demand."""
    out: dict[str, list[Source]] = {}

    def add(expr: str, src: Source) -> None:
        have = out.setdefault(normalize(expr), [])
        # The same text asked twice is one answer; an unlabelled text (a bare sum) answers for one
        # cell only: a real Prometheus gives it one series, never one per cell with equal labels.
        if all(s.cell != src.cell for s in have) and (src.by_cell or not have):
            have.append(src)

    nq = policy.levers.node_quarantine
    for q in policy.queries.queries:
        if q.name in FIGURES:  # a query of a custom policy the fleet has no figure for stays unknown
            for cell in cells:
                add(q.render(cell, nq.taint_key, nq.dedicated_taints, nq.gpu_node_selector), Source(cell, q.name))
    rate = policy.levers.price.route_weight
    for cell in cells:
        add(policy.levers.headroom.render(cell), Source(cell, "burn_fast"))
        add(policy.queries.changed.demand.query, Source(cell, "demand"))
        add(rate.render(cell), Source(cell, "demand", by_cell=False))
    return out


# ------------------------------------------------------------------------------- the server


class DemoPrometheus:
    """Prometheus's query API over ``metrics``, answering ``policy``'s queries."""

    def __init__(self, metrics: FleetMetrics, policy: Policy) -> None:
        self.metrics = metrics
        self._exprs = policy_expressions(policy, metrics.cells)
        self._runner: web.AppRunner | None = None
        self._url: str | None = None

    @property
    def url(self) -> str:
        if self._url is None:
            raise RuntimeError("the demo Prometheus is not started")
        return self._url

    def register(
        self, expr: str, cell: str, name: str, op: str | None = None, threshold: float = 0.0, *, by_cell: bool = True
    ) -> None:
        """Answer ``expr`` with ``{cell}`` (``by_cell=False``: no label) and figure ``name`` at the
        times ``name op threshold`` holds (a game-day alert's expression, e.g. ``max by (cell) (…) >
        0``; no ``op``: always). The same expression may be registered for several cells;
        registering it again for a cell replaces that one. An unlabelled one answers for one cell:
        registering it again replaces it, whichever cell."""
        if op is not None and op not in OPS:
            raise ValueError(f"unknown op {op!r}; one of {', '.join(OPS)}")
        self.metrics.check(cell, name)
        key = normalize(expr)
        if not key:
            raise ValueError("an empty expression can't be registered")
        # An unlabelled expression is one series: registering it again, for any cell, replaces it.
        others = [s for s in self._exprs.get(key, []) if s.cell != cell and by_cell and s.by_cell]
        self._exprs[key] = [*others, Source(cell, name, op, float(threshold), by_cell)]

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        """Serve on ``host:port`` (0: a free port); the base URL."""
        app = web.Application()
        for path, handler in (("/api/v1/query", self._query), ("/api/v1/query_range", self._query_range)):
            app.router.add_get(path, handler)
            app.router.add_post(path, handler)
        app.router.add_get("/-/ready", _text("Prometheus Server is Ready.\n"))
        app.router.add_get("/-/healthy", _text("Prometheus Server is Healthy.\n"))
        app.router.add_get("/api/v1/status/buildinfo", _buildinfo)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
        await runner.setup()
        site = web.TCPSite(runner, host, port)
        await site.start()
        self._runner = runner
        bound = runner.addresses[0][1]
        self._url = f"http://{f'[{host}]' if ':' in host else host}:{bound}"
        log.info("demo_prometheus_started", url=self._url, expressions=len(self._exprs))
        return self._url

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
            self._url = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # --------------------------------------------------------------------------- handlers

    async def _query(self, request: web.Request) -> web.Response:
        params = await _params(request)
        try:
            at = _time_param(params, "time", math.floor(self.metrics.now() * 1000))
            _check_timeout(params)
            sources = self._sources(params.get("query", ""), instant=True)
            series = [(s, v) for s in sources if (v := self._figure(s, at)) is not None]
        except ApiError as err:
            log.debug("demo_prometheus_refused", endpoint="query", error=err.error, expr=_cut(params))
            return _error(err)
        log.debug("demo_prometheus_query", endpoint="query", expr=_cut(params), series=len(series))
        items = [f'{{"metric":{_labels(s)},"value":{_point(at, v)}}}' for s, v in series]
        return _json(_success("vector", items))

    async def _query_range(self, request: web.Request) -> web.Response:
        params = await _params(request)
        try:
            start, end, step = _range_params(params)
            _check_timeout(params)
            sources = self._sources(params.get("query", ""), instant=False)
            series = [(s, self._points(s, start, end, step)) for s in sources]
        except ApiError as err:
            log.debug("demo_prometheus_refused", endpoint="query_range", error=err.error, expr=_cut(params))
            return _error(err)
        items = [
            f'{{"metric":{_labels(s)},"values":[{",".join(_point(t, v) for t, v in pts)}]}}'
            for s, pts in series
            if pts  # a series with no point in the range is not in the answer
        ]
        log.debug("demo_prometheus_query", endpoint="query_range", expr=_cut(params), series=len(items))
        return _json(_success("matrix", items))

    # --------------------------------------------------------------------------- evaluation

    def _sources(self, expr: str, *, instant: bool) -> list[Source]:
        key = normalize(expr)
        if not key:
            raise _no_expression(instant)
        sources = self._exprs.get(key)
        if sources is None:
            raise ApiError(422, "execution", NOT_SIMULATED)
        return sorted(sources, key=lambda s: s.cell)

    def _figure(self, src: Source, ms: int) -> float | None:
        """The series' value at ``ms``; None: no sample then (no figure, or the filter fails)."""
        try:
            v = self.metrics.value(src.cell, src.name, ms / 1000)
        except Exception as exc:  # noqa: BLE001 - a derived figure's source failed: say so, as Prometheus would
            log.warning("demo_prometheus_figure_failed", cell=src.cell, figure=src.name, error=type(exc).__name__)
            raise ApiError(
                422, "execution", f"demo Prometheus: the {src.name} figure of {src.cell} could not be read ({exc})"
            ) from None
        return v if v is not None and src.holds(v) else None

    def _points(self, src: Source, start: int, end: int, step: int) -> list[tuple[int, float]]:
        if self.metrics.is_derived(src.name):
            # Read live with no history: one read stands for every step (each read lists a cell's
            # nodes; 11,000 of them would stall the loop).
            v = self._figure(src, end)
            return [] if v is None else [(t, v) for t in range(start, end + 1, step)]
        got = ((t, self._figure(src, t)) for t in range(start, end + 1, step))
        return [(t, v) for t, v in got if v is not None]


def _labels(src: Source) -> str:
    return json.dumps({"cell": src.cell} if src.by_cell else {}, ensure_ascii=False, separators=(",", ":"))


def _cut(params: Mapping[str, str]) -> str:
    expr = normalize(params.get("query", ""))
    return expr if len(expr) <= 200 else expr[:199] + "…"


async def _params(request: web.Request) -> dict[str, str]:
    """The request's parameters as Prometheus reads them: a form body's value before the URL's,
    the first of repeated ones."""
    out: dict[str, str] = {}
    if request.method == "POST":
        form = await request.post()
        for k in form:
            v = form.get(k)
            if isinstance(v, str):
                out.setdefault(k, v)
    for k in request.query:
        out.setdefault(k, request.query[k])
    return out


def _text(body: str) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def handler(_request: web.Request) -> web.Response:
        return web.Response(text=body)

    return handler


async def _buildinfo(_request: web.Request) -> web.Response:
    return _json(json.dumps({"status": "success", "data": BUILD_INFO}, separators=(",", ":")))
