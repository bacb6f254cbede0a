"""The one implementation of bot.prom's port, on prometheus-api-client's ``PrometheusConnect``.

The only module that imports prometheus_api_client, requests or urllib3 (a test holds it so). The
runtime builds one ``Prometheus`` from settings; capabilities get it as ``Services.prometheus``.

PrometheusConnect is synchronous, so each query runs in this client's own bounded pool of worker
threads, off the event loop (a Prometheus that hangs ties up these threads until their timeout, not
the loop's default executor that the rest of the app shares). Each worker thread has its own
PrometheusConnect and requests session: a session is not documented as safe to share across
threads. The library's retries are off: a query's timeout is its caller's, and it covers the
connection and the read; it is also sent to Prometheus as the query's evaluation ``timeout``.

TLS is always verified, against ``ca_file`` (PROMETHEUS_CA_FILE) or requests' default bundle:
Prometheus's answers decide whether route-weight moves traffic, so an endpoint that can't prove who
it is must not be able to say "healthy". Credentials: a bearer token (PROMETHEUS_BEARER_TOKEN, or
PROMETHEUS_BEARER_TOKEN_FILE, read at each query so a rotated token is used) or basic auth, given
to PrometheusConnect's ``auth``. Every request carries ``User-Agent: firebreak/<version>``.

What prometheus-api-client does not give, and the smallest way round it here:
- ``custom_query`` returns ``data.result`` without ``resultType``, so the type is read from the
  result's shape. Two cases can't be told apart: an empty range vector reads as an empty instant
  vector (both mean "no series"), and a string literal that spells a number (``"4"``) reads as
  that scalar.
- A non-200 answer raises ``PrometheusApiClientException`` whose only payload is its message,
  ``HTTP Status Code <status> (<body bytes repr>)``: Prometheus's error text is read back out of it
  (``_refusal``). tests/prom/test_connect.py fails if that message changes, and pyproject.toml caps
  the library below its next minor version.
"""

from __future__ import annotations

import ast
import asyncio
import json
import math
import os
import re
import ssl
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import requests
from prometheus_api_client import PrometheusApiClientException
from prometheus_api_client.prometheus_connect import PrometheusConnect
from pydantic import SecretStr
from urllib3.util import Retry

from bot import logs, metrics
from bot.prom import Failed, Matrix, Result, Sample, Scalar, Series, Text, Vector, Why

log = logs.get(__name__)

# Queries in flight per client; more wait for a free thread (their timeout still runs).
MAX_CONCURRENT = 16

# requests' own default for a plain session: no retries, a read error raised as itself (ReadTimeout).
_NO_RETRIES = Retry(0, read=False)


@dataclass(frozen=True)
class BearerToken:
    """``Authorization: Bearer``: the token itself, or the file that holds it (re-read per query)."""

    token: SecretStr | None = None
    file: Path | None = None


@dataclass(frozen=True)
class BasicAuth:
    username: str
    password: SecretStr


Credentials = BearerToken | BasicAuth


class _TokenUnreadable(Exception):
    pass


class _Bearer(requests.auth.AuthBase):
    """requests' custom auth (what PrometheusConnect's ``auth`` takes): the token on each request."""

    def __init__(self, bearer: BearerToken) -> None:
        self._bearer = bearer

    def __call__(self, r: requests.PreparedRequest) -> requests.PreparedRequest:
        if self._bearer.file is not None:
            try:
                token = self._bearer.file.read_text().strip()
            except OSError:
                raise _TokenUnreadable(f"PROMETHEUS_BEARER_TOKEN_FILE {self._bearer.file} can't be read") from None
        else:
            token = self._bearer.token.get_secret_value() if self._bearer.token else ""
        r.headers["Authorization"] = f"Bearer {token}"
        return r


def _auth(credentials: Credentials | None) -> Any:
    if isinstance(credentials, BasicAuth):
        return (credentials.username, credentials.password.get_secret_value())
    if isinstance(credentials, BearerToken):
        return _Bearer(credentials)
    return None


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


# The JSON API's sample value: Go's strconv.FormatFloat(v, 'f', -1, 64), or NaN / ±Inf.
_NUMBER = re.compile(r"-?\d+(\.\d+)?|NaN|[+-]Inf")


class _Malformed(Exception):
    """A 200 whose JSON is not the query API's shape: raised by the checks below, and only by them,
    so a bug elsewhere in the parsing is never mistaken for a bad answer."""


def _labels(raw: Any) -> dict[str, str]:
    if not isinstance(raw, dict):
        raise _Malformed("metric is not an object")
    return {str(k): str(v) for k, v in raw.items()}


def _point(raw: Any) -> tuple[float, float]:
    if not isinstance(raw, list) or len(raw) != 2:
        raise _Malformed("a sample is not [<time>, <value>]")
    try:
        return float(raw[0]), float(raw[1])  # [<unix seconds>, "<value>"]
    except (TypeError, ValueError):
        raise _Malformed("a sample's time or value is not a number") from None


def _entry(raw: Any, *keys: str) -> dict[str, Any]:
    if not isinstance(raw, dict) or any(k not in raw for k in keys):
        raise _Malformed(f"a result entry lacks {' or '.join(keys)}")
    return raw


def _series(raw: Any) -> Matrix:
    if not isinstance(raw, list):
        raise _Malformed("result is not a list")
    entries = [_entry(r, "metric", "values") for r in raw]
    for r in entries:
        if not isinstance(r["values"], list):
            raise _Malformed("values is not a list")
    return Matrix(tuple(Series(_labels(r["metric"]), tuple(_point(p) for p in r["values"])) for r in entries))


def _instant(raw: Any) -> Result:
    """An instant query's ``data.result``, typed by its shape (custom_query drops ``resultType``)."""
    if not isinstance(raw, list):
        raise _Malformed("result is not a list")
    if len(raw) == 2 and not isinstance(raw[0], dict):  # a scalar or a string: [<time>, "<value>"]
        value = raw[1]
        if not isinstance(value, str):
            raise _Malformed("value is not a string")
        return Scalar(float(value)) if _NUMBER.fullmatch(value) else Text(value)
    if raw and all(isinstance(r, dict) and "values" in r for r in raw):
        return _series(raw)
    entries = [_entry(r, "metric", "value") for r in raw]
    return Vector(tuple(Sample(_labels(r["metric"]), _point(r["value"])[1]) for r in entries))


_EXCEPTION_TEXT = re.compile(r"HTTP Status Code (\d+) \((b.*)\)", re.DOTALL)


def _refusal(exc: PrometheusApiClientException) -> Failed:
    """A non-200 answer, from the exception's ``HTTP Status Code <status> (<body repr>)`` (all the
    library passes on): Prometheus's error text and errorType when the body is the API's JSON."""
    m = _EXCEPTION_TEXT.fullmatch(str(exc))
    if m is None:
        return Failed(Why.HTTP, str(exc)[:300])
    status = int(m[1])
    try:
        body = ast.literal_eval(m[2])
    except (ValueError, SyntaxError):
        body = b""
    body = body if isinstance(body, bytes) else b""
    try:
        doc = json.loads(body)
    except ValueError:
        doc = None
    error = doc.get("error") if isinstance(doc, dict) else None
    et = doc.get("errorType") if isinstance(doc, dict) else None
    if status in (401, 403):  # a proxy's or Prometheus's own text: "Unauthorized"
        return Failed(Why.AUTH, str(error or body.decode(errors="replace").strip()[:200]), status)
    if not isinstance(doc, dict):
        return Failed(Why.NOT_JSON, status=status)
    et = str(et) if et else None
    if status in (400, 422) and error:
        return Failed(Why.REJECTED, str(error), status, et)
    return Failed(Why.HTTP, str(error or ""), status, et)


def _duration(seconds: float) -> str:
    """A Prometheus duration for the evaluation timeout: whole milliseconds, at least 1."""
    return f"{max(1, math.ceil(seconds * 1000))}ms"


def _time(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, tz=UTC)


class Prometheus:
    """bot.prom.PromQuery against one Prometheus. ``url``: its base URL; ``ca_file``: the CA bundle
    that signed its certificate (None: requests' default bundle); ``credentials``: a bearer token or
    basic auth; ``timeout``: seconds per query when the caller gives none."""

    def __init__(
        self,
        url: str,
        *,
        ca_file: str | Path | None = None,
        credentials: Credentials | None = None,
        timeout: float = 5.0,
        user_agent: str = "firebreak",
    ) -> None:
        self.url = url.rstrip("/")
        self.ca_file = str(ca_file) if ca_file is not None else None
        self.timeout = timeout
        self._auth = _auth(credentials)
        self._headers = {"User-Agent": user_agent}
        self._pool = ThreadPoolExecutor(max_workers=MAX_CONCURRENT, thread_name_prefix="prometheus")
        self._local = threading.local()
        self._lock = threading.Lock()
        self._clients: list[PrometheusConnect] = []

    def __repr__(self) -> str:  # never the credentials
        return f"Prometheus({self.url!r})"

    def _timeout(self, timeout: float | None) -> Any:
        # Any: the library annotates whole seconds (int); it hands the value to requests, which takes a float.
        return self.timeout if timeout is None else timeout

    async def query(self, promql: str, at: float, timeout: float | None = None) -> Result:
        t = self._timeout(timeout)
        params = {"time": at, "timeout": _duration(t)}
        return await self._run("query", lambda pc: pc.custom_query(promql, params=params, timeout=t), _instant)

    async def query_range(
        self, promql: str, start: float, end: float, step: float, timeout: float | None = None
    ) -> Result:
        # custom_query_range sends start and end in whole seconds (callers use a whole-second grid).
        t = self._timeout(timeout)
        params = {"timeout": _duration(t)}
        return await self._run(
            "query_range",
            lambda pc: pc.custom_query_range(promql, _time(start), _time(end), f"{step:g}", params=params, timeout=t),
            _series,
        )

    async def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        with self._lock:
            clients, self._clients = self._clients, []
        for pc in clients:
            pc.close()

    async def _run(
        self, endpoint: str, fetch: Callable[[PrometheusConnect], Any], parse: Callable[[Any], Result]
    ) -> Result:
        loop = asyncio.get_running_loop()
        result = await loop.run_in_executor(self._pool, self._call, endpoint, fetch, parse)
        if isinstance(result, Failed):
            metrics.PROMETHEUS_QUERY_ERRORS.labels(endpoint, result.why.value).inc()
        return result

    def _client(self) -> PrometheusConnect:
        """This worker thread's PrometheusConnect, made on its first query."""
        pc: PrometheusConnect | None = getattr(self._local, "client", None)
        if pc is None:
            session = requests.Session()
            session.verify = self.ca_file or True
            pc = PrometheusConnect(self.url, headers=self._headers, auth=self._auth, retry=_NO_RETRIES, session=session)
            self._local.client = pc
            with self._lock:
                self._clients.append(pc)
        return pc

    def _call(self, endpoint: str, fetch: Callable[[PrometheusConnect], Any], parse: Callable[[Any], Result]) -> Result:
        if self.ca_file is not None and not os.access(self.ca_file, os.R_OK):
            return Failed(Why.CA_FILE, f"PROMETHEUS_CA_FILE {self.ca_file} can't be read")
        client = self._client()  # outside the try: a fault in making it is ours, not "malformed"
        try:
            raw = fetch(client)
        except PrometheusApiClientException as exc:
            return _refusal(exc)
        except _TokenUnreadable as exc:
            return Failed(Why.TOKEN_FILE, str(exc))
        except requests.exceptions.JSONDecodeError:
            return Failed(Why.NOT_JSON, status=200)  # the library reads the body only on a 200
        except requests.exceptions.SSLError as exc:
            return Failed(Why.TLS, tls_reason(exc))
        except requests.exceptions.Timeout as exc:
            return Failed(Why.TIMEOUT, type(exc).__name__)
        except requests.exceptions.RequestException as exc:
            log.warning("prometheus_query_failed", endpoint=endpoint, error=type(exc).__name__)
            return Failed(Why.UNREACHABLE, type(exc).__name__)
        except (KeyError, TypeError):
            # The library's own ``response.json()["data"]["result"]`` on a 200 without that path.
            return Failed(Why.MALFORMED)
        # Anything else (and any bug in the parsers below) is raised, traceback and all, to the caller.
        try:
            return parse(raw)
        except _Malformed:
            return Failed(Why.MALFORMED)
