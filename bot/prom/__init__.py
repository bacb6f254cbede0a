"""The app's one Prometheus client: instant and range queries over Prometheus's HTTP API.

It calls the API with requests (the library prometheus-api-client wraps) rather than through
prometheus-api-client, because that library drops what callers here need: the answer's
``resultType`` (a scalar is one figure, a string or a range vector is not a number per cell) and
Prometheus's own error text (a rejected query should say why, not just "400").

Every answer is typed, so a caller can tell "failed" from "no data": ``Vector`` (an empty one is
"no series"), ``Scalar``, ``Matrix`` (a range query, or a range-vector expression), ``Text`` (a
string literal), or ``Failed`` with the reason (``Why``) and Prometheus's or the TLS check's own
words. Nothing raises: a query that could not be answered is a ``Failed``.

TLS is always verified, against ``ca_file`` (the PEM bundle settings.prometheus_ca_file names) or
requests' default bundle: Prometheus's answers decide whether route-weight moves traffic, so an
endpoint that can't prove who it is must not be able to say "healthy".

requests is synchronous, so each query runs in a worker thread, off the event loop (as
``asyncio.to_thread`` would, but in this module's own bounded pool: a Prometheus that hangs ties
up these threads until their timeout, not the loop's default executor that the rest of the app
shares). Each call's timeout covers the connection and the read, and is also sent to Prometheus
as the query's evaluation ``timeout``.
"""

from __future__ import annotations

import asyncio
import math
import os
import ssl
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

import requests

from bot import logs

log = logs.get(__name__)

# Queries in flight across the app; more wait for a free thread (their timeout still runs).
MAX_CONCURRENT = 16
_POOL = ThreadPoolExecutor(max_workers=MAX_CONCURRENT, thread_name_prefix="prometheus")


@dataclass(frozen=True)
class Sample:
    labels: Mapping[str, str]
    value: float


@dataclass(frozen=True)
class Vector:
    """An instant vector: one sample per series. Empty: the query matched no series ("no data")."""

    samples: tuple[Sample, ...]

    @property
    def values(self) -> list[float]:
        return [s.value for s in self.samples]


@dataclass(frozen=True)
class Scalar:
    value: float


@dataclass(frozen=True)
class Series:
    """One series of a range answer: (timestamp, value) points, oldest first."""

    labels: Mapping[str, str]
    points: tuple[tuple[float, float], ...]


@dataclass(frozen=True)
class Matrix:
    series: tuple[Series, ...]


@dataclass(frozen=True)
class Text:
    """A PromQL string literal's value."""

    value: str


class Why(str, Enum):
    """Why a query has no answer."""

    CA_FILE = "ca_file"  # the CA bundle can't be read
    TLS = "tls"  # the server's certificate is not trusted (or the handshake failed)
    UNREACHABLE = "unreachable"  # no connection, or the connection broke
    TIMEOUT = "timeout"  # no answer within the timeout
    REJECTED = "rejected"  # Prometheus refused the query (400/422 with its error text): the query is bad
    HTTP = "http"  # any other non-success answer
    NOT_JSON = "not_json"  # an answer that is not JSON at all (a proxy's error page)
    MALFORMED = "malformed"  # JSON, but not the query API's shape


@dataclass(frozen=True)
class Failed:
    """No answer. ``detail``: Prometheus's error text, the TLS check's words, the CA file's path
    sentence, or the exception's class name (UNREACHABLE, TIMEOUT). ``status``: the HTTP status,
    when there was one. ``error_type``: Prometheus's errorType (bad_data, execution, timeout…)."""

    why: Why
    detail: str = ""
    status: int | None = None
    error_type: str | None = None

    def __str__(self) -> str:
        d = self.detail
        match self.why:
            case Why.CA_FILE:
                return d
            case Why.TLS:
                return f"Prometheus's TLS certificate is not trusted ({d})"
            case Why.UNREACHABLE:
                return f"Prometheus can't be reached ({d})"
            case Why.TIMEOUT:
                return f"Prometheus did not answer in time ({d})"
            case Why.REJECTED:
                return f"Prometheus rejected the query ({d})"
            case Why.HTTP:
                return f"Prometheus answered HTTP {self.status} ({d or 'no error text'})"
            case Why.NOT_JSON:
                return f"Prometheus answered HTTP {self.status} without the query API's JSON"
            case _:
                return "Prometheus's answer is not the query API's JSON"


Result = Vector | Scalar | Matrix | Text | Failed


def tls_reason(exc: BaseException) -> str:
    """The certificate check's own words (e.g. "self-signed certificate in certificate chain"),
    dug out of requests' and urllib3's wrappers."""
    todo: list[BaseException] = [exc]
    seen: set[int] = set()
    while todo:
        e = todo.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, ssl.SSLCertVerificationError):
            return e.verify_message or str(e)
        todo += [a for a in (*e.args, getattr(e, "reason", None)) if isinstance(a, BaseException)]
    return "TLS handshake failed"


def _labels(raw: Any) -> dict[str, str]:
    if not isinstance(raw, dict):
        raise TypeError("metric is not an object")
    return {str(k): str(v) for k, v in raw.items()}


def _point(raw: Any) -> tuple[float, float]:
    ts, value = raw  # [<unix seconds>, "<value>"]
    return float(ts), float(value)


def parse(body: Any) -> Result:
    """A successful /api/v1/query or /api/v1/query_range answer as a typed result."""
    try:
        data = body["data"]
        kind, result = data["resultType"], data["result"]
        if kind == "vector":
            return Vector(tuple(Sample(_labels(r["metric"]), _point(r["value"])[1]) for r in result))
        if kind == "scalar":
            return Scalar(_point(result)[1])
        if kind == "matrix":
            return Matrix(tuple(Series(_labels(r["metric"]), tuple(_point(p) for p in r["values"])) for r in result))
        if kind == "string":
            return Text(str(result[1]))
    except (KeyError, IndexError, TypeError, ValueError):
        pass
    return Failed(Why.MALFORMED)


def _answer(resp: requests.Response) -> Result:
    try:
        body = resp.json()
    except ValueError:
        return Failed(Why.NOT_JSON, status=resp.status_code)
    if resp.status_code != 200 or not isinstance(body, dict) or body.get("status") != "success":
        error = body.get("error") if isinstance(body, dict) else None
        error_type = body.get("errorType") if isinstance(body, dict) else None
        et = str(error_type) if error_type else None
        if resp.status_code in (400, 422) and error:
            return Failed(Why.REJECTED, str(error), resp.status_code, et)
        return Failed(Why.HTTP, str(error or ""), resp.status_code, et)
    return parse(body)


def _duration(seconds: float) -> str:
    """A Prometheus duration for the evaluation timeout: whole milliseconds, at least 1."""
    return f"{max(1, math.ceil(seconds * 1000))}ms"


class Prometheus:
    """Queries against one Prometheus. ``url``: its base URL; ``ca_file``: the CA bundle that signed
    its certificate (None: requests' default bundle); ``timeout``: seconds per query by default."""

    def __init__(self, url: str, *, ca_file: str | Path | None = None, timeout: float = 5.0) -> None:
        self.url = url.rstrip("/")
        self.ca_file = str(ca_file) if ca_file is not None else None
        self.timeout = timeout

    async def query(self, promql: str, at: float, timeout: float | None = None) -> Result:
        """The instant query ``promql`` evaluated at ``at`` (unix seconds)."""
        return await self._run("query", {"query": promql, "time": at}, timeout)

    async def query_range(
        self, promql: str, start: float, end: float, step: float, timeout: float | None = None
    ) -> Result:
        """``promql`` evaluated every ``step`` seconds from ``start`` to ``end``: a Matrix."""
        return await self._run("query_range", {"query": promql, "start": start, "end": end, "step": step}, timeout)

    async def _run(self, endpoint: str, params: dict[str, str | float], timeout: float | None) -> Result:
        t = self.timeout if timeout is None else timeout
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(_POOL, self._call, endpoint, params, t)

    def _call(self, endpoint: str, params: dict[str, str | float], timeout: float) -> Result:
        if self.ca_file is not None and not os.access(self.ca_file, os.R_OK):
            return Failed(Why.CA_FILE, f"PROMETHEUS_CA_FILE {self.ca_file} can't be read")
        try:
            with requests.Session() as session:
                resp = session.get(
                    f"{self.url}/api/v1/{endpoint}",
                    params={**params, "timeout": _duration(timeout)},
                    timeout=timeout,
                    verify=self.ca_file or True,
                )
            return _answer(resp)
        except requests.exceptions.SSLError as exc:
            return Failed(Why.TLS, tls_reason(exc))
        except requests.exceptions.Timeout as exc:
            return Failed(Why.TIMEOUT, type(exc).__name__)
        except Exception as exc:  # noqa: BLE001 - any other failure to get an answer is "unreachable", never a crash
            log.warning("prometheus_query_failed", endpoint=endpoint, error=type(exc).__name__)
            return Failed(Why.UNREACHABLE, type(exc).__name__)
