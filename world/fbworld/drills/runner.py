"""Play a drill's timeline against the demo fleet: at each step's offset (divided by the speed),
move the simulated Prometheus's figures, record what happens to GPUs on the fleet's dcgm-exporter
(fbworld/dcgm.py), change the Kubernetes emulators, print the narrative line
and deliver the step's alerts to the app's own POST /alertmanager with the bearer token, as
Alertmanager would. Knows nothing of the app's insides: what the app did with a delivery is told
back through ``delivered`` (the console's glue reads it from the audit log)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import aiohttp

from bot import logs
from fbworld.drills import alerts, kube
from fbworld.drills.model import Drill, Step, Webhook, clock
from fbworld.fleet import DemoFleet

log = logs.get(__name__)

POST_TIMEOUT_S = 10.0
MAX_SPEED = 1000.0


@dataclass(frozen=True)
class DrillEvent:
    at: float  # unix seconds
    offset: float  # drill seconds since the start
    kind: str  # say | metrics | dcgm | kube | alert | error
    text: str


@dataclass
class Runner:
    drill: Drill
    fleet: DemoFleet
    webhook_url: str
    token: str
    out: Callable[[str], None]
    speed: float = 1.0
    # Told each delivery id the app accepted; answers what the app made of it (e.g. "opened INC-2").
    delivered: Callable[[str], Awaitable[str | None]] | None = None
    events: list[DrillEvent] = field(default_factory=list)
    first_signal: float | None = None  # unix time of the first delivery the app acted on (a page, a security alert)
    _started: float | None = None  # loop time
    _done_through: float = -1.0  # the offset of the last step that finished
    _progress: asyncio.Condition = field(default_factory=asyncio.Condition)
    _fingerprints: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not 0 < self.speed <= MAX_SPEED:
            raise ValueError(f"speed must be more than 0 and at most {MAX_SPEED:g} (got {self.speed:g})")

    # the clock -------------------------------------------------------------------------------
    def offset(self) -> float:
        """Drill seconds since the start (0 before it)."""
        if self._started is None:
            return 0.0
        return (asyncio.get_running_loop().time() - self._started) * self.speed

    @property
    def finished(self) -> bool:
        return self._done_through >= self.drill.length

    def steps_left(self) -> int:
        return sum(1 for s in self.drill.steps if s.offset > self._done_through)

    async def wait_until(self, offset: float) -> None:
        """Until the drill clock reaches ``offset`` and every step due by then has finished."""
        due = max((s.offset for s in self.drill.steps if s.offset <= offset), default=-1.0)
        async with self._progress:
            await self._progress.wait_for(lambda: self._done_through >= due)
        left = offset - self.offset()
        if left > 0:
            await asyncio.sleep(left / self.speed)

    # the timeline ----------------------------------------------------------------------------
    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        self._started = loop.time()
        for step in self.drill.steps:
            delay = self._started + step.offset / self.speed - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            await self._step(step)
            async with self._progress:
                self._done_through = step.offset
                self._progress.notify_all()

    def _note(self, kind: str, text: str, offset: float, at: float | None = None) -> None:
        self.events.append(DrillEvent(time.time() if at is None else at, offset, kind, text))
        self.out(f"[drill {clock(offset)}] {text}")

    async def _step(self, step: Step) -> None:
        at = step.offset
        for m in step.metrics:
            try:
                self.fleet.metrics.set(m.cell, m.figure, m.value)
            except ValueError as exc:  # a cell the fleet doesn't have, a figure read live: say so, go on
                self._note("error", f"figure not moved: {exc}", at)
        if step.metrics:
            moved = ", ".join(f"{m.figure} {m.value:g} in {m.cell}" for m in step.metrics)
            self.events.append(DrillEvent(time.time(), at, "metrics", f"figures: {moved}"))
        for g in step.dcgm:
            try:
                if self.fleet.dcgm is None:
                    raise ValueError("the fleet has no dcgm-exporter model")
                now = time.time()
                self.fleet.dcgm.record(
                    g.cell, g.node, g.gpu, now, xid=g.xid, dbe=g.dbe, row_remap=g.row_remap, reload=g.reload
                )
            except ValueError as exc:  # a node or GPU the fleet doesn't have: say so, go on
                self._note("error", f"GPU event not recorded: {exc}", at)
            else:
                self.events.append(DrillEvent(now, at, "dcgm", f"{g.node} GPU {g.gpu} ({g.cell}): {g.what}"))
        for change in step.kube:
            try:
                said = kube.apply(self.fleet.clusters, change)
            except (kube.KubeChangeError, ValueError) as exc:
                self._note("error", f"kube change failed: {exc}", at)
            else:
                self.events.append(DrillEvent(time.time(), at, "kube", said))
        if step.say:
            self._note("say", step.say, at)
        if step.alert is not None:
            await self._deliver(step.alert, at)

    async def _deliver(self, hook: Webhook, at: float) -> None:
        self._register(hook)
        sent = time.time()
        body = alerts.payload(hook, sent, self._fingerprints)
        names = ", ".join(sorted({a.labels["alertname"] for a in hook.alerts}))
        try:
            status, answer = await self._post(body)
        except (aiohttp.ClientError, TimeoutError) as exc:
            self._note("error", f"Alertmanager could not deliver {names}: {type(exc).__name__}: {exc}", at)
            return
        if status != 200:
            self._note("error", f"POST /alertmanager answered {status}: {answer.get('error', answer)}", at)
            return
        handled = bool(answer.get("handled"))
        if self.first_signal is None and handled:
            self.first_signal = sent  # a ticket alone is no signal Firebreak acts on
        what = f"Alertmanager → POST /alertmanager: {len(hook.alerts)} alert(s) ({names}), {body['status']}"
        made = await self.delivered(str(answer.get("delivery", ""))) if self.delivered and handled else None
        if not handled:
            made = "no page or security alert among them, so Firebreak opens nothing"
        self._note("alert", what + (f": {made}" if made else ""), at, sent)

    def _register(self, hook: Webhook) -> None:
        """Let the simulated Prometheus answer each alert's expression (the postmortem asks it)."""
        prom = self.fleet.prometheus
        for a in hook.alerts:
            if prom is not None and a.expr and a.when is not None:
                prom.register(a.expr, a.labels["cell"], a.when.figure, a.when.op, a.when.threshold)

    async def _post(self, body: dict[str, object]) -> tuple[int, dict[str, object]]:
        headers = {"Authorization": f"Bearer {self.token}", "User-Agent": "Alertmanager/0.28.1"}
        timeout = aiohttp.ClientTimeout(total=POST_TIMEOUT_S)
        async with (
            aiohttp.ClientSession(timeout=timeout) as session,
            session.post(self.webhook_url, json=body, headers=headers) as resp,
        ):
            try:
                answer = await resp.json(content_type=None)
            except ValueError:
                answer = {"error": (await resp.text())[:200]}
            return resp.status, answer if isinstance(answer, dict) else {"answer": answer}
