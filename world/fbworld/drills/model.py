"""A game-day drill as data: what happens to the demo fleet and when, and what the person at the
console is expected to decide. Validated by pydantic, so a drill file with a typo fails with the
field's path instead of half-running."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

from fbworld.dcgm import FIGURES as DCGM_FIGURES
from fbworld.metrics import FIGURES

_OFFSET = re.compile(r"^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")
NAME = re.compile(r"^[a-z][a-z0-9-]{1,40}$")


def seconds(text: str) -> float:
    """``1m30s``, ``45s``, ``2m``, ``1h`` as seconds; ValueError otherwise."""
    m = _OFFSET.match(text.strip())
    if not text.strip() or m is None:
        raise ValueError(f"{text!r} is not a duration like 30s, 2m or 1m30s")
    h, mi, s = (int(g or 0) for g in m.groups())
    return float(h * 3600 + mi * 60 + s)


def clock(offset: float) -> str:
    """A drill offset as the console prints it: ``+2:05``, ``+1:02:05``."""
    total = int(offset)
    h, rest = divmod(total, 3600)
    m, s = divmod(rest, 60)
    return f"+{h}:{m:02d}:{s:02d}" if h else f"+{m}:{s:02d}"


def _known_figure(v: str) -> str:
    if v not in FIGURES:
        raise ValueError(f"unknown figure {v!r}; one of {', '.join(FIGURES)}")
    return v


def _settable_figure(v: str) -> str:
    if v in DCGM_FIGURES:
        raise ValueError(
            f"{v} comes from the GPUs' own dcgm-exporter series: give what happened to a GPU under "
            "`dcgm:` (an xid, dbe errors, a row_remap or a reload) instead of setting the figure"
        )
    return v


# A figure the simulated Prometheus answers with (world/fbworld/metrics.py).
Figure = Annotated[str, AfterValidator(_known_figure)]
# One a drill may set by hand: not one the fleet computes from the GPUs (fbworld/dcgm.py).
SettableFigure = Annotated[Figure, AfterValidator(_settable_figure)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Condition(BaseModel):
    """The alert rule's condition, so the simulated Prometheus answers the alert's expression (and
    the postmortem finds when it became true): ``figure op threshold`` on the alert's cell."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    figure: Figure
    op: Literal[">", ">=", "<", "<="]
    threshold: float


class AlertSpec(Strict):
    """One alert of a webhook: its labels and annotations as a Prometheus rule would send them.
    ``expr`` is the rule's PromQL (it becomes the generatorURL's ``g0.expr``)."""

    labels: dict[str, str]
    annotations: dict[str, str] = {}
    expr: str | None = None
    when: Condition | None = None
    status: Literal["firing", "resolved"] = "firing"

    @model_validator(mode="after")
    def _named(self) -> AlertSpec:
        if not self.labels.get("alertname"):
            raise ValueError("an alert needs an alertname label")
        if self.when is not None and (self.expr is None or "cell" not in self.labels):
            raise ValueError("`when` needs the alert's `expr` and a `cell` label to answer it on")
        return self


class Webhook(Strict):
    """One Alertmanager delivery (webhook payload version 4) to the app's POST /alertmanager."""

    receiver: str = "firebreak"
    alerts: list[AlertSpec] = Field(min_length=1)


class MetricSet(Strict):
    cell: str
    figure: SettableFigure
    value: float


class GpuEvent(Strict):
    """Something that happens to one GPU, as dcgm-exporter will show it (fbworld/dcgm.py): the
    driver reports an XID (the XID gauge holds it until the driver reloads), double-bit ECC errors
    (the volatile counter steps up), the row remapper remaps a row (pending until a reset) or fails
    to, or the driver reloads (a GPU reset or reboot: the gauge reads 0 again)."""

    cell: str
    node: str
    gpu: int = Field(ge=0)
    xid: int | None = Field(default=None, gt=0)
    dbe: int | None = Field(default=None, ge=1)
    row_remap: Literal["uncorrectable", "correctable", "failed"] | None = None
    reload: bool = False

    @model_validator(mode="after")
    def _one(self) -> GpuEvent:
        given = [k for k in ("xid", "dbe", "row_remap", "reload") if getattr(self, k) not in (None, False)]
        if len(given) != 1:
            raise ValueError(f"one event per entry: xid, dbe, row_remap or reload (got {', '.join(given) or 'none'})")
        return self

    @property
    def what(self) -> str:
        if self.xid is not None:
            return f"XID {self.xid}"
        if self.dbe is not None:
            return f"{self.dbe} double-bit ECC error(s)"
        if self.row_remap is not None:
            return f"row remap {self.row_remap}"
        return "driver reload"


class NodeCondition(Strict):
    """Set one condition in a Node's status.conditions (what NVSentinel or the node problem
    detector writes), replacing the condition of the same type."""

    context: str
    node: str
    type: str
    status: Literal["True", "False", "Unknown"] = "True"
    reason: str
    message: str


class Event(Strict):
    """A core/v1 Event about an object (``Warning`` by default), as the kubelet or a controller writes one."""

    context: str
    kind: str  # the involved object's kind: Node, Pod, Rollout…
    name: str
    namespace: str | None = None
    reason: str
    message: str
    type: Literal["Normal", "Warning"] = "Warning"
    count: int = Field(default=1, ge=1)
    component: str = "kubelet"


class RolloutRevision(Strict):
    """A new revision of an Argo Rollout: its pod template's container args (e.g. the weights path)
    change, a ReplicaSet for the new pod-template hash appears, and the canary sits at its first
    pause with ``canary_weight`` percent of the traffic."""

    context: str
    rollout: str  # namespace/name
    revision: int = Field(ge=1)
    pod_hash: str = Field(pattern=r"^[a-z0-9]{6,12}$")
    args: list[str]
    canary_weight: int = Field(default=20, ge=0, le=100)


class BackendWeight(Strict):
    """Set one backendRef's weight in an HTTPRoute (someone else's change: the drill's world)."""

    context: str
    route: str  # namespace/name
    backend: str
    weight: int = Field(ge=0)


class NodeLabels(Strict):
    """Set labels on GPU nodes of a context (e.g. a driver rollout's new version)."""

    context: str
    nodes: list[str] = Field(min_length=1)
    labels: dict[str, str]


class NodeRemediation(Strict):
    """A Medik8s NodeHealthCheck remediating nodes: for each node its Self Node Remediation puts the
    `remediation.medik8s.io/self-node-remediation` NoSchedule taint on (written by the SNR
    manager, as managedFields shows), and the NHC's status tracks it as unhealthy and in flight."""

    context: str
    nhc: str  # the NodeHealthCheck's name (cluster-scoped)
    nodes: list[str] = Field(min_length=1)


class KubeChange(Strict):
    """Exactly one change to a Kubernetes emulator."""

    node_condition: NodeCondition | None = None
    event: Event | None = None
    rollout_revision: RolloutRevision | None = None
    backend_weight: BackendWeight | None = None
    node_labels: NodeLabels | None = None
    node_remediation: NodeRemediation | None = None

    @model_validator(mode="after")
    def _one(self) -> KubeChange:
        given = [k for k, v in self if v is not None]
        if len(given) != 1:
            raise ValueError(f"one change per entry (got {', '.join(given) or 'none'})")
        return self

    @property
    def what(self) -> Any:
        return next(v for _, v in self if v is not None)


class Step(Strict):
    """What happens at ``at`` after the drill starts: in order, the figures move, the GPUs report
    (``dcgm``), the clusters change, the narrative line is printed, then the webhook is delivered."""

    at: str
    say: str | None = None
    metrics: list[MetricSet] = []
    dcgm: list[GpuEvent] = []
    kube: list[KubeChange] = []
    alert: Webhook | None = None

    @field_validator("at")
    @classmethod
    def _offset(cls, v: str) -> str:
        seconds(v)
        return v

    @property
    def offset(self) -> float:
        return seconds(self.at)

    @model_validator(mode="after")
    def _does_something(self) -> Step:
        if not (self.say or self.metrics or self.dcgm or self.kube or self.alert):
            raise ValueError(f"the step at {self.at} does nothing")
        return self


class Match(Strict):
    """An audit entry: its ``action`` and detail fields (dotted paths into ``detail``, e.g.
    ``args.lever``) equal to the given values, and ``contains`` substrings in the given fields."""

    action: str
    detail: dict[str, str | int | bool | None] = {}
    contains: dict[str, str] = {}


class Decision(Strict):
    """A decision the drill expects: the ``count``-th audit entry matching any of ``match``."""

    name: str
    match: list[Match] = Field(min_length=1)
    count: int = Field(default=1, ge=1)


class Drill(Strict):
    name: str
    title: str
    summary: str
    briefing: str = ""  # printed at the start: who you are and what you can do
    steps: list[Step] = Field(min_length=1)
    decisions: list[Decision] = Field(min_length=1)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not NAME.match(v):
            raise ValueError(f"drill name {v!r}: lowercase letters, digits and dashes")
        return v

    @model_validator(mode="after")
    def _ordered(self) -> Drill:
        offsets = [s.offset for s in self.steps]
        if offsets != sorted(offsets):
            raise ValueError("steps must be in the order of their `at`")
        if not any(s.alert for s in self.steps):
            raise ValueError("a drill needs at least one alert: the first signal the report times from")
        names = [d.name for d in self.decisions]
        if len(set(names)) != len(names):
            raise ValueError("decision names must be distinct")
        return self

    @property
    def length(self) -> float:
        return self.steps[-1].offset
