"""The job value handlers receive, and the handler registry."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Awaitable, Callable

if TYPE_CHECKING:
    from bot.core.services import Services


@dataclass(frozen=True)
class Job:
    kind: str
    key: str
    due: float
    payload: dict[str, Any] = field(default_factory=dict)
    late: bool = False  # delivered after due + tolerance (e.g. every replica was down)
    attempt: int = 1  # >1 only when a claimer died before finishing and the lease ran out
    token: str = ""


JobHandler = Callable[["Services", Job], Awaitable[None]]
HANDLERS: dict[str, JobHandler] = {}
# Run once when a scheduler loop starts, before the first tick (e.g. re-sync after a crash).
STARTUP: list[Callable[["Services"], Awaitable[None]]] = []


def job_handler(kind: str) -> Callable[[JobHandler], JobHandler]:
    def deco(fn: JobHandler) -> JobHandler:
        if kind in HANDLERS:
            raise RuntimeError(f"job kind {kind!r} registered twice")
        HANDLERS[kind] = fn
        return fn

    return deco


def on_start(fn: Callable[["Services"], Awaitable[None]]) -> Callable[["Services"], Awaitable[None]]:
    STARTUP.append(fn)
    return fn
