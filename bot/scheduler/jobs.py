"""The job value handlers receive."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Job:
    kind: str
    key: str
    due: float
    payload: dict[str, Any] = field(default_factory=dict)
    late: bool = False  # delivered after due + tolerance (e.g. every replica was down)
    attempt: int = 1  # >1 only when a claimer died before finishing and the lease ran out
    token: str = ""


# A job kind's handler, bound to the app's services by bot/runtime.py.
RunJob = Callable[[Job], Awaitable[None]]
StartHook = Callable[[], Awaitable[None]]
