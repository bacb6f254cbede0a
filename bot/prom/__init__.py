"""The port every capability asks Prometheus through: ``PromQuery``, and the typed answers.

The app builds one implementation at start (bot/runtime.py, from PROMETHEUS_URL and its
credentials) and hands it to the capabilities as ``Services.prometheus`` (None when PROMETHEUS_URL
is unset). That implementation is bot.prom.connect, on prometheus-api-client; nothing else talks
to Prometheus.

Every answer is typed, so a caller can tell "failed" from "no data": ``Vector`` (an empty one is
"no series"), ``Scalar``, ``Matrix`` (a range query, or a range-vector expression), ``Text`` (a
string literal), or ``Failed`` with the reason (``Why``) and Prometheus's or the TLS check's own
words. Nothing raises: a query that could not be answered is a ``Failed``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Protocol


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
    TOKEN_FILE = "token_file"  # the bearer token file can't be read
    TLS = "tls"  # the server's certificate is not trusted (or the handshake failed)
    UNREACHABLE = "unreachable"  # no connection, or the connection broke
    TIMEOUT = "timeout"  # no answer within the timeout
    AUTH = "auth"  # Prometheus (or the proxy before it) refused the credentials: 401 or 403
    REJECTED = "rejected"  # Prometheus refused the query (400/422 with its error text): the query is bad
    HTTP = "http"  # any other non-success answer
    NOT_JSON = "not_json"  # an answer that is not JSON at all (a proxy's error page)
    MALFORMED = "malformed"  # JSON, but not the query API's shape


@dataclass(frozen=True)
class Failed:
    """No answer. ``detail``: Prometheus's error text, the TLS check's words, the CA or token file's
    sentence, or the exception's class name (UNREACHABLE, TIMEOUT). ``status``: the HTTP status,
    when there was one. ``error_type``: Prometheus's errorType (bad_data, execution, timeout…)."""

    why: Why
    detail: str = ""
    status: int | None = None
    error_type: str | None = None

    def __str__(self) -> str:
        d = self.detail
        match self.why:
            case Why.CA_FILE | Why.TOKEN_FILE:
                return d
            case Why.TLS:
                return f"Prometheus's TLS certificate is not trusted ({d})"
            case Why.UNREACHABLE:
                return f"Prometheus can't be reached ({d})"
            case Why.TIMEOUT:
                return f"Prometheus did not answer in time ({d})"
            case Why.AUTH:
                return (
                    f"Prometheus refused Firebreak's credentials (HTTP {self.status}: {d or 'no error text'}); "
                    "check PROMETHEUS_BEARER_TOKEN(_FILE) or PROMETHEUS_USERNAME and PROMETHEUS_PASSWORD"
                )
            case Why.REJECTED:
                return f"Prometheus rejected the query ({d})"
            case Why.HTTP:
                return f"Prometheus answered HTTP {self.status} ({d or 'no error text'})"
            case Why.NOT_JSON:
                return f"Prometheus answered HTTP {self.status} without the query API's JSON"
            case _:
                return "Prometheus's answer is not the query API's JSON"


Result = Vector | Scalar | Matrix | Text | Failed


class PromQuery(Protocol):
    """Prometheus's query API, asked without blocking the event loop. ``timeout`` (seconds) bounds
    one query: the connection, the read, and Prometheus's own evaluation; None is the client's
    default (PROMETHEUS_TIMEOUT)."""

    async def query(self, promql: str, at: float, timeout: float | None = None) -> Result:
        """The instant query ``promql`` evaluated at ``at`` (unix seconds)."""
        ...

    async def query_range(
        self, promql: str, start: float, end: float, step: float, timeout: float | None = None
    ) -> Result:
        """``promql`` evaluated every ``step`` seconds from ``start`` to ``end``: a Matrix."""
        ...
